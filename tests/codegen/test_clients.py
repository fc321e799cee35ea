"""clients.py: typed outbound calls, tried against a generated service that produces its own topics."""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from svcgen.codegen import render_package
from svcgen.codegen.ownership import write_package
from svcgen.manifest import load_manifest, load_manifest_text
from svcgen.runtime import HttpSender
from tests.support.codegen import imported

PACKAGE = "echo_clients_service"
MANIFEST = """\
svcgen: 1
service: echo-clients
types:
  Ping:
    fields:
      text: string
      at: datetime
  Pong:
    fields:
      text: string
      version: string
topics:
  - id: echo:ping
    version: v1
    request: Ping
    response: Pong
  - id: echo:ping
    version: v2
    request: Ping
    response: Pong
  - id: echo:later
    request: Ping
    response: Pong
produces:
  - id: echo:ping
    version: v2
    request: Ping
    response: Pong
  - id: echo:later
    request: Ping
    response: Pong
  - id: echo:ping
    version: v1
    request: Ping
    response: string
"""
HANDLER = """\
from __future__ import annotations

from svcgen.runtime import Context, Result

from ..models import Ping, Pong


async def handle(request: Ping, context: Context) -> Result[Pong]:
    return Result.ok(Pong(text=request.text + "!", version=context.version))
"""


@pytest.fixture
def package(tmp_path: Path) -> Iterator[ModuleType]:
    manifest = load_manifest_text(MANIFEST, "echo.yaml")
    write_package(render_package(manifest, tmp_path), tmp_path / PACKAGE)
    for version in ("v1", "v2"):
        (tmp_path / PACKAGE / f"handlers/echo_ping_{version}.py").write_text(HANDLER)
    with imported(tmp_path, PACKAGE) as module:
        yield module


def test_typed_calls(package: ModuleType) -> None:
    service = importlib.import_module(f"{PACKAGE}.service")
    clients_module = importlib.import_module(f"{PACKAGE}.clients")
    models = importlib.import_module(f"{PACKAGE}.models")

    async def scenario() -> list[Any]:
        transport = httpx.ASGITransport(app=service.create_app())
        sender = HttpSender("http://echo/svc/invoke", transport=transport)
        async with clients_module.Clients(sender) as clients:
            ping = models.Ping(text="hi", at=datetime(2024, 1, 1, tzinfo=UTC))
            results = [
                await clients.echo_ping_v2(ping),
                await clients.echo_later(ping),
                await clients.echo_ping_v1(ping),
            ]
        await sender.aclose()
        return results

    v2, later, mismatched = asyncio.run(scenario())
    assert v2.status == "ok" and v2.payload == models.Pong(text="hi!", version="v2")
    assert later.status == "not-implemented" and later.payload is None
    assert later.detail == "echo:later is not implemented yet"
    # v1 answers a Pong object where this produces entry declares a string: a typed failure, not a crash.
    assert mismatched.status == "unexpected-error"
    assert "does not fit its type" in (mismatched.detail or "")


OWNER = """\
svcgen: 1
service: ledger
types:
  Entry:
    fields:
      amount: {type: integer, minimum: 1}
      memo: {type: string, default: ""}
  Receipt:
    fields:
      entryId: string
      amount: integer
topics:
  - id: ledger:record
    version: v1
    request: Entry
    response: Receipt
"""
PRODUCER = """\
svcgen: 1
service: booker
types:
  Ping:
    fields:
      text: string
topics:
  - id: booker:ping
    request: Ping
    response: Ping
produces:
  - id: ledger:record
    from: ledger.yaml
"""
RECORD_HANDLER = """\
from __future__ import annotations

from svcgen.runtime import Context, Result

from ..models import Entry, Receipt


async def handle(request: Entry, context: Context) -> Result[Receipt]:
    return Result.ok(Receipt(entry_id="e-" + request.memo, amount=request.amount))
"""


def test_a_client_taken_from_the_owner_calls_it_with_its_types(tmp_path: Path) -> None:
    (tmp_path / "ledger.yaml").write_text(OWNER, encoding="utf-8")
    (tmp_path / "booker.yaml").write_text(PRODUCER, encoding="utf-8")
    for name in ("ledger", "booker"):
        model = load_manifest((tmp_path / f"{name}.yaml").as_posix())
        write_package(render_package(model, tmp_path), tmp_path / model.package)
    (tmp_path / "ledger_service/handlers/ledger_record_v1.py").write_text(RECORD_HANDLER)
    with imported(tmp_path, "ledger_service"), imported(tmp_path, "booker_service"):
        ledger = importlib.import_module("ledger_service.service")
        clients_module = importlib.import_module("booker_service.clients")
        models = importlib.import_module("booker_service.models")

        async def scenario() -> list[Any]:
            transport = httpx.ASGITransport(app=ledger.create_app())
            sender = HttpSender("http://ledger/svc/invoke", transport=transport)
            async with clients_module.Clients(sender) as clients:
                answers = [await clients.ledger_record_v1(models.ledger_Entry(amount=5, memo="m"))]
                answers.append(await clients.ledger_record_v1(models.ledger_Entry(amount=0)))
            await sender.aclose()
            return answers

        booked, refused = asyncio.run(scenario())
    # The producer's ledger_Entry is the owner's Entry under its namespace, constraint and default included.
    assert booked.status == "ok" and booked.payload == models.ledger_Receipt(entry_id="e-m", amount=5)
    assert refused.status == "validation-error" and "amount" in (refused.detail or "")
