"""The trace feed: a bounded window of raw events, and exact counters and edges that outlive it.

The window answers the trace query and drops its oldest events past its cap (`dropped` counts them). An event is
unique by (traceId, spanId) within the window: one that arrives again is not counted again. Counters
per (service, topic, version, status) and client → server edges are updated on arrival, so they stay exact however
many events the window has shed. An edge is a span whose parent span belongs to another service; since a server
usually reports its span before its client does, a child whose parent is not indexed yet waits in a bounded
pending table until the parent arrives.

Bounds: the window in events and bytes; counters and edges in entries, the least recently updated going first
(counted in `evicted_counters`, `evicted_edges`). An event of a topic its (described) service does not declare is
counted under UNKNOWN_TOPIC (`counted_as`), its name kept only in the window. A status outside the spec's status
table is counted under `other` (`other_statuses` counts such events), so made-up statuses cannot fill the counter
table. An event the store could not hold (a duration above MAX_DURATION_MS, whose sums could overflow; see
`decode_entry`) is skipped and counted, never the batch refused.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from ..runtime._codec import codec_for
from ..runtime._mesh.messages import TraceEntry
from ..runtime._status import STATUS_CODES, is_success
from ..runtime._topics import UNKNOWN_TOPIC
from .buckets import CELL_WIDTH, LATENCY_BOUNDS_MS, BucketBook, MinuteReader, is_client_failure, is_server_failure
from .caps import CollectorLimits
from .snapshot import CounterEntry, EdgeEntry, Json, TraceWindow
from .wire import MAX_COUNT, decode_entry, put_bounded, require, saturated

_DECODE_ENTRY = codec_for(TraceEntry).decode
_ENCODE_ENTRY: Callable[[TraceEntry], Json] = codec_for(TraceEntry).encode

_COUNTER_FIELDS: Final[dict[str, type | tuple[type, ...]]] = {
    "service": str, "topic": str, "version": str, "status": str, "count": int, "totalDurationMs": (int, float),
    "timedCount": int,
}
_EDGE_FIELDS: Final[dict[str, type | tuple[type, ...]]] = {
    "client": str, "server": str, "count": int, "errors": int, "recentDurationsMs": list,
}

CounterKey = tuple[str, str, str, str]

MAX_DURATION_MS: Final = float(2**53)
"""Longest duration accepted (some 285,000 years): sums of them stay finite."""
OTHER_STATUS: Final = "other"
"""The counter status of every status outside the spec's status table."""
_EVENT_OVERHEAD: Final = 16
"""Bytes counted per event key besides its value's characters, for the window's byte budget."""


def normalize_event(raw: Any) -> Json | None:
    """The event with only spec keys, read through its record (`TraceEntry`); None when malformed or unstorable,
    a duration the counters could not sum among them (skipped and counted by the caller)."""
    entry = decode_entry(_DECODE_ENTRY, raw)
    if entry is None:
        return None
    if entry.duration_ms is not None and entry.duration_ms > MAX_DURATION_MS:
        return None
    return _ENCODE_ENTRY(entry)  # `startedAt` in the mesh's one time form (the record's): comparable as text


def counted_as(event: Json, declared: Collection[str] | None) -> tuple[str, str]:
    """The (topic, version) an event is counted under: its own when its service declares the topic (or is not
    described yet: nothing to hold it against), else (UNKNOWN_TOPIC, ""), one bucket per service, so no caller can
    fill the counters with made-up names and evict what the service really serves. For a service not described
    yet, `held_topics` gives what to hold it against."""
    topic = event["topic"]
    if declared is None or topic in declared:
        return topic, event.get("topicVersion", "")
    return UNKNOWN_TOPIC, ""


def held_topics(declared: frozenset[str] | None, counted: frozenset[str], limit: int) -> frozenset[str] | None:
    """What a service's events are held against (`counted_as`): its `declared` topics once it is described;
    before that, nothing until it is counted under `limit` distinct topics, then those (`counted`), so a service
    that never registers cannot be made to count unbounded names either."""
    if declared is not None:
        return declared
    return counted if len(counted) >= limit else None


def is_failure(status: str) -> bool:
    """An unknown status counts as a failure, as `Result.of` treats it."""
    return not is_success(status)


@dataclass(slots=True)
class _Edge:
    client: str
    server: str
    durations: deque[float]
    count: int = 0
    errors: int = 0
    """Server-side failures (`is_server_failure`)."""
    first: str | None = None
    last: str | None = None
    client_errors: int = 0
    """Client answers (`is_client_failure`)."""

    def entry(self) -> EdgeEntry:
        entry = EdgeEntry(
            client=self.client,
            server=self.server,
            count=self.count,
            errors=self.errors,
            clientErrors=self.client_errors,
            recentDurationsMs=list(self.durations),
        )
        if self.first is not None:
            entry["firstStartedAt"] = self.first
        if self.last is not None:
            entry["lastStartedAt"] = self.last
        return entry


@dataclass(slots=True)
class _Child:
    """What an edge needs of a span that waits for its parent."""

    service: str
    status: str
    duration: float | None
    started: str | None
    minute: int | None


@dataclass
class TraceLog:
    limits: CollectorLimits = field(default_factory=CollectorLimits)
    dropped: int = 0
    """Events pushed out of the window."""
    evicted_counters: int = 0
    """Counters dropped, least recently counted first, to make room for a new key past the cap."""
    other_statuses: int = 0
    """Events counted under OTHER_STATUS."""
    evicted_edges: int = 0
    """Edges dropped, least recently called first, to make room for a new pair past the cap."""

    def __post_init__(self) -> None:
        self.window: deque[Json] = deque()
        self.window_bytes = 0
        self._window_sizes: deque[int] = deque()
        """Each windowed event's `_event_bytes`, in window order: an evicted event is not weighed again."""
        self.by_trace: dict[str, list[Json]] = {}
        self.counters: OrderedDict[CounterKey, CounterEntry] = OrderedDict()
        self._topics: dict[str, Counter[str]] = {}
        """Per service, its counters per topic: the topics it is counted under."""
        self.edges: OrderedDict[tuple[str, str], _Edge] = OrderedDict()
        self.spans: OrderedDict[str, str] = OrderedDict()
        self.pending: OrderedDict[str, list[_Child]] = OrderedDict()
        self.buckets = BucketBook(self.limits.bucket_minutes, self.limits.bucket_series)
        self._minute = MinuteReader()
        self._topic_cells: dict[tuple[CounterKey, str, int], list[float]] = {}
        self._edge_cells: dict[tuple[str, str, str, int], list[float]] = {}
        """The calls of the batch being added, per (counter key, transport, minute) and (client, server, status,
        minute), summed before they reach the book (`count_buckets`): a batch's events share a few series and
        minutes."""

    def add(self, event: Json, declared: Collection[str] | None = None, arrived_at: str | None = None) -> bool:
        """One normalised event: into the window, the counters and time buckets (`counted_as` against the topics
        its service has `declared`) and the edges. False, and nothing counted, for an event the window holds
        already (the same traceId and spanId): a resent event is counted once. It is bucketed in the minute it
        started, else the minute it arrived (`arrived_at`, RFC 3339)."""
        siblings = self.by_trace.get(event["traceId"])
        if siblings is not None:  # most events start a trace the window does not hold
            span = event["spanId"]
            if any(held["spanId"] == span for held in siblings):
                return False
        minute = self._minute(event.get("startedAt"))
        if minute is None:
            minute = self._minute(arrived_at)
        self._window_add(event)
        self._count(event, counted_as(event, declared), minute)
        self._link(event, minute)
        return True

    def trace(self, trace_id: str) -> list[Json]:
        return list(self.by_trace.get(trace_id, ()))

    def _window_add(self, event: Json) -> None:
        window, sizes = self.window, self._window_sizes
        window.append(event)
        size = _event_bytes(event)
        sizes.append(size)
        self.window_bytes += size
        self.by_trace.setdefault(event["traceId"], []).append(event)
        while len(window) > self.limits.trace_window or self.window_bytes > self.limits.trace_window_bytes:
            old = window.popleft()
            self.window_bytes -= sizes.popleft()
            self.dropped += 1
            # Events of a trace arrive in order, so the evicted one is the first of its trace's list.
            siblings = self.by_trace.get(old["traceId"])
            if siblings:
                siblings.pop(0)
                if not siblings:
                    del self.by_trace[old["traceId"]]

    def _count(self, event: Json, counted: tuple[str, str], minute: int | None) -> None:
        status = event["status"]
        if status not in STATUS_CODES:
            status = OTHER_STATUS
            self.other_statuses += 1
        key = (event["service"], *counted, status)
        duration = event.get("durationMs")
        if minute is not None:
            cell_key = (key, event.get("transport", ""), minute)
            cell = self._topic_cells.get(cell_key)
            if cell is None:
                cell = self._topic_cells[cell_key] = [0.0] * CELL_WIDTH  # a list: cheaper to add to than an array
            cell[0] += 1  # count_into, inlined: this runs for every event
            if duration is not None:
                cell[1] += 1
                cell[2] += duration
                cell[3 + bisect_left(LATENCY_BOUNDS_MS, duration)] += 1
        counter = self.counters.get(key)
        if counter is None:
            while len(self.counters) >= self.limits.counters:
                self._forget(self.counters.popitem(last=False)[0])
                self.evicted_counters += 1
            self._topics.setdefault(key[0], Counter())[key[1]] += 1
            counter = self.counters[key] = CounterEntry(
                service=key[0], topic=key[1], version=key[2], status=key[3], count=0, totalDurationMs=0.0, timedCount=0
            )
        else:
            self.counters.move_to_end(key)
        counter["count"] = saturated(counter["count"] + 1)
        if duration is not None:
            counter["totalDurationMs"] += duration
            counter["timedCount"] = saturated(counter["timedCount"] + 1)
        started = event.get("startedAt")
        if started is not None:
            if started < counter.get("firstStartedAt", "~"):
                counter["firstStartedAt"] = started
            if started > counter.get("lastStartedAt", ""):
                counter["lastStartedAt"] = started

    def topics_of(self, service: str) -> frozenset[str]:
        """The topics `service` is counted under now."""
        return frozenset(self._topics.get(service, ()))

    def _forget(self, key: CounterKey) -> None:
        held = self._topics.get(key[0])
        if held is not None:
            held[key[1]] -= 1
            if held[key[1]] <= 0:
                del held[key[1]]
            if not held:
                del self._topics[key[0]]

    def _link(self, event: Json, minute: int | None) -> None:
        service = event["service"]
        parent = event.get("parentSpanId")
        if parent is not None:
            child = _Child(service, event["status"], event.get("durationMs"), event.get("startedAt"), minute)
            client = self.spans.get(parent)
            if client is not None:
                self._edge(client, child)
            else:
                waiting = self.pending.get(parent)
                if waiting is None:
                    put_bounded(self.pending, parent, [child], self.limits.pending_children)
                elif len(waiting) < 64:  # a span with more unanswered children than this is not worth waiting for
                    waiting.append(child)
        put_bounded(self.spans, event["spanId"], service, self.limits.span_index)
        children = self.pending.pop(event["spanId"], None)
        if children:
            for child in children:
                self._edge(service, child)

    def _edge(self, client: str, child: _Child) -> None:
        if client == child.service:
            return  # a call inside one service is not an edge
        key = (client, child.service)
        edge = self.edges.get(key)
        if edge is None:
            while len(self.edges) >= self.limits.edges:
                self.edges.popitem(last=False)
                self.evicted_edges += 1
            edge = self.edges[key] = _Edge(client, child.service, deque(maxlen=self.limits.recent_durations))
        else:
            self.edges.move_to_end(key)
        edge.count = saturated(edge.count + 1)
        if is_server_failure(child.status):
            edge.errors = saturated(edge.errors + 1)
        elif is_client_failure(child.status):
            edge.client_errors = saturated(edge.client_errors + 1)
        if child.duration is not None:
            edge.durations.append(child.duration)
        if child.minute is not None:
            status = child.status if child.status in STATUS_CODES else OTHER_STATUS
            edge_key = (client, child.service, status, child.minute)
            cell = self._edge_cells.get(edge_key)
            if cell is None:
                cell = self._edge_cells[edge_key] = [0.0] * CELL_WIDTH
            cell[0] += 1
            if child.duration is not None:
                cell[1] += 1
                cell[2] += child.duration
                cell[3 + bisect_left(LATENCY_BOUNDS_MS, child.duration)] += 1
        if child.started is not None:
            if edge.first is None or child.started < edge.first:
                edge.first = child.started
            if edge.last is None or child.started > edge.last:
                edge.last = child.started

    def count_buckets(self) -> None:
        """Hand the time buckets what `add` counted since the last call (the caller calls it after each batch)."""
        book = self.buckets
        if self._topic_cells:
            topic_cells, self._topic_cells = self._topic_cells, {}
            for ((service, topic, version, status), transport, minute), cell in topic_cells.items():
                book.merge_topic((service, topic, version, transport, status), minute, cell)
        if self._edge_cells:
            edge_cells, self._edge_cells = self._edge_cells, {}
            for (client, server, status, minute), cell in edge_cells.items():
                book.merge_edge((client, server, status), minute, cell)

    # --- snapshot -------------------------------------------------------------------------------------------

    def window_snapshot(self) -> TraceWindow:
        # Events are never mutated after ingest, so sharing them is safe.
        return TraceWindow(cap=self.limits.trace_window, dropped=self.dropped, events=list(self.window))

    def counter_snapshot(self) -> list[CounterEntry]:
        return [CounterEntry(**counter) for counter in self.counters.values()]

    def edge_snapshot(self) -> list[EdgeEntry]:
        return [edge.entry() for edge in self.edges.values()]

    def restore(self, window: TraceWindow, counters: list[CounterEntry], edges: list[EdgeEntry]) -> None:
        """Counters and edges first, so replaying the window only rebuilds the window and the span index."""
        for counter in counters:
            require(counter, _COUNTER_FIELDS)
            key = (counter["service"], counter["topic"], counter["version"], counter["status"])
            _require_storable(counts=(counter["count"], counter["timedCount"]), sums=(counter["totalDurationMs"],))
            put_bounded(self.counters, key, CounterEntry(**counter), self.limits.counters)
        self._topics = {}
        for service, topic, _, _ in self.counters:
            self._topics.setdefault(service, Counter())[topic] += 1
        for entry in edges:
            require(entry, _EDGE_FIELDS)
            durations = [float(d) for d in entry["recentDurationsMs"]]
            _require_storable(counts=(entry["count"], entry["errors"], entry.get("clientErrors", 0)), sums=durations)
            edge = _Edge(
                entry["client"],
                entry["server"],
                deque(durations, maxlen=self.limits.recent_durations),
                int(entry["count"]),
                int(entry["errors"]),
                entry.get("firstStartedAt"),
                entry.get("lastStartedAt"),
                int(entry.get("clientErrors", 0)),
            )
            put_bounded(self.edges, (edge.client, edge.server), edge, self.limits.edges)
        require(window, {"dropped": int, "events": list})
        self.dropped = int(window["dropped"])
        events = [event for event in (normalize_event(raw) for raw in window["events"]) if event is not None]
        for event in events[-self.limits.trace_window :]:
            self._window_add(event)
            put_bounded(self.spans, event["spanId"], event["service"], self.limits.span_index)


def _event_bytes(event: Json) -> int:
    return sum(_EVENT_OVERHEAD + (len(value) if isinstance(value, str) else 8) for value in event.values())


def _require_storable(*, counts: Iterable[int], sums: Iterable[float]) -> None:
    """Raise ValueError for a number a restored snapshot may not hold (the collector never writes one): counts
    within 0..MAX_COUNT, durations and their sums finite and not negative."""
    for count in counts:
        if not 0 <= count <= MAX_COUNT:
            raise ValueError(f"{count!r} is not a storable count")
    for value in sums:
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"{value!r} is not a storable duration")
