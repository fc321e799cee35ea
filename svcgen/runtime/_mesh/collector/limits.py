"""The collector's caps (DESIGN §8 "Bounded"): every table has one, and each says what it drops."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Limits:
    trace_window: int = 10_000
    """Raw trace events kept for the trace query; past it the oldest go (counted in `dropped`)."""
    counters: int = 10_000
    """Distinct (service, topic, version, status) counters; a new key past it is refused and counted."""
    edges: int = 10_000
    """Distinct (client, server) edges; a new pair past it is refused and counted."""
    span_index: int = 100_000
    """Span id → service entries used to find edges; the oldest are forgotten first."""
    pending_children: int = 10_000
    """Spans whose parent has not arrived yet (a server often reports before its client); oldest forgotten."""
    recent_durations: int = 256
    """Newest durations kept per edge for percentiles."""
    issues: int = 1_000
    """Merged issues; the least recently seen is dropped first."""
    exemplars: int = 5
    """Newest exemplar trace ids per merged issue (DESIGN §7)."""
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

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            if getattr(self, name) < 1:
                raise ValueError(f"collector limit {name} must be at least 1")
