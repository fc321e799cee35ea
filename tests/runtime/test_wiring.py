"""`Wiring`: produced-topic targets (environment first), one sender for all of them, hooks around the app's own."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from svcgen.runtime import (
    ApiKey,
    HttpApp,
    Identity,
    MeshHost,
    MeshSettings,
    Registry,
    Retry,
    Service,
    ServiceDefinition,
    Wiring,
    WiringError,
    target_variable,
)


def test_the_environment_overrides_the_wiring_s_target() -> None:
    assert target_variable("payments:capture") == "SVCGEN_TARGET_PAYMENTS_CAPTURE"
    assert target_variable("stock-a:b.c") == "SVCGEN_TARGET_STOCK_A_B_C"
    wiring = Wiring(environ={"SVCGEN_TARGET_PAYMENTS_CAPTURE": " http://payments:8000/svc/invoke "})
    wiring.targets.update({"payments:capture": "http://127.0.0.1:8000/svc/invoke", "ledger:record": "http://l/i"})
    assert wiring.target("payments:capture") == "http://payments:8000/svc/invoke"
    assert wiring.target("ledger:record") == "http://l/i"


def test_a_missing_or_malformed_target_is_one_line_naming_what_to_set() -> None:
    with pytest.raises(WiringError, match=r"^the produced topic a:b has no target: set SVCGEN_TARGET_A_B to "):
        Wiring(environ={}).target("a:b")
    with pytest.raises(WiringError, match=r"^SVCGEN_TARGET_A_B = 'payments:8000' is not an absolute http\(s\) URL or nats://"):
        Wiring(environ={"SVCGEN_TARGET_A_B": "payments:8000"}).target("a:b")
    wiring = Wiring(environ={})
    wiring.targets["a:b"] = "ftp://x"
    with pytest.raises(WiringError, match=r"^TARGETS\['a:b'\] in wiring.py = 'ftp://x' is not"):
        wiring.target("a:b")


def test_one_sender_posts_each_topic_to_its_own_target_and_closes_at_shutdown() -> None:
    sent: list[str] = []

    def record(request: httpx.Request) -> httpx.Response:
        sent.append(str(request.url))
        return httpx.Response(200, json={})

    wiring = Wiring(environ={"SVCGEN_TARGET_B_C": "http://b.test/ops/invoke"}, transport=httpx.MockTransport(record))
    wiring.targets["a:x"] = "http://a.test/svc/invoke"
    sender = wiring.sender(["a:x", "b:c", "a:x"])

    async def exercise() -> list[str | None]:
        details = [(await sender.send(topic, {})).detail for topic in ("a:x", "b:c")]
        for hook in wiring.shutdown:
            await hook()
        return [*details, (await sender.send("a:x", {})).detail]

    assert asyncio.run(exercise()) == [None, None, "sender is closed"]
    assert sent == ["http://a.test/svc/invoke/a:x", "http://b.test/ops/invoke/b:c"]


def test_hooks_go_around_the_app_s_own() -> None:
    async def wiring_start() -> None: ...
    async def wiring_stop() -> None: ...
    async def app_start() -> None: ...
    async def app_stop() -> None: ...

    app = HttpApp(Service(Identity("s"), Registry()), on_startup=[app_start], on_shutdown=[app_stop])
    wiring = Wiring(environ={})
    assert wiring.on_startup(wiring_start) is wiring_start and wiring.on_shutdown(wiring_stop) is wiring_stop
    assert wiring.attach(app) is app
    assert app.on_startup == [wiring_start, app_start]
    assert app.on_shutdown == [app_stop, wiring_stop]


@pytest.mark.parametrize("setting", ["credentials", "retries"])
def test_an_app_refuses_a_per_topic_setting_for_a_topic_it_does_not_produce(setting: str) -> None:
    def wire(wiring: Wiring) -> None:
        if setting == "credentials":
            wiring.credentials["payments:capture"] = ApiKey("x-api-key", "k")
        else:
            wiring.retries["payments:capture"] = Retry(retries=0)

    definition = ServiceDefinition(Identity("a"), Registry)  # produces nothing: no sender is ever made
    with pytest.raises(WiringError, match=rf"{setting} in wiring.py name payments:capture, which this service"):
        definition.create_app(wire, setup=Wiring(environ={}))


def test_a_collector_named_to_a_service_built_without_a_mesh_is_one_warning_not_silence(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # SVCGEN_COLLECTOR overrides the manifest's mesh: without one it was ignored without a word, and the service
    # never appeared in the collector.
    definition = ServiceDefinition(Identity("a"), Registry)
    with caplog.at_level("WARNING", logger="svcgen.mesh"):
        definition.create_app(setup=Wiring(environ={"SVCGEN_COLLECTOR": "http://127.0.0.1:8700"}))
        definition.create_app(setup=Wiring(environ={}))
        definition.create_app(setup=Wiring(environ={"SVCGEN_MESH_NATS": " "}))
    assert [record.getMessage() for record in caplog.records] == [
        "SVCGEN_COLLECTOR is set, but the manifest has no mesh: section, so this service sends no feeds; add "
        "`mesh: {collector: <url>}` to the manifest and rebuild to report"
    ]
    caplog.clear()
    with caplog.at_level("WARNING", logger="svcgen.mesh"):
        definition.create_app(mesh=MeshHost(Identity("a"), MeshSettings()), setup=Wiring(environ={
            "SVCGEN_COLLECTOR": "http://127.0.0.1:8700"}))  # fmt: skip
    assert caplog.records == []
