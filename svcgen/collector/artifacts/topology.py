"""topology.json: client → server edges found in the traces, with rate, error rates and latency.

`errorRate` counts the server's side of failures (5xx statuses, exceptions), `clientErrorRate` the client answers
(4xx: not-found, validation-error, ...), so a caller asking for missing things does not look like an outage.

Every figure comes from the trace feed (`source: "traces"`) and is null when its input is missing:
percentiles (nearest rank, so each is a duration actually observed) need recent durations; the error rate
needs at least one call; the rate needs the edge's first start time.

`requestsPerMinute` is the edge's calls over the trace window's span: from the edge's first call to the end of
the window (the newest start time the collector has counted, any service), never less than 60 s. So 2 calls
0.3 s apart are 2 per minute, not thousands, and an edge that went quiet decays instead of keeping its burst rate.
Start times are held to the collector's own clock (the snapshot's `savedAt`): one from a clock in the future is
taken as now, so one such service cannot push the window's end out and collapse every rate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

from ...runtime._mesh.clock import parse_rfc3339
from ..snapshot import EdgeEntry, Json, Snapshot

TRACES_SOURCE: Final = "traces"


MIN_RATE_SPAN_SECONDS: Final = 60.0


def build_topology(snapshot: Snapshot, *, generated_at: str) -> Json:
    edges = sorted(snapshot["edges"], key=lambda edge: (edge["client"], edge["server"]))
    end = window_end(snapshot)
    return {"generatedAtUtc": generated_at, "edges": [edge_figures(edge, end) for edge in edges]}


def window_end(snapshot: Snapshot) -> float | None:
    """The newest start time among the counted calls and the edges, epoch seconds, none later than the collector's
    clock when it took the snapshot; None when none has one."""
    times = [parse_rfc3339(counter.get("lastStartedAt")) for counter in snapshot["counters"]]
    times += [parse_rfc3339(edge.get("lastStartedAt")) for edge in snapshot["edges"]]
    now = parse_rfc3339(snapshot.get("savedAt")) or math.inf
    known = [min(at, now) for at in times if at is not None]
    return max(known) if known else None


def edge_figures(edge: EdgeEntry, end: float | None = None) -> Json:
    durations = sorted(d for d in edge["recentDurationsMs"] if _finite_number(d))
    return {
        "client": edge["client"],
        "server": edge["server"],
        "source": TRACES_SOURCE,
        "requestsPerMinute": requests_per_minute(edge["count"], edge.get("firstStartedAt"), edge.get("lastStartedAt"),
                                                 end),
        "errorRate": edge["errors"] / edge["count"] if edge["count"] > 0 else None,
        "clientErrorRate": edge.get("clientErrors", 0) / edge["count"] if edge["count"] > 0 else None,
        "p50LatencyMs": percentile(durations, 50),
        "p95LatencyMs": percentile(durations, 95),
        "p99LatencyMs": percentile(durations, 99),
    }


def percentile(ordered: Sequence[float], rank: float) -> float | None:
    """Nearest-rank percentile of ascending values; None for none."""
    if not ordered:
        return None
    index = max(math.ceil(rank / 100 * len(ordered)), 1) - 1
    return float(ordered[index])


def requests_per_minute(count: int, first: str | None, last: str | None, end: float | None = None) -> float | None:
    """Calls per minute from `first` to `end` (else `last`), the span never less than MIN_RATE_SPAN_SECONDS; times
    after `end` (from a clock in the future) are taken as `end`."""
    start, stop_at = parse_rfc3339(first), parse_rfc3339(last)
    if end is not None:
        start = min(start, end) if start is not None else None
        stop_at = min(stop_at, end) if stop_at is not None else None
    stop = max(at for at in (stop_at, end, start) if at is not None) if start is not None else None
    if start is None or stop is None or count <= 0:
        return None
    return count / (max(stop - start, MIN_RATE_SPAN_SECONDS) / 60)


def _finite_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
