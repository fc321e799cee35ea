from __future__ import annotations

import asyncio
import gc
import logging
import re
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
import pytest

from svcgen.runtime import Context, Identity, Next, Registry, Result, Service, create_app, current_trace
from svcgen.runtime._codec import codec_for
from svcgen.runtime._invocation import Invocation, lowered
from svcgen.runtime._mesh.exporters import InMemoryExporter, QueueExporter
from svcgen.runtime._mesh.issues import IssueAggregator
from svcgen.runtime._mesh.messages import MAX_TEXT, TraceEntry
from svcgen.runtime._mesh.tracecontext import TraceContext
from svcgen.runtime._mesh.traces import (
    LOG_EVERY,
    REANCHOR_SECONDS,
    TraceEvent,
    TraceMiddleware,
    TraceRecord,
    write_entries,
)
from tests.support.asgi import raw_request
from tests.support.fakes import STARTED_TEXT, GetOrder, Order, SteppingClock, Traced, registry, traced_service

ALWAYS = {"traceId", "spanId", "service", "topic", "status"}
TIMED = ALWAYS | {"instanceId", "durationMs", "startedAt", "transport"}


def invoke(traced: Traced, topic: str, body: str | None = None, headers: dict[str, str] | None = None) -> Any:
    return asyncio.run(traced.service.invoke(Invocation(topic, lowered(headers), body)))


def test_ok_event_has_exactly_the_known_keys_from_the_injected_clocks() -> None:
    traced = traced_service()
    outcome = invoke(traced, "orders:get", '{"orderId": "o-1"}')
    assert outcome.result.status == "ok"
    assert traced.events == [{
        "traceId": f"{1:032x}", "spanId": f"{2:016x}", "service": "orders", "topic": "orders:get", "status": "ok",
        "instanceId": "i-1", "durationMs": 12.5, "startedAt": STARTED_TEXT, "transport": "envelope",
    }]


def test_no_instance_id_means_no_instance_key() -> None:
    traced = traced_service(instance_id=None)
    invoke(traced, "orders:get", '{"orderId": "o-1"}')
    assert set(traced.events[0]) == TIMED - {"instanceId"}


def test_resolved_version_and_status_verbatim() -> None:
    traced = traced_service()
    invoke(traced, "orders:place", '{"orderId": "o-1"}', {"svc-version": "v2"})
    [event] = traced.events
    assert (event["status"], event["topicVersion"]) == ("created", "v2")
    assert set(event) == TIMED | {"topicVersion"}


def test_not_found_and_validation_failures_are_traced_once_each() -> None:
    traced = traced_service()
    invoke(traced, "orders:nope", "{}", {"svc-version": "v9"})
    invoke(traced, "orders:get", "{}")
    invoke(traced, "", "{}")
    invoke(traced, "orders:get", "{not json")
    invoke(traced, "orders:place", "{}", {"svc-version": "v3"})
    statuses = [(e["topic"], e["status"]) for e in traced.events]
    assert statuses == [
        ("orders:nope", "not-found"),
        ("orders:get", "validation-error"),
        ("", "validation-error"),
        ("orders:get", "bad-request"),
        ("orders:place", "not-found"),
    ]
    # A requested version that did not resolve is not a topicVersion; what the binding refused says why.
    assert [set(e) - TIMED for e in traced.events] == [set(), {"failureDetail"}, set(), {"failureDetail"},
                                                        set()]  # fmt: skip
    assert traced.events[1]["failureDetail"] == "orderId: required"


def test_handler_exception_is_service_unavailable_with_its_type_and_no_text() -> None:
    traced = traced_service()
    outcome = invoke(traced, "orders:explode", '{"orderId": "o-1"}')
    assert outcome.result.status == "service-unavailable"
    [event] = traced.events
    assert event["status"] == "service-unavailable"
    assert event["exceptionType"] == "LookupError"
    assert set(event) == TIMED | {"exceptionType", "failureDetail"}
    assert event["failureDetail"] == "orders:explode failed while handling the request"
    text = orjson.dumps(event).decode()
    assert "4111" not in text and "alice" not in text
    assert "4111" not in repr(traced.exporter.events[0])


def test_reserved_topics_are_not_routed_invocations() -> None:
    traced = traced_service()
    for topic in ("svc:mesh", "svc:spec", "svc:healthcheck"):
        assert invoke(traced, topic).result.status == "ok"
    envelope = asyncio.run(traced.service.invoke_envelope({"topic": "svc:mesh"}))
    assert orjson.loads(envelope)["statusCode"] == "ok"
    assert traced.events == []


def test_correlation_id_is_read_and_a_huge_one_left_out() -> None:
    traced = traced_service()
    invoke(traced, "orders:get", '{"orderId": "o-1"}', {"X-Correlation-Id": "corr-42"})
    invoke(traced, "orders:get", '{"orderId": "o-1"}', {"x-correlation-id": "c" * (MAX_TEXT + 1)})
    invoke(traced, "orders:get", '{"orderId": "o-1"}', {"x-correlation-id": ""})
    first, second, third = traced.events
    assert first["correlationId"] == "corr-42"
    assert "correlationId" not in second and "correlationId" not in third


def test_an_unrouted_huge_topic_is_cut_in_the_event() -> None:
    traced = traced_service()
    invoke(traced, "x" * 100_000, "{}")
    [event] = traced.events
    assert event["status"] == "not-found"
    assert len(event["topic"]) == MAX_TEXT and event["topic"].endswith("…")


def test_trace_is_current_during_the_call_only() -> None:
    seen: list[Any] = []

    async def inner(context: Context, call_next: Next) -> Result[Any]:
        seen.append((current_trace(), current_trace()))
        return await call_next(context)

    traced = traced_service(inner=(inner,))
    invoke(traced, "orders:get", '{"orderId": "o-1"}')
    [(first, second)] = seen
    assert first == second  # the same ids on every read
    assert first.trace_id == traced.events[0]["traceId"]
    assert current_trace() is None


def test_sync_handlers_see_the_trace_in_their_worker_thread() -> None:
    traced = traced_service()
    outcome = invoke(traced, "orders:sync", '{"orderId": "o-1"}')
    body = orjson.loads(outcome.body)
    [event] = traced.events
    assert (body["traceId"], body["spanId"]) == (event["traceId"], event["spanId"])
    assert body["headers"] == {"traceparent": f"00-{event['traceId']}-{event['spanId']}-01"}


def test_concurrent_invocations_each_see_their_own_trace() -> None:
    seen: list[tuple[str, str]] = []

    async def inner(context: Context, call_next: Next) -> Result[Any]:
        await asyncio.sleep(0)  # interleave the invocations
        current = current_trace()
        assert current is not None
        seen.append((context.headers["x-correlation-id"], current.trace_id))
        return await call_next(context)

    traced = traced_service(inner=(inner,))

    async def run() -> None:
        await asyncio.gather(*(
            traced.service.invoke(Invocation("orders:get", {"x-correlation-id": str(i)}, '{"orderId": "o"}'))
            for i in range(20)
        ))

    asyncio.run(run())
    by_correlation = {e["correlationId"]: e["traceId"] for e in traced.events}
    assert len(traced.events) == 20
    assert dict(seen) == by_correlation


def test_exception_escaping_an_inner_middleware_is_traced_then_reraised() -> None:
    async def broken(context: Context, call_next: Next) -> Result[Any]:
        raise KeyError("secret")

    traced = traced_service(inner=(broken,))
    with pytest.raises(KeyError):
        invoke(traced, "orders:get", '{"orderId": "o-1"}')
    [event] = traced.events
    assert (event["status"], event["exceptionType"]) == ("unexpected-error", "KeyError")
    assert current_trace() is None


class RaisingExporter:
    def __init__(self) -> None:
        self.calls = 0

    def export(self, event: TraceEvent) -> None:
        self.calls += 1
        raise RuntimeError("collector down")


def test_a_failing_exporter_never_reaches_the_request(caplog: pytest.LogCaptureFixture) -> None:
    exporter = RaisingExporter()
    traced = traced_service(exporter=exporter)
    with caplog.at_level(logging.WARNING, logger="svcgen.mesh.traces"):
        outcomes = [invoke(traced, "orders:get", '{"orderId": "o-1"}') for _ in range(3)]
    assert [o.result.status for o in outcomes] == ["ok", "ok", "ok"]
    assert exporter.calls == 3 and traced.tracer.export_errors == 3
    # Logged once per LOG_EVERY failures, not per request.
    assert len([r for r in caplog.records if "exporter" in r.getMessage()]) == 1
    assert LOG_EVERY > 3


def test_a_failing_observer_or_id_source_never_reaches_the_request(caplog: pytest.LogCaptureFixture) -> None:
    traced = traced_service()

    def observer(event: TraceEvent, context: Context) -> None:
        raise ValueError("bad observer")

    traced.tracer.on_failure.insert(0, observer)
    assert invoke(traced, "orders:explode", '{"orderId": "o-1"}').result.status == "service-unavailable"
    assert traced.tracer.observer_errors == 1
    assert len(traced.issues) == 1  # later observers still ran

    class BrokenIds:
        def trace_id(self) -> str:
            raise OSError("no entropy")

        def span_id(self) -> str:
            raise OSError("no entropy")

    exporter = InMemoryExporter()
    broken = TraceMiddleware(Identity("orders"), exporter, ids=BrokenIds())
    service = Service(Identity("orders"), registry(), middleware=[broken])
    fallback = Traced(service, broken, exporter, traced.issues)
    with caplog.at_level(logging.WARNING, logger="svcgen.mesh.traces"):
        seen_by_handler = invoke(fallback, "orders:sync", '{"orderId": "o-1"}').result
        assert invoke(fallback, "orders:get", '{"orderId": "o-1"}').result.status == "ok"
    # The source is asked as each invocation starts; when it fails, that invocation takes derived ids, and the
    # failure is counted and logged once.
    first, second = fallback.events
    assert re.fullmatch(r"[0-9a-f]{32}", first["traceId"]) and re.fullmatch(r"[0-9a-f]{32}", second["traceId"])
    assert first["traceId"] != second["traceId"]
    handler_saw = seen_by_handler.payload
    assert (handler_saw["traceId"], handler_saw["spanId"]) == (first["traceId"], first["spanId"])
    assert broken.id_errors == 2
    assert len([r for r in caplog.records if "id source" in r.getMessage()]) == 1


def test_one_event_per_http_request_with_transport_headers() -> None:
    queue = QueueExporter(cap=100)
    traced = traced_service(exporter=queue)
    app = create_app(traced.service, ["GET /orders/{orderId} -> orders:get"])

    async def run() -> list[int]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://orders.test") as client:
            codes = []
            headers = {"traceparent": f"00-{'ab' * 16}-{'cd' * 8}-01", "x-correlation-id": "c-1"}
            codes.append((await client.get("/orders/o-1", headers=headers)).status_code)
            codes.append((await client.post("/svc/invoke/orders:explode", json={"orderId": "o"})).status_code)
            codes.append((await client.get("/nowhere")).status_code)  # no route: no invocation
            codes.append((await client.get("/svc/spec")).status_code)
            return codes

    assert asyncio.run(run()) == [200, 503, 404, 200]
    first, second = queue.drain()
    assert (first.trace_id, first.parent_span_id, first.correlation_id) == ("ab" * 16, "cd" * 8, "c-1")
    assert (second.status, second.exception_type) == ("service-unavailable", "LookupError")
    assert [issue["transport"] for issue in traced.issues.flush()["issues"]] == ["http"]


def test_in_memory_exporter_is_the_default_sink_of_the_helper() -> None:
    traced = traced_service(exporter=InMemoryExporter(cap=1))
    invoke(traced, "orders:get", '{"orderId": "o-1"}')
    invoke(traced, "orders:get", '{"orderId": "o-2"}')
    assert len(traced.exporter.events) == 1 and traced.exporter.dropped == 1


def test_started_at_follows_a_wall_clock_step_within_the_reanchor_interval() -> None:
    wall = [1_800_000_000.0]
    clock = SteppingClock(start=50.0, step=0.25)
    exporter = InMemoryExporter()
    tracer = TraceMiddleware(Identity("orders"), exporter, clock=clock, wall_clock=lambda: wall[0])
    service = Service(Identity("orders"), registry(), middleware=[tracer])
    traced = Traced(service, tracer, exporter, IssueAggregator("orders"))
    invoke(traced, "orders:get", '{"orderId": "o-1"}')  # reads the wall clock: 0.0 s
    wall[0] += 3600.0  # the wall clock is stepped an hour ahead
    invoke(traced, "orders:get", '{"orderId": "o-1"}')  # starts 0.5 s later: still on the old reading
    invoke(traced, "orders:get", '{"orderId": "o-1"}')  # 1.0 s later: reads the wall clock again
    first, second, third = (event.started_at for event in exporter.events)
    assert (first, second, third) == (1_800_000_000.0, 1_800_000_000.5, 1_800_003_600.0)
    assert REANCHOR_SECONDS == 1.0


def test_observers_see_failures_only() -> None:
    seen: list[str] = []
    traced = traced_service()
    traced.tracer.on_failure.append(lambda event, context: seen.append(event.status))
    invoke(traced, "orders:get", '{"orderId": "o-1"}')
    invoke(traced, "orders:get", "{}")
    invoke(traced, "orders:explode", '{"orderId": "o-1"}')
    assert seen == ["validation-error", "service-unavailable"]
    assert [event["status"] for event in traced.events] == ["ok", "validation-error", "service-unavailable"]


def test_records_hold_only_text_and_numbers_so_the_collector_stops_tracking_them() -> None:
    # Thousands of records wait in the queue between beats; tracked ones would be traversed on every collection.
    class Keeping:
        def __init__(self) -> None:
            self.records: list[TraceRecord] = []

        def export(self, record: TraceRecord) -> None:
            self.records.append(record)

    keeping = Keeping()
    identity = Identity("orders", "i-1")
    service = Service(identity, registry(), middleware=[TraceMiddleware(identity, keeping)])

    async def run() -> None:
        joining = {"traceparent": f"00-{'a' * 32}-{'b' * 16}-01"}
        await service.invoke(Invocation("orders:get", headers=joining, body='{"orderId": "o-1"}'))
        await service.invoke(Invocation("orders:get", {"x-correlation-id": "c-1"}, '{"orderId": "missing"}'))
        await service.invoke(Invocation("orders:explode", body='{"orderId": "o-1"}'))

    asyncio.run(run())
    # A record's shared origin tuple may be examined after the record in the first pass, so allow two.
    gc.collect()
    gc.collect()
    assert len(keeping.records) == 3
    assert not any(gc.is_tracked(record) for record in keeping.records)
    assert [TraceEvent.from_record(record).status for record in keeping.records] == [
        "ok", "not-found", "service-unavailable"
    ]


def raising(error: BaseException) -> Any:
    async def handle(request: GetOrder, context: Context) -> Result[Order]:
        raise error

    return handle


def raising_sync(error: BaseException) -> Any:
    def handle(request: GetOrder, context: Context) -> Result[Order]:
        raise error

    return handle


@pytest.mark.parametrize("sync", [False, True], ids=["async", "sync"])
@pytest.mark.parametrize("error", [asyncio.CancelledError(), SystemExit(3), KeyboardInterrupt()],
                         ids=lambda e: type(e).__name__)  # fmt: skip
def test_a_handler_raising_any_base_exception_is_the_documented_handler_failure(
    error: BaseException, sync: bool
) -> None:
    reg = Registry()
    reg.add("orders:get", raising_sync(error) if sync else raising(error))
    traced = traced_service(reg=reg)
    app = create_app(traced.service, ["GET /orders/{orderId} -> orders:get"])
    code, headers, body = asyncio.run(raw_request(app, "GET", b"/orders/o-1", b"", [], b""))
    assert code == 503 and headers[b"content-type"] == b"application/json"
    assert orjson.loads(body) == {"status": "service-unavailable",
                                  "detail": "orders:get failed while handling the request"}  # fmt: skip
    [event] = traced.events
    assert (event["status"], event["exceptionType"]) == ("service-unavailable", type(error).__qualname__)
    [issue] = traced.issues.flush()["issues"]
    assert (issue["classification"], issue["exceptionType"]) == ("exception", type(error).__qualname__)


def test_an_invocation_cancelled_from_outside_is_traced_and_ends_quietly() -> None:
    """The client left (or the server stops) and the request's task is cancelled: the cancellation goes on, the
    event says so (`timeout`, `CancelledError`), and no issue is raised."""
    started = asyncio.Event()

    async def slow(request: GetOrder, context: Context) -> Result[Order]:
        started.set()
        await asyncio.sleep(3600)
        return Result.ok(Order(request.order_id))

    reg = Registry()
    reg.add("orders:get", slow)
    traced = traced_service(reg=reg)
    app = create_app(traced.service, ["GET /orders/{orderId} -> orders:get"])

    async def run() -> None:
        call = asyncio.create_task(raw_request(app, "GET", b"/orders/o-1", b"", [], b""))
        await asyncio.wait_for(started.wait(), timeout=5)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call

    asyncio.run(run())
    [event] = traced.events
    assert (event["status"], event["exceptionType"]) == ("timeout", "CancelledError")
    assert traced.issues.flush()["issues"] == []


@dataclass
class Count:
    total: int


async def _wrong_answer(request: GetOrder, context: Context) -> Result[Count]:
    return Result.ok(Count(2**70))  # the wire's integers are signed 64-bit


def test_a_response_that_does_not_fit_its_type_is_traced_as_the_failure_answered_with_the_runtime_reason() -> None:
    reg = Registry()
    reg.add("orders:get", _wrong_answer)
    traced = traced_service(reg=reg)
    outcome = invoke(traced, "orders:get", '{"orderId": "o-1"}')
    assert outcome.result.status == "unexpected-error"
    [event] = traced.events
    assert event["status"] == "unexpected-error"
    assert event["failureDetail"] == outcome.result.detail
    assert event["failureDetail"].startswith("orders:get produced a response that does not fit its type (")
    [issue] = traced.issues.flush()["issues"]
    assert (issue["classification"], issue["status"]) == ("exception", "unexpected-error")


def test_a_fitting_response_is_encoded_once_and_answered_as_before() -> None:
    traced = traced_service()
    outcome = invoke(traced, "orders:get", '{"orderId": "o-1"}')
    assert (outcome.result.status, orjson.loads(outcome.body)) == ("ok", {"orderId": "o-1"})
    assert "failureDetail" not in traced.events[0]


def test_log_lines_written_during_an_invocation_carry_its_trace_and_span_ids() -> None:
    from svcgen.runtime._logging import TraceFields

    seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    keep = Keep()
    keep.addFilter(TraceFields())
    pipeline_logger = logging.getLogger("svcgen.pipeline")
    pipeline_logger.addHandler(keep)
    try:
        traced = traced_service()
        invoke(traced, "orders:explode", '{"orderId": "o-1"}')
        logging.getLogger("outside").addHandler(keep)
        logging.getLogger("outside").warning("no invocation runs")
    finally:
        pipeline_logger.removeHandler(keep)
        logging.getLogger("outside").removeHandler(keep)
    [event] = traced.events
    raised = [record for record in seen if record.name == "svcgen.pipeline"]
    assert raised and all(vars(r)["trace"] == f" trace={event['traceId']} span={event['spanId']}" for r in raised)
    assert vars(seen[-1])["trace"] == ""


def _record(held: Any, *, routed: bool = True, topic: str = "orders:get", correlation: str | None = "c-1",
            detail: str | None = None, instance: str | None = "i-1") -> TraceRecord:
    origin = ("orders", instance, 1_700_000_000.25, 50.0)
    return (held, 7, origin, topic, routed, "ok" if detail is None else "unexpected-error", detail is None, "v2",
            None if detail is None else "ValueError", 50.5, 50.5123456, correlation, "http", detail)


@pytest.mark.parametrize("record", [
    _record(None),
    _record(None, instance=None, correlation=None),
    _record("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
    _record("not a traceparent"),
    _record(TraceContext("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", "b7ad6b7169203331")),
    _record(None, routed=False, topic="x" * (MAX_TEXT + 50)),
    _record(None, correlation="c" * (MAX_TEXT + 1)),
    _record(None, detail="why " * 400),
], ids=["new", "bare", "joined", "bad-inbound", "decided", "unrouted-long", "long-correlation", "long-detail"])
def test_the_reporter_builds_each_entry_as_the_event_would(record: TraceRecord) -> None:
    assert write_entries([record]) == [codec_for(TraceEntry).encode(TraceEvent.from_record(record).to_entry())]


def test_a_batch_of_every_kind_is_written_entry_by_entry_as_the_events_would_be() -> None:
    """New traces take their ids in one pass over the batch; the decided and joined ones in between keep theirs."""
    kinds = [_record(None), _record("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"), _record(None),
             _record(TraceContext("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7")), _record(None)]
    records = [(record[0], number, *record[2:]) for number, record in enumerate(kinds, start=1020)]  # two id blocks
    expected = [codec_for(TraceEntry).encode(TraceEvent.from_record(record).to_entry()) for record in records]
    assert write_entries(records) == expected
    assert len({entry["spanId"] for entry in expected}) == len(records)
