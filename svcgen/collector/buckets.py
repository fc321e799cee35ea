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

Bounds: a series holds the last hour by minute and the retention (`CollectorLimits.bucket_minutes`, 24 h by
default) by ten minutes, in fixed rings (`SERIES_BYTES` each, however busy); a series silent past the retention
goes, and past `CollectorLimits.bucket_series` series the least recently counted goes (counted in `evicted`).
docs/collector.md gives the figure for a large fleet.

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
        self._last: tuple[str, int] = ("", 0)

    def __call__(self, started_at: str | None) -> int | None:
        if not started_at:
            return None
        head = started_at[:16]
        if head == self._last[0]:
            return self._last[1]
        minute = self._known.get(head)
        if minute is None:
            if not _MINUTE_TEXT.fullmatch(head):
                return None
            if len(self._known) > 4096:
                self._known.clear()
            minute = self._known[head] = calendar.timegm(time.strptime(head, "%Y-%m-%dT%H:%M")) // 60
        self._last = (head, minute)
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


RECENT_MINUTES: Final = 60
"""Minutes kept at one-minute resolution (the 5m and 1h windows)."""
BLOCK_MINUTES: Final = 10
"""Beyond the last hour, cells cover ten minutes each (the 24h window is read in ten-minute steps)."""


class _Ring:
    """Fixed slots of cells, one per `step` minutes, reused as time moves on: a slot holds the cell of the period
    its stamp names. Two typed arrays, so a cell costs its numbers and nothing else."""

    __slots__ = ("stamps", "step", "values")

    def __init__(self, slots: int, step: int) -> None:
        self.step = step
        self.stamps = array("q", [-1]) * slots
        self.values = array("d", bytes(8 * CELL_WIDTH * slots))

    def cell(self, minute: int) -> int | None:
        """Offset of the cell holding `minute` in `values` (reset when its slot held an older period); None when the
        slot already holds a newer period (`minute` is older than the ring reaches)."""
        period = minute // self.step
        slot = period % len(self.stamps)
        held = self.stamps[slot]
        offset = slot * CELL_WIDTH
        if held != period:
            if held > period:
                return None
            self.stamps[slot] = period
            self.values[offset : offset + CELL_WIDTH] = _ZEROS
        return offset

    def count(self, minute: int, duration_ms: float | None, calls: int, histogram_bin: int) -> None:
        offset = self.cell(minute)
        if offset is None:
            return
        values = self.values
        values[offset + _COUNT] += calls
        if duration_ms is not None:
            values[offset + _TIMED] += calls
            values[offset + _SUM] += duration_ms * calls
            values[offset + _HIST + histogram_bin] += calls

    def merge(self, minute: int, cell: Sequence[float]) -> None:
        offset = self.cell(minute)
        if offset is not None:
            values = self.values
            for index, value in enumerate(cell):
                if value:
                    values[offset + index] += value

    def window(self, first: int, last: int) -> Iterator[tuple[int, Cell]]:
        """(first minute of the period, cell) of every held period that overlaps [first, last]."""
        step = self.step
        for slot, period in enumerate(self.stamps):
            if period >= 0 and first <= period * step + step - 1 and period * step <= last:
                yield period * step, self.values[slot * CELL_WIDTH : (slot + 1) * CELL_WIDTH]

    def newest(self) -> int:
        return max(self.stamps) * self.step

    def held(self) -> int:
        return sum(1 for period in self.stamps if period >= 0)


_ZEROS: Final = array("d", bytes(8 * CELL_WIDTH))


class _Series:
    """One series: the last hour by minute (`recent`), older minutes folded into ten-minute periods (`older`, made
    when the first minute is folded). A minute's cell is folded when its slot is needed again an hour later, so
    the two rings never hold the same call twice and a call costs one cell update."""

    __slots__ = ("blocks", "older", "recent")

    def __init__(self, blocks: int) -> None:
        self.recent = _Ring(RECENT_MINUTES, 1)
        self.older: _Ring | None = None
        self.blocks = blocks

    def _older(self) -> _Ring:
        if self.older is None:
            self.older = _Ring(self.blocks, BLOCK_MINUTES)
        return self.older

    def _slot(self, minute: int) -> int | None:
        """Offset of `minute`'s cell in the recent ring, folding out the older minute its slot held; None when
        `minute` is older than the hour the ring holds (it goes to the ten-minute ring)."""
        recent = self.recent
        slot = minute % RECENT_MINUTES
        held = recent.stamps[slot]
        offset = slot * CELL_WIDTH
        if held != minute:
            if held > minute:
                return None
            if held >= 0:
                self._older().merge(held, recent.values[offset : offset + CELL_WIDTH])
                recent.values[offset : offset + CELL_WIDTH] = _ZEROS
            recent.stamps[slot] = minute
        return offset

    def count(self, minute: int, duration_ms: float | None, calls: int) -> None:
        offset = self._slot(minute)
        if offset is None:
            self._older().count(minute, duration_ms, calls, bin_of(duration_ms) if duration_ms is not None else 0)
            return
        values = self.recent.values
        values[offset] += calls
        if duration_ms is not None:
            values[offset + _TIMED] += calls
            values[offset + _SUM] += duration_ms * calls
            values[offset + _HIST + bisect.bisect_left(LATENCY_BOUNDS_MS, duration_ms)] += calls

    def merge(self, minute: int, cell: Sequence[float], step: int | None = None) -> None:
        """Add a cell: a minute's (`step` None or 1) where that minute is held, a ten-minute period's (`step` 10,
        from a snapshot) into the older ring."""
        if step == BLOCK_MINUTES:
            self._older().merge(minute, cell)
            return
        offset = self._slot(minute)
        if offset is None:
            self._older().merge(minute, cell)
            return
        values = self.recent.values
        for index, value in enumerate(cell):
            if value:
                values[offset + index] += value

    def window(self, first: int, last: int) -> Iterator[tuple[int, Cell]]:
        """The cells overlapping [first, last]: minutes for a window within the hour, else the ten-minute periods
        and the minutes not folded yet."""
        yield from self.recent.window(first, last)
        if last - first >= RECENT_MINUTES and self.older is not None:
            yield from self.older.window(first, last)

    def newest(self) -> int:
        return max(self.recent.newest(), self.older.newest() if self.older is not None else -1)

    def rows(self) -> Iterator[tuple[int, int, Cell]]:
        """(step, minute, cell) of every period held."""
        for ring in (self.recent, self.older):
            if ring is not None:
                for minute, cell in ring.window(0, 2**62):
                    yield ring.step, minute, cell

    def held(self) -> int:
        return self.recent.held() + (self.older.held() if self.older is not None else 0)


@dataclass
class BucketBook:
    """The memory form: topic and edge series, bounded in time (`retention` minutes) and in series (`max_series`).

    A series is two rings of fixed size (`_Ring`): the newest 60 minutes by minute and, once it is older than
    that, the retention by ten minutes, so its memory does not grow with traffic; the 5m and 1h windows read
    minutes, the 24h window ten-minute periods and the minutes not folded into them yet."""

    retention: int = 1440
    """Minutes kept."""
    max_series: int = 10_000
    evicted: int = 0
    """Series dropped past `max_series`, least recently counted first."""
    newest: int | None = None
    """The newest minute counted: a series silent since `newest - retention` goes."""

    def __post_init__(self) -> None:
        self.topics: OrderedDict[TopicKey, _Series] = OrderedDict()
        self.edges: OrderedDict[EdgeKey, _Series] = OrderedDict()
        self.by_topic: dict[str, set[TopicKey]] = {}
        self._blocks = max(1, math.ceil(self.retention / BLOCK_MINUTES))

    # --- counting -------------------------------------------------------------------------------------------

    def count_topic(self, key: TopicKey, minute: int, duration_ms: float | None, calls: int = 1) -> bool:
        """Count calls of a topic series in `minute`; False (nothing counted) for a minute past the retention."""
        if not self._advance(minute):
            return False
        self._topic(key).count(minute, duration_ms, calls)
        return True

    def count_edge(self, key: EdgeKey, minute: int, duration_ms: float | None, calls: int = 1) -> bool:
        if not self._advance(minute):
            return False
        self._edge(key).count(minute, duration_ms, calls)
        return True

    def merge_topic(self, key: TopicKey, minute: int, cell: Sequence[float], step: int | None = None) -> None:
        """Add a whole cell (a minute's from PostgreSQL rows; a snapshot's with its `step`)."""
        if self._advance(minute):
            self._topic(key).merge(minute, cell, step)

    def merge_edge(self, key: EdgeKey, minute: int, cell: Sequence[float], step: int | None = None) -> None:
        if self._advance(minute):
            self._edge(key).merge(minute, cell, step)

    def _topic(self, key: TopicKey) -> _Series:
        series = self.topics.get(key)
        if series is None:
            series = self.topics[key] = _Series(self._blocks)
            self.by_topic.setdefault(key[1], set()).add(key)
            self._bound()
        else:
            self.topics.move_to_end(key)
        return series

    def _edge(self, key: EdgeKey) -> _Series:
        series = self.edges.get(key)
        if series is None:
            series = self.edges[key] = _Series(self._blocks)
            self._bound()
        else:
            self.edges.move_to_end(key)
        return series

    def _advance(self, minute: int) -> bool:
        newest = self.newest
        if newest is None or minute > newest:
            self.newest = minute
            if newest is not None and minute // 60 != newest // 60:
                self.prune()  # once an hour of clock, drop the series silent past the retention
            return True
        return minute > newest - self.retention

    def prune(self) -> None:
        if self.newest is None:
            return
        oldest = self.newest - self.retention + 1
        for key in [key for key, series in self.topics.items() if series.newest() < oldest]:
            del self.topics[key]
            self._unindex(key)
        for edge in [key for key, series in self.edges.items() if series.newest() < oldest]:
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

    @staticmethod
    def step(minutes: int) -> int:
        """The resolution a window of `minutes` is read at."""
        return 1 if minutes <= RECENT_MINUTES else BLOCK_MINUTES

    def topic_cells(self, topic: str, first: int, last: int) -> Iterator[tuple[TopicKey, int, Cell]]:
        for key in sorted(self.by_topic.get(topic, ())):
            for minute, cell in self.topics[key].window(first, last):
                yield key, minute, cell

    def all_topic_cells(self, first: int, last: int) -> Iterator[tuple[TopicKey, int, Cell]]:
        for key, series in self.topics.items():
            for minute, cell in series.window(first, last):
                yield key, minute, cell

    def topic_totals(self, first: int, last: int) -> Iterator[tuple[TopicKey, list[float]]]:
        """Per topic series with calls in [first, last], its cells summed (column sums in C: the fleet's ranking
        reads every series)."""
        for key, series in self.topics.items():
            cells = [cell for _, cell in series.window(first, last)]
            if cells:
                yield key, list(map(math.fsum, zip(*cells, strict=True)))

    def edge_cells(self, first: int, last: int) -> Iterator[tuple[EdgeKey, int, Cell]]:
        for key, series in self.edges.items():
            for minute, cell in series.window(first, last):
                yield key, minute, cell

    def cells(self) -> int:
        """Periods held, both resolutions."""
        return sum(series.held() for table in (self.topics, self.edges) for series in table.values())

    # --- snapshot -------------------------------------------------------------------------------------------

    def snapshot(self) -> list[list[object]]:
        """`[kind, key..., step, minute, cell...]` rows: kind `t` (topic) or `e` (edge), `step` 1 for a minute's
        cell, 10 for a ten-minute period's."""
        rows: list[list[object]] = []
        for key, series in self.topics.items():
            rows.extend(["t", *key, step, minute, *cell.tolist()] for step, minute, cell in series.rows())
        for edge_key, series in self.edges.items():
            rows.extend(["e", *edge_key, step, minute, *cell.tolist()] for step, minute, cell in series.rows())
        return rows

    def restore(self, rows: Iterable[list[object]]) -> None:
        for row in rows:
            kind = row[0]
            if kind == "t":
                topic_key = (str(row[1]), str(row[2]), str(row[3]), str(row[4]), str(row[5]))
                self.merge_topic(topic_key, _int(row[7]), _cell(row[8:]), _step(row[6]))
            elif kind == "e":
                self.merge_edge((str(row[1]), str(row[2]), str(row[3])), _int(row[5]), _cell(row[6:]), _step(row[4]))
            else:
                raise ValueError(f"unknown bucket row kind {kind!r}")


def _int(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{value!r} is not a minute")
    return value


def _step(value: object) -> int:
    if value == 1 or value == BLOCK_MINUTES:
        return BLOCK_MINUTES if value == BLOCK_MINUTES else 1
    raise ValueError(f"{value!r} is not a bucket step (1 or {BLOCK_MINUTES})")


def _cell(values: list[object]) -> list[float]:
    if len(values) != CELL_WIDTH:
        raise ValueError(f"a bucket cell has {CELL_WIDTH} numbers, not {len(values)}")
    cell = [float(value) for value in values if isinstance(value, int | float) and not isinstance(value, bool)]
    if len(cell) != CELL_WIDTH or not all(math.isfinite(value) and value >= 0 for value in cell):
        raise ValueError("a bucket cell holds finite non-negative numbers")
    return cell


SERIES_BYTES: Final = 8 * (RECENT_MINUTES + 144) * (1 + CELL_WIDTH)
"""What one series costs at the default retention, whatever its traffic: its two rings' stamps and numbers."""
