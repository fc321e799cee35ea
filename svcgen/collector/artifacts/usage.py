"""usage.json: exercise counts per (topic, version, service, status), from the collector's exact counters.

The window is the span of the counted events' start times, known only when every counter has both ends
(otherwise some counted events have no start time and the window would understate them): null else.
`transport` is what the trace events of the entry said carried them (`http`, `nats`, `envelope`, `event`), read
from the time buckets (the last 24 h): null when they did not say, or said more than one.
"""

from __future__ import annotations

from ...runtime._mesh.clock import parse_rfc3339
from ..snapshot import CounterEntry, Json, Snapshot
from .times import utc_text
from .topology import TRACES_SOURCE


def build_usage(snapshot: Snapshot, *, generated_at: str) -> Json:
    counters = sorted(snapshot["counters"], key=lambda c: (c["topic"], c["version"], c["service"], c["status"]))
    start, end = usage_window(counters)
    transports: dict[tuple[str, str, str, str], set[str]] = {}
    for row in snapshot.get("buckets", []):
        if isinstance(row, list) and len(row) > 5 and row[0] == "t" and isinstance(row[4], str) and row[4]:
            transports.setdefault((row[1], row[2], row[3], row[5]), set()).add(row[4])
    for service, topic, version, status, transport in snapshot.get("transports", []):
        transports.setdefault((service, topic, version, status), set()).add(transport)
    return {
        "generatedAtUtc": generated_at,
        "windowStartUtc": start,
        "windowEndUtc": end,
        "entries": [_entry(counter, transports.get((counter["service"], counter["topic"], counter["version"],
                                                    counter["status"]), set())) for counter in counters],
    }


def usage_window(counters: list[CounterEntry]) -> tuple[str | None, str | None]:
    firsts = [counter.get("firstStartedAt") for counter in counters]
    lasts = [counter.get("lastStartedAt") for counter in counters]
    if not counters or any(parse_rfc3339(text) is None for text in firsts + lasts):
        return None, None
    start = min(firsts, key=lambda text: parse_rfc3339(text) or 0.0)
    end = max(lasts, key=lambda text: parse_rfc3339(text) or 0.0)
    return utc_text(start), utc_text(end)


def _entry(counter: CounterEntry, transports: set[str]) -> Json:
    timed = counter["timedCount"]
    return {
        "topic": counter["topic"],
        "version": counter["version"],
        "service": counter["service"],
        "transport": next(iter(transports)) if len(transports) == 1 else None,
        "status": counter["status"],
        "count": counter["count"],
        "avgDurationMs": counter["totalDurationMs"] / timed if timed > 0 else None,
        "source": TRACES_SOURCE,
    }
