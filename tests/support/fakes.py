"""Deterministic clocks and ids, and a small traced service, shared by the mesh tests."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from svcgen.runtime import Context, Identity, Middleware, Registry, Result, Service, codec_for
from svcgen.runtime._mesh.exporters import InMemoryExporter
from svcgen.runtime._mesh.issues import IssueAggregator
from svcgen.runtime._mesh.messages import TraceEntry
from svcgen.runtime._mesh.traces import TraceMiddleware

STARTED = datetime(2026, 11, 22, 10, 0, 0, 123000, tzinfo=UTC)
STARTED_TEXT = "2026-11-22T10:00:00.123Z"
ENCODE_ENTRY = codec_for(TraceEntry).encode


class SequentialIds:
    """Trace ids 000..01, 000..02, ... and span ids alike, from one counter."""

    def __init__(self) -> None:
        self.issued = 0

    def trace_id(self) -> str:
        self.issued += 1
        return f"{self.issued:032x}"

    def span_id(self) -> str:
        self.issued += 1
        return f"{self.issued:016x}"


class SteppingClock:
    """Each reading advances by `step` seconds: an invocation read twice lasts exactly `step`."""

    def __init__(self, start: float = 100.0, step: float = 0.0125) -> None:
        self.now = start
        self.step = step

    def __call__(self) -> float:
        value = self.now
        self.now += self.step
        return value


def fixed_wall_clock(moment: datetime = STARTED) -> Any:
    seconds = moment.timestamp()
    return lambda: seconds


@dataclass
class GetOrder:
    order_id: str


@dataclass
class Order:
    order_id: str


async def get_order(request: GetOrder, context: Context) -> Result[Order]:
    if request.order_id == "missing":
        return Result.not_found("no such order")
    return Result.ok(Order(request.order_id))


async def place_v2(request: GetOrder, context: Context) -> Result[Order]:
    return Result.created(Order(request.order_id))


async def explode(request: GetOrder, context: Context) -> Result[Order]:
    raise LookupError("card 4111-1111-1111-1111 of alice@example.com")


def sync_trace(request: GetOrder, context: Context) -> Result[dict[str, Any]]:
    """A sync handler (runs in a worker thread): reports what it sees of the current trace."""
    from svcgen.runtime._mesh.tracecontext import current_trace, propagation_headers

    current = current_trace()
    return Result.ok({
        "traceId": current.trace_id if current else None,
        "spanId": current.span_id if current else None,
        "headers": dict(propagation_headers()),
    })


def registry() -> Registry:
    reg = Registry()
    reg.add("orders:get", get_order)
    reg.add("orders:place", place_v2, version="v2")
    reg.add("orders:explode", explode)
    reg.add("orders:sync", sync_trace)
    return reg


@dataclass
class Traced:
    service: Service
    tracer: TraceMiddleware
    exporter: InMemoryExporter
    issues: IssueAggregator

    @property
    def events(self) -> list[dict[str, Any]]:
        """Spec "Trace event" wire forms, encoded through the traces feed's record."""
        return [ENCODE_ENTRY(event.to_entry()) for event in self.exporter.events]


def traced_service(
    *,
    instance_id: str | None = "i-1",
    exporter: Any = None,
    inner: tuple[Middleware, ...] = (),
    reg: Registry | None = None,
    service: str = "orders",
) -> Traced:
    exporter = exporter if exporter is not None else InMemoryExporter()
    issues = IssueAggregator(service, clock=fixed_wall_clock())
    tracer = TraceMiddleware(
        Identity(service, instance_id=instance_id),
        exporter,
        clock=SteppingClock(),
        wall_clock=fixed_wall_clock(),
        ids=SequentialIds(),
        on_failure=[issues.observe],
    )
    built = Service(Identity(service, instance_id=instance_id), reg or registry(), middleware=[tracer, *inner])
    sink = exporter if isinstance(exporter, InMemoryExporter) else InMemoryExporter()
    return Traced(built, tracer, sink, issues)
