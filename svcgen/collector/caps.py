"""The collector's caps (docs/collector.md, Limits): every table has one in entries, the documents and the trace window
one in bytes too, and each says what it drops. Everything dropped is counted (the fleet query's `dropped`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CollectorLimits:
    trace_window: int = 10_000
    """Raw trace events kept for the trace query; past it the oldest go (counted in `dropped`)."""
    trace_window_bytes: int = 8 * 2**20
    """JSON bytes of the trace window; past it the oldest events go, as past `trace_window`."""
    counters: int = 10_000
    """Distinct (service, topic, version, status) counters; past it the least recently counted goes (counted).
    A status outside the spec's status table is counted under `other`, so statuses cannot fill the table."""
    undescribed_topics: int = 100
    """Distinct topics counted by name for a service not described yet (no descriptor, no polled spec); past it
    further topics of that service are counted under `svc:unknown` (once described, its descriptor decides)."""
    edges: int = 10_000
    """Distinct (client, server) edges; past it the least recently called goes (counted)."""
    span_index: int = 100_000
    """Span id → service entries used to find edges; the oldest are forgotten first."""
    pending_children: int = 10_000
    """Spans whose parent has not arrived yet (a server often reports before its client); oldest forgotten."""
    recent_durations: int = 256
    """Newest durations kept per edge for percentiles."""
    bucket_minutes: int = 1_440
    """Minutes of per-minute counters and latency histograms kept (24 h); older cells go as the clock moves on."""
    bucket_series: int = 10_000
    """Distinct topic (service, topic, version, transport, status) and edge (client, server, status) series of
    time buckets (in memory; PostgreSQL keeps its rows by time only); past it the least recently counted goes."""
    issues: int = 1_000
    """Merged issues; the least recently seen is dropped first."""
    exemplars: int = 5
    """Newest exemplar trace ids per merged issue (docs/mesh-view.md, Issues)."""
    catalog: int = 1_000
    """(service, serviceVersion) entries; the least recently updated is dropped first."""
    instances: int = 10_000
    """Heartbeating instances; the least recently heard is dropped first."""
    polls: int = 1_000
    """Polled (service, base URL) members; the least recently polled is dropped first."""
    services: int = 10_000
    """Services with feed bookkeeping (`missingFeeds`); the least recently heard is dropped first."""
    changes: int = 50
    """Newest TopicChange entries per catalog entry."""
    removed_topics: int = 100
    """Newest removed topics per catalog entry."""
    batch_ids: int = 10_000
    """Newest trace and issue `batchId`s remembered, so a retried batch is counted once."""
    descriptor_bytes: int = 256 * 2**10
    """Largest registered descriptor (JSON bytes); a larger register is refused with `bad-request`."""
    spec_bytes: int = 2**20
    """Largest polled spec (JSON bytes); a larger one is a failed poll, never stored."""
    health_bytes: int = 64 * 2**10
    """Largest health document of a heartbeat or poll (JSON bytes); a heartbeat over it is refused, a poll
    failed."""
    catalog_bytes: int = 32 * 2**20
    """JSON bytes of every descriptor, spec and health document held together; past it the least recently
    updated entry of the largest table goes (counted). JSON bytes, not memory: in memory the catalog takes about 7
    times as much (bench/catalogrss.py; docs/collector.md, Limits)."""
    depth: int = 64
    """Deepest nesting of a stored document (descriptor, spec, health); deeper is refused like an oversized one."""

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            if getattr(self, name) < 1:
                raise ValueError(f"collector limit {name} must be at least 1")
        if max(self.descriptor_bytes, self.spec_bytes, self.health_bytes) > self.catalog_bytes:
            raise ValueError("collector limit catalog_bytes must hold the largest descriptor, spec or health")
