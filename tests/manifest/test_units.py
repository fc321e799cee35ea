"""Small pieces of the front end: did-you-mean, canonical names, routes, value fitting."""

from __future__ import annotations

import pytest

from svcgen.manifest.fits import fits
from svcgen.manifest.routes import RouteSyntaxError, parse_route, shadows
from svcgen.manifest.spelling import canonical_camel, did_you_mean, is_pascal_identifier, pascal_case
from svcgen.manifest.typeexpr import parse_type


@pytest.mark.parametrize(
    ("word", "candidates", "expected"),
    [
        ("sumary", ["summary", "request"], "summary"),
        ("Summary", ["summary"], "summary"),
        ("desc", ["description", "fields"], "description"),
        ("de", ["description"], None),
        ("zzz", ["summary"], None),
        ("routes", ["id", "version", "request", "response", "summary"], None),
    ],
)
def test_did_you_mean(word: str, candidates: list[str], expected: str | None) -> None:
    assert did_you_mean(word, candidates) == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("orderID", "orderId"),
        ("order_id", "orderId"),
        ("OrderId", "orderId"),
        ("HTTPServerURL", "httpServerUrl"),
        ("order-id", "orderId"),
        ("x", "x"),
        ("2fa", None),
        ("__", None),
    ],
)
def test_canonical_camel(name: str, expected: str | None) -> None:
    assert canonical_camel(name) == expected


def test_pascal_names() -> None:
    assert is_pascal_identifier("LineItem") and is_pascal_identifier("V2")
    assert not is_pascal_identifier("lineItem") and not is_pascal_identifier("None") and not is_pascal_identifier("A_B")
    assert pascal_case("line_item") == "LineItem"
    assert pascal_case("lineItem") == "LineItem"
    assert pascal_case("none") is None


def test_parse_route() -> None:
    route = parse_route("GET /orders/{orderId}/lines/")
    assert (route.method, route.path, route.segments) == (
        "GET",
        "/orders/{orderId}/lines/",
        ("orders", "{orderId}", "lines"),
    )
    assert route.placeholders == (None, "orderId", None)
    assert route.params == ("orderId",) and not route.has_version
    assert parse_route("POST /{version}/x").has_version
    assert parse_route("GET /").segments == ()
    with pytest.raises(RouteSyntaxError):
        parse_route("GET")


@pytest.mark.parametrize(
    ("earlier", "later", "expected"),
    [
        ("GET /a/{x}", "GET /a/b", True),
        ("GET /a/{x}", "GET /a/{y}", True),
        ("GET /a/b", "GET /a/b/", True),
        ("GET /{v}/{x}", "GET /a/b", True),
        ("GET /a/b", "GET /a/{x}", False),
        ("GET /a/{x}", "POST /a/b", False),
        ("GET /a/{x}", "GET /a/b/c", False),
        ("GET /a/c", "GET /a/b", False),
    ],
)
def test_shadows(earlier: str, later: str, expected: bool) -> None:
    assert shadows(parse_route(earlier), parse_route(later)) is expected


def test_fits_checks_known_record_fields() -> None:
    records = {"Line": {"sku": (parse_type("string"), True), "qty": (parse_type("integer"), False)}}
    line = parse_type("Line")
    assert fits(line, {"sku": "a"}, records)
    assert fits(line, {"sku": "a", "qty": 2}, records)
    assert not fits(line, {"qty": 2}, records)
    assert not fits(line, {"sku": "a", "other": 1}, records)
    assert not fits(line, {"sku": 1}, records)
    assert fits(parse_type("Unknown"), {"anything": 1}, records)
    assert not fits(parse_type("Unknown"), [], records)


def test_datetimes_fit_by_the_codecs_rfc3339_rule() -> None:
    datetime = parse_type("datetime")
    assert fits(datetime, "2024-02-29T23:59:59.5-07:30")
    assert not fits(datetime, "2023-02-29T00:00:00Z")
    assert not fits(datetime, "2024-01-01 00:00:00Z")
    assert not fits(datetime, "2024-01-01T00:00:00")
