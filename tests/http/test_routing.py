import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from svcgen.runtime import Route
from svcgen.runtime._http.routing import (
    COMPILED_ROUTES_MAX,
    PathNotUtf8,
    RouteError,
    Router,
    split_path,
    split_raw_path,
)


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


# --- a method's compiled expression answers as the trie does -------------------------------------------------

_SEGMENTS = st.sampled_from(["a", "b", "orders", "{x}", "{y}", "{version}", "a.b", "(c)", "*", "", "é"])
_PATH_PARTS = st.sampled_from(["a", "b", "orders", "a.b", "(c)", "*", "", "é", "v2", "o-1", "%2F", "%61", "aXb"])


@st.composite
def _route_specs(draw: st.DrawFn) -> list[str]:
    specs = []
    for _ in range(draw(st.integers(1, 6))):
        segments = draw(st.lists(_SEGMENTS, max_size=4))
        names = iter(("x", "y", "z", "w"))
        # Placeholders renamed apart: a route may not name one twice.
        path = "/" + "/".join(f"{{{next(names)}}}" if s in ("{x}", "{y}") else s for s in segments)
        specs.append(f"{draw(st.sampled_from(['GET', 'POST']))} {path}")
    return specs


@settings(max_examples=1000, deadline=None)
@example(["POST /a/a//"], ["a", "a"], "/", True, "POST")  # a last segment empty: only the path with it matches
@example(["GET /"], [], "//", False, "GET")
@given(_route_specs(), st.lists(_PATH_PARTS, max_size=5), st.sampled_from(["", "/", "//"]), st.booleans(),
       st.sampled_from(["GET", "POST"]))  # fmt: skip
def test_compiled_routes_answer_as_the_trie(
    specs: list[str], parts: list[str], trailing: str, leading: bool, method: str
) -> None:
    try:
        r = router(*specs)
    except RouteError:  # `{version}` twice
        assume(False)
    raw = (("/" if leading else "") + "/".join(parts) + trailing).encode()
    walked = r.find(method, split_raw_path(raw))
    assert r.find_path(method, raw) == walked


def test_a_method_past_the_compiled_maximum_walks_the_trie_with_the_same_answers() -> None:
    specs = [f"GET /r{i}/{{id}}" for i in range(COMPILED_ROUTES_MAX + 4)]
    r = router(*specs, "GET /r3/{other}/x")
    for i in (0, 3, COMPILED_ROUTES_MAX + 3):
        found = r.find_path("GET", f"/r{i}/k".encode())
        assert found is not None and (found[0].topic, found[1]) == (f"t{i}", {"id": "k"})
    found = r.find_path("GET", b"/r3/k/x")
    assert found is not None and found[0].topic == f"t{COMPILED_ROUTES_MAX + 4}"
    assert r.find_path("GET", b"/r99/k") is None


def test_a_compiled_path_that_is_not_utf8_is_refused() -> None:
    with pytest.raises(PathNotUtf8):
        router("GET /a/{x}").find_path("GET", b"/a/\xff")
