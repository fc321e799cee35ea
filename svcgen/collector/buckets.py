"""Time buckets: per-minute counters and latency histograms, so queries and the dashboard can say "in the last
5 minutes / hour / day" (DESIGN §13).

Two kinds of series, each a run of one-minute cells:

- a topic series per (service, topic, version, transport, status): what the handling service traced;
- an edge series per (client, server, status): the calls one service made to another.

A cell holds the calls counted in that minute, how many carried a duration, their sum, and a latency histogram
over `LATENCY_BOUNDS_MS` (the last bin is everything slower). Percentiles are read from the merged histogram of a
window, interpolated inside the bin that holds the rank, so they are estimates within one bin's width; counts are
exact. A call is placed in the minute it started (`startedAt`), else the minute the collector took it.

Exactness: the book adds only what the store newly accepted (an event new by (traceId, spanId), a batch new by
batchId), so a resent event or batch is never counted twice; the PostgreSQL form adds the same cells in the
ingest's transaction (`collector_buckets`, `INSERT ... ON CONFLICT DO UPDATE` adding counts), so replicas sharing a
database add exactly.

Bounds: cells older than the retention (`CollectorLimits.bucket_minutes`, 24 h by default) go as the clock moves
on; past `CollectorLimits.bucket_series` series the least recently counted series goes (counted in `evicted`).
A cell costs about `CELL_BYTES` (docs/collector.md gives the figure for a large fleet).

Pure: no clock, no I/O; the caller says what minute it is (`now_minute`).
"""

from __future__ import annotations

import bisect
import calendar
import math
import re
import time
from array import array
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Final, TypeAlias

from ..runtime._status import STATUS_CODES, is_success

LATENCY_BOUNDS_MS: Final = (1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0)
"""Upper bounds of the histogram's bins in milliseconds; one more bin takes everything slower."""
BINS: Final = len(LATENCY_BOUNDS_MS) + 1
_COUNT, _TIMED, _SUM, _HIST = 0, 1, 2, 3
CELL_WIDTH: Final = _HIST + BINS
WINDOWS: Final = {"5m": 5, "1h": 60, "24h": 1440}
"""The windows queries and the dashboard take, in minutes."""
DEFAULT_WINDOW: Final = "1h"

TopicKey: TypeAlias = tuple[str, str, str, str, str]
"""(service, topic, version, transport, status); version and transport are "" when unknown."""
EdgeKey: TypeAlias = tuple[str, str, str]
"""(client, server, status)."""
Cell: TypeAlias = "array[float]"

_MINUTE_TEXT: Final = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d")


def parse_window(text: str | None) -> int:
    """Minutes of a window name (`5m`, `1h`, `24h`); ValueError naming the choices for anything else."""
    if text is None:
        return WINDOWS[DEFAULT_WINDOW]
    minutes = WINDOWS.get(text)
    if minutes is None:
        raise ValueError(f"window {text!r}: expected one of {', '.join(WINDOWS)}")
    return minutes


def minute_of(epoch_seconds: float) -> int:
    return math.floor(epoch_seconds / 60)


class MinuteReader:
    """The minute of a stored `startedAt` (`2026-11-22T10:00:00.123Z`), read from its first 16 characters and
    remembered (a batch's events share a handful of minutes)."""

    def __init__(self) -> None:
        self._known: dict[str, int] = {}

    def __call__(self, started_at: str | None) -> int | None:
        if not started_at:
            return None
        head = started_at[:16]
        minute = self._known.get(head)
        if minute is None:
            if not _MINUTE_TEXT.fullmatch(head):
                return None
            if len(self._known) > 4096:
                self._known.clear()
            minute = self._known[head] = calendar.timegm(time.strptime(head, "%Y-%m-%dT%H:%M")) // 60
        return minute


def bin_of(duration_ms: float) -> int:
    return bisect.bisect_left(LATENCY_BOUNDS_MS, duration_ms)


def is_server_failure(status: str) -> bool:
    """A failure of the serving side (DESIGN §13): a 5xx status (unexpected-error, not-implemented,
    service-unavailable, timeout; a handler's exception is traced as one) or a failure status outside the table
    (answered 500). What `errorRate` counts."""
    code = STATUS_CODES.get(status)
    return not is_success(status) and (code is None or code >= 500)


def is_client_failure(status: str) -> bool:
    """A client answer (4xx: bad-request, not-found, conflict, validation-error, ...): the caller's to fix, counted
    in `clientErrorRate`, never in `errorRate`."""
    code = STATUS_CODES.get(status)
    return code is not None and 400 <= code < 500


def new_cell() -> Cell:
    return array("d", bytes(8 * CELL_WIDTH))


def count_into(cell: Cell, duration_ms: float | None, calls: int = 1) -> None:
    cell[_COUNT] += calls
    if duration_ms is not None:
        cell[_TIMED] += calls
        cell[_SUM] += duration_ms * calls
        cell[_HIST + bin_of(duration_ms)] += calls


def merge_into(total: Cell, cell: Iterable[float]) -> None:
    for index, value in enumerate(cell):
        if value:
            total[index] += value


@dataclass(slots=True)
class Figures:
    """A window's totals for one group of series (a topic version, an edge, ...)."""

    invocations: int = 0
    errors: int = 0
    """Server-side failures."""
    client_errors: int = 0
    timed: int = 0
    total_ms: float = 0.0
    histogram: Cell = field(default_factory=lambda: array("d", bytes(8 * BINS)))
    status_counts: dict[str, int] = field(default_factory=dict)

    def add(self, status: str, cell: Sequence[float]) -> None:
        calls = int(cell[_COUNT])
        self.invocations += calls
        if is_server_failure(status):
            self.errors += calls
        elif is_client_failure(status):
            self.client_errors += calls
        self.status_counts[status] = self.status_counts.get(status, 0) + calls
        self.timed += int(cell[_TIMED])
        self.total_ms += cell[_SUM]
        histogram = self.histogram
        for index in range(BINS):
            value = cell[_HIST + index]
            if value:
                histogram[index] += value

    def percentile(self, rank: float) -> float | None:
        """The `rank`th percentile of the window's durations, interpolated within its bin; None without any."""
        total = sum(self.histogram)
        if total <= 0:
            return None
        wanted = max(rank / 100 * total, 1e-9)
        seen = 0.0
        for index, value in enumerate(self.histogram):
            if value and seen + value >= wanted:
                low = LATENCY_BOUNDS_MS[index - 1] if index > 0 else 0.0
                high = LATENCY_BOUNDS_MS[index] if index < len(LATENCY_BOUNDS_MS) else low
                return round(low + (high - low) * (wanted - seen) / value, 3)
            seen += value
        return LATENCY_BOUNDS_MS[-1]

    def wire(self, minutes: int) -> dict[str, object]:
        """The figures as the queries answer them; one that is not known (no calls, no durations) is omitted."""
        calls = self.invocations
        figures = {
            "invocations": calls,
            "errors": self.errors,
            "clientErrors": self.client_errors,
            "errorRate": self.errors / calls if calls else None,
            "clientErrorRate": self.client_errors / calls if calls else None,
            "requestsPerMinute": calls / minutes,
            "avgDurationMs": self.total_ms / self.timed if self.timed else None,
            "p50LatencyMs": self.percentile(50),
            "p95LatencyMs": self.percentile(95),
            "p99LatencyMs": self.percentile(99),
        }
        return {name: value for name, value in figures.items() if value is not None}


class _Series:
    """One series' cells by minute."""

    __slots__ = ("cells",)

    def __init__(self) -> None:
        self.cells: dict[int, Cell] = {}

    def cell(self, minute: int) -> Cell:
        cell = self.cells.get(minute)
        if cell is None:
            cell = self.cells[minute] = new_cell()
        return cell

    def prune(self, oldest: int) -> int:
        """Drop cells before minute `oldest`; how many went."""
        cells = self.cells
        stale = [minute for minute in cells if minute < oldest]
        for minute in stale:
            del cells[minute]
        return len(stale)

    def window(self, first: int, last: int) -> Iterator[tuple[int, Cell]]:
        for minute, cell in self.cells.items():
            if first <= minute <= last:
                yield minute, cell


@dataclass
class BucketBook:
    """The memory form: topic and edge series, bounded in minutes (`retention`) and in series (`max_series`)."""

    retention: int = 1440
    """Minutes kept."""
    max_series: int = 20_000
    evicted: int = 0
    """Series dropped past `max_series`, least recently counted first."""
    newest: int | None = None
    """The newest minute counted or asked about: cells before `newest - retention + 1` are gone."""

    def __post_init__(self) -> None:
        self.topics: OrderedDict[TopicKey, _Series] = OrderedDict()
        self.edges: OrderedDict[EdgeKey, _Series] = OrderedDict()
        self.by_topic: dict[str, set[TopicKey]] = {}

    # --- counting -------------------------------------------------------------------------------------------

    def count_topic(self, key: TopicKey, minute: int, duration_ms: float | None, calls: int = 1) -> bool:
        """Count calls of a topic series in `minute`; False (nothing counted) for a minute past the retention."""
        if not self._advance(minute):
            return False
        series = self.topics.get(key)
        if series is None:
            series = self.topics[key] = _Series()
            self.by_topic.setdefault(key[1], set()).add(key)
            self._bound()
        else:
            self.topics.move_to_end(key)
        count_into(series.cell(minute), duration_ms, calls)
        return True

    def count_edge(self, key: EdgeKey, minute: int, duration_ms: float | None, calls: int = 1) -> bool:
        if not self._advance(minute):
            return False
        series = self.edges.get(key)
        if series is None:
            series = self.edges[key] = _Series()
            self._bound()
        else:
            self.edges.move_to_end(key)
        count_into(series.cell(minute), duration_ms, calls)
        return True

    def merge_topic(self, key: TopicKey, minute: int, cell: Iterable[float]) -> None:
        """Add a whole cell (restoring a snapshot, reading PostgreSQL rows)."""
        if self._advance(minute):
            series = self.topics.get(key)
            if series is None:
                series = self.topics[key] = _Series()
                self.by_topic.setdefault(key[1], set()).add(key)
                self._bound()
            merge_into(series.cell(minute), cell)

    def merge_edge(self, key: EdgeKey, minute: int, cell: Iterable[float]) -> None:
        if self._advance(minute):
            series = self.edges.get(key)
            if series is None:
                series = self.edges[key] = _Series()
                self._bound()
            merge_into(series.cell(minute), cell)

    def _advance(self, minute: int) -> bool:
        newest = self.newest
        if newest is None or minute > newest:
            self.newest = minute
            if newest is not None and minute // 60 != newest // 60:
                self.prune()  # once an hour of clock, drop what every series holds past the retention
            return True
        return minute > newest - self.retention

    def prune(self) -> None:
        if self.newest is None:
            return
        oldest = self.newest - self.retention + 1
        for key in [key for key, series in self.topics.items() if series.prune(oldest) and not series.cells]:
            del self.topics[key]
            self._unindex(key)
        for edge in [key for key, series in self.edges.items() if series.prune(oldest) and not series.cells]:
            del self.edges[edge]

    def _bound(self) -> None:
        while len(self.topics) + len(self.edges) > self.max_series:
            if len(self.edges) > len(self.topics):
                self.edges.popitem(last=False)
            else:
                key, _ = self.topics.popitem(last=False)
                self._unindex(key)
            self.evicted += 1

    def _unindex(self, key: TopicKey) -> None:
        keys = self.by_topic.get(key[1])
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self.by_topic[key[1]]

    # --- reading --------------------------------------------------------------------------------------------

    def span(self, minutes: int, now_minute: int | None = None) -> tuple[int, int]:
        """(first, last) minute of a window of `minutes` ending at `now_minute` (else the newest counted)."""
        last = now_minute if now_minute is not None else (self.newest if self.newest is not None else 0)
        return last - minutes + 1, last

    def topic_cells(self, topic: str, first: int, last: int) -> Iterator[tuple[TopicKey, int, Cell]]:
        for key in sorted(self.by_topic.get(topic, ())):
            for minute, cell in self.topics[key].window(first, last):
                yield key, minute, cell

    def all_topic_cells(self, first: int, last: int) -> Iterator[tuple[TopicKey, int, Cell]]:
        for key, series in self.topics.items():
            for minute, cell in series.window(first, last):
                yield key, minute, cell

    def edge_cells(self, first: int, last: int) -> Iterator[tuple[EdgeKey, int, Cell]]:
        for key, series in self.edges.items():
            for minute, cell in series.window(first, last):
                yield key, minute, cell

    def cells(self) -> int:
        return sum(len(series.cells) for table in (self.topics, self.edges) for series in table.values())

    # --- snapshot -------------------------------------------------------------------------------------------

    def snapshot(self) -> list[list[object]]:
        """`[kind, key..., minute, cell...]` rows: kind `t` (topic) or `e` (edge)."""
        rows: list[list[object]] = []
        for key, series in self.topics.items():
            rows.extend(["t", *key, minute, *cell.tolist()] for minute, cell in series.cells.items())
        for edge_key, series in self.edges.items():
            rows.extend(["e", *edge_key, minute, *cell.tolist()] for minute, cell in series.cells.items())
        return rows

    def restore(self, rows: Iterable[list[object]]) -> None:
        for row in rows:
            kind = row[0]
            if kind == "t":
                topic_key = (str(row[1]), str(row[2]), str(row[3]), str(row[4]), str(row[5]))
                self.merge_topic(topic_key, _int(row[6]), _cell(row[7:]))
            elif kind == "e":
                self.merge_edge((str(row[1]), str(row[2]), str(row[3])), _int(row[4]), _cell(row[5:]))
            else:
                raise ValueError(f"unknown bucket row kind {kind!r}")


def _int(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{value!r} is not a minute")
    return value


def _cell(values: list[object]) -> list[float]:
    if len(values) != CELL_WIDTH:
        raise ValueError(f"a bucket cell has {CELL_WIDTH} numbers, not {len(values)}")
    cell = [float(value) for value in values if isinstance(value, int | float) and not isinstance(value, bool)]
    if len(cell) != CELL_WIDTH or not all(math.isfinite(value) and value >= 0 for value in cell):
        raise ValueError("a bucket cell holds finite non-negative numbers")
    return cell


CELL_BYTES: Final = 8 * CELL_WIDTH + 64 + 100
"""About what one cell costs in memory: its numbers, the array's header, its place in the series' dict."""
