"""OTLP export: the trace middleware's records also leave as OpenTelemetry spans, by OTLP/HTTP protobuf.

Where it sits: the host hands every finished invocation's `TraceRecord` to this exporter's own bounded queue (beside
the collector's queue when there is one), the same records the collector feed drains: one tracing path, two
destinations. The request path only appends the record; decoding it into a span, encoding the batch and POSTing
it to `{endpoint}` (`/v1/traces`, `Content-Type: application/x-protobuf`, an `ExportTraceServiceRequest`) happen
in a task on the event loop, as soon as a batch is full or 5 seconds after the last one (OTEL_BSP_SCHEDULE_DELAY).

What a span says (OpenTelemetry semantic conventions, RPC): our trace and span ids and the inbound parent; kind
SERVER; name `{service}/{topic}`; `rpc.system` `svcgen`, `rpc.service` the service, `rpc.method` the topic (for a
topic the service does not have, `svc:unknown` in both: a backend's span names stay few whatever callers send), plus
`svc.topic` (the topic as called), `svc.version`, `svc.status` (and `error.type`, `svc.correlation_id` when known);
status ERROR with our status as its message for a failed invocation, UNSET otherwise; the resource names
`service.name`, `service.version` and `service.instance.id`.

Best effort, never in the way: a batch the receiver does not take (down, refusing, timed out, partly rejected) is
counted and not resent, so an absent receiver costs one failed POST per batch and nothing piles up; the queue
drops its oldest record when full, counted too. `undelivered` is every span that never reached the receiver; a
log line says so on the first loss and then once per `LOG_EVERY` spans lost, and at shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit, urlunsplit

import httpx

from .._descriptor import Identity
from .._http.sender import display_url
from .._http.transport import KeepAliveTransport, lean_transport
from .._topics import UNKNOWN_TOPIC
from .._wiring import WiringError, checked_http_url
from .exporters import QueueExporter
from .messages import MAX_TEXT
from .reporter import DEFAULT_SHUTDOWN_TIMEOUT, run_flushes
from .tracecontext import TraceContext, resolve
from .traces import LOG_EVERY, TraceEvent, TraceRecord

if TYPE_CHECKING:
    from opentelemetry.proto.common.v1.common_pb2 import KeyValue
    from opentelemetry.proto.trace.v1.trace_pb2 import Span

logger = logging.getLogger("svcgen.mesh.otlp")

ENDPOINT_ENV: Final = "OTEL_EXPORTER_OTLP_ENDPOINT"
"""A base URL: `/v1/traces` is appended (the OpenTelemetry exporter spec); overrides the manifest's `mesh.otlp`."""
TRACES_ENDPOINT_ENV: Final = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
"""The full URL spans are POSTed to, used as given; wins over both of the above."""
SCHEDULE_DELAY_ENV: Final = "OTEL_BSP_SCHEDULE_DELAY"
"""Milliseconds between batches while fewer than a full batch wait (OpenTelemetry's batch span processor setting)."""
TRACES_PATH: Final = "/v1/traces"
CONTENT_TYPE: Final = "application/x-protobuf"
_PROTOBUF_HEADERS: Final = [(b"content-type", CONTENT_TYPE.encode())]
MISSING_EXTRA: Final = "OTLP export needs opentelemetry-proto: pip install 'svcgen[otlp]'"
RPC_SYSTEM: Final = "svcgen"
SCOPE_NAME: Final = "svcgen"
DEFAULT_BATCH_SIZE: Final = 512
DEFAULT_SCHEDULE_DELAY: Final = 5.0
"""Seconds, OpenTelemetry's default: at a low request rate a POST carries many spans, not one or two."""
DEFAULT_TIMEOUT: Final = 5.0
"""Seconds a POST may take; a receiver slower than that loses the batch."""

SHAPE_CACHE: Final = 1024
"""Serialized span shapes kept (one per topic, version and outcome); past it the cache starts afresh."""

_NANOS: Final = 1_000_000_000
_REMOTE_PARENT: Final = 0x300
"""Span flags `CONTEXT_HAS_IS_REMOTE | CONTEXT_IS_REMOTE`: the parent came in a `traceparent` header."""


def traces_endpoint(configured: str | None, environ: Mapping[str, str]) -> str | None:
    """Where spans go: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as given, else OTEL_EXPORTER_OTLP_ENDPOINT or the
    manifest's `mesh.otlp` (base URLs) with `/v1/traces` appended; None when none is set. A value that is not an
    http(s) URL is a `WiringError` naming the variable."""
    full = environ.get(TRACES_ENDPOINT_ENV, "").strip()
    if full:
        return _checked(full, TRACES_ENDPOINT_ENV)
    base = environ.get(ENDPOINT_ENV, "").strip()
    if base:
        return _signal_url(_checked(base, ENDPOINT_ENV))
    if configured:
        return _signal_url(_checked(configured, "mesh.otlp"))
    return None


def _signal_url(base: str) -> str:
    """`/v1/traces` appended to the base URL's path, its query (a key some receivers take) kept after it."""
    parts = urlsplit(base)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + TRACES_PATH, fragment=""))


def _checked(url: str, where: str) -> str:
    return checked_http_url(url, where, "http://127.0.0.1:4318")


class SpanEncoder:
    """Trace events → the bytes of one `ExportTraceServiceRequest` under this service's resource. Raises
    `WiringError` (one line naming the extra) when opentelemetry-proto is not installed.

    Cost: building a span's attribute messages one by one takes several times the request it describes. What only
    depends on (service, topic, version, status, exception type) (name, kind, attributes, status) is built once
    and kept serialized, its "shape"; each span merges its shape (one C call) and sets its own ids and times."""

    def __init__(self, identity: Identity) -> None:
        try:
            from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
            from opentelemetry.proto.common.v1 import common_pb2
            from opentelemetry.proto.resource.v1 import resource_pb2
            from opentelemetry.proto.trace.v1 import trace_pb2
        except ImportError:
            raise WiringError(MISSING_EXTRA) from None
        self._request = trace_service_pb2.ExportTraceServiceRequest
        self._response = trace_service_pb2.ExportTraceServiceResponse
        self._span = trace_pb2.Span
        self._key_value = common_pb2.KeyValue
        self._any_value = common_pb2.AnyValue
        self._scope = common_pb2.InstrumentationScope(name=SCOPE_NAME)
        resource = {"service.name": identity.service, "service.version": identity.service_version,
                    "service.instance.id": identity.instance_id}
        self._resource = resource_pb2.Resource(attributes=self._attributes(resource))
        self._server = trace_pb2.Span.SPAN_KIND_SERVER
        self._error = trace_pb2.Status.STATUS_CODE_ERROR
        self._shapes: dict[tuple[str, str, str | None, str, str | None, bool], bytes] = {}

    def encode(self, events: Sequence[TraceEvent]) -> bytes:
        request, add = self._new_request()
        for event in events:
            span = add()
            key = (event.service, event.topic, event.topic_version, event.status, event.exception_type,
                   event.successful)
            span.MergeFromString(self._shapes.get(key) or self._shape(key, event.routed))
            start = round((event.started_at or 0.0) * _NANOS)
            _timed(span, event.decided_trace(), start, round((event.duration_ms or 0.0) * 1_000_000),
                   event.correlation_id)
        return bytes(request.SerializeToString())

    def encode_records(self, records: Sequence[TraceRecord]) -> bytes:
        """The request of the trace middleware's records, read straight from each tuple (no `TraceEvent` between:
        the exporter's drain builds none); `encode` of the events they read back as gives the same bytes."""
        request, add = self._new_request()
        shapes = self._shapes
        for record in records:
            (held, number, origin, topic, routed, status, successful, version, exception_type, started, ended,
             correlation_id, _, _) = record
            service = origin[0]
            if not routed and len(topic) > MAX_TEXT:
                topic = topic[: MAX_TEXT - 1] + "…"
            key = (service, topic, (version or None) if routed else None, status, exception_type or None, successful)
            span = add()
            span.MergeFromString(shapes.get(key) or self._shape(key, routed))
            trace = held if isinstance(held, TraceContext) else resolve((held, number))
            # As `TraceEvent.from_record` reads a record: its start in epoch seconds, its duration in milliseconds.
            start = round((origin[2] + (started - origin[3])) * _NANOS)
            _timed(span, trace, start, round((ended - started) * 1000.0 * 1_000_000),
                   correlation_id if correlation_id and len(correlation_id) <= MAX_TEXT else None)
        return bytes(request.SerializeToString())

    def _new_request(self) -> tuple[Any, Callable[[], Any]]:
        """An export request of this service's resource and scope, and the function adding a span to it."""
        request = self._request()
        resource_spans = request.resource_spans.add()
        resource_spans.resource.CopyFrom(self._resource)
        scope_spans = resource_spans.scope_spans.add()
        scope_spans.scope.CopyFrom(self._scope)
        return request, scope_spans.spans.add

    def _shape(self, key: tuple[str, str, str | None, str, str | None, bool], routed: bool) -> bytes:
        """The serialized shape of (service, topic, version, status, exception type, successful), made once."""
        if len(self._shapes) >= SHAPE_CACHE:  # unrouted topics are the caller's text: keep the cache bounded
            self._shapes.clear()
        service, topic, version, status, exception_type, successful = key
        method = topic if routed else UNKNOWN_TOPIC
        span = self._span(
            name=f"{service}/{method}",
            kind=self._server,
            attributes=self._attributes({
                "rpc.system": RPC_SYSTEM,
                "rpc.service": service,
                "rpc.method": method,
                "svc.topic": topic,
                "svc.version": version,
                "svc.status": status,
                "error.type": None if successful else exception_type or status,
            }),
        )
        if not successful:
            span.status.code = self._error
            span.status.message = status
        shape = self._shapes[key] = bytes(span.SerializeToString())
        return shape

    def rejected(self, body: bytes) -> int:
        """Spans the receiver's answer says it rejected (`partial_success`); 0 for an empty or unreadable body."""
        try:
            return int(self._response.FromString(body).partial_success.rejected_spans)
        except Exception:
            return 0

    def _attributes(self, values: Mapping[str, str | None]) -> list[KeyValue]:
        return [self._key_value(key=key, value=self._any_value(string_value=value))
                for key, value in values.items() if value]


class OtlpExporter:
    """An `Exporter` whose records leave as OTLP/HTTP spans. `export` only queues (bounded at `cap`, the oldest
    dropped and counted); `start` runs the sending task on the running loop, `stop` sends what is queued within
    `shutdown_timeout` and counts the rest. `transport` replaces the HTTP transport (tests)."""

    def __init__(
        self,
        endpoint: str,
        identity: Identity,
        *,
        cap: int,
        batch_size: int = DEFAULT_BATCH_SIZE,
        flush_interval: float = DEFAULT_SCHEDULE_DELAY,
        timeout: float = DEFAULT_TIMEOUT,
        shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if batch_size < 1 or flush_interval <= 0:
            raise ValueError("OTLP batch size must be at least 1 and its flush interval positive")
        self.endpoint = endpoint
        self.encoder = SpanEncoder(identity)
        self.queue = QueueExporter(cap=cap)
        self.batch_size = batch_size
        self.flush_interval = flush_interval
        self.timeout = timeout
        self.shutdown_timeout = shutdown_timeout
        self.exported = 0
        """Spans the receiver took."""
        self.failed = 0
        """Spans of batches the receiver did not take (unreachable, refusing, timed out) or rejected in part."""
        self.batches = 0
        self._transport = transport if transport is not None else lean_transport(endpoint)
        self._lean = self._transport if isinstance(self._transport, KeepAliveTransport) else None
        """Posted to without httpx's client layer (a plain-HTTP receiver, no transport given)."""
        self._url = httpx.URL(endpoint)
        self._shown = display_url(self._url)
        """The endpoint for log lines: its user:password or query (an API key, say) never reaches a log."""
        self._client: httpx.AsyncClient | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._logged = 0
        self._last_failure = "none"

    def export(self, record: TraceRecord) -> None:
        self.queue.export(record)

    @property
    def dropped(self) -> int:
        """Records the full queue pushed out."""
        return self.queue.dropped

    @property
    def undelivered(self) -> int:
        """Every span that never reached the receiver so far: the queue's drops plus `failed`."""
        return self.queue.dropped + self.failed

    async def start(self) -> None:
        if self._task is not None:
            return
        self._client = httpx.AsyncClient(transport=self._transport, timeout=self.timeout)
        self._stopping = asyncio.Event()
        self._task = asyncio.create_task(self._run(self._stopping), name="svcgen-otlp")

    async def stop(self) -> None:
        """Finish the send in progress, then send everything queued, all within `shutdown_timeout`; what the
        deadline cuts off is counted and logged with the total."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.shutdown_timeout
        task, self._task = self._task, None
        self._stopping.set()
        if task is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(task, timeout=self.shutdown_timeout)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.flush(until_empty=True), timeout=max(0.0, deadline - loop.time()))
        left = len(self.queue)
        self.queue.clear()
        self.failed += left
        if self._client is not None:
            await self._client.aclose()
            self._client = None
        if self._lean is not None:
            await self._lean.aclose()
            self._lean = self._transport = lean_transport(self.endpoint)  # a stopped exporter may start again
        if self.undelivered:
            logger.warning("%d span(s) never reached the OTLP receiver %s (%d dropped by the full queue)",
                           self.undelivered, self._shown, self.dropped)

    async def flush(self, *, until_empty: bool = False) -> None:
        """Send batches while full ones keep coming (`until_empty`: until the queue is empty, even when stopping)."""
        while records := self.queue.take(self.batch_size):
            await self.send_records(records)
            if len(records) < self.batch_size or (self._stopping.is_set() and not until_empty):
                break
        self._report_undelivered()

    async def send(self, events: Sequence[TraceEvent]) -> bool:
        """POST one batch; True when the receiver took all of it. Never raises (but for cancellation)."""
        return await self._post(lambda: self.encoder.encode(events), len(events))

    async def send_records(self, records: Sequence[TraceRecord]) -> bool:
        """`send` of the records as the queue holds them (what `flush` drains): no event is built per span."""
        return await self._post(lambda: self.encoder.encode_records(records), len(records))

    async def _post(self, encode: Callable[[], bytes], count: int) -> bool:
        try:
            body = encode()
            if self._lean is not None:
                code, _, content = await self._lean.post(self._url, _PROTOBUF_HEADERS, body, self.timeout)
            else:
                client = self._client or httpx.AsyncClient(transport=self._transport, timeout=self.timeout)
                self._client = client
                answer = await client.post(self.endpoint, content=body, headers={"content-type": CONTENT_TYPE})
                code, content = answer.status_code, answer.content
        except asyncio.CancelledError:
            self.failed += count
            raise
        except Exception as exc:
            return self._lost(count, type(exc).__name__)
        if not 200 <= code < 300:
            return self._lost(count, f"HTTP {code}")
        rejected = min(count, self.encoder.rejected(content))
        self.batches += 1
        self.exported += count - rejected
        return not rejected or self._lost(rejected, "rejected by the receiver")

    def _lost(self, spans: int, why: str) -> bool:
        self.failed += spans
        self._last_failure = why
        return False

    def _report_undelivered(self) -> None:
        """A log line on the first loss, then once per `LOG_EVERY` spans lost, never per batch."""
        total = self.undelivered
        if total > self._logged and (not self._logged or total - self._logged >= LOG_EVERY):
            logger.warning("%d span(s) never reached the OTLP receiver %s so far (%d dropped by the full queue, "
                           "last failure: %s); logged once per %d", total, self._shown, self.dropped,
                           self._last_failure, LOG_EVERY)
            self._logged = total

    async def _run(self, stopping: asyncio.Event) -> None:
        await run_flushes(stopping, self.flush, lambda: len(self.queue) >= self.batch_size, self.flush_interval,
                          logger)


def _timed(span: Span, trace: TraceContext, start: int, duration: int, correlation_id: str | None) -> None:
    """A span's ids, flags, times (nanoseconds) and correlation id, over its cached shape: one rule for events and
    for records."""
    span.trace_id = bytes.fromhex(trace.trace_id)
    span.span_id = bytes.fromhex(trace.span_id)
    if trace.parent_span_id:
        span.parent_span_id = bytes.fromhex(trace.parent_span_id)
        span.flags = trace.flags | _REMOTE_PARENT
    else:
        span.flags = trace.flags
    span.start_time_unix_nano = start
    span.end_time_unix_nano = start + duration
    if correlation_id:
        attribute = span.attributes.add(key="svc.correlation_id")
        attribute.value.string_value = correlation_id
