"""Where finished trace events go: the `Exporter` protocol, an in-memory exporter and a draining queue.

Both keep at most `cap` events and drop the OLDEST when full, counting what they dropped (DESIGN §8 "Bounded").

Threads: the trace middleware exports on the event loop, but `export` may also be called from a worker thread
(sync handlers run in `asyncio.to_thread`, and a host may run several loops). `deque.append` alone would be
safe under the GIL, but "full → count a drop → append" and "drain n" are several steps, so a plain lock guards
them; uncontended it costs well under a microsecond and keeps `dropped` exact.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import TYPE_CHECKING, Any, Final, Protocol

if TYPE_CHECKING:
    from .traces import TraceEvent

DEFAULT_CAP: Final = 10_000


class Exporter(Protocol):
    def export(self, event: TraceEvent) -> None:
        """Take one finished event. Runs on the request path: it must be cheap and should not block."""
        ...


class InMemoryExporter:
    """Keeps the newest `cap` events for inspection (tests, a local console); nothing consumes them."""

    def __init__(self, cap: int = DEFAULT_CAP) -> None:
        if cap < 1:
            raise ValueError("exporter cap must be at least 1")
        self.cap = cap
        self.dropped = 0
        """Events pushed out by newer ones since construction."""
        self._events: deque[TraceEvent] = deque(maxlen=cap)
        self._lock = threading.Lock()

    def export(self, event: TraceEvent) -> None:
        with self._lock:
            if len(self._events) == self.cap:
                self.dropped += 1
            self._events.append(event)

    @property
    def events(self) -> list[TraceEvent]:
        """A snapshot, oldest first."""
        with self._lock:
            return list(self._events)

    def clear(self) -> None:
        with self._lock:
            self._events.clear()

    def __len__(self) -> int:
        return len(self._events)


class QueueExporter(InMemoryExporter):
    """A bounded queue the feeds reporter drains in batches; when full the oldest event is dropped."""

    def drain(self, max: int | None = None) -> list[TraceEvent]:
        """Remove and return up to `max` events (all when None), oldest first."""
        with self._lock:
            count = len(self._events) if max is None else min(max, len(self._events))
            pop = self._events.popleft
            return [pop() for _ in range(count)]

    def drain_wire(self, max: int | None = None) -> list[dict[str, Any]]:
        """`drain` in wire form (the reporter's trace source); encoding happens here, off the request path."""
        return [event.to_wire() for event in self.drain(max)]
