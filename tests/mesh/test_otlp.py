"""OTLP export in process: the trace middleware's records reach a real OTLP/HTTP receiver as spans with our ids,
parent links, status and attributes; an absent or refusing receiver costs the requests nothing and every lost
span is counted."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from svcgen.runtime import HttpApp, Identity, MeshHost, MeshSettings, Result, Service, TraceContext, WiringError
from svcgen.runtime._invocation import Invocation, lowered
from svcgen.runtime._mesh.exporters import FanOutExporter
from svcgen.runtime._mesh.messages import MAX_TEXT
from svcgen.runtime._mesh.otlp import (
    CONTENT_TYPE,
    DEFAULT_SCHEDULE_DELAY,
    ENDPOINT_ENV,
    MISSING_EXTRA,
    SCHEDULE_DELAY_ENV,
    TRACES_ENDPOINT_ENV,
    OtlpExporter,
    SpanEncoder,
    traces_endpoint,
)
from svcgen.runtime._mesh.traces import TraceEvent, TraceRecord
from tests.support.fakes import STARTED, traced_service
from tests.support.otlpreceiver import OtlpReceiver, decode, otlp_receiver
from tests.support.server import free_port

IDENTITY = Identity("orders", service_version="1.4.2", instance_id="i-1")
PARENT_TRACE = "a" * 32
PARENT_SPAN = "b" * 16
TRACEPARENT = f"00-{PARENT_TRACE}-{PARENT_SPAN}-01"
STARTED_NS = round(STARTED.timestamp() * 1e9)


def run(coroutine: Callable[[], Any]) -> Any:
    return asyncio.run(coroutine())


async def invoke_three(exporter: Any) -> list[str]:
    """A joined success, a not-found and a handler exception; their statuses."""
    traced = traced_service(exporter=exporter)
    outcomes = [
        await traced.service.invoke(Invocation("orders:get", body='{"orderId": "o-1"}',
                                    headers=lowered({"traceparent": TRACEPARENT, "x-correlation-id": "c-1"}))),
        await traced.service.invoke(Invocation("orders:get", body='{"orderId": "missing"}')),
        await traced.service.invoke(Invocation("orders:explode", body='{"orderId": "o-1"}')),
    ]
    return [outcome.result.status for outcome in outcomes]


def export_three(**receiver_options: int) -> tuple[OtlpExporter, OtlpReceiver]:
    """`invoke_three` exported to a real receiver, the exporter stopped (everything sent) before the receiver."""
    with otlp_receiver(**receiver_options) as receiver:
        exporter = OtlpExporter(receiver.url + "/v1/traces", IDENTITY, cap=100)

        async def scenario() -> list[str]:
            statuses = await invoke_three(exporter)
            await exporter.stop()
            return statuses

        assert run(scenario) == ["ok", "not-found", "service-unavailable"]
    return exporter, receiver


def export_five(exporter: OtlpExporter) -> None:
    """Records of spans 1..5, straight into the exporter."""
    for n in range(1, 6):
        exporter.export(TraceEvent(TraceContext(f"{n:032x}", f"{n:016x}"), "orders", "orders:get", "ok").to_record())


def test_each_invocation_reaches_the_receiver_as_one_server_span_with_our_ids_and_rpc_attributes() -> None:
    exporter, receiver = export_three()
    spans = receiver.spans
    assert receiver.requests == [("/v1/traces", CONTENT_TYPE)]
    assert [received.resource for received in spans] == [
        {"service.name": "orders", "service.version": "1.4.2", "service.instance.id": "i-1"}
    ] * 3
    joined, missing, exploded = spans
    assert (joined.trace_id, joined.parent_span_id, joined.span_id) == (PARENT_TRACE, PARENT_SPAN, f"{1:016x}")
    assert joined.span.flags == 0x301  # sampled, parent known to be remote
    assert joined.span.kind == Span.SPAN_KIND_SERVER
    assert joined.span.name == "orders/orders:get"
    assert joined.span.start_time_unix_nano == STARTED_NS
    assert joined.span.end_time_unix_nano - joined.span.start_time_unix_nano == 12_500_000
    assert joined.span.status.code == Status.STATUS_CODE_UNSET
    assert joined.attributes == {
        "rpc.system": "svcgen", "rpc.service": "orders", "rpc.method": "orders:get", "svc.topic": "orders:get",
        "svc.status": "ok", "svc.correlation_id": "c-1",
    }
    # A new trace each: no parent; failures are errors carrying our status.
    assert (missing.trace_id, missing.span_id, missing.parent_span_id) == (f"{2:032x}", f"{3:016x}", "")
    assert (exploded.trace_id, exploded.span_id, exploded.parent_span_id) == (f"{4:032x}", f"{5:016x}", "")
    assert missing.span.flags == 0x01
    assert (missing.span.status.code, missing.span.status.message) == (Status.STATUS_CODE_ERROR, "not-found")
    assert missing.attributes["error.type"] == "not-found"
    assert (exploded.span.status.code, exploded.span.status.message) == (
        Status.STATUS_CODE_ERROR, "service-unavailable")
    assert exploded.attributes["error.type"] == "LookupError"
    assert exporter.exported == 3 and exporter.undelivered == 0


def test_the_topic_version_is_an_attribute() -> None:
    with otlp_receiver() as receiver:
        exporter = OtlpExporter(receiver.url + "/v1/traces", IDENTITY, cap=100)

        async def scenario() -> None:
            traced = traced_service(exporter=exporter)
            await traced.service.invoke(Invocation("orders:place", body='{"orderId": "o-1"}', path_version="v2"))
            await exporter.stop()

        run(scenario)
        (placed,) = receiver.spans
    assert placed.attributes["svc.version"] == "v2"
    assert placed.attributes["svc.status"] == "created"


def test_a_topic_the_service_does_not_have_is_one_span_name_whatever_the_caller_sent() -> None:
    """Issue 31's cardinality, for OTLP backends: made-up topics are named `svc:unknown` (the called topic stays in
    `svc.topic`), so a caller cannot fill a tracing backend with span names."""
    with otlp_receiver() as receiver:
        exporter = OtlpExporter(receiver.url + "/v1/traces", IDENTITY, cap=100)

        async def scenario() -> None:
            traced = traced_service(exporter=exporter)
            for n in range(3):
                await traced.service.invoke(Invocation(f"junk:{n}", body="{}"))
            await exporter.stop()

        run(scenario)
        spans = receiver.spans
    assert {span.span.name for span in spans} == {"orders/svc:unknown"}
    assert {span.attributes["rpc.method"] for span in spans} == {"svc:unknown"}
    assert [span.attributes["svc.topic"] for span in spans] == ["junk:0", "junk:1", "junk:2"]


def test_with_the_receiver_down_requests_succeed_and_every_span_is_counted_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    exporter = OtlpExporter(f"http://127.0.0.1:{free_port()}/v1/traces", IDENTITY, cap=100, timeout=2)

    async def scenario() -> list[str]:
        statuses = await invoke_three(exporter)
        await exporter.flush()
        statuses += await invoke_three(exporter)
        await exporter.flush()
        return statuses

    with caplog.at_level(logging.WARNING, logger="svcgen.mesh.otlp"):
        statuses = run(scenario)
    assert statuses == ["ok", "not-found", "service-unavailable"] * 2
    assert (exporter.exported, exporter.failed, exporter.undelivered) == (0, 6, 6)
    lines = [record.getMessage() for record in caplog.records if record.name == "svcgen.mesh.otlp"]
    assert len(lines) == 1 and lines[0].startswith("3 span(s) never reached the OTLP receiver"), lines
    assert "ConnectError" in lines[0]


def test_the_loss_lines_name_the_receiver_without_its_credentials(caplog: pytest.LogCaptureFixture) -> None:
    # OTEL_EXPORTER_OTLP_ENDPOINT may carry user:password (or a key in the query): never written to a log line.
    port = free_port()
    exporter = OtlpExporter(f"http://user:s3cret@127.0.0.1:{port}/v1/traces?key=k3y", IDENTITY, cap=100, timeout=2)

    async def scenario() -> None:
        await invoke_three(exporter)
        await exporter.flush()
        await exporter.stop()

    with caplog.at_level(logging.WARNING, logger="svcgen.mesh.otlp"):
        run(scenario)
    lines = [record.getMessage() for record in caplog.records if record.name == "svcgen.mesh.otlp"]
    assert len(lines) == 2, lines
    for line in lines:
        assert f"the OTLP receiver http://127.0.0.1:{port}/v1/traces " in line, line
        assert "s3cret" not in line and "k3y" not in line and "user" not in line, line


def test_a_full_queue_drops_the_oldest_and_counts_them() -> None:
    bodies: list[bytes] = []

    def receive(request: httpx.Request) -> httpx.Response:
        bodies.append(request.content)
        return httpx.Response(200)

    exporter = OtlpExporter("http://receiver.test/v1/traces", IDENTITY, cap=3,
                            transport=httpx.MockTransport(receive))
    export_five(exporter)
    run(exporter.stop)
    assert [received.span_id for body in bodies for received in decode(body)] == [f"{n:016x}" for n in (3, 4, 5)]
    assert (exporter.exported, exporter.dropped, exporter.undelivered) == (3, 2, 2)


def test_what_a_hanging_receiver_holds_past_the_shutdown_deadline_is_counted() -> None:
    async def hang(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(60)
        return httpx.Response(200)

    exporter = OtlpExporter("http://receiver.test/v1/traces", IDENTITY, cap=100, batch_size=2, shutdown_timeout=0.2,
                            transport=httpx.MockTransport(hang))
    export_five(exporter)
    run(exporter.stop)
    assert (exporter.exported, exporter.failed, len(exporter.queue)) == (0, 5, 0)


@pytest.mark.parametrize("answer", [{"status": 503}, {"rejected": 2}])
def test_a_refused_or_partly_rejected_batch_is_counted(answer: dict[str, int]) -> None:
    exporter, receiver = export_three(**answer)
    assert len(receiver.spans) == 3
    refused = "status" in answer
    assert (exporter.exported, exporter.failed) == ((0, 3) if refused else (1, 2))


def test_batches_are_bounded_and_leave_without_a_flush_call() -> None:
    with otlp_receiver() as receiver:
        exporter = OtlpExporter(receiver.url + "/v1/traces", IDENTITY, cap=100, batch_size=2, flush_interval=0.05)

        async def scenario() -> list[int]:
            await exporter.start()
            await invoke_three(exporter)
            while len(receiver.spans) < 3:
                await asyncio.sleep(0.01)
            sizes = [len(exporter.queue)]
            await exporter.stop()
            return sizes

        assert run(scenario) == [0]
        assert len(receiver.requests) == 2  # two spans, then the last one
    assert exporter.batches == 2


def test_the_endpoint_comes_from_the_environment_first_then_the_manifest() -> None:
    base = "http://127.0.0.1:4318"
    assert traces_endpoint(None, {}) is None
    assert traces_endpoint(base + "/", {}) == base + "/v1/traces"
    assert traces_endpoint(base, {ENDPOINT_ENV: "http://otel.internal:4318/"}) == "http://otel.internal:4318/v1/traces"
    everything = {ENDPOINT_ENV: "http://otel.internal:4318", TRACES_ENDPOINT_ENV: "http://tempo:4318/custom"}
    assert traces_endpoint(base, everything) == "http://tempo:4318/custom"
    assert traces_endpoint(None, {ENDPOINT_ENV: " "}) is None
    # The signal's path goes on the path, a query (a key some receivers take) kept after it.
    keyed = {ENDPOINT_ENV: "https://otel.example/base/?key=k1"}
    assert traces_endpoint(None, keyed) == "https://otel.example/base/v1/traces?key=k1"
    assert traces_endpoint("http://otel:4318?key=k2", {}) == "http://otel:4318/v1/traces?key=k2"
    for bad in ({ENDPOINT_ENV: "otel:4318"}, {TRACES_ENDPOINT_ENV: "grpc://otel:4317"}):
        with pytest.raises(WiringError, match=f"{next(iter(bad))}=.*expected an http"):
            traces_endpoint(base, bad)


def test_the_batch_delay_comes_from_otel_bsp_schedule_delay_and_a_bad_one_is_refused() -> None:
    settings = MeshSettings(otlp="http://127.0.0.1:4318")
    host = MeshHost(IDENTITY, settings, environ={SCHEDULE_DELAY_ENV: "250"})
    assert host.otlp is not None and host.otlp.flush_interval == 0.25
    default = MeshHost(IDENTITY, settings, environ={}).otlp
    assert default is not None and default.flush_interval == DEFAULT_SCHEDULE_DELAY == 5.0
    for bad in ("soon", "0", "-5", "inf"):
        with pytest.raises(WiringError, match=f"{SCHEDULE_DELAY_ENV}=.*milliseconds"):
            MeshHost(IDENTITY, settings, environ={SCHEDULE_DELAY_ENV: bad})


def test_without_the_extra_the_host_refuses_in_one_line_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.proto.trace.v1", None)
    with pytest.raises(WiringError) as refused:
        MeshHost(IDENTITY, MeshSettings(otlp="http://127.0.0.1:4318"), environ={})
    assert str(refused.value) == MISSING_EXTRA
    assert "pip install 'svcgen[otlp]'" in MISSING_EXTRA


class Collector:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    async def send(self, topic: str, payload: Any = None, headers: Any = None) -> Result[Any]:
        if topic == "svc:mesh:traces":
            self.events.extend(payload["events"])
        return Result.ok({})


async def serve_once(host: MeshHost) -> None:
    """Start the host in an app's lifespan, invoke twice (one joined), stop it."""
    service = Service(host.identity, traced_service().service.registry, middleware=host.middleware)
    app = host.attach(HttpApp(service))
    for hook in app.on_startup:
        await hook()
    traced = Invocation("orders:get", body='{"orderId": "o-1"}', headers=lowered({"traceparent": TRACEPARENT}))
    await service.invoke(traced)
    await service.invoke(Invocation("orders:get", body='{"orderId": "missing"}'))
    for hook in app.on_shutdown:
        await hook()


def test_a_mesh_with_only_otlp_exports_without_a_collector() -> None:
    with otlp_receiver() as receiver:
        host = MeshHost(IDENTITY, MeshSettings(otlp=receiver.url), environ={})
        assert host.otlp is not None and host.tracer.exporter is host.otlp.queue
        run(lambda: serve_once(host))
        spans = receiver.spans
    assert host.reporter is None and len(host.queue) == 0
    assert [(span.attributes["svc.status"], span.parent_span_id) for span in spans] == [
        ("ok", PARENT_SPAN), ("not-found", "")]


def test_with_both_the_collector_and_the_receiver_get_the_same_spans() -> None:
    collector = Collector()
    with otlp_receiver() as receiver:
        host = MeshHost(IDENTITY, MeshSettings("http://collector.test", otlp="http://unused.test"),
                        sender=collector, environ={ENDPOINT_ENV: receiver.url})
        assert isinstance(host.tracer.exporter, FanOutExporter)
        run(lambda: serve_once(host))
        spans = receiver.spans
    assert [(span.trace_id, span.span_id, span.parent_span_id) for span in spans] == [
        (event["traceId"], event["spanId"], event.get("parentSpanId", "")) for event in collector.events]
    assert len(spans) == 2


def test_records_encode_to_the_same_bytes_as_their_events() -> None:
    """The exporter encodes the queue's records straight (`encode_records`, no event per span); the request it
    makes is byte for byte the one `encode` makes of the events the records read back as."""
    parent = f"00-{'ab' * 16}-{'cd' * 8}-01"
    decided = TraceContext("12" * 16, "34" * 8, "56" * 8, 1)
    origins = [("orders", "i-1", 1_795_000_000.0, 100.0), ("orders", None, 1_795_000_000.1234995, 0.5)]
    records: list[TraceRecord] = []
    for number, held in enumerate([None, parent, "junk", decided]):
        origin = origins[number % 2]
        for routed, topic in ((True, "orders:get"), (False, "x" * (MAX_TEXT + 5))):
            for status, ok, exc in (("ok", True, None), ("service-unavailable", False, "LookupError"),
                                    ("bad-request", False, "")):
                for correlation in (None, "c-1", "c" * (MAX_TEXT + 1)):
                    started = origin[3] + number * 0.0104995
                    records.append((held, number, origin, topic, routed, status, ok, "v2" if number % 2 else "", exc,
                                    started, started + 0.0012345678, correlation, "http", None))
    encoder = SpanEncoder(Identity("orders", instance_id="i-1"))
    expected = SpanEncoder(Identity("orders", instance_id="i-1")).encode([TraceEvent.from_record(r) for r in records])
    assert encoder.encode_records(records) == expected
    assert encoder.encode_records(records) == expected  # the shapes made by the first call, reused
