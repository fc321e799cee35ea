"""End to end: uvicorn on 127.0.0.1, a real HTTP client."""

from typing import Any

import httpx

from svcgen.runtime import Context, Identity, Registry, Result, Service, create_app
from tests.support.sample import build_service
from tests.support.server import running

from .test_app import PLACE, ROUTES


def test_served_by_uvicorn() -> None:
    events: list[str] = []

    async def startup() -> None:
        events.append("startup")

    async def shutdown() -> None:
        events.append("shutdown")

    app = create_app(build_service(), ROUTES, on_startup=[startup], on_shutdown=[shutdown])
    with running(app) as base_url, httpx.Client(base_url=base_url, timeout=5) as client:
        placed = client.post("/orders", json=PLACE)
        assert placed.status_code == 201
        assert placed.json()["totalItems"] == 2
        assert placed.headers["svc-version"] == "v1"
        assert client.post("/v2/orders", json={"customerId": "c"}).json()["orderId"] == "o-2"
        assert client.get("/orders/missing").status_code == 404
        assert client.get("/orders/o-5").json()["orderId"] == "o-5"
        assert client.delete("/orders/o-5").status_code == 204
        assert client.post("/boom", json={}).status_code == 503
        assert client.post("/orders", content=b"{bad").status_code == 400
        assert client.get("/svc/health").json()["isHealthy"] is True
        assert client.get("/svc/spec").json()["service"] == "orders"
        assert client.get("/svc/openapi.json").json()["openapi"] == "3.1.0"
        envelope = client.post("/svc/invoke", json={"topic": "svc:mesh"})
        assert envelope.status_code == 200 and envelope.json()["statusCode"] == "ok"
        assert client.post("/svc/invoke", content=b"[]").status_code == 400
        assert client.get("/mesh").json()["service"] == "orders"
        # still serving after all of the above
        assert client.get("/orders/o-6").status_code == 200
    assert events == ["startup", "shutdown"]


def test_handler_headers_that_cannot_go_on_the_wire_are_dropped() -> None:
    """A handler's header with CR/LF or a name that is no token made uvicorn refuse the whole answer (an empty
    reply), and its `content-length` went out beside the binding's own: the binding frames the answer, so those
    are dropped and the rest of the answer goes out."""
    registry = Registry()

    async def odd(request: dict[str, Any], context: Context) -> Result[dict[str, str]]:
        headers = {"x-kept": "yes", "x-split": "a\r\nx-injected: 1", "bad name": "v", "x-euro": "€",
                   "content-length": "3", "Transfer-Encoding": "chunked", "connection": "close"}  # fmt: skip
        return Result.ok({"a": "b"}, headers=headers)

    registry.add("t:odd", odd)
    app = create_app(Service(Identity("s"), registry), ["GET /odd -> t:odd"])
    with running(app) as base_url, httpx.Client(base_url=base_url, timeout=5) as client:
        for _ in range(2):  # the connection is kept: the answer was framed once, by the binding
            answer = client.get("/odd")
            assert answer.status_code == 200
            assert answer.json() == {"a": "b"}
            assert answer.headers["x-kept"] == "yes"
            assert answer.headers.get_list("content-length") == [str(len(answer.content))]
            for name in ("x-split", "x-injected", "bad name", "x-euro", "transfer-encoding", "connection"):
                assert name not in answer.headers
