"""topology.json: client → server edges found in the traces, with rate, error rate and latency.

Every figure comes from the trace feed (`source: "traces"`) and is null when its input is missing:
percentiles (nearest rank, so each is a duration actually observed) need recent durations; the rate
needs a first and a last start time at least a moment apart; the error rate needs at least one call.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

from ..clock import parse_rfc3339
from ..collector.snapshot import EdgeEntry, Json, Snapshot

TRACES_SOURCE: Final = "traces"


def build_topology(snapshot: Snapshot, *, generated_at: str) -> Json:
    edges = sorted(snapshot["edges"], key=lambda edge: (edge["client"], edge["server"]))
    return {"generatedAtUtc": generated_at, "edges": [edge_figures(edge) for edge in edges]}


def edge_figures(edge: EdgeEntry) -> Json:
    durations = sorted(d for d in edge["recentDurationsMs"] if _finite_number(d))
    return {
        "client": edge["client"],
        "server": edge["server"],
        "source": TRACES_SOURCE,
        "requestsPerMinute": requests_per_minute(edge["count"], edge.get("firstStartedAt"), edge.get("lastStartedAt")),
        "errorRate": edge["errors"] / edge["count"] if edge["count"] > 0 else None,
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


def requests_per_minute(count: int, first: str | None, last: str | None) -> float | None:
    start, end = parse_rfc3339(first), parse_rfc3339(last)
    if start is None or end is None or end <= start:
        return None
    return count / ((end - start) / 60)


def _finite_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
