"""wiring.py, the user's: create_app() applies it with or without the mesh. Its hooks run in the app's lifespan
(a real uvicorn server here), produced topics go where the environment says, through one client per process
that is closed at shutdown; a produced topic added after wiring.py was written still finds its target."""

from __future__ import annotations

import asyncio
import importlib
from pathlib import Path
from types import ModuleType

import httpx
import pytest
from click.testing import CliRunner

from svcgen.cli import main
from svcgen.runtime import Wiring, WiringError
from tests.support.codegen import imported
from tests.support.server import running

PACKAGE = "desk_service"
MANIFEST = """\
svcgen: 1
service: desk
{mesh}types:
  Item:
    fields:
      sku: string
  Receipt:
    fields:
      client: integer
      reserved: string
{reserved}topics:
  - id: desk:order
    request: Item
    response: Receipt
    routes: ["POST /orders"]
{produces}"""
PRODUCES = """\
produces:
  - id: stock:reserve
    request: Item
    response: Reserved
"""
RESERVED = "  Reserved:\n    fields:\n      sku: string\n"
MESH = "mesh:\n  collector: http://127.0.0.1:9\n"

HANDLER = """\
from __future__ import annotations

from svcgen.runtime import Context, Result

from ..clients import Clients
from ..models import Item, Receipt


async def handle(request: Item, context: Context) -> Result[Receipt]:
    clients = context.scope.get(Clients)
    reserved = await clients.stock_reserve(request)
    return Result.ok(Receipt(client=id(clients), reserved=reserved.payload.sku if reserved.payload else "-"))
"""

WIRING = """\
from __future__ import annotations

from svcgen.runtime import Wiring

EVENTS: list[str] = []


def wire(wiring: Wiring) -> None:
    async def startup() -> None:
        EVENTS.append("startup")

    async def shutdown() -> None:
        EVENTS.append("shutdown")

    wiring.on_startup(startup)
    wiring.on_shutdown(shutdown)
"""
TARGET = "SVCGEN_TARGET_STOCK_RESERVE"


def build(project: Path, *, mesh: bool = False, produces: bool = True) -> str:
    text = MANIFEST.format(
        mesh=MESH if mesh else "", reserved=RESERVED if produces else "", produces=PRODUCES if produces else ""
    )
    (project / "m.yaml").write_text(text)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(project)
        result = CliRunner().invoke(main, ["build", "m.yaml", "-o", "out"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def service_module() -> ModuleType:
    return importlib.import_module(f"{PACKAGE}.service")


@pytest.mark.parametrize("mesh", [False, True], ids=["without-mesh", "with-mesh"])
def test_hooks_run_in_the_lifespan_and_one_client_serves_every_request_then_closes(tmp_path: Path, mesh: bool) -> None:
    build(tmp_path, mesh=mesh)
    package = tmp_path / "out" / PACKAGE
    (package / "handlers/desk_order.py").write_text(HANDLER)
    (package / "wiring.py").write_text(WIRING)
    sent: list[str] = []

    def stock(request: httpx.Request) -> httpx.Response:
        sent.append(str(request.url))
        return httpx.Response(200, json={"sku": "reserved-" + request.read().decode()[8:9]})

    environ = {TARGET: "http://stock.test/ops/invoke", "SVCGEN_COLLECTOR": "http://127.0.0.1:9"}
    setup = Wiring(environ=environ, transport=httpx.MockTransport(stock))
    with imported(tmp_path / "out", PACKAGE):
        events: list[str] = importlib.import_module(f"{PACKAGE}.wiring").EVENTS
        app = service_module().create_app(setup=setup)
        assert events == []
        with running(app) as base:
            assert events == ["startup"]
            answers = [httpx.post(f"{base}/orders", json={"sku": sku}, timeout=10) for sku in "abc"]
        assert events == ["startup", "shutdown"]
        clients = setup.dependencies.open_scope().get(importlib.import_module(f"{PACKAGE}.clients").Clients)
    assert [answer.status_code for answer in answers] == [200, 200, 200]
    assert [answer.json()["reserved"] for answer in answers] == ["reserved-a", "reserved-b", "reserved-c"]
    assert {answer.json()["client"] for answer in answers} == {id(clients)}, "one client for every request"
    assert sent == ["http://stock.test/ops/invoke/stock:reserve"] * 3
    after = asyncio.run(clients.sender.send("stock:reserve", b"{}"))
    assert after.detail == "sender is closed", "closed at shutdown"


def test_the_stub_as_created_serves_and_its_target_comes_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build(tmp_path)
    monkeypatch.setenv(TARGET, "http://127.0.0.1:9/svc/invoke")
    with imported(tmp_path / "out", PACKAGE):
        assert Wiring().target("stock:reserve") == "http://127.0.0.1:9/svc/invoke"
        with running(service_module().create_app()) as base:
            answer = httpx.post(f"{base}/orders", json={"sku": "a"}, timeout=10)
    assert answer.status_code == 501  # the handler stub; the app started with the wiring stub as created


def test_a_produced_topic_added_after_wiring_py_was_written_needs_its_variable(tmp_path: Path) -> None:
    build(tmp_path, produces=False)
    wiring = (tmp_path / "out" / PACKAGE / "wiring.py").read_text()
    assert "TARGETS: dict[str, str] = {}" in wiring
    assert "kept: handlers/desk_order.py, wiring.py" in build(tmp_path)
    with imported(tmp_path / "out", PACKAGE):
        with pytest.raises(WiringError) as refused:
            service_module().create_app(setup=Wiring(environ={}))
        assert str(refused.value) == (
            "the produced topic stock:reserve has no target: set SVCGEN_TARGET_STOCK_RESERVE to the invoke URL of the "
            "service that handles it (e.g. http://127.0.0.1:8001/svc/invoke), or add it to TARGETS in wiring.py"
        )
        service_module().create_app(setup=Wiring(environ={TARGET: "http://stock.test/svc/invoke"}))
    assert (tmp_path / "out" / PACKAGE / "wiring.py").read_text() == wiring
