"""The collector hosted over HTTP (create_app on an in-process ASGI transport), and a hosted service's reporter
registering, beating and flushing into a real Collector."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import orjson

from svcgen.runtime import Identity, Service
from svcgen.runtime._http.app import create_app
from svcgen.runtime._mesh.collector import Collector, collector_service
from svcgen.runtime._mesh.feeds import EnvelopePublisher
from svcgen.runtime._mesh.host import MeshHost, MeshSettings
from tests.support.fakes import registry
from tests.support.feeds import Clock, descriptor, event, heartbeat, issue


async def invoke(client: httpx.AsyncClient, topic: str, body: Any) -> tuple[str, Any]:
    envelope = {"topic": topic, "headers": {}, "body": orjson.dumps(body).decode()}
    response = await client.post("/svc/invoke", json=envelope)
    assert response.status_code == 200, response.text
    envelope = response.json()
    return envelope["statusCode"], orjson.loads(envelope["body"]) if envelope["body"] else None


def test_the_collector_over_the_invoke_surface() -> None:
    collector = Collector(clock=Clock())
    app = create_app(collector_service(collector))

    async def run() -> None:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://collector") as client:
            assert await invoke(client, "svc:mesh:register", descriptor()) == ("ok", {"accepted": 1})
            assert await invoke(client, "svc:mesh:heartbeat", heartbeat()) == ("ok", {"accepted": 1})
            assert await invoke(client, "svc:mesh:traces", {"events": [event(1), {"bad": 1}]}) == (
                "ok", {"accepted": 1})
            assert await invoke(client, "svc:mesh:issues", {"service": "orders", "issues": [issue()]}) == (
                "ok", {"accepted": 1})
            status, fleet = await invoke(client, "svc:mesh:query:fleet", {})
            assert status == "ok"
            assert fleet["services"][0]["service"] == "orders"
            assert fleet["services"][0]["missingFeeds"] == []
            status, found = await invoke(client, "svc:mesh:query:service", {"service": "orders"})
            assert (status, found["health"]) == ("ok", "healthy")
            status, found = await invoke(client, "svc:mesh:query:trace", {"traceId": f"{1:032x}"})
            assert (status, len(found["events"])) == ("ok", 1)
            status, failure = await invoke(client, "svc:mesh:register", {"topics": []})
            assert status == "bad-request"
            assert set(failure) == {"status", "detail"}
            assert (await invoke(client, "svc:mesh:query:topic", {}))[0] == "bad-request"
            assert (await invoke(client, "svc:mesh:query:topic", {"topic": "no:such"}))[0] == "not-found"
            assert (await invoke(client, "svc:mesh:traces", [1, 2]))[0] == "bad-request"
            health = await client.get("/svc/health")
            assert health.status_code == 200
            assert health.json()["healthChecks"] == {"store": {"status": "ok"}}
            spec = (await client.get("/svc/spec")).json()
            assert spec["service"] == "svc-collector"
            assert {t["id"] for t in spec["topics"]} >= {"svc:mesh:register", "svc:mesh:query:fleet"}

    asyncio.run(run())


def test_a_hosted_services_reporter_feeds_a_real_collector() -> None:
    collector = Collector(clock=Clock())
    collector_app = create_app(collector_service(collector))
    publisher = EnvelopePublisher("http://collector", transport=httpx.ASGITransport(collector_app))
    host = MeshHost(Identity("orders"), MeshSettings(collector="http://collector"), publisher=publisher,
                    instance_id="i-1")
    service = Service(host.identity, registry(), middleware=host.middleware)
    app = host.attach(create_app(service, ["GET /orders/{orderId} -> orders:get"]))
    assert host.reporter is not None
    reporter = host.reporter

    async def run() -> None:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://orders") as client:
            assert (await client.get("/orders/1")).status_code == 200
            assert (await client.get("/orders/missing")).status_code == 404
        await reporter.flush_traces()  # trace batches go on their own cadence, not with the beat
        await reporter.beat()
        fleet = collector.query_fleet().payload
        assert fleet is not None
        (orders,) = fleet["services"]
        assert orders["service"] == "orders"
        assert orders["topics"] == 4  # orders:explode, orders:get, orders:place, orders:sync
        assert orders["health"] == "healthy"
        assert orders["instances"] == 1
        assert orders["missingFeeds"] == []
        (found,) = fleet["issues"]
        assert (found["topic"], found["classification"]) == ("orders:get", "client")
        instance = collector.snapshot()["instances"][0]
        assert instance["descriptorHash"] == service.descriptor.hash
        assert instance["hashMatches"] is True
        assert reporter.needs_register is False

        # The collector loses its state: the next heartbeat asks for a register, which the beat after sends.
        collector.restore(Collector().snapshot())
        await reporter.beat()
        assert reporter.needs_register is True
        assert collector.snapshot()["catalog"] == []
        await reporter.beat()
        assert reporter.needs_register is False
        assert collector.snapshot()["catalog"][0]["descriptorHash"] == service.descriptor.hash
        await publisher.aclose()

    asyncio.run(run())
