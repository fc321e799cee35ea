"""Hostile cardinality (issue 31): anyone who can reach a service invokes thousands of made-up topics, through
`POST /svc/invoke {"topic": "junk:<i>"}`, `POST /svc/invoke/junk:<i>` and the NATS subjects. The service's real
counters and issues must survive at the collector: a topic the service does not have is counted under one bucket
per service (`svc:unknown`), its name kept only in the trace event."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import nats
import orjson
import pytest
from nats.aio.client import Client

from svcgen.collector import Collector, CollectorLimits, collector_service
from svcgen.runtime import Identity, MeshHost, MeshSettings, NatsBinding, Service, create_app
from svcgen.runtime._mesh.feeds import EnvelopeSender
from svcgen.runtime._mesh.reporter import Reporter
from svcgen.runtime._nats.subjects import invoke_subject, topic_subject
from svcgen.runtime._topics import UNKNOWN_TOPIC
from tests.support.broker import nats_url, unique_name
from tests.support.feeds import Clock, ok
from tests.support.sample import build_registry

JUNK = 300
"""Made-up topics per run: many times the collector's counter and issue caps below."""
REAL = 5
LIMITS = CollectorLimits(counters=12, issues=12)
TRACE = "0af7651916cd43dd8448eb211c80319c"

__all__ = ["nats_url"]


def mesh(name: str, collector: Collector) -> tuple[MeshHost, Service]:
    sender = EnvelopeSender("http://collector", transport=httpx.ASGITransport(create_app(collector_service(collector))))
    host = MeshHost(Identity(name), MeshSettings(collector="http://collector", heartbeat_seconds=3600),
                    sender=sender, instance_id="i-1", environ={})  # fmt: skip
    return host, Service(host.identity, build_registry(), middleware=host.middleware)


async def report(reporter: Reporter) -> None:
    await reporter.beat()  # registers: the collector holds the service's descriptor
    await reporter.flush_traces(until_empty=True)
    await reporter.beat()  # the issues


def assert_real_record_survives(collector: Collector, name: str, junk_trace: str, junk_topic: str) -> None:
    """The real topic's counters and issue are exact; the junk is one bucket; its names only in trace events."""
    get = ok(collector.query_topic({"topic": "orders:get"}))
    assert get["statusCounts"] == {"not-found": 1, "ok": REAL}
    service = ok(collector.query_service({"service": name}))
    assert service["invocations"] == REAL + 1 + JUNK
    bucket = ok(collector.query_topic({"topic": UNKNOWN_TOPIC}))
    assert bucket["invocations"] == JUNK
    fleet = ok(collector.query_fleet())
    assert not [entry["topic"] for entry in fleet["topics"] if entry["topic"].startswith("junk")]
    assert fleet["dropped"]["counters"] == 0 and fleet["dropped"]["issues"] == 0
    by_topic = {issue["topic"]: issue for issue in fleet["issues"] if issue["service"] == name}
    assert set(by_topic) == {"orders:get", UNKNOWN_TOPIC}
    assert by_topic["orders:get"]["classification"] == "client"
    assert by_topic[UNKNOWN_TOPIC]["count"] == JUNK
    assert by_topic[UNKNOWN_TOPIC]["classification"] == "config-wiring"
    (traced,) = ok(collector.query_trace({"traceId": junk_trace}))["events"]
    assert traced["topic"] == junk_topic  # the name the caller sent, in its trace event only


@pytest.mark.parametrize("surface", ["envelope", "topic-path"])
def test_made_up_topics_over_http_do_not_evict_the_real_record(surface: str) -> None:
    collector = Collector(limits=LIMITS, clock=Clock())
    name = unique_name("orders")
    host, service = mesh(name, collector)
    app = host.attach(create_app(service, ["GET /orders/{orderId} -> orders:get"]))
    assert host.reporter is not None
    traceparent = {"traceparent": f"00-{TRACE}-b7ad6b7169203331-01"}

    async def junk(client: httpx.AsyncClient, index: int, headers: dict[str, str]) -> httpx.Response:
        if surface == "envelope":
            envelope = {"topic": f"junk:{index}", "payload": {}, "headers": headers}  # the envelope carries its headers
            return await client.post("/svc/invoke", json=envelope)
        return await client.post(f"/svc/invoke/junk:{index}", json={}, headers=headers)

    async def run() -> None:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://orders") as client:
            for _ in range(REAL):
                assert (await client.get("/orders/1")).status_code == 200
            assert (await client.get("/orders/missing")).status_code == 404
            for index in range(JUNK):
                answer = await junk(client, index, traceparent if index == 7 else {})
                # The envelope surface answers 200 with the response envelope; the topic path the status itself.
                status = answer.json()["statusCode"] if surface == "envelope" else answer.json()["status"]
                assert status == "not-found", answer.text
        assert host.reporter is not None
        await report(host.reporter)

    asyncio.run(run())
    assert_real_record_survives(collector, name, TRACE, "junk:7")


@contextlib.asynccontextmanager
async def served_over_nats(nats_url: str, service: Service) -> AsyncIterator[Client]:
    connection = await nats.connect(nats_url)
    binding = NatsBinding(service, connection, stop_timeout=1)
    await binding.start()
    caller = await nats.connect(nats_url)
    try:
        yield caller
    finally:
        await caller.close()
        await binding.stop()
        await connection.close()


def test_made_up_topics_over_nats_do_not_evict_the_real_record(nats_url: str) -> None:
    collector = Collector(limits=LIMITS, clock=Clock())
    name = unique_name("orders")
    host, service = mesh(name, collector)
    host.attach(create_app(service))  # the reporter; the service is served over NATS below
    assert host.reporter is not None
    reporter = host.reporter

    async def request(caller: Any, subject: str, body: Any, headers: dict[str, str] | None = None) -> Any:
        reply = await caller.request(subject, orjson.dumps(body), timeout=10, headers=headers)
        return orjson.loads(reply.data)["statusCode"]  # the response envelope

    async def run() -> None:
        async with served_over_nats(nats_url, service) as caller:
            call: Callable[..., Awaitable[Any]] = request
            for _ in range(REAL):
                assert await call(caller, topic_subject(name, "orders:get"), {"orderId": "1"}) == "ok"
            assert await call(caller, topic_subject(name, "orders:get"), {"orderId": "missing"}) == "not-found"
            traceparent = {"traceparent": f"00-{TRACE}-b7ad6b7169203331-01"}
            for index in range(JUNK):
                headers = traceparent if index == 7 else None
                if index % 2:
                    answer = await call(caller, topic_subject(name, f"junk:{index}"), {}, headers)
                else:
                    answer = await call(caller, invoke_subject(name), {"topic": f"junk:{index}", "payload": {}},
                                        headers)  # fmt: skip
                assert answer == "not-found"
        await report(reporter)

    asyncio.run(run())
    assert_real_record_survives(collector, name, TRACE, "junk:7")
