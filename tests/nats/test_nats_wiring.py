"""Wiring and NATS: one injected connection per process shared by the binding and the produced-topic sender,
closed at shutdown; nats:// targets and SVCGEN_NATS checked at startup in one line."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import httpx
import nats
import pytest
from nats.aio.client import Client

from svcgen.runtime import Context, HttpApp, Identity, Registry, Result, Sender, Service, Wiring, WiringError
from tests.support.asgi import lifespan
from tests.support.broker import unique_name


async def relay(request: dict[str, Any], context: Context) -> Result[Any]:
    return await context.scope.get(Relay).sender.send("echo:say", {"text": request["text"]})


async def say(request: dict[str, Any], context: Context) -> Result[Any]:
    return Result.ok({"text": request["text"] + "!", "transport": context.transport})


class Relay:
    def __init__(self, sender: Sender) -> None:
        self.sender = sender


def test_one_injected_connection_serves_and_sends_and_closes_at_shutdown(nats_url: str) -> None:
    name = unique_name("nw")
    opened: list[Client] = []

    async def connect(server: str) -> Client:
        opened.append(await nats.connect(server))
        return opened[-1]

    environ = {"SVCGEN_NATS": nats_url, "SVCGEN_TARGET_ECHO_SAY": f"{nats_url}/{name}"}
    setup = Wiring(environ=environ, nats_connect=connect)
    registry = Registry()
    registry.add("echo:say", say, request=dict[str, Any], response=dict[str, Any])
    registry.add("echo:relay", relay, request=dict[str, Any], response=dict[str, Any])
    setup.dependencies.value(Relay, Relay(setup.sender(["echo:say"])))
    app = setup.attach(HttpApp(Service(Identity(name), registry, dependencies=setup.dependencies)))

    async def scenario() -> httpx.Response:
        async with lifespan(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
                return await client.post("/svc/invoke/echo:relay", json={"text": "hi"})

    response = asyncio.run(scenario())
    assert response.status_code == 200 and response.json() == {"text": "hi!", "transport": "nats"}
    assert len(opened) == 1 and opened[0].is_closed


@pytest.mark.parametrize(("environ", "message"), [
    ({"SVCGEN_TARGET_A_B": "nats://127.0.0.1:4222"}, "SVCGEN_TARGET_A_B = 'nats://127.0.0.1:4222': a NATS target"),
    ({"SVCGEN_NATS": "nats://"}, "SVCGEN_NATS = 'nats://' is not a nats://host:port URL"),
    # A password in a malformed URL stays out of the error (with or without a scheme).
    ({"SVCGEN_TARGET_A_B": "nats://u:pw@127.0.0.1:4222"}, "SVCGEN_TARGET_A_B = 'nats://127.0.0.1:4222': a NATS target"),
    ({"SVCGEN_NATS": "nats://u:pw@h:99999"}, "SVCGEN_NATS = 'nats://h:99999' is not a nats://host:port URL"),
    ({"SVCGEN_NATS": "u:pw@127.0.0.1:4222"}, "SVCGEN_NATS = '127.0.0.1:4222' is not a nats://host:port URL"),
])
def test_malformed_nats_settings_are_one_line(environ: dict[str, str], message: str) -> None:
    setup = Wiring(environ=environ)
    with pytest.raises(WiringError) as raised:
        if "SVCGEN_NATS" in environ:
            setup.attach(HttpApp(Service(Identity("s"), Registry())))
        else:
            setup.target("a:b")
    assert str(raised.value).startswith(message)


def test_without_nats_py_a_nats_setting_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nats", None)
    setup = Wiring(environ={"SVCGEN_TARGET_A_B": "nats://127.0.0.1:4222/b", "SVCGEN_NATS": "nats://127.0.0.1:4222"})
    with pytest.raises(WiringError, match=r"^SVCGEN_TARGET_A_B: NATS needs nats-py: pip install 'svcgen\[nats\]'$"):
        setup.target("a:b")
    with pytest.raises(WiringError, match=r"^SVCGEN_NATS: NATS needs nats-py"):
        setup.attach(HttpApp(Service(Identity("s"), Registry())))
