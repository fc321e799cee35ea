import json
from typing import Any

import pytest

from svcgen.runtime import Context, Guard, HttpApp, Identity, Registry, Result, Route, Service, create_app
from svcgen.runtime._http.routing import RouteError
from svcgen.runtime._service import ADMITTED_PER_CALL
from tests.support.client import call
from tests.support.fakes import traced_service
from tests.support.sample import GetOrder, build_registry, build_service
from tests.support.security import Calls, clinic_security, clinic_service

ROUTES = [
    "POST /orders -> orders:place@v1",
    "POST /{version}/orders -> orders:place",
    "GET /orders/{orderId} -> orders:get",
    "DELETE /orders/{orderId} -> orders:delete",
    "POST /boom -> orders:explode",
    "GET /mesh -> svc:mesh",
]
PLACE = {"customerId": "c-1", "items": [{"sku": "a", "quantity": 2}], "placedAt": "2026-11-22T10:00:00Z"}


def make_app(**options: Any) -> HttpApp:
    service_options = {k: options.pop(k) for k in ("database_ok", "prefix") if k in options}
    return create_app(build_service(**service_options), ROUTES, **options)


class TestRouting:
    def test_route_with_static_version(self) -> None:
        response = call(make_app(), "POST", "/orders", json=PLACE)
        assert response.status_code == 201
        assert response.json() == {"orderId": "o-1", "customerId": "c-1", "totalItems": 2}
        assert response.headers["svc-version"] == "v1"
        assert response.headers["x-handled-by"] == "v1"
        assert response.headers["content-type"] == "application/json"

    def test_the_version_echoed_is_this_services_whatever_headers_the_result_carries(self) -> None:
        # A handler answering with a Result another service gave it: that service's version is not this one's.
        async def relay(request: GetOrder, context: Context) -> Result[Any]:
            return Result.ok({"orderId": request.order_id}, headers={"svc-version": "v9", "x-from": "ledger"})

        registry = Registry()
        registry.add("orders:relay", relay, version="v1")
        app = create_app(Service(Identity("orders"), registry), ["GET /relay/{orderId} -> orders:relay@v1"])
        response = call(app, "GET", "/relay/o-1")
        assert response.status_code == 200, response.text
        assert response.headers.get_list("svc-version") == ["v1"] and response.headers["x-from"] == "ledger"

    def test_version_segment_selects_handler_and_is_not_delivered(self) -> None:
        app = make_app()
        assert call(app, "POST", "/v1/orders", json=PLACE).json()["orderId"] == "o-1"
        response = call(app, "POST", "/v2/orders", json={"customerId": "c-2", "version": "ignored-field"})
        assert response.status_code == 200
        assert response.json()["orderId"] == "o-2"
        assert response.headers["svc-version"] == "v2"

    def test_version_segment_beats_header_which_beats_static_version(self) -> None:
        app = make_app()
        assert call(app, "POST", "/v1/orders", json=PLACE, headers={"svc-version": "v2"}).json()["orderId"] == "o-1"
        assert call(app, "POST", "/orders", json=PLACE, headers={"x-version": "v2"}).json()["orderId"] == "o-2"

    def test_unknown_version_segment_is_not_found(self) -> None:
        response = call(make_app(), "POST", "/v7/orders", json=PLACE)
        assert response.status_code == 404
        assert response.json()["status"] == "not-found"

    def test_path_field_is_converted_to_its_type(self) -> None:
        registry = Registry()

        async def handle(request: GetOrder, context: Context) -> Result[dict[str, Any]]:
            return Result.ok({"orderId": request.order_id, "verbose": request.verbose})

        registry.add("a:b", handle)
        app = create_app(Service(Identity("s"), registry), ["GET /things/{orderId}/{verbose} -> a:b"])
        assert call(app, "GET", "/things/o-1/true").json() == {"orderId": "o-1", "verbose": True}
        bad = call(app, "GET", "/things/o-1/maybe")
        assert bad.status_code == 422
        assert bad.json()["status"] == "validation-error"
        assert bad.json()["detail"].startswith("verbose")

    def test_precedence_path_then_query_then_body(self) -> None:
        registry = Registry()

        async def echo(request: dict[str, Any], context: Context) -> Result[dict[str, Any]]:
            return Result.ok(request)

        registry.add("a:echo", echo)
        app = create_app(Service(Identity("s"), registry), ["POST /echo/{a} -> a:echo"])
        response = call(app, "POST", "/echo/from-path?a=q&b=from-query", json={"a": 1, "b": 2, "c": 3})
        assert response.json() == {"a": "from-path", "b": "from-query", "c": 3}

    def test_first_registered_route_wins(self) -> None:
        registry = Registry()

        async def first(request: dict[str, Any], context: Context) -> Result[str]:
            return Result.ok("first")

        async def second(request: dict[str, Any], context: Context) -> Result[str]:
            return Result.ok("second")

        registry.add("t:first", first)
        registry.add("t:second", second)
        service = Service(Identity("s"), registry)
        app = create_app(service, ["GET /items/{id} -> t:first", "GET /items/special -> t:second"])
        assert call(app, "GET", "/items/special").json() == "first"
        app = create_app(service, ["GET /items/special -> t:second", "GET /items/{id} -> t:first"])
        assert call(app, "GET", "/items/special").json() == "second"
        assert call(app, "GET", "/items/other").json() == "first"

    def test_several_routes_one_handler(self) -> None:
        app = make_app()
        assert call(app, "POST", "/orders", json=PLACE).status_code == 201
        assert call(app, "POST", "/v1/orders", json=PLACE).status_code == 201

    def test_headers_reach_the_handler(self) -> None:
        registry = Registry()

        async def headers(request: dict[str, Any], context: Context) -> Result[dict[str, str]]:
            return Result.ok({"tenant": context.headers.get("x-tenant", "")}, headers={"x-served": "yes"})

        registry.add("a:h", headers)
        app = create_app(Service(Identity("s"), registry), ["GET /h -> a:h"])
        response = call(app, "GET", "/h", headers={"X-Tenant": "acme"})
        assert response.json() == {"tenant": "acme"}
        assert response.headers["x-served"] == "yes"


class TestStatusMapping:
    def test_no_route_is_404(self) -> None:
        response = call(make_app(), "GET", "/nowhere")
        assert response.status_code == 404
        assert response.json() == {"status": "not-found", "detail": "no route for GET /nowhere"}

    def test_method_mismatch_is_405_with_allow(self) -> None:
        response = call(make_app(), "PUT", "/orders")
        assert response.status_code == 405
        assert response.headers["allow"] == "POST, OPTIONS"

    def test_invalid_json_is_400(self) -> None:
        response = call(make_app(), "POST", "/orders", content=b"{nope")
        assert response.status_code == 400
        assert response.json()["status"] == "bad-request"

    def test_non_object_body_is_400(self) -> None:
        assert call(make_app(), "POST", "/orders", json=[1, 2]).status_code == 400

    def test_empty_body_counts_as_empty_object(self) -> None:
        response = call(make_app(), "POST", "/orders")
        assert response.status_code == 422
        assert response.json() == {
            "status": "validation-error",
            "detail": "customerId: required; items: required; placedAt: required",
            "errors": [
                {"path": "customerId", "message": "required"},
                {"path": "items", "message": "required"},
                {"path": "placedAt", "message": "required"},
            ],
        }

    def test_validation_is_422_with_field_path(self) -> None:
        response = call(make_app(), "POST", "/orders", json={**PLACE, "items": [{"sku": 5}]})
        assert response.status_code == 422
        assert response.json()["detail"] == "items[0].sku: expected string"

    def test_handler_exception_is_503_without_text(self) -> None:
        response = call(make_app(), "POST", "/boom", json={})
        assert response.status_code == 503
        assert response.json()["status"] == "service-unavailable"
        assert "hunter2" not in response.text and "SecretError" not in response.text

    def test_204_has_no_body(self) -> None:
        response = call(make_app(), "DELETE", "/orders/o-1")
        assert response.status_code == 204
        assert response.content == b""

    def test_body_over_the_limit_is_413(self) -> None:
        response = call(make_app(max_body_bytes=100), "POST", "/orders", content=b"x" * 101)
        assert response.status_code == 413
        assert response.json()["status"] == "bad-request"  # no 413 status in the vocabulary: see http/limits.py


class TestSurfaces:
    def test_invoke(self) -> None:
        envelope = {"topic": "orders:get", "headers": {}, "body": json.dumps({"orderId": "missing"})}
        response = call(make_app(), "POST", "/svc/invoke", json=envelope)
        assert response.status_code == 200
        assert response.json()["statusCode"] == "not-found"

    @pytest.mark.parametrize(
        "body",
        [b"nope", b"[]", b'{"topic": 1}', b'{"topic": "a", "headers": {"h": 2}}', b'{"topic": "a", "body": {}}'],
    )
    def test_malformed_envelope_is_400(self, body: bytes) -> None:
        response = call(make_app(), "POST", "/svc/invoke", content=body)
        assert response.status_code == 400
        assert response.json()["status"] == "bad-request"

    def test_health_ok_and_unhealthy(self) -> None:
        healthy = call(make_app(), "GET", "/svc/health")
        assert healthy.status_code == 200
        assert healthy.json()["isHealthy"] is True
        sick = call(make_app(database_ok=False), "GET", "/svc/health")
        assert sick.status_code == 503
        assert sick.json()["healthChecks"]["database"] == {"status": "failed", "detail": "connection refused"}
        assert sick.json()["healthChecks"]["cache"] == {"status": "ok"}

    def test_health_absent_without_checks(self) -> None:
        app = create_app(Service(Identity("s"), build_registry()))
        assert call(app, "GET", "/svc/health").status_code == 404

    def test_spec_and_openapi(self) -> None:
        app = make_app()
        spec = call(app, "GET", "/svc/spec")
        assert spec.status_code == 200
        assert spec.json() == app.service.spec
        openapi = call(app, "GET", "/svc/openapi.json")
        assert openapi.json()["openapi"] == "3.1.0"
        assert openapi.json() == app.service.openapi

    def test_spec_can_be_disabled(self) -> None:
        assert call(make_app(spec=False), "GET", "/svc/spec").status_code == 404

    def test_invoke_can_be_disabled(self) -> None:
        assert call(make_app(invoke=False), "POST", "/svc/invoke", json={"topic": "svc:mesh"}).status_code == 404

    def test_prefix_moves_every_surface(self) -> None:
        app = make_app(prefix="/ops/")
        assert call(app, "GET", "/ops/health").status_code == 200
        assert call(app, "GET", "/ops/spec").status_code == 200
        assert call(app, "GET", "/ops/openapi.json").status_code == 200
        assert call(app, "POST", "/ops/invoke", json={"topic": "svc:mesh"}).status_code == 200
        assert call(app, "GET", "/svc/health").status_code == 404
        paths = call(app, "GET", "/ops/openapi.json").json()["paths"]
        assert all(path.startswith("/ops/invoke/") for path in paths)

    def test_reserved_topics_over_invoke(self) -> None:
        app = make_app()
        for topic in ("svc:mesh", "svc:spec", "svc:healthcheck"):
            answer = call(app, "POST", "/svc/invoke", json={"topic": topic}).json()
            assert answer["statusCode"] == "ok", topic

    def test_get_route_bound_to_mesh_exposes_descriptor(self) -> None:
        app = make_app()
        response = call(app, "GET", "/mesh")
        assert response.status_code == 200
        assert response.json() == app.service.descriptor.document

    def test_route_colliding_with_a_surface_is_refused(self) -> None:
        with pytest.raises(RouteError, match="collides with the well-known surface GET /svc/"):
            create_app(build_service(), ["GET /svc/{what} -> orders:get"])
        # same path, other method: no collision
        create_app(build_service(), ["GET /svc/invoke -> orders:get"])

    def test_an_encoded_slash_never_spells_a_surface(self) -> None:
        """`%2F` stays inside its segment: `/svc%2Fhealth` is one segment, the application route's `{orderId}`, not
        the health surface its decoded path spells (surfaces never shadow application routes)."""
        app = create_app(build_service(), ["GET /{orderId} -> orders:get"])
        for method in ("GET", "HEAD"):
            response = call(app, method, "/svc%2Fhealth")
            assert response.status_code == 200, method
            assert response.headers.get("svc-version") is None
        assert call(app, "GET", "/svc%2Fhealth").json()["orderId"] == "svc/health"
        assert call(app, "OPTIONS", "/svc%2Fhealth").headers["allow"] == "GET, HEAD, OPTIONS"
        bare = create_app(build_service())
        assert call(bare, "GET", "/svc%2Fhealth").status_code == 404
        assert call(bare, "HEAD", "/svc%2Fspec").status_code == 404
        assert call(bare, "OPTIONS", "/svc%2Fspec").status_code == 404
        assert call(bare, "POST", "/svc%2Finvoke", json={"topic": "svc:mesh"}).status_code == 404
        assert call(bare, "GET", "/svc/health").status_code == 200

    def test_route_to_unknown_topic_is_refused(self) -> None:
        with pytest.raises(RouteError, match="no handler"):
            create_app(build_service(), ["GET /x -> orders:unknown"])


class TestRoutes:
    @pytest.mark.parametrize(
        "spec",
        ["FETCH /x", "GET x", "GET /a/{b", "GET /a/x{b}", "GET /{a}/{a}"],
    )
    def test_bad_route_specs(self, spec: str) -> None:
        with pytest.raises(RouteError):
            Route.parse(spec, "a:b")

    def test_version_segment_detected(self) -> None:
        assert Route.parse("POST /{version}/orders", "a").has_version_segment
        assert not Route.parse("POST /orders", "a").has_version_segment




class TestTopicInvokeSurface:
    """`POST {prefix}/invoke/<topic>[/<version>]`: the paths the operations document advertises."""

    def test_every_documented_path_is_served(self) -> None:
        app = make_app()
        for path in app.service.openapi["paths"]:
            response = call(app, "POST", path, json={})
            assert response.status_code != 404 or response.json()["detail"] != f"no route for POST {path}", path

    def test_typed_call_with_status_mapping(self) -> None:
        app = make_app()
        ok = call(app, "POST", "/svc/invoke/orders:get", json={"orderId": "o-3"})
        assert ok.status_code == 200
        assert ok.json() == {"orderId": "o-3", "customerId": "c", "totalItems": 0}
        assert call(app, "POST", "/svc/invoke/orders:get", json={"orderId": "missing"}).status_code == 404
        assert call(app, "POST", "/svc/invoke/orders:get", json={}).status_code == 422
        assert call(app, "POST", "/svc/invoke/orders:nope", json={}).status_code == 404

    def test_version_segment_selects_the_handler(self) -> None:
        app = make_app()
        v2 = call(app, "POST", "/svc/invoke/orders:place/v2", json={"customerId": "c"})
        assert v2.status_code == 200
        assert v2.json()["orderId"] == "o-2"
        assert v2.headers["svc-version"] == "v2"
        assert call(app, "POST", "/svc/invoke/orders:place/v1", json=PLACE).status_code == 201

    def test_moves_with_the_prefix_and_is_off_with_invoke(self) -> None:
        assert call(make_app(prefix="/ops"), "POST", "/ops/invoke/orders:get", json={"orderId": "1"}).status_code == 200
        assert call(make_app(invoke=False), "POST", "/svc/invoke/orders:get", json={"orderId": "1"}).status_code == 404

    def test_colliding_route_is_refused(self) -> None:
        with pytest.raises(RouteError, match="collides"):
            create_app(build_service(), ["POST /svc/invoke/{topic} -> orders:get"])
        with pytest.raises(RouteError, match="collides"):
            create_app(build_service(), ["POST /{a}/invoke/x/{b} -> orders:get"])
        create_app(build_service(), ["POST /svc/invoke/a/b/c -> orders:get"])


class TestNoContentAnswers:
    """`updated` and `deleted` keep their payload; only the HTTP 204 answer has no body (DESIGN §7)."""

    @staticmethod
    def app() -> HttpApp:
        async def rename(request: GetOrder, context: Context) -> Result[GetOrder]:
            return Result.updated(GetOrder(order_id=request.order_id + "-renamed"))

        registry = Registry()
        registry.add("orders:rename", rename, success=("updated",))
        return create_app(Service(Identity("orders"), registry), ["PUT /orders/{orderId} -> orders:rename"])

    def test_the_route_answers_204_without_a_body(self) -> None:
        response = call(self.app(), "PUT", "/orders/o-1")
        assert (response.status_code, response.content) == (204, b"")
        assert "content-length" not in response.headers

    def test_the_per_topic_face_answers_204_without_a_body(self) -> None:
        response = call(self.app(), "POST", "/svc/invoke/orders:rename", json={"orderId": "o-1"})
        assert (response.status_code, response.content) == (204, b"")

    def test_the_envelope_keeps_the_payload(self) -> None:
        envelope = {"topic": "orders:rename", "body": '{"orderId": "o-1"}'}
        answer = call(self.app(), "POST", "/svc/invoke", json=envelope).json()
        assert answer["statusCode"] == "updated"
        assert json.loads(answer["body"]) == {"orderId": "o-1-renamed", "verbose": False}


# --- a call its route decides alone skips invoke's per-call admission, with the same answer --------------------


SHORTCUT_CASES: list[tuple[str, str, dict[str, str], Any]] = [
    ("POST", "/orders", {}, PLACE),
    ("POST", "/orders", {"svc-version": "v2"}, PLACE),
    ("POST", "/orders", {"x-version": " v2 "}, PLACE),
    ("POST", "/orders", {"version": "v9"}, PLACE),
    ("POST", "/orders", {"idempotency-key": "k-1"}, PLACE),
    ("POST", "/orders", {"idempotency-key": "k-1"}, PLACE),
    ("POST", "/orders", {"svc-deadline": "5000", "x-correlation-id": "c-1"}, PLACE),
    ("POST", "/orders", {"svc-deadline": "0"}, PLACE),
    ("POST", "/orders", {}, {"customerId": 7}),
    ("POST", "/v2/orders", {"svc-version": "v1"}, PLACE),
    ("GET", "/orders/o-1?verbose=true", {}, None),
    ("GET", "/orders/o-1?verbose=perhaps", {}, None),
    ("HEAD", "/orders/o-1", {}, None),
    ("DELETE", "/orders/o-1", {}, None),
    ("POST", "/boom", {}, {}),
    ("GET", "/mesh", {}, None),
    ("GET", "/orders/o-1/", {}, None),
    ("GET", "/orders/o%2D1?verbose=1", {}, None),
    ("GET", "/orders/o-1?verbose=%ff", {}, None),
    ("GET", "/orders/\u00e9t\u00e9", {"svc-deadline": "5000"}, None),
    ("POST", "/svc/invoke/orders:get", {}, {"orderId": "o-9"}),
    ("POST", "/svc/invoke/orders:place/v2", {}, PLACE),
    ("PUT", "/orders", {}, {}),
    ("GET", "/nowhere", {}, None),
    ("OPTIONS", "/orders/o-1", {}, None),
]


def _answers(app: HttpApp) -> list[tuple[int, dict[str, str], bytes]]:
    answers = []
    for method, url, headers, body in SHORTCUT_CASES:
        response = call(app, method, url, headers=headers, json=body) if body is not None else \
            call(app, method, url, headers=headers)  # fmt: skip
        answers.append((response.status_code, dict(response.headers), response.content))
    return answers


def test_a_call_its_route_decides_is_answered_as_invoke_answers_it(monkeypatch: pytest.MonkeyPatch) -> None:
    taken: list[str] = []
    route_runner = Service.route_runner

    def recording(service: Service, topic: str, static_version: str) -> Any:
        run = route_runner(service, topic, static_version)
        if run is None:
            return None

        async def recorded(*args: Any) -> Any:
            taken.append("runner")
            return await run(*args)

        return recorded

    monkeypatch.setattr(Service, "route_runner", recording)
    shortcut = make_app()
    monkeypatch.setattr(Service, "route_runner", lambda *_: None)
    general = make_app()
    invoke = Service.invoke

    async def invoked(service: Service, invocation: Any) -> Any:
        if service is shortcut.service:
            taken.append("invoke")
        return await invoke(service, invocation)

    monkeypatch.setattr(Service, "invoke", invoked)
    assert _answers(shortcut) == _answers(general)
    # Both ways were taken: version headers and idempotency keys went through invoke, plain calls did not.
    assert taken[:5] == ["runner", "invoke", "invoke", "invoke", "invoke"]
    assert taken.count("runner") >= 12


def test_what_keeps_a_routed_call_on_invoke() -> None:
    service = make_app().service
    place = service.registry.get("orders:place", "v1")
    assert place is not None and service.route_runner("orders:place", "v1") is service.runner(place)
    assert service.route_runner("orders:get", "") is not None
    assert service.route_runner("orders:place", "") is None  # two versions: the caller must pick
    assert service.route_runner("orders:place", "v7") is None
    assert service.route_runner("no:such", "") is None
    assert {"svc-version", "version", "x-version", "idempotency-key"} == ADMITTED_PER_CALL
    guarded = clinic_service(Guard(clinic_security(jwks="https://id.test/jwks")), Calls())
    assert guarded.route_runner("patients:directory", "") is None  # a public topic too: the guard sees every call


def test_the_envelope_face_takes_the_requests_trace_correlation_and_deadline_where_the_envelope_has_none() -> None:
    # A proxy or tracer sets traceparent on the HTTP request, not inside the envelope it cannot read.
    async def echo(request: dict[str, Any], context: Context) -> Result[dict[str, Any]]:
        return Result.ok({"headers": dict(context.headers), "bounded": context.deadline is not None})

    registry = Registry()
    registry.add("t:echo", echo, request=dict[str, Any], response=dict[str, Any])
    traced = traced_service(reg=registry)
    app = create_app(traced.service)
    proxy = {"traceparent": f"00-{'ab' * 16}-{'cd' * 8}-01", "x-correlation-id": "c-proxy", "svc-deadline": "60000"}

    def invoke(envelope: dict[str, Any], headers: dict[str, str]) -> Any:
        answer = call(app, "POST", "/svc/invoke", json={"topic": "t:echo", "body": "{}", **envelope}, headers=headers)
        assert answer.status_code == 200, answer.text
        return answer.json()

    seen = json.loads(invoke({}, {**proxy, "x-other": "not carried"})["body"])
    assert seen == {"headers": proxy, "bounded": True}
    event = traced.events[-1]
    assert (event["traceId"], event["parentSpanId"], event["correlationId"]) == ("ab" * 16, "cd" * 8, "c-proxy")
    # The envelope's own headers win, whatever their case.
    own = {"Traceparent": f"00-{'12' * 16}-{'34' * 8}-01", "x-correlation-id": "c-own"}
    seen = json.loads(invoke({"headers": own}, proxy)["body"])
    assert seen["headers"] == {"traceparent": own["Traceparent"], "x-correlation-id": "c-own", "svc-deadline": "60000"}
    assert (traced.events[-1]["traceId"], traced.events[-1]["correlationId"]) == ("12" * 16, "c-own")
    # The request's deadline holds: one already passed is answered timeout without running the handler.
    assert invoke({}, {"svc-deadline": "0"})["statusCode"] == "timeout"
    assert json.loads(invoke({}, {})["body"]) == {"headers": {}, "bounded": False}
