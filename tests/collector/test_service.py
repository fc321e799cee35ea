"""The collector hosted over HTTP (create_app on an in-process ASGI transport), and a hosted service's reporter
registering, beating and flushing into a real Collector."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import orjson

from svcgen.collector import Collector, collector_service
from svcgen.runtime import Codec, Identity, MeshHost, MeshSettings, Service, codec_for, create_app
from svcgen.runtime._mesh.feeds import EnvelopeSender
from svcgen.runtime._mesh.messages import Accepted, FleetAnswer, ServiceAnswer, TopicAnswer, TraceAnswer
from tests.support.fakes import registry
from tests.support.feeds import Clock, descriptor, event, heartbeat, issue, memory, ok


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
    sender = EnvelopeSender("http://collector", transport=httpx.ASGITransport(collector_app))
    host = MeshHost(Identity("orders"), MeshSettings(collector="http://collector"), sender=sender,
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
        # The reporter's events and issues fit the records the collector reads.
        assert collector.dropped()["skipped"] == 0
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
        memory(collector).restore(Collector().snapshot())
        await reporter.beat()
        assert reporter.needs_register is True
        assert collector.snapshot()["catalog"] == []
        await reporter.beat()
        assert reporter.needs_register is False
        assert collector.snapshot()["catalog"][0]["descriptorHash"] == service.descriptor.hash
        await sender.aclose()

    asyncio.run(run())


MESH_TOPICS = (
    "svc:mesh:register", "svc:mesh:heartbeat", "svc:mesh:traces", "svc:mesh:issues",
    "svc:mesh:query:fleet", "svc:mesh:query:service", "svc:mesh:query:topic", "svc:mesh:query:trace",
)  # fmt: skip


def served(collector: Collector, path: str) -> Any:
    app = create_app(collector_service(collector))

    async def get() -> Any:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://collector") as client:
            response = await client.get(path)
            assert response.status_code == 200
            return response.json()

    return asyncio.run(get())


def test_the_served_spec_has_typed_request_and_response_schemas_for_all_8_mesh_topics() -> None:
    topics = {entry["id"]: entry for entry in served(Collector(clock=Clock()), "/svc/spec")["topics"]}
    for topic in MESH_TOPICS:
        request, response = topics[topic]["requestSchema"], topics[topic]["responseSchema"]
        assert request["type"] == response["type"] == "object", topic
        assert response["properties"] and response["required"], topic
        assert request["properties"] or topic == "svc:mesh:query:fleet", topic
    assert topics["svc:mesh:register"]["requestSchema"]["required"] == ["service"]
    assert topics["svc:mesh:register"]["responseSchema"]["required"] == ["accepted"]
    event_schema = topics["svc:mesh:traces"]["requestSchema"]["properties"]["events"]["items"]
    assert event_schema["required"] == ["traceId", "spanId", "service", "topic", "status"]
    assert event_schema["properties"]["startedAt"]["format"] == "date-time"
    assert event_schema["properties"]["traceId"]["maxLength"] == 256
    issue_schema = topics["svc:mesh:issues"]["requestSchema"]["properties"]["issues"]["items"]
    assert issue_schema["properties"]["count"]["minimum"] == 1
    health = topics["svc:mesh:heartbeat"]["requestSchema"]["properties"]["health"]
    assert health["properties"]["isHealthy"] == {"type": "boolean"}
    assert topics["svc:mesh:query:trace"]["requestSchema"]["required"] == ["traceId"]
    fleet = topics["svc:mesh:query:fleet"]["responseSchema"]
    assert fleet["required"] == ["services", "topics", "issues", "issuesOmitted", "dropped"]
    assert fleet["properties"]["services"]["items"]["properties"]["missingFeeds"]["type"] == "array"
    assert topics["svc:mesh:query:topic"]["responseSchema"]["properties"]["statusCounts"]["type"] == "object"
    # The HTTP API document carries the same components.
    components = served(Collector(clock=Clock()), "/svc/openapi.json")["components"]["schemas"]
    assert any(schema == topics["svc:mesh:traces"]["requestSchema"] for schema in components.values())


def test_a_malformed_feed_names_the_field_path() -> None:
    collector = Collector(clock=Clock())
    app = create_app(collector_service(collector))

    async def run() -> None:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://collector") as client:
            for topic, body, detail in [
                ("svc:mesh:heartbeat", {"service": "orders", "health": {"isHealthy": "yes"}},
                 "heartbeat: health.isHealthy: expected boolean"),
                ("svc:mesh:traces", {"events": [event(1)], "batchId": ""},
                 "traces: batchId: expected at least 1 character"),
                ("svc:mesh:traces", {"events": {}}, "traces: events: expected array"),
                ("svc:mesh:issues", {"issues": []}, "issues: service: required"),
                ("svc:mesh:register", {"service": "orders", "topics": [{"requestSchema": {}}, {"id": 7}]},
                 "register: topics[0].id: required; topics[1].id: expected string"),
                ("svc:mesh:query:service", {"service": 5}, "query service: service: expected string"),
                ("svc:mesh:query:trace", {}, "query trace: traceId: required"),
            ]:  # fmt: skip
                assert await invoke(client, topic, body) == (
                    "bad-request", {"status": "bad-request", "detail": detail}), topic
            assert collector.snapshot()["catalog"] == []

    asyncio.run(run())


def test_every_answer_fits_the_record_the_spec_publishes() -> None:
    c = Collector(clock=Clock())
    accepted = [
        c.register(descriptor(version="2.0.0")),
        c.heartbeat(heartbeat(digest="sha256:other")),
        c.traces({"events": [event(1), event(2, status="timeout")], "batchId": "b-1"}),
        c.issues({"service": "orders", "issues": [issue()]}),
    ]
    answers: list[tuple[type, Any]] = [(Accepted, ok(answer)) for answer in accepted]
    answers += [
        (FleetAnswer, ok(c.query_fleet({}))),
        (FleetAnswer, ok(c.query_fleet({"window": "1h"}))),
        (ServiceAnswer, ok(c.query_service({"service": "orders"}))),
        (TopicAnswer, ok(c.query_topic({"topic": "orders:get"}))),
        (TopicAnswer, ok(c.query_topic({"topic": "orders:get", "window": "5m"}))),
        (TraceAnswer, ok(c.query_trace({"traceId": f"{1:032x}"}))),
    ]
    assert any(answer.get("reregister") for _, answer in answers)
    for record, answer in answers:
        codec: Codec[Any] = codec_for(record)
        # Decoding keeps only declared keys: an answer key the record does not declare would be missing here.
        assert keys(codec.encode(codec.decode(answer))) == keys(answer), record.__name__


def keys(value: Any) -> Any:
    """The key structure of a JSON value (times read back through a record change form, not keys)."""
    if isinstance(value, dict):
        return {key: keys(item) for key, item in value.items()}
    if isinstance(value, list):
        return [keys(item) for item in value]
    return None
