"""The NATS binding over a real NATS server: the envelope and per-topic subjects, the same answers as HTTP, the
trace carried in NATS headers, and NatsSender's status mapping (no responders, timeout)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import nats
import orjson
import pytest
from nats.aio.client import Client

from svcgen.runtime import Context, Identity, Limits, NatsBinding, NatsSender, Result, Service
from svcgen.runtime._mesh.exporters import InMemoryExporter
from svcgen.runtime._mesh.traces import TraceMiddleware
from svcgen.runtime._nats.connections import NatsConnections, NatsError
from svcgen.runtime._nats.subjects import token, topic_of, topic_prefix, topic_subject
from tests.support.broker import unique_name
from tests.support.sample import build_registry

PARENT = "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01"


async def slow(request: dict[str, Any], context: Context) -> Result[dict[str, Any]]:
    await asyncio.sleep(5)
    return Result.ok({})


class Served:
    def __init__(self, name: str, connection: Client, exporter: InMemoryExporter, binding: NatsBinding) -> None:
        self.name = name
        self.connection = connection
        self.exporter = exporter
        self.binding = binding

    async def request(self, subject: str, data: bytes, **options: Any) -> dict[str, Any]:
        reply = await self.connection.request(subject, data, timeout=5, **options)
        envelope: dict[str, Any] = orjson.loads(reply.data)
        return envelope


@contextlib.asynccontextmanager
async def served(nats_url: str, limits: Limits | None = None) -> AsyncIterator[Served]:
    name = unique_name("nb")
    exporter = InMemoryExporter()
    registry = build_registry()
    registry.add("slow:wait", slow)
    service = Service(Identity(name), registry, middleware=[TraceMiddleware(Identity(name), exporter)])
    connection = await nats.connect(nats_url)
    binding = NatsBinding(service, connection, limits=limits, stop_timeout=0.5)
    await binding.start()
    try:
        yield Served(name, connection, exporter, binding)
    finally:
        await binding.stop()
        await connection.close()


def body(envelope: dict[str, Any]) -> Any:
    return orjson.loads(envelope["body"]) if envelope["body"] else None


def test_subject_tokens_round_trip() -> None:
    prefix = topic_prefix("orders")
    for topic, version in [("orders:place", "v2"), ("a.b*c>d%e", "1.0"), ("orders:get", "")]:
        subject = topic_subject("orders", topic, version)
        assert subject.count(".") == 3 + (1 if version else 0)
        assert topic_of(subject, prefix) == (topic, version or None)
    assert topic_subject("orders", "orders:place") == "svc.topic.orders.orders:place"
    assert token("a.b") == "a%2Eb"
    assert topic_of("svc.topic.ordersx.a", prefix) is None
    assert topic_of(f"{prefix}.a.b.c", prefix) is None


def test_per_topic_subject_answers_a_response_envelope_with_version_from_subject_or_header(nats_url: str) -> None:
    async def scenario() -> list[dict[str, Any]]:
        async with served(nats_url) as s:
            payload = orjson.dumps({"customerId": "c-1", "items": [{"sku": "a", "quantity": 2}]})
            return [
                await s.request(topic_subject(s.name, "orders:place", "v2"), payload),
                await s.request(topic_subject(s.name, "orders:place"), payload, headers={"Svc-Version": "v2"}),
                await s.request(topic_subject(s.name, "orders:get"), b'{"orderId": "missing"}'),
                await s.request(topic_subject(s.name, "orders:get"), b'{"orderId": 5}'),
                await s.request(topic_subject(s.name, "orders:nope"), b"{}"),
                await s.request(topic_subject(s.name, "orders:explode"), b"{}"),
                await s.request(topic_subject(s.name, "svc:mesh"), b""),
            ]

    by_subject, by_header, missing, invalid, unknown, exploded, mesh = asyncio.run(scenario())
    assert by_subject["statusCode"] == "ok" and by_subject["isSuccessful"] is True
    assert by_subject["headers"]["svc-version"] == "v2"
    assert body(by_subject) == {"orderId": "o-2", "customerId": "c-1", "totalItems": 1}
    assert by_header == by_subject
    assert (missing["statusCode"], body(missing)["detail"]) == ("not-found", "order missing does not exist")
    assert invalid["statusCode"] == "validation-error" and "orderId" in body(invalid)["detail"]
    assert unknown["statusCode"] == "not-found"
    assert exploded["statusCode"] == "service-unavailable" and "hunter2" not in exploded["body"]
    assert mesh["statusCode"] == "ok" and body(mesh)["service"].startswith("nb")


def test_envelope_subject_is_the_invoke_surface_and_refuses_malformed_envelopes(nats_url: str) -> None:
    async def scenario() -> list[dict[str, Any]]:
        async with served(nats_url) as s:
            subject = f"svc.invoke.{s.name}"
            get = orjson.dumps({"topic": "orders:get", "body": '{"orderId": "o-9"}'})
            return [
                await s.request(subject, get),
                await s.request(subject, orjson.dumps({"topic": "svc:spec"})),
                await s.request(subject, b"not json"),
                await s.request(subject, b'{"topic": 5}'),
                await s.request(subject, orjson.dumps({"topic": ""})),
                await s.request(subject, orjson.dumps({"topic": "orders:get", "body": "[[[" + "]]]"})),
            ]

    get, spec, garbage, bad_topic, empty, wrong_body = asyncio.run(scenario())
    assert get["statusCode"] == "ok" and body(get)["orderId"] == "o-9"
    assert spec["statusCode"] == "ok" and body(spec)["topics"][0]["id"] == "orders:delete"
    assert garbage == {
        "statusCode": "bad-request", "isSuccessful": False, "headers": {"content-type": "application/json"},
        "body": '{"status":"bad-request","detail":"envelope is not valid JSON"}',
    }
    assert bad_topic["statusCode"] == "bad-request" and body(bad_topic)["detail"] == "envelope topic must be a string"
    assert empty["statusCode"] == "validation-error"
    assert wrong_body["statusCode"] == "bad-request"


def test_one_trace_event_per_invocation_joins_the_traceparent_in_nats_headers(nats_url: str) -> None:
    async def scenario() -> Served:
        async with served(nats_url) as s:
            await s.request(topic_subject(s.name, "orders:get"), b'{"orderId": "1"}', headers={"traceparent": PARENT})
            envelope = {"topic": "orders:get", "body": '{"orderId": "2"}'}
            await s.request(f"svc.invoke.{s.name}", orjson.dumps(envelope), headers={"Traceparent": PARENT})
            await s.request(f"svc.invoke.{s.name}", orjson.dumps({"topic": "svc:mesh"}))
            return s

    s = asyncio.run(scenario())
    events = s.exporter.events
    assert [(e.topic, e.transport, e.trace_id, e.parent_span_id) for e in events] == [
        ("orders:get", "nats", "ab" * 16, "cd" * 8),
        ("orders:get", "envelope", "ab" * 16, "cd" * 8),
    ]


def test_sender_maps_no_responders_and_timeout_and_reads_failures(nats_url: str) -> None:
    async def scenario() -> list[Result[Any]]:
        async with served(nats_url) as s:
            connections = NatsConnections()
            target = f"{nats_url}/{s.name}"
            try:
                async with NatsSender(target, connections=connections, timeout=0.3) as sender:
                    ok = await sender.send("orders:get", {"orderId": "o-3"})
                    missing = await sender.send("orders:get", {"orderId": "missing"})
                    waited = await sender.send("slow:wait", {})
                nobody = NatsSender(f"{nats_url}/{unique_name('none')}", connections=connections)
                unanswered = await nobody.send("orders:get", {"orderId": "o-3"})
                await nobody.aclose()
                closed = await sender.send("orders:get", {})
            finally:
                await connections.aclose()
            return [ok, missing, waited, unanswered, closed]

    ok, missing, waited, unanswered, closed = asyncio.run(scenario())
    assert ok.status == "ok" and ok.payload == {"orderId": "o-3", "customerId": "c", "totalItems": 0}
    assert (missing.status, missing.detail, missing.payload) == ("not-found", "order missing does not exist", None)
    assert waited.status == "timeout"
    assert unanswered.status == "service-unavailable" and "no service answers" in (unanswered.detail or "")
    assert closed.status == "unexpected-error"


def test_sender_without_a_server_is_service_unavailable() -> None:
    async def scenario() -> Result[Any]:
        async with NatsSender("nats://127.0.0.1:1/nobody") as sender:
            return await sender.send("orders:get", {})

    result = asyncio.run(scenario())
    assert result.status == "service-unavailable" and "cannot connect to NATS" in (result.detail or "")


@pytest.mark.parametrize("target", ["nats://127.0.0.1:4222", "nats://127.0.0.1:4222/a.b", "http://x/y"])
def test_a_nats_target_names_the_service(target: str) -> None:
    with pytest.raises(NatsError, match="nats://host:port"):
        NatsSender(target)
