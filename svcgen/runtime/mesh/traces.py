"""Trace events and the trace middleware: exactly one event per routed invocation (spec "Trace events").

Install the middleware first (outermost) so it times routing and decoding too. It reads `traceparent` (join or
start a trace) and `x-correlation-id`, makes the trace current for outbound calls, and hands the finished event to
the exporter and then to each `on_event` observer (the issue aggregator is one). Reserved topics (`svc:mesh`,
`svc:spec`, `svc:healthcheck`) are answered before the pipeline, so they are never traced.

Nothing here may fail, slow or block the request: its own bookkeeping is wrapped, and exporter/observer errors are
counted and logged once per `LOG_EVERY` failures, never raised.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

from ..context import Context
from ..identity import Identity
from ..pipeline import Next
from ..result import Result
from ..status import UNEXPECTED_ERROR
from .clock import MonotonicClock, WallClock, monotonic_clock, rfc3339, wall_clock
from .exporters import Exporter
from .tracecontext import (
    TRACEPARENT,
    IdGenerator,
    RandomIds,
    TraceContext,
    activate,
    continue_trace,
    deactivate,
    random_root_trace,
    start_trace,
)

logger = logging.getLogger("svcgen.mesh.traces")

CORRELATION_HEADER: Final = "x-correlation-id"
LOG_EVERY: Final = 1000
"""An exporter or observer that keeps failing is logged on its 1st, 1001st, ... failure."""
MAX_TEXT: Final = 256
"""Caller-chosen text kept in an event: a longer unrouted topic is cut, a longer correlation id left out."""

Observer = Callable[["TraceEvent", Context], None]
"""Called with every finished event and its context, after the exporter; must be cheap."""


# Not frozen: a frozen dataclass sets each field through object.__setattr__, which costs ~2 µs per invocation.
@dataclass(slots=True)
class TraceEvent:
    """One routed invocation, built once and then only read (treat it as immutable). Optional fields are None
    when unknown and then absent from the wire form."""

    trace_id: str
    span_id: str
    service: str
    topic: str
    status: str
    parent_span_id: str | None = None
    instance_id: str | None = None
    topic_version: str | None = None
    exception_type: str | None = None
    duration_ms: float | None = None
    """Milliseconds, full precision; microsecond precision on the wire."""
    started_at: float | None = None
    """Epoch seconds; RFC 3339 UTC on the wire."""
    correlation_id: str | None = None
    successful: bool = True
    """Not a wire key: whether the Result counted as a success, so observers need not re-derive it."""

    def to_wire(self) -> dict[str, Any]:
        """Spec "Trace event" keys in table order; unknown keys are omitted, never null."""
        wire: dict[str, Any] = {
            "traceId": self.trace_id,
            "spanId": self.span_id,
            "service": self.service,
            "topic": self.topic,
            "status": self.status,
        }
        if self.parent_span_id:
            wire["parentSpanId"] = self.parent_span_id
        if self.instance_id:
            wire["instanceId"] = self.instance_id
        if self.topic_version:
            wire["topicVersion"] = self.topic_version
        if self.exception_type:
            wire["exceptionType"] = self.exception_type
        if self.duration_ms is not None:
            wire["durationMs"] = round(self.duration_ms, 3)
        if self.started_at is not None:
            wire["startedAt"] = rfc3339(self.started_at)
        if self.correlation_id:
            wire["correlationId"] = self.correlation_id
        return wire


class TraceMiddleware:
    """Pipeline middleware `(context, next) -> Result`; register it first so it is outermost.

    - `clock`: monotonic seconds, for `durationMs`; `wall_clock`: epoch seconds, for `startedAt`.
    - `ids`: trace/span id source (default: OS randomness).
    - `on_event`: observers of every finished event, e.g. `IssueAggregator.observe`.
    - A handler exception reaches here as the pipeline's `service-unavailable` Result with
      `context.exception_type` set; an exception escaping an inner middleware is traced as `unexpected-error`
      (what the HTTP binding answers for it) with its type, then re-raised untouched. A cancelled invocation has
      no outcome and emits no event.
    """

    def __init__(
        self,
        identity: Identity,
        exporter: Exporter,
        *,
        clock: MonotonicClock = monotonic_clock,
        wall_clock: WallClock = wall_clock,
        ids: IdGenerator | None = None,
        on_event: Sequence[Observer] = (),
    ) -> None:
        self.service = identity.service
        self.instance_id = identity.instance_id or None
        self.exporter = exporter
        self.on_event = list(on_event)
        self.export_errors = 0
        self.observer_errors = 0
        self.internal_errors = 0
        self._clock = clock
        self._wall_clock = wall_clock
        self._ids: IdGenerator = ids if ids is not None else RandomIds()
        self._new_root: Callable[[], TraceContext] = random_root_trace if ids is None else partial(start_trace, ids)

    async def __call__(self, context: Context, call_next: Next) -> Result[Any]:
        try:
            inbound = context.headers.get(TRACEPARENT)
            trace = self._new_root() if inbound is None else continue_trace(inbound, self._ids)
            started_at = self._wall_clock()
            started = self._clock()
        except Exception:
            self._internal_error("starting a trace")
            return await call_next(context)
        context.trace = trace
        token = activate(trace)
        try:
            result = await call_next(context)
        except Exception as exc:
            self._finish(context, trace, started, started_at, UNEXPECTED_ERROR, False, type(exc).__qualname__)
            raise
        finally:
            deactivate(token)
        self._finish(context, trace, started, started_at, result.status, result.is_successful, context.exception_type)
        return result

    def _finish(
        self,
        context: Context,
        trace: TraceContext,
        started: float,
        started_at: float,
        status: str,
        successful: bool,
        exception_type: str | None,
    ) -> None:
        try:
            duration_ms = (self._clock() - started) * 1000.0  # rounded when encoded, off the request path
            topic = context.topic
            if context.registration is None and len(topic) > MAX_TEXT:
                topic = topic[: MAX_TEXT - 1] + "…"
            headers = context.headers
            correlation_id = headers.get(CORRELATION_HEADER) if headers else None
            # Positional, in field order: keyword construction costs three times as much on every invocation.
            event = TraceEvent(
                trace.trace_id,
                trace.span_id,
                self.service,
                topic,
                status,
                trace.parent_span_id,
                self.instance_id,
                # Only a resolved version: before routing, context.version is what the caller asked for.
                (context.version or None) if context.registration is not None else None,
                exception_type or None,
                duration_ms,
                started_at,
                correlation_id if correlation_id and len(correlation_id) <= MAX_TEXT else None,
                successful,
            )
        except Exception:
            self._internal_error("building a trace event")
            return
        try:
            self.exporter.export(event)
        except Exception as exc:
            self.export_errors += 1
            _log_sometimes(self.export_errors, "trace exporter %s failed (%s)", type(self.exporter).__name__, exc)
        for observer in self.on_event:
            try:
                observer(event, context)
            except Exception as exc:
                self.observer_errors += 1
                _log_sometimes(self.observer_errors, "trace observer %s failed (%s)", _name(observer), exc)

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


def _name(observer: Observer) -> str:
    return getattr(observer, "__qualname__", None) or type(observer).__qualname__
