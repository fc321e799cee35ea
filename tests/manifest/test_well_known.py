"""Routes on the well-known prefix: validate refuses exactly the routes the runtime would refuse at startup."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from svcgen.manifest import ManifestError, load_manifest_text
from svcgen.manifest.routes import RouteSyntaxError, parse_route
from svcgen.runtime import HttpApp, Route
from svcgen.runtime._http.routing import RouteError
from tests.support.manifests import errors, load_ok, manifest
from tests.support.sample import build_service

COLLISION = "collides with the well-known surface"
SEGMENTS = ["svc", "ops", "invoke", "health", "spec", "openapi.json", "orders", "get", "{orderId}", "{name}"]
PREFIXES = ["/svc", "/ops", "/", "/ops/v1", "svc/"]


def order_manifest(prefix: str | None, *routes: str) -> str:
    listed = ", ".join(f'"{route}"' for route in routes)
    return manifest(f"""
        svcgen: 1
        service: orders
        {f"prefix: {prefix}" if prefix is not None else ""}
        types:
          Order:
            fields:
              orderId: string
              name: string
        topics:
          - id: orders:get
            request: Order
            response: Order
            routes: [{listed}]
        """)


def validate_collides(prefix: str, route: str) -> bool:
    try:
        load_manifest_text(order_manifest(prefix, route), "m.yaml")
    except ManifestError as error:
        return any(COLLISION in diagnostic.message for diagnostic in error.diagnostics)
    return False


def startup_collides(prefix: str, route: str) -> bool:
    service = build_service(prefix=prefix)
    try:
        HttpApp(service, [Route.parse(route, "orders:get")])
    except RouteError as error:
        assert COLLISION in str(error)
        return True
    return False


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    prefix=st.sampled_from(PREFIXES),
    method=st.sampled_from(["GET", "POST", "PUT"]),
    segments=st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=5),
)
def test_validate_and_startup_agree_on_every_route(prefix: str, method: str, segments: list[str]) -> None:
    route = f"{method} /{'/'.join(segments)}"
    try:
        parse_route(route)
    except RouteSyntaxError:
        assume(False)
    assert validate_collides(prefix, route) == startup_collides(prefix, route), route


@pytest.mark.parametrize(
    ("prefix", "route", "surface"),
    [
        (None, "POST /svc/invoke", "POST /svc/invoke"),
        (None, "GET /svc/{name}", "GET /svc/health"),
        (None, "POST /svc/invoke/{name}/{orderId}", "POST /svc/invoke/<topic>[/<version>]"),
        ("/", "GET /openapi.json", "GET /openapi.json"),
        ("/ops/", "GET /ops/spec", "GET /ops/spec"),
    ],
)
def test_a_route_on_a_surface_is_an_error_at_the_route(prefix: str | None, route: str, surface: str) -> None:
    shown = (prefix or "/svc").rstrip("/") or "/"
    assert errors(order_manifest(prefix, route)) == [
        f"m.yaml:13:14: route '{route}' {COLLISION} {surface} that the runtime serves under the prefix {shown}; "
        "move the route or set another 'prefix'"
    ]


def test_the_same_path_under_another_prefix_is_free() -> None:
    assert load_ok(order_manifest("/ops", "POST /svc/invoke", "GET /svc/health")).prefix == "/ops"


def test_an_unreadable_prefix_skips_only_the_collision_check() -> None:
    misspelt = order_manifest(None, "GET /svc/health", "GET /x/{nope}").replace("types:", "prefx: /ops\ntypes:")
    assert errors(misspelt) == [
        "m.yaml:4:1: unknown key 'prefx' in manifest; did you mean 'prefix'?",
        "m.yaml:14:33: route placeholder {nope} names no field of Order; its fields are orderId, name",
    ]
    rejected = order_manifest("'/o ps'", "GET /svc/health")
    assert errors(rejected) == ["m.yaml:3:9: prefix must be a URL path like /svc, got '/o ps'"]
