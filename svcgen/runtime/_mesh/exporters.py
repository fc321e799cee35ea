"""Where finished invocations go: the `Exporter` protocol, an in-memory exporter and a draining queue.

An exporter takes the trace middleware's `TraceRecord`, a tuple cheap enough to build on every invocation, and
turns records into `TraceEvent`s only when they are read or drained, off the request path.

Both keep at most `cap` records and drop the OLDEST when full, counting what they dropped (docs/wire.md, Feed batches).

Threads and cost: `export` runs on every invocation, so it takes no lock. The trace middleware exports on the
event loop, but `export` may also be called from other threads. `deque(maxlen=cap).append` drops the oldest by
itself and `next()` on an `itertools.count` tallies the export; both are single C calls, atomic under the GIL.
`dropped` is derived from the tally by the readers, which share a lock: exports minus removals minus what is
held. It is exact whenever no export is half done (always, on the loop), and never goes down.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from typing import Any, Final, Protocol

from .traces import TraceEvent, TraceRecord, write_entries

DEFAULT_CAP: Final = 10_000


class Exporter(Protocol):
    def export(self, record: TraceRecord) -> None:
        """Take one finished invocation. Runs on the request path: it must be cheap and should not block."""
        ...


class FanOutExporter:
    """Hands each record to every exporter in turn (the collector's queue and the OTLP exporter share one)."""

    def __init__(self, *exporters: Exporter) -> None:
        self.exporters = exporters
        self._exports = tuple(exporter.export for exporter in exporters)

    def export(self, record: TraceRecord) -> None:
        for export in self._exports:
            export(record)


class InMemoryExporter:
    """Keeps the newest `cap` events for inspection (tests, a local console); nothing consumes them."""

    def __init__(self, cap: int = DEFAULT_CAP) -> None:
        if cap < 1:
            raise ValueError("exporter cap must be at least 1")
        self.cap = cap
        self._records: deque[TraceRecord] = deque(maxlen=cap)
        self._tally = itertools.count()
        """Advanced once per export and once per read of it (`_count_dropped`)."""
        self._tally_reads = 0
        self._removed = 0
        self._dropped = 0
        self._lock = threading.Lock()
        """Readers only: exports never wait."""

    def export(self, record: TraceRecord) -> None:
        self._records.append(record)
        next(self._tally)

    @property
    def dropped(self) -> int:
        """Records pushed out by newer ones since construction."""
        with self._lock:
            return self._count_dropped()

    def _count_dropped(self) -> int:
        # Reading the tally advances it: take out this read and every earlier one.
        exports = next(self._tally) - self._tally_reads
        self._tally_reads += 1
        self._dropped = max(self._dropped, exports - self._removed - len(self._records))
        return self._dropped

    @property
    def events(self) -> list[TraceEvent]:
        """A snapshot, oldest first."""
        with self._lock:
            records = list(self._records)
        return [TraceEvent.from_record(record) for record in records]

    def clear(self) -> None:
        with self._lock:
            self._removed += len(self._records)
            self._records.clear()

    def __len__(self) -> int:
        return len(self._records)


class QueueExporter(InMemoryExporter):
    """A bounded queue the feeds reporter drains in batches; when full the oldest event is dropped."""

    def drain(self, max: int | None = None) -> list[TraceEvent]:
        """Remove and return up to `max` events (all when None), oldest first."""
        return [TraceEvent.from_record(record) for record in self._take(max)]

    def drain_wire(self, max: int | None = None) -> list[dict[str, Any]]:
        """`drain` as the traces feed's entries in wire form, each written straight from its record by
        `TraceEntry`'s codec: the reporter's trace source, off the request path."""
        return write_entries(self._take(max))

    def take(self, max: int | None = None) -> list[TraceRecord]:
        """Remove and return up to `max` records (all when None), oldest first, as the request path left them."""
        return self._take(max)

    def _take(self, max: int | None) -> list[TraceRecord]:
        with self._lock:
            count = len(self._records) if max is None else min(max, len(self._records))
            pop = self._records.popleft
            records = [pop() for _ in range(count)]
            self._removed += count
        return records
