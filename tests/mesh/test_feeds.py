import asyncio
import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import httpx
import orjson

from svcgen.runtime import Context, Dependencies, HealthCheckResult, Identity, Result, TraceContext, codec_for
from svcgen.runtime._descriptor import build_descriptor
from svcgen.runtime._health import HealthReport
from svcgen.runtime._mesh.feeds import MAX_TRACE_BATCH_BYTES, EnvelopeSender, FeedSender, heartbeat_document
from svcgen.runtime._mesh.issues import IssueAggregator
from svcgen.runtime._mesh.messages import Heartbeat, IssueBatch, ServiceDescriptor, TraceEntry
from svcgen.runtime._mesh.traces import TraceEvent
from tests.support.fakes import registry
from tests.support.feeds import event


def collector_transport(answers: dict[str, Any], seen: list[dict[str, Any]]) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        envelope = json.loads(request.content)
        seen.append({"url": str(request.url), "topic_header": request.headers.get("topic"), **envelope})
        answer = answers[envelope["topic"]]
        if isinstance(answer, httpx.Response):
            return answer
        status, body = answer
        return httpx.Response(200, json={"statusCode": status, "isSuccessful": status == "ok",
                                         "headers": {}, "body": json.dumps(body)})

    return httpx.MockTransport(handle)


def test_feeds_post_envelopes_to_the_collector_invoke_surface() -> None:
    seen: list[dict[str, Any]] = []
    answers = {
        "svc:mesh:register": ("ok", {"accepted": 1}),
        "svc:mesh:heartbeat": ("ok", {"accepted": 1, "reregister": True}),
        "svc:mesh:traces": ("ok", {"accepted": 2}),
        "svc:mesh:issues": ("bad-request", {"status": "bad-request", "detail": "service is required"}),
    }
    sender = EnvelopeSender("http://collector.test:8700/", "/ops", transport=collector_transport(answers, seen))
    feeds = FeedSender(sender)

    async def run() -> list[Result[Any]]:
        try:
            return [
                await feeds.register({"service": "orders"}),
                await feeds.heartbeat({"service": "orders"}),
                await feeds.traces([event(1), event(2)], "b-1"),
                await feeds.issues({"issues": []}),
            ]
        finally:
            await sender.aclose()

    register, heartbeat, traces, issues = asyncio.run(run())
    assert [s["url"] for s in seen] == ["http://collector.test:8700/ops/invoke"] * 4
    assert [s["topic"] for s in seen] == [s["topic_header"] for s in seen]
    assert json.loads(seen[2]["body"]) == {"events": [event(1), event(2)], "batchId": "b-1"}
    assert (register.status, register.payload) == ("ok", {"accepted": 1})
    assert heartbeat.payload == {"accepted": 1, "reregister": True}
    assert traces.payload == {"accepted": 2}
    assert (issues.status, issues.detail) == ("bad-request", "service is required")


def test_unreachable_or_broken_collector_is_a_result_never_an_exception() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    def garbage(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=[1, 2])

    def server_error(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500, text="boom")

    async def send(handler: Any) -> Result[Any]:
        sender = EnvelopeSender("http://c.test", transport=httpx.MockTransport(handler))
        try:
            return await FeedSender(sender).register({"service": "s"})
        finally:
            await sender.aclose()

    assert asyncio.run(send(refuse)).status == "service-unavailable"
    assert asyncio.run(send(garbage)).status == "unexpected-error"
    assert asyncio.run(send(server_error)).status == "unexpected-error"


def test_a_sender_that_raises_is_contained() -> None:
    class Exploding:
        async def send(self, topic: str, payload: Any = None, headers: Any = None) -> Result[Any]:
            raise RuntimeError("bus down")

    result = asyncio.run(FeedSender(Exploding()).traces([], "b-1"))
    assert result.status == "unexpected-error"


def test_heartbeat_document_omits_unknowns_and_defaults_health() -> None:
    moment = datetime(2026, 11, 22, 11, 0, 0, 123456, tzinfo=timezone(timedelta(hours=2))).timestamp()
    assert heartbeat_document("orders", moment) == {
        "service": "orders",
        "sentAt": "2026-11-22T09:00:00.123Z",
        "health": {"isHealthy": True, "healthChecks": {}},
    }
    report = HealthReport({"db": HealthCheckResult.failed("down")})
    assert heartbeat_document("orders", moment, report, instance_id="i-1", descriptor_hash="sha256:ab") == {
        "service": "orders",
        "sentAt": "2026-11-22T09:00:00.123Z",
        "instanceId": "i-1",
        "descriptorHash": "sha256:ab",
        "health": {"isHealthy": False, "healthChecks": {"db": {"status": "failed", "detail": "down"}}},
    }


def test_what_a_reporter_sends_is_byte_for_byte_what_the_collectors_records_encode() -> None:
    """One wire rule: each feed body, decoded by the record the collector reads it with and encoded again, is the
    same bytes, key order and time form (`...123Z`) included."""
    moment = datetime(2026, 11, 22, 10, 0, 0, 123000, tzinfo=UTC).timestamp()
    report = HealthReport({"db": HealthCheckResult.ok(), "cache": HealthCheckResult.failed("down")})
    trace = TraceContext("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", "00f067aa0ba902b7")
    event = TraceEvent(trace, "orders", "orders:place", "service-unavailable", "i-1", "v1", "KeyError", 12.3456789,
                       moment, "c-1", False, "http")  # fmt: skip
    issues = IssueAggregator("orders", clock=lambda: moment)
    issues.observe(event, Context("orders:place", "v1", {}, Dependencies().open_scope(), transport="http"))
    descriptor = build_descriptor(Identity("orders", "1.0.0", "i-1", placement={"zone": "a"}), registry(), [])
    bodies: list[tuple[type[Any], Any]] = [
        (Heartbeat, heartbeat_document("orders", moment, report, instance_id="i-1", descriptor_hash="sha256:ab")),
        (TraceEntry, codec_for(TraceEntry).encode(event.to_entry())),
        (IssueBatch, issues.flush()),
        (ServiceDescriptor, descriptor.document),
    ]
    for record, body in bodies:
        codec = codec_for(record)
        assert orjson.dumps(codec.encode(codec.decode(body))) == orjson.dumps(body), record.__name__
    assert bodies[1][1]["startedAt"] == "2026-11-22T10:00:00.123Z"
    assert bodies[2][1]["issues"][0]["firstSeen"] == "2026-11-22T10:00:00.123Z"


def _long_event(n: int) -> dict[str, Any]:
    """An entry with every optional text near its cap and full of quotes: the heaviest a batch can carry."""
    quoted = 'a "quoted" word, '
    return {**event(n), "correlationId": (quoted * 20)[:250], "exceptionType": "E" * 200,
            "failureDetail": (quoted * 80)[:1000], "status": "unexpected-error"}  # fmt: skip


def test_a_batch_too_heavy_for_the_collectors_body_limit_goes_in_halves_with_ids_kept_on_resend() -> None:
    class Recording:
        def __init__(self, refuse: str | None = None) -> None:
            self.ids: list[str] = []
            self.refuse = refuse

        async def send(self, topic: str, payload: Any = None, headers: Any = None) -> Result[Any]:
            self.ids.append(payload["batchId"])
            if payload["batchId"] == self.refuse:
                return Result.unexpected_error("collector unreachable")
            return Result.ok({"accepted": len(payload["events"])})

        async def aclose(self) -> None:
            pass

    events = [_long_event(n) for n in range(8)]
    sender = Recording()
    feeds = FeedSender(sender, max_trace_batch_bytes=len(orjson.dumps(events[:2])) * 2 + 4096)
    sent = asyncio.run(feeds.traces(events, "b"))
    assert sent.is_successful and sent.payload == {"accepted": 8}
    assert sender.ids == ["b-1-1", "b-1-2", "b-2-1", "b-2-2"]
    failing = Recording(refuse="b-1-2")
    again = asyncio.run(FeedSender(failing, max_trace_batch_bytes=feeds.max_trace_batch_bytes).traces(events, "b"))
    assert not again.is_successful and failing.ids == ["b-1-1", "b-1-2"]  # the first failed part answers


def test_a_batch_under_the_limit_once_escaped_goes_whole_though_escaping_every_byte_would_pass_it() -> None:
    from svcgen.runtime._mesh.feeds import ENVELOPE_ALLOWANCE, WrittenBody, trace_batch

    sent: list[str] = []

    class Recording:
        async def send(self, topic: str, payload: Any = None, headers: Any = None) -> Result[Any]:
            sent.append(payload["batchId"])
            return Result.ok({"accepted": len(payload["events"])})

    events = [_long_event(n) for n in range(8)]
    text = WrittenBody(trace_batch(events, "b")).json
    escaped = len(text) + text.count(b'"') + text.count(b"\\") + ENVELOPE_ALLOWANCE
    assert escaped < 2 * len(text) + ENVELOPE_ALLOWANCE
    assert asyncio.run(FeedSender(Recording(), max_trace_batch_bytes=escaped).traces(events, "b")).is_successful
    assert asyncio.run(FeedSender(Recording(), max_trace_batch_bytes=escaped - 1).traces(events, "c")).is_successful
    assert sent == ["b", "c-1", "c-2"]


def test_a_full_batch_of_the_heaviest_entries_is_taken_by_a_real_collector() -> None:
    from svcgen.collector.service import collector_service
    from svcgen.runtime._http.app import create_app
    from tests.support.server import running

    events = [_long_event(n) for n in range(500)]

    async def send(url: str, limit: int) -> Result[Any]:
        sender = EnvelopeSender(url)
        try:
            return await FeedSender(sender, max_trace_batch_bytes=limit).traces(events, f"heavy-{limit}")
        finally:
            await sender.aclose()

    with running(create_app(collector_service(), [])) as url:
        whole = asyncio.run(send(url, 1 << 30))
        sent = asyncio.run(send(url, MAX_TRACE_BATCH_BYTES))
    assert not whole.is_successful  # in one piece the collector refuses it (413), on every resend
    assert sent.is_successful, sent
    assert sent.payload == {"accepted": 500}


def test_a_written_body_goes_in_its_envelope_as_the_plain_body_would() -> None:
    from svcgen.runtime._mesh.feeds import WrittenBody, feed_envelope, trace_batch

    batch = trace_batch([event(1), _long_event(2)], "b-7")
    written = WrittenBody(batch)
    assert written == batch and orjson.loads(written.json) == batch  # any sender reads the dict it is
    assert feed_envelope("svc:mesh:traces", written, {"a": "b"}) == feed_envelope("svc:mesh:traces", batch, {"a": "b"})
