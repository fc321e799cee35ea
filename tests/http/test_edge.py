"""HTTP at the edge as clients expect it: 405 with Allow, HEAD, OPTIONS, CORS through Starlette's middleware, the
user's ASGI and pipeline middleware from the wiring, `invoke=False`, and 422 `errors` a form can map to fields."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx
import pytest

from svcgen.runtime import (
    ApiKeyScheme,
    Context,
    Cors,
    Deprecation,
    Guard,
    HttpApp,
    Identity,
    JwtScheme,
    MemoryIdempotencyStore,
    Next,
    Result,
    Security,
    Service,
    Wiring,
    create_app,
)
from svcgen.runtime._idempotency import IN_FLIGHT, Claim, StoredAnswer
from tests.support.client import call
from tests.support.sample import build_registry, build_service, get_order
from tests.support.server import running

from .test_app import PLACE, ROUTES


def make_app(**options: Any) -> HttpApp:
    return create_app(build_service(), ROUTES, **options)


def test_wrong_method_is_405_with_allow_on_routes_and_well_known_surfaces() -> None:
    app = make_app()
    answer = call(app, "PATCH", "/orders/o-1")
    assert answer.status_code == 405
    assert answer.headers["allow"] == "GET, HEAD, DELETE, OPTIONS"
    # No word for 405 in the status vocabulary: bad-request, its detail naming what is allowed, as Allow does.
    assert answer.json() == {
        "status": "bad-request",
        "detail": "PATCH is not allowed on /orders/o-1; allowed: GET, HEAD, DELETE, OPTIONS",
    }
    invoked = call(app, "GET", "/svc/invoke")
    assert invoked.headers["allow"] == "POST, OPTIONS"
    assert invoked.json()["detail"] == "GET is not allowed on /svc/invoke; allowed: POST, OPTIONS"
    assert call(app, "GET", "/svc/invoke/orders:place").status_code == 405
    assert call(app, "POST", "/svc/health").headers["allow"] == "GET, HEAD, OPTIONS"
    assert call(app, "GET", "/nowhere").status_code == 404


def test_head_answers_every_get_without_a_body() -> None:
    app = make_app()
    for path in ("/orders/o-5", "/svc/health", "/svc/openapi.json", "/svc/docs"):
        got = call(app, "GET", path)
        head = call(app, "HEAD", path)
        assert head.status_code == got.status_code == 200, path
        assert head.content == b""
        assert head.headers["content-length"] == got.headers["content-length"]
        assert head.headers["content-type"] == got.headers["content-type"]
    assert call(app, "HEAD", "/orders").status_code == 405  # POST only: HEAD is not GET's


def test_options_is_204_with_allow() -> None:
    app = make_app()
    answer = call(app, "OPTIONS", "/orders/o-1")
    assert answer.status_code == 204 and answer.content == b""
    assert answer.headers["allow"] == "GET, HEAD, DELETE, OPTIONS"
    assert call(app, "OPTIONS", "/nowhere").status_code == 404


def test_head_and_options_through_uvicorn() -> None:
    with running(make_app()) as url, httpx.Client(base_url=url, timeout=10) as client:
        head = client.head("/orders/o-5")
        assert head.status_code == 200 and head.content == b""
        assert client.options("/orders").headers["allow"] == "POST, OPTIONS"
        assert client.put("/orders").status_code == 405


def test_invoke_false_turns_the_invoke_faces_off() -> None:
    app = make_app(invoke=False)
    assert call(app, "POST", "/svc/invoke", json={"topic": "svc:mesh"}).status_code == 404
    assert call(app, "POST", "/svc/invoke/orders:place", json=PLACE).status_code == 404
    assert call(app, "POST", "/orders", json=PLACE).status_code == 201
    # The operations document describes the invoke faces: where none is served, it lists no operation.
    served = call(app, "GET", "/svc/openapi.json")
    assert served.status_code == 200 and served.content == app.openapi_body
    document = served.json()
    assert document["paths"] == {} and list(document["components"]["schemas"]) == ["SvcError"]
    faces = make_app()
    assert faces.openapi == faces.service.openapi and "/svc/invoke/orders:place/v1" in faces.openapi["paths"]
    assert document["info"] == faces.openapi["info"]


def test_validation_error_lists_each_field_with_its_wire_path() -> None:
    app = make_app()
    bad = {"customerId": 7, "items": [{"sku": "a"}, {"sku": 3, "quantity": "many"}], "placedAt": "yesterday"}
    answer = call(app, "POST", "/orders", json=bad)
    assert answer.status_code == 422
    body = answer.json()
    assert body["status"] == "validation-error" and body["detail"]
    paths = [error["path"] for error in body["errors"]]
    assert paths == ["customerId", "items[1].sku", "items[1].quantity", "placedAt"]
    assert all(error["message"] for error in body["errors"])


def test_validation_errors_stop_at_twenty() -> None:
    app = make_app()
    bad = {"customerId": "c", "items": [{"sku": n} for n in range(30)], "placedAt": "2026-01-01T00:00:00Z"}
    errors = call(app, "POST", "/orders", json=bad).json()["errors"]
    assert len(errors) == 20 and errors[0]["path"] == "items[0].sku"


def test_wiring_puts_asgi_middleware_outermost_first_and_pipeline_middleware_in() -> None:
    seen: list[str] = []

    def tagging(name: str) -> Any:
        def wrap(inner: Any) -> Any:
            async def app(scope: Any, receive: Any, send: Any) -> None:
                if scope["type"] == "http":
                    seen.append(name)
                await inner(scope, receive, send)

            return app

        return wrap

    async def stamp(context: Context, following: Next) -> Result[Any]:
        seen.append(f"pipeline:{context.topic}")
        return (await following(context)).with_headers({"x-stamped": "yes"})

    wiring = Wiring(environ={})
    wiring.asgi_middleware += [tagging("outer"), tagging("inner")]
    wiring.middleware.append(stamp)
    app = wiring.attach(create_app(build_service(middleware=wiring.middleware), ROUTES))
    answer = call(app, "GET", "/orders/o-1")
    assert answer.headers["x-stamped"] == "yes"
    assert seen == ["outer", "inner", "pipeline:orders:get"]


def test_cors_preflight_and_simple_requests_through_starlette() -> None:
    wiring = Wiring(environ={})
    wiring.cors = Cors(allow_origins=["https://app.example.test"])
    app = wiring.attach(make_app())
    with running(app) as url, httpx.Client(base_url=url, timeout=10) as client:
        preflight = client.options(
            "/orders",
            headers={
                "origin": "https://app.example.test",
                "access-control-request-method": "POST",
                "access-control-request-headers": "authorization, content-type",
            },
        )
        assert preflight.status_code == 200
        assert preflight.headers["access-control-allow-origin"] == "https://app.example.test"
        assert "POST" in preflight.headers["access-control-allow-methods"]
        simple = client.get("/orders/o-1", headers={"origin": "https://app.example.test"})
        assert simple.headers["access-control-allow-origin"] == "https://app.example.test"
        foreign = client.get("/orders/o-1", headers={"origin": "https://evil.example.test"})
        assert "access-control-allow-origin" not in foreign.headers
        refused = client.options(
            "/orders", headers={"origin": "https://evil.example.test", "access-control-request-method": "POST"}
        )
        assert refused.status_code == 400
        # without an Origin it is plain OPTIONS: 204 with Allow
        assert client.options("/orders").status_code == 204


ORIGIN = "https://app.example.test"


def preflight(app: HttpApp, *, origin: str = ORIGIN, headers: str = "content-type") -> httpx.Response:
    asked = {"origin": origin, "access-control-request-method": "POST", "access-control-request-headers": headers}
    return call(app, "OPTIONS", "/orders", headers=asked)


def secured_app(cors: Cors) -> HttpApp:
    security = Security.declare(
        [
            ApiKeyScheme("partner", "X-Partner-Key"),
            JwtScheme("staff", issuer="https://id.example.test", audience=["svc"], algorithms=["HS256"], key="k"),
        ],
        default=["partner"],
    )
    wiring = Wiring(environ={})
    wiring.cors = cors
    return wiring.attach(create_app(build_service(security=security), ROUTES))


def test_cors_allows_the_headers_the_security_schemes_read() -> None:
    # out of the box: a browser may send the API-key header the manifest declares
    app = secured_app(Cors(allow_origins=[ORIGIN]))
    answer = preflight(app, headers="x-partner-key, content-type")
    assert answer.status_code == 200
    assert "x-partner-key" in answer.headers["access-control-allow-headers"].lower()
    # headers listed by hand still get the ones the security reads (the guard checks them anyway)
    app = secured_app(Cors(allow_origins=[ORIGIN], allow_headers=["content-type"]))
    assert preflight(app, headers="authorization, x-partner-key").status_code == 200
    assert preflight(app, headers="x-other").status_code == 400


# Headers a browser lets a script read without them being exposed, and those CORS itself or the server adds.
SHOWN_ANYWAY = {"cache-control", "content-language", "content-length", "content-type", "expires", "last-modified",
                "pragma", "date", "server", "vary"}  # fmt: skip


class BusyOnKey:
    """The in-memory store, except that the key `busy` is always still in flight."""

    def __init__(self) -> None:
        self.memory = MemoryIdempotencyStore()

    async def claim(self, scope: str, key: str, fingerprint: str) -> Claim:
        return IN_FLIGHT if key == "busy" else await self.memory.claim(scope, key, fingerprint)

    async def complete(self, scope: str, key: str, fingerprint: str, answer: StoredAnswer) -> None:
        await self.memory.complete(scope, key, fingerprint, answer)

    async def release(self, scope: str, key: str, fingerprint: str) -> None:
        await self.memory.release(scope, key, fingerprint)


def browser_facing_app(cors: Cors) -> HttpApp:
    """The sample behind an API key, with a deprecated topic version and an idempotency store that has `busy`
    in flight, so its answers carry every header the service writes."""
    registry = build_registry()
    registry.add("orders:old", get_order, version="v1", deprecated=Deprecation(since="2026-01-01", sunset="2027-01-01"))
    security = Security.declare([ApiKeyScheme("partner", "X-Partner-Key")], default=["partner"])
    guard = Guard(security, api_keys={"partner": {"k-1": "acme"}})
    service = Service(Identity("orders", binding="http"), registry, security=guard, idempotency=BusyOnKey())
    wiring = Wiring(environ={})
    wiring.cors = cors
    return wiring.attach(create_app(service, ROUTES))


def test_cors_allows_the_services_own_request_headers_whatever_is_configured() -> None:
    own = "idempotency-key, svc-deadline, x-correlation-id, traceparent, svc-version, version, x-version"
    for cors in (Cors(allow_origins=[ORIGIN]), Cors(allow_origins=[ORIGIN], allow_headers=["X-App"])):
        with running(browser_facing_app(cors)) as url, httpx.Client(base_url=url, timeout=10) as client:
            asked = {"origin": ORIGIN, "access-control-request-method": "POST",
                     "access-control-request-headers": f"{own}, x-partner-key, content-type"}  # fmt: skip
            answer = client.options("/orders", headers=asked)
            assert answer.status_code == 200, answer.text
            allowed = {name.strip() for name in answer.headers["access-control-allow-headers"].lower().split(",")}
            assert {name.strip() for name in own.split(",")} <= allowed
            assert ("x-app" in allowed) == ("X-App" in cors.allow_headers)  # the user's own, on top
            refused = client.options("/orders", headers={**asked, "access-control-request-headers": "x-other"})
            assert refused.status_code == 400


def test_a_browser_script_can_read_every_header_the_service_writes() -> None:
    cors = Cors(allow_origins=[ORIGIN], expose_headers=["X-Handled-By"])
    key = {"origin": ORIGIN, "x-partner-key": "k-1"}
    with running(browser_facing_app(cors)) as url, httpx.Client(base_url=url, timeout=10) as client:
        client.post("/orders", json=PLACE, headers={**key, "idempotency-key": "k-a"})
        answers = {
            "idempotent-replayed": client.post("/orders", json=PLACE, headers={**key, "idempotency-key": "k-a"}),
            "retry-after": client.post("/orders", json=PLACE, headers={**key, "idempotency-key": "busy"}),
            "www-authenticate": client.post("/orders", json=PLACE, headers={"origin": ORIGIN}),
            "sunset": client.post("/svc/invoke/orders:old", json={"orderId": "o-1"}, headers=key),
        }
    for written, answer in answers.items():
        assert written in answer.headers, (written, dict(answer.headers))
        exposed = {name.strip().lower() for name in answer.headers["access-control-expose-headers"].split(",")}
        hidden = {name for name in answer.headers if name not in SHOWN_ANYWAY and not name.startswith("access-")}
        assert hidden <= exposed, (written, hidden - exposed)
    assert answers["idempotent-replayed"].headers["x-handled-by"] == "v1"  # the user's own exposed too
    assert {"svc-version", "deprecation"} <= answers["sunset"].headers.keys()


def test_a_refused_preflight_has_the_failure_body() -> None:
    wiring = Wiring(environ={})
    wiring.cors = Cors(allow_origins=[ORIGIN])
    app = wiring.attach(make_app())
    evil = "https://evil.example.test/" + "x" * 300
    answer = preflight(app, origin=evil)
    assert answer.status_code == 400
    assert answer.headers["content-type"] == "application/json"
    body = answer.json()
    assert body["status"] == "bad-request" and "origin" in body["detail"]
    assert "evil" not in body["detail"]  # the untrusted origin is not echoed
    assert "access-control-allow-origin" not in answer.headers
    long_name = "x-" + "a" * 300
    body = preflight(app, headers=f"content-type, x-other, {long_name}").json()
    assert body["status"] == "bad-request"
    assert "x-other" in body["detail"] and "origin" not in body["detail"]
    assert long_name not in body["detail"] and len(body["detail"]) < 200
    assert preflight(app).status_code == 200  # an allowed preflight is Starlette's own answer


def raising(when: str) -> Any:
    """ASGI middleware that raises `RuntimeError('secret-xyz')` on a request before or after calling the app it
    wraps, or at once on lifespan."""

    def wrap(inner: Any) -> Any:
        async def app(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http" and when != "lifespan":
                await inner(scope, receive, send)
                return
            if when in ("before", "lifespan"):
                raise RuntimeError("secret-xyz")
            await inner(scope, receive, send)
            raise RuntimeError("secret-xyz")

        return app

    return wrap


def test_a_failing_asgi_middleware_gets_the_failure_body(caplog: pytest.LogCaptureFixture) -> None:
    app = make_app().wrap(raising("before"))
    with caplog.at_level(logging.ERROR, logger="svcgen.http"):
        answer = call(app, "GET", "/orders/o-1")
    assert answer.status_code == 500
    assert answer.headers["content-type"] == "application/json"
    assert answer.json() == {"status": "unexpected-error", "detail": "the server failed to handle the request"}
    assert "RuntimeError" in caplog.text
    # through uvicorn too: our body, not the server's text/plain 500
    with running(make_app().wrap(raising("before"))) as url:
        assert httpx.get(url + "/orders/o-1", timeout=10).json()["status"] == "unexpected-error"
    # after the response started it is left alone: the server ends the connection as it does
    with pytest.raises(RuntimeError):
        call(make_app().wrap(raising("after")), "GET", "/orders/o-1")


def test_lifespan_passes_a_failing_asgi_middleware_through() -> None:
    app = make_app().wrap(raising("lifespan"))

    async def receive() -> dict[str, Any]:
        return {"type": "lifespan.startup"}

    async def send(message: Any) -> None:
        raise AssertionError(message)

    with pytest.raises(RuntimeError):
        asyncio.run(app({"type": "lifespan"}, receive, send))


@pytest.mark.parametrize(("origin", "hint"), [
    ("https://app.example.test/", " (write 'https://app.example.test')"),
    ("https://app.example.test/app", " (write 'https://app.example.test')"),
    ("https://app.example.test?x=1", " (write 'https://app.example.test')"),
    ("app.example.test", ""),
])
def test_a_cors_origin_a_browser_never_sends_is_refused_at_wiring(origin: str, hint: str) -> None:
    # A browser's Origin is scheme://host[:port]: with a trailing slash the front end was silently refused forever.
    with pytest.raises(ValueError) as refused:
        Cors(allow_origins=[ORIGIN, origin])
    assert str(refused.value) == (f"Cors: origin {origin!r} is not scheme://host[:port], the only form a browser "
                                  f"sends, so it would never match{hint}")  # fmt: skip
    assert Cors(allow_origins=["https://app.example.test:8443", "http://localhost:3000", "null", "*"]).allow_origins
