import pytest

from svcgen.runtime import Route
from svcgen.runtime._http.routing import Router, split_path, split_raw_path


def router(*specs: str) -> Router:
    return Router(Route.parse(spec, f"t{i}") for i, spec in enumerate(specs))


def matched(r: Router, method: str, path: str) -> tuple[str, dict[str, str], str | None] | None:
    match = r.match(method, split_path(path))
    return None if match is None else (match.route.topic, match.params, match.path_version)


def test_literal_and_placeholder_matching() -> None:
    r = router("GET /orders", "GET /orders/{orderId}", "GET /orders/{orderId}/lines/{line}")
    assert matched(r, "GET", "/orders") == ("t0", {}, None)
    assert matched(r, "GET", "/orders/o-1") == ("t1", {"orderId": "o-1"}, None)
    assert matched(r, "GET", "/orders/o-1/lines/3") == ("t2", {"orderId": "o-1", "line": "3"}, None)
    assert matched(r, "GET", "/orders/o-1/lines") is None
    assert matched(r, "POST", "/orders") is None


def test_placeholder_matches_exactly_one_non_empty_segment() -> None:
    r = router("GET /a/{x}")
    assert matched(r, "GET", "/a/b/c") is None
    assert matched(r, "GET", "/a//") is None
    assert matched(r, "GET", "/a") is None


def test_version_segment_is_consumed() -> None:
    r = router("POST /{version}/orders/{orderId}")
    assert matched(r, "POST", "/v2/orders/9") == ("t0", {"orderId": "9"}, "v2")


def test_first_registered_wins_across_literal_and_placeholder_branches() -> None:
    assert matched(router("GET /a/{x}/c", "GET /a/b/{y}"), "GET", "/a/b/c") == ("t0", {"x": "b"}, None)
    assert matched(router("GET /a/b/{y}", "GET /a/{x}/c"), "GET", "/a/b/c") == ("t0", {"y": "c"}, None)


def test_identical_shape_keeps_the_first() -> None:
    r = router("GET /a/{x}", "GET /a/{y}")
    assert matched(r, "GET", "/a/1") == ("t0", {"x": "1"}, None)
    assert len(r) == 2


def test_trailing_slash_is_ignored() -> None:
    assert matched(router("GET /orders"), "GET", "/orders/") == ("t0", {}, None)


def test_root_route() -> None:
    assert matched(router("GET /"), "GET", "/") == ("t0", {}, None)


def test_raw_path_keeps_encoded_slash_inside_its_segment() -> None:
    assert split_raw_path(b"/files/a%2Fb/x%20y") == ["files", "a/b", "x y"]


@pytest.mark.parametrize("count", [10, 1000])
def test_many_routes_still_match_the_right_one(count: int) -> None:
    r = router(*[f"GET /r{i}/{{id}}/detail" for i in range(count)])
    assert matched(r, "GET", f"/r{count - 1}/42/detail") == (f"t{count - 1}", {"id": "42"}, None)
