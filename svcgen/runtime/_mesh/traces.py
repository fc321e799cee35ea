"""Trace events and the trace middleware: exactly one event per routed invocation (spec "Trace events").

Install the middleware first (outermost) so it times routing and decoding too. It reads `traceparent` (join or
start a trace) and `x-correlation-id`, makes the trace current for outbound calls, and hands a record of the
finished invocation to the exporter and, when the invocation failed, its event to each `on_failure` observer (the
issue aggregator is one). Reserved topics (`svc:mesh`, `svc:spec`, `svc:healthcheck`) are answered before the
pipeline, so they are never traced.

The request path only reads clocks, headers and the result, and appends one tuple (`TraceRecord`) of text and
numbers, which the garbage collector soon stops tracking: the trace's ids are derived when first read
(`PendingTrace`, `resolve`) and the `TraceEvent` is built when the record is read, off the request path
(bench/trace.py measures what each costs).

Nothing here may fail, slow or block the request: its own bookkeeping is wrapped, and exporter/observer errors are
counted and logged once per `LOG_EVERY` failures, never raised.
"""

from __future__ import annotations

import logging
from asyncio import CancelledError
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from .._codec import rows_encoder
from .._context import CORRELATION_HEADER, TRACEPARENT, Context
from .._descriptor import Identity
from .._pipeline import BindingFailure, Next, cancelled_from_outside
from .._result import Result
from .._status import TIMEOUT, UNEXPECTED_ERROR
from .clock import MonotonicClock, WallClock, monotonic_clock, wall_clock
from .messages import (
    MAX_DETAIL,
    MAX_TEXT,  # caller-chosen text past it: an unrouted topic is cut, a correlation id left out
    TraceEntry,
)
from .tracecontext import (
    IdGenerator,
    Trace,
    TraceContext,
    activate,
    continue_trace,
    current_trace,
    deactivate,
    new_trace_ids_of,
    next_invocation,
    resolve,
)

if TYPE_CHECKING:
    from .exporters import Exporter

logger = logging.getLogger("svcgen.mesh.traces")

LOG_EVERY: Final = 1000
"""A tracing failure that keeps happening is logged on its 1st, 1001st, ... occurrence, not per request."""

REANCHOR_SECONDS: Final = 1.0
"""How often the tracer re-reads the wall clock beside the monotonic one; a wall-clock step shows in `startedAt`
within this."""

Origin: TypeAlias = tuple[str, "str | None", float, float]
"""What every record of one tracer shares: (service, instance id, wall clock and monotonic clock read together).
A monotonic reading `m` started at wall time `wall + (m - monotonic)`."""

TraceRecord: TypeAlias = tuple[
    "str | TraceContext | None", int, Origin, str, bool, str, bool, str, "str | None", float, float, "str | None", str,
    "str | None",
]
"""One finished invocation as the request path keeps it, a plain tuple because it is built on every invocation:
(inbound `traceparent` and invocation number, which make its `PendingTrace`, or a decided `TraceContext` and the
number; origin, topic, routed, status, successful, version as the context had it, exception type, started and
ended in monotonic seconds, correlation id, transport, the runtime's own failure detail). It holds only text
and numbers, not even the pending trace's tuple, so the garbage collector stops tracking it within a pass or two
instead of traversing every queued record. `TraceEvent.from_record` reads it; `TraceEvent.to_record` writes one
from an event."""

Span: TypeAlias = tuple[TraceContext, int, float]
"""A span `TraceMiddleware.open_span` opened: its ids, its number, its start in monotonic seconds."""

Observer = Callable[["TraceEvent", Context], None]
"""Called with the event of a failed invocation and its context, after the exporter; must be cheap."""


# Not frozen: a frozen dataclass sets each field through object.__setattr__, several times the cost, and the
# reporter builds one per drained record.
@dataclass(slots=True)
class TraceEvent:
    """One routed invocation as the spec's trace event says it; treat it as immutable. Optional fields are None
    when unknown and then absent from the wire form. Its ids come from `trace`, which may be decided only when
    first read."""

    trace: Trace
    service: str
    topic: str
    status: str
    instance_id: str | None = None
    topic_version: str | None = None
    exception_type: str | None = None
    duration_ms: float | None = None
    """Milliseconds, full precision; microsecond precision on the wire."""
    started_at: float | None = None
    """Epoch seconds; RFC 3339 UTC on the wire."""
    correlation_id: str | None = None
    successful: bool = True
    """Not a wire key: whether the Result counted as a success."""
    transport: str | None = None
    """What carried the call: `http`, `nats`, `envelope` or `event` (a key svcgen adds to the spec's event)."""
    failure_detail: str | None = None
    """Why the runtime itself failed the call (a request or response that did not fit its type, a handler that
    raised): the binding's own words, never a handler's text or exception message. Cut to MAX_DETAIL."""
    handler_answered: bool = False
    """Not a wire key: the status is the answer of the handler (or a middleware) of a routed call, not one the
    binding made (unknown topic, undecodable request, handler raised)."""
    routed: bool = True
    """Not a wire key: the service has the topic (and version). An unrouted event's topic is the caller's text:
    it is counted under UNKNOWN_TOPIC."""

    @classmethod
    def from_record(cls, record: TraceRecord) -> TraceEvent:
        held, number, routed, successful = record[0], record[1], record[4], record[6]
        trace: Trace = held if isinstance(held, TraceContext) else (held, number)
        (service, topic, status, instance_id, version, exception_type, duration_ms, started_at, correlation_id,
         transport, failure_detail) = _readable(record)
        return cls(trace, service, topic, status, instance_id, version, exception_type, duration_ms, started_at,
                   correlation_id, successful, transport, failure_detail, routed=routed)  # fmt: skip

    def to_record(self) -> TraceRecord:
        """A record that reads back as this event (what an exporter takes); no duration or start reads back as 0."""
        origin = (self.service, self.instance_id, self.started_at or 0.0, 0.0)
        duration = (self.duration_ms or 0.0) / 1000.0
        held, number = (self.trace, 0) if isinstance(self.trace, TraceContext) else self.trace
        return (
            held, number, origin, self.topic, self.routed, self.status, self.successful, self.topic_version or "",
            self.exception_type, 0.0, duration, self.correlation_id, self.transport or "", self.failure_detail,
        )

    @property
    def trace_id(self) -> str:
        return self.decided_trace().trace_id

    @property
    def span_id(self) -> str:
        return self.decided_trace().span_id

    @property
    def parent_span_id(self) -> str | None:
        return self.decided_trace().parent_span_id

    def decided_trace(self) -> TraceContext:
        """The event's ids, derived once (replacing a pending trace by what it resolves to changes nothing read)."""
        trace = self.trace
        if not isinstance(trace, TraceContext):
            trace = self.trace = resolve(trace)
        return trace

    def to_entry(self) -> TraceEntry:
        """The event as the traces feed's record declares it (the collector decodes the same record)."""
        trace = self.decided_trace()
        return TraceEntry(
            trace.trace_id,
            trace.span_id,
            self.service,
            self.topic,
            self.status,
            trace.parent_span_id or None,
            self.instance_id or None,
            self.topic_version or None,
            self.exception_type or None,
            None if self.duration_ms is None else round(self.duration_ms, 3),  # microseconds: the wire's precision
            None if self.started_at is None else datetime.fromtimestamp(self.started_at, UTC),
            self.correlation_id or None,
            self.transport or None,
            self.failure_detail or None,
        )


def _readable(record: TraceRecord) -> tuple[Any, ...]:
    """What a record says beside its trace, as the event and the entry both read it: (service, topic, status,
    instance id, version, exception type, duration in ms, start in epoch seconds, correlation id, transport,
    failure detail), each None when unknown."""
    (_, _, origin, topic, routed, status, _, version, exception_type, started, ended, correlation_id, transport,
     failure_detail) = record
    service, instance_id, wall, monotonic = origin
    if not routed and len(topic) > MAX_TEXT:
        topic = topic[: MAX_TEXT - 1] + "…"
    return (
        service,
        topic,
        status,
        instance_id or None,
        # Only a resolved version: before routing, the context's version is what the caller asked for.
        (version or None) if routed else None,
        exception_type or None,
        (ended - started) * 1000.0,
        wall + (started - monotonic),
        correlation_id if correlation_id and len(correlation_id) <= MAX_TEXT else None,
        transport or None,
        _cut(failure_detail) if failure_detail else None,
    )


def entry_rows(records: Sequence[TraceRecord]) -> list[tuple[Any, ...]]:
    """The `TraceEntry` field values of each record, in field order, `startedAt` as epoch seconds: what
    `TraceEvent.from_record(record).to_entry()` holds, without the event (a test holds the two equal). The ids of
    new traces are derived for the whole batch at once."""
    new_ids = iter(new_trace_ids_of([record[1] for record in records if record[0] is None]))
    rows: list[tuple[Any, ...]] = []
    append = rows.append
    for record in records:
        held = record[0]
        parent_span_id: str | None
        if held is None:  # most invocations: a new trace
            trace_id, span_id = next(new_ids)
            parent_span_id = None
        else:
            trace = held if isinstance(held, TraceContext) else resolve((held, record[1]))
            trace_id, span_id, parent_span_id = trace.trace_id, trace.span_id, trace.parent_span_id or None
        (service, topic, status, instance_id, version, exception_type, duration_ms, started_at, correlation_id,
         transport, failure_detail) = _readable(record)
        append((trace_id, span_id, service, topic, status, parent_span_id, instance_id, version, exception_type,
                round(duration_ms, 3), started_at, correlation_id, transport, failure_detail))  # fmt: skip
    return rows


_WRITE_ENTRIES: Final = rows_encoder(TraceEntry)


def write_entries(records: Sequence[TraceRecord]) -> list[dict[str, Any]]:
    """The records' trace entries in wire form, written by `TraceEntry`'s codec from their values, no record object
    between (what the reporter sends)."""
    return _WRITE_ENTRIES(entry_rows(records))


class TraceMiddleware:
    """Pipeline middleware `(context, next) -> Result`; register it first so it is outermost.

    - `clock`: monotonic seconds, read at the start and end of each invocation; `wall_clock`: epoch seconds,
      read beside it at most once per `REANCHOR_SECONDS` to turn a start into `startedAt`.
    - `ids`: an id source deciding each trace as the invocation starts (deterministic ids in tests); by default
      ids are derived when first read (`resolve`). A failing source is counted in `id_errors` and logged, and
      that invocation takes derived ids.
    - `on_failure`: observers of the event of every failed invocation, e.g. `IssueAggregator.observe`; a
      success calls nothing but the exporter.
    - A handler exception (any `BaseException`) reaches here as the pipeline's `service-unavailable`
      `BindingFailure` naming its type; an exception escaping an inner middleware is traced as `unexpected-error`
      (what the HTTP binding answers for it) with its type, then re-raised untouched. An invocation cancelled
      from outside (the client left, the server stops) is traced as `timeout` with `exceptionType`
      `CancelledError` and ends quietly: no failure observers (no issue), the cancellation re-raised.
    - `current_trace()` gives the invocation's trace while it runs.
    """

    def __init__(
        self,
        identity: Identity,
        exporter: Exporter,
        *,
        clock: MonotonicClock = monotonic_clock,
        wall_clock: WallClock = wall_clock,
        ids: IdGenerator | None = None,
        on_failure: Sequence[Observer] = (),
    ) -> None:
        self.service = identity.service
        self.instance_id = identity.instance_id or None
        self.exporter = exporter
        self.on_failure = list(on_failure)
        self.export_errors = 0
        self.observer_errors = 0
        self.internal_errors = 0
        self.id_errors = 0
        self._clock = clock
        self._wall_clock = wall_clock
        self._ids = ids
        self._origin: Origin = (self.service, self.instance_id, 0.0, 0.0)
        self._reanchor_at = float("-inf")

    async def __call__(self, context: Context, call_next: Next) -> Result[Any]:
        try:
            headers = context.headers
            inbound = headers.get(TRACEPARENT)
            number = next_invocation()
            decided = None if self._ids is None else self._decide(inbound, self._ids)
            # The record holds the pending trace's parts, not its tuple (see TraceRecord).
            held: str | TraceContext | None
            trace: Trace
            if decided is None:
                held, trace = inbound, (inbound, number)
            else:
                held = trace = decided
            started = self._clock()
            if started >= self._reanchor_at:
                self._reanchor(started)
        except Exception:
            self._internal_error("starting a trace")
            return await call_next(context)
        token = activate(trace)
        try:
            result = await call_next(context)
        except BaseException as exc:
            quiet = isinstance(exc, CancelledError) and cancelled_from_outside()
            self._emit(context, (
                held, number, self._origin, context.topic, context.registration is not None,
                TIMEOUT if quiet else UNEXPECTED_ERROR, False, context.version, type(exc).__qualname__, started,
                self._clock(), headers.get(CORRELATION_HEADER), context.transport,
                None if quiet else f"{type(exc).__qualname__} escaped the middleware",
            ), observe=not quiet, handler_answered=False)
            raise
        finally:
            deactivate(token)
        try:
            successful = result.is_successful
            routed = context.registration is not None
            refused = isinstance(result, BindingFailure)
            record: TraceRecord = (
                held, number, self._origin, context.topic, routed, result.status, successful, context.version,
                result.exception_type if isinstance(result, BindingFailure) else None, started, self._clock(),
                headers.get(CORRELATION_HEADER), context.transport, result.detail if refused else None,
            )
        except Exception:
            self._internal_error("recording a trace")
            return result
        try:
            self.exporter.export(record)
        except Exception as exc:
            self._export_failed(exc)
        if not successful:
            self._observe(context, record, routed and not refused)
        return result

    def open_span(self) -> Span | None:
        """A span of its own for something the current invocation does (an event's publish): a child of the current
        trace, or the root of a new one outside an invocation. `close_span` records it; None if tracing failed."""
        try:
            number = next_invocation()
            parent = current_trace()
            own = resolve((None, number)) if self._ids is None else self._decide(None, self._ids)
            if own is None:
                own = resolve((None, number))
            if parent is not None:
                own = TraceContext(parent.trace_id, own.span_id, parent.span_id, parent.flags)
            started = self._clock()
            if started >= self._reanchor_at:
                self._reanchor(started)
            return own, number, started
        except Exception:
            self._internal_error("starting a span")
            return None

    def close_span(self, span: Span | None, topic: str, version: str, transport: str, result: Result[Any]) -> None:
        """Export the trace event of `span`, ended now with `result`'s status (never raises)."""
        if span is None:
            return
        try:
            own, number, started = span
            record: TraceRecord = (
                own, number, self._origin, topic, True, result.status, result.is_successful, version, None, started,
                self._clock(), None, transport, None,
            )
        except Exception:
            self._internal_error("recording a span")
            return
        try:
            self.exporter.export(record)
        except Exception as exc:
            self._export_failed(exc)

    def _decide(self, inbound: str | None, ids: IdGenerator) -> TraceContext | None:
        """The trace from an injected id source, or None (take derived ids) when the source fails."""
        try:
            return continue_trace(inbound, ids)
        except Exception as exc:
            self.id_errors += 1
            _log_sometimes(self.id_errors, "trace id source %s failed (%s)", type(ids).__name__, exc)
            return None

    def _reanchor(self, monotonic: float) -> None:
        self._origin = (self.service, self.instance_id, self._wall_clock(), monotonic)
        self._reanchor_at = monotonic + REANCHOR_SECONDS

    def _emit(self, context: Context, record: TraceRecord, *, observe: bool, handler_answered: bool) -> None:
        try:
            self.exporter.export(record)
        except Exception as exc:
            self._export_failed(exc)
        if observe:
            self._observe(context, record, handler_answered)

    def _observe(self, context: Context, record: TraceRecord, handler_answered: bool) -> None:
        try:
            event = TraceEvent.from_record(record)
            event.handler_answered = handler_answered
        except Exception:
            self._internal_error("building a trace event")
            return
        for observer in self.on_failure:
            try:
                observer(event, context)
            except Exception as exc:
                self.observer_errors += 1
                _log_sometimes(self.observer_errors, "trace observer %s failed (%s)", _name(observer), exc)

    def _export_failed(self, exc: Exception) -> None:
        self.export_errors += 1
        _log_sometimes(self.export_errors, "trace exporter %s failed (%s)", type(self.exporter).__name__, exc)

    def _internal_error(self, doing: str) -> None:
        self.internal_errors += 1
        if (self.internal_errors - 1) % LOG_EVERY == 0:
            logger.exception("tracing failed while %s; the invocation goes on untraced", doing)


def _log_sometimes(count: int, message: str, name: str, exc: Exception) -> None:
    # The type only: exception text may carry request data.
    if (count - 1) % LOG_EVERY == 0:
        logger.warning(
            message + "; %d failure(s) so far, logged once per %d", name, type(exc).__name__, count, LOG_EVERY
        )


def _cut(text: str) -> str:
    return text if len(text) <= MAX_DETAIL else text[: MAX_DETAIL - 1] + "…"


def _name(observer: Observer) -> str:
    return getattr(observer, "__qualname__", None) or type(observer).__qualname__
