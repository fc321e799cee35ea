"""Generated services over NATS: two replicas of one service in its queue group share the requests, a third
service calls them through its generated client over a nats:// target, and one trace spans all three."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx

from svcgen.codegen.ownership import write_package
from svcgen.codegen.render import render_package
from svcgen.manifest import load_manifest_text
from svcgen.runtime import MeshHost, MeshSettings, Result, Wiring
from tests.support.asgi import lifespan
from tests.support.broker import unique_name
from tests.support.codegen import imported

CALLS = 24
TYPES = """
types:
  Reserve: {fields: {sku: string}}
  Reserved: {fields: {sku: string, left: integer}}
"""
STOCK = """svcgen: 1
service: SERVICE
package: PACKAGE
mesh: {collector: "http://127.0.0.1:9", heartbeatSeconds: 3600}
""" + TYPES + """
topics:
  - {id: "stock:reserve", request: Reserve, response: Reserved}
"""
SHOP = """svcgen: 1
service: SERVICE
package: PACKAGE
mesh: {collector: "http://127.0.0.1:9", heartbeatSeconds: 3600}
""" + TYPES + """
  Buy: {fields: {sku: string, times: integer}}
  Bought: {fields: {reserved: integer}}
topics:
  - {id: "shop:buy", request: Buy, response: Bought, routes: ["POST /buy"]}
produces:
  - {id: "stock:reserve", request: Reserve, response: Reserved}
"""
STOCK_HANDLER = """
from svcgen.runtime import Context, Result

from ..models import Reserve, Reserved


async def handle(request: Reserve, context: Context) -> Result[Reserved]:
    return Result.ok(Reserved(sku=request.sku, left=7))
"""
SHOP_HANDLER = """
from svcgen.runtime import Context, Result

from ..clients import Clients
from ..models import Bought, Buy, Reserve


async def handle(request: Buy, context: Context) -> Result[Bought]:
    clients = context.scope.get(Clients)
    reserved = 0
    for _ in range(request.times):
        answer = await clients.stock_reserve(Reserve(sku=request.sku))
        if answer.status != "ok" or answer.payload is None or answer.payload.left != 7:
            return Result.of(answer.status, detail=answer.detail or "no payload")
        reserved += 1
    return Result.ok(Bought(reserved=reserved))
"""


class Recorder:
    """A collector stand-in: keeps the trace events the reporters send."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    async def send(self, topic: str, payload: Any = None, headers: Any = None) -> Result[Any]:
        if topic == "svc:mesh:traces":
            self.events.extend(payload["events"])
        return Result.ok({"accepted": 1})


def build(tmp_path: Path, manifest: str, service: str, handler: str, module: str) -> str:
    package = service.replace("-", "_") + "_service"
    model = load_manifest_text(manifest.replace("SERVICE", service).replace("PACKAGE", package), f"{service}.yaml")
    write_package(render_package(model, tmp_path), tmp_path / package)
    (tmp_path / package / "handlers" / f"{module}.py").write_text(handler)
    return package


def app_of(package: ModuleType, setup: Wiring, recorder: Recorder) -> Any:
    service = importlib.import_module(f"{package.__name__}.service")
    mesh = MeshHost(service.identity(), MeshSettings("http://127.0.0.1:9", heartbeat_seconds=3600),
                    sender=recorder, environ={})
    return service.create_app(setup=setup, mesh=mesh)


def test_replicas_share_requests_and_one_trace_spans_the_caller_and_both(tmp_path: Path, nats_url: str) -> None:
    stock, shop = unique_name("stock"), unique_name("shop")
    stock_package = build(tmp_path, STOCK, stock, STOCK_HANDLER, "stock_reserve")
    shop_package = build(tmp_path, SHOP, shop, SHOP_HANDLER, "shop_buy")
    recorder = Recorder()
    shop_setup = Wiring(environ={"SVCGEN_TARGET_STOCK_RESERVE": f"{nats_url}/{stock}"})

    async def scenario(stock_module: ModuleType, shop_module: ModuleType) -> httpx.Response:
        replicas = [app_of(stock_module, Wiring(environ={"SVCGEN_NATS": nats_url}), recorder) for _ in range(2)]
        front = app_of(shop_module, shop_setup, recorder)
        async with contextlib.AsyncExitStack() as stack:
            for app in [*replicas, front]:
                await stack.enter_async_context(lifespan(app))
            transport = httpx.ASGITransport(app=front)
            async with httpx.AsyncClient(transport=transport, base_url="http://shop") as client:
                return await client.post("/buy", json={"sku": "sku-1", "times": CALLS})

    with imported(tmp_path, stock_package) as stock_module, imported(tmp_path, shop_package) as shop_module:
        response = asyncio.run(scenario(stock_module, shop_module))

    assert response.status_code == 200, response.text
    assert response.json() == {"reserved": CALLS}
    [root] = [event for event in recorder.events if event["service"] == shop]
    called = [event for event in recorder.events if event["service"] == stock]
    assert len(called) == CALLS
    assert {event["traceId"] for event in called} == {root["traceId"]}
    assert {event["parentSpanId"] for event in called} == {root["spanId"]}
    assert "parentSpanId" not in root
    assert len({event["spanId"] for event in recorder.events}) == CALLS + 1
    # Both replicas answered some of the calls: the queue group shares them.
    assert len({event["instanceId"] for event in called}) == 2
    assert shop_setup.nats.closed


def test_generated_client_over_nats_with_no_responder_is_service_unavailable(tmp_path: Path, nats_url: str) -> None:
    shop = unique_name("shop")
    shop_package = build(tmp_path, SHOP, shop, SHOP_HANDLER, "shop_buy")

    async def scenario(shop_module: ModuleType) -> httpx.Response:
        setup = Wiring(environ={"SVCGEN_TARGET_STOCK_RESERVE": f"{nats_url}/{unique_name('gone')}"})
        front = app_of(shop_module, setup, Recorder())
        async with lifespan(front):
            transport = httpx.ASGITransport(app=front)
            async with httpx.AsyncClient(transport=transport, base_url="http://shop") as client:
                return await client.post("/buy", json={"sku": "sku-1", "times": 1})

    with imported(tmp_path, shop_package) as shop_module:
        response = asyncio.run(scenario(shop_module))
    assert response.status_code == 503
    assert response.json()["status"] == "service-unavailable"
    assert "no service answers" in response.json()["detail"]
