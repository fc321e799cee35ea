"""usage.json: exercise counts per (topic, version, service, status), from the collector's exact counters.

The window is the span of the counted events' start times, known only when every counter has both ends
(otherwise some counted events have no start time and the window would understate them): null else.
`transport` is null: a trace event does not say which transport carried the call.
"""

from __future__ import annotations

from ...runtime._mesh.clock import parse_rfc3339
from ..snapshot import CounterEntry, Json, Snapshot
from .times import utc_text
from .topology import TRACES_SOURCE


def build_usage(snapshot: Snapshot, *, generated_at: str) -> Json:
    counters = sorted(snapshot["counters"], key=lambda c: (c["topic"], c["version"], c["service"], c["status"]))
    start, end = usage_window(counters)
    return {
        "generatedAtUtc": generated_at,
        "windowStartUtc": start,
        "windowEndUtc": end,
        "entries": [_entry(counter) for counter in counters],
    }


def usage_window(counters: list[CounterEntry]) -> tuple[str | None, str | None]:
    firsts = [counter.get("firstStartedAt") for counter in counters]
    lasts = [counter.get("lastStartedAt") for counter in counters]
    if not counters or any(parse_rfc3339(text) is None for text in firsts + lasts):
        return None, None
    start = min(firsts, key=lambda text: parse_rfc3339(text) or 0.0)
    end = max(lasts, key=lambda text: parse_rfc3339(text) or 0.0)
    return utc_text(start), utc_text(end)


def _entry(counter: CounterEntry) -> Json:
    timed = counter["timedCount"]
    return {
        "topic": counter["topic"],
        "version": counter["version"],
        "service": counter["service"],
        "transport": None,
        "status": counter["status"],
        "count": counter["count"],
        "avgDurationMs": counter["totalDurationMs"] / timed if timed > 0 else None,
        "source": TRACES_SOURCE,
    }
