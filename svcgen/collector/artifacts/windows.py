"""windows.json: what happened in the last 5 minutes, hour and day, from the collector's time buckets.

`{generatedAtUtc, windowEndUtc, windows: {"5m"|"1h"|"24h": {since, until, topics: [...], edges: [...]}}}`. Each
topic entry is one (service, topic, version) with calls in the window: exact `invocations`, `errors` (server-side:
5xx, exceptions), `clientErrors` (4xx), their rates, `requestsPerMinute`, p50/p95/p99 from the histograms, `impact`
(its share of the window's call time) and a `sparkline` (calls and server-side failures per step, at most 60
steps), ranked by server-side failures, then impact. Each edge entry is one client → server pair with the same
figures. The 5m and 1h windows are read by minute, the 24h one by ten minutes. A window ends with the minute the
snapshot was taken; figures not known are omitted.
"""

from __future__ import annotations

import math
from typing import Any

from ...runtime._mesh.clock import parse_rfc3339, rfc3339
from ..buckets import CELL_WIDTH, WINDOWS, BucketBook, Figures, is_server_failure, minute_of
from ..queries import spark_step
from ..snapshot import Json, Snapshot


def build_windows(snapshot: Snapshot, *, generated_at: str) -> Json:
    now = minute_of(parse_rfc3339(snapshot.get("savedAt")) or 0.0)
    windows: Json = {}
    rows = [row for row in snapshot.get("buckets", []) if _well_formed(row)]
    for name, minutes in WINDOWS.items():
        first = now - minutes + 1
        resolution = BucketBook.step(minutes)
        step = spark_step(minutes)
        points = math.ceil(minutes / step)
        topics: dict[tuple[str, str, str], tuple[Figures, list[int], list[int]]] = {}
        edges: dict[tuple[str, str], Figures] = {}
        for row in rows:
            if row[0] == "t":
                minute, cell, status = row[7], row[8:], row[5]
                if row[6] > resolution or not first - row[6] < minute <= now:
                    continue
                group = topics.get((row[1], row[2], row[3]))
                if group is None:
                    group = topics[(row[1], row[2], row[3])] = (Figures(), [0] * points, [0] * points)
                group[0].add(status, cell)
                point = min(max(minute - first, 0) // step, points - 1)
                group[1][point] += int(cell[0])
                if is_server_failure(status):
                    group[2][point] += int(cell[0])
            else:
                minute, cell = row[5], row[6:]
                if row[4] <= resolution and first - row[4] < minute <= now:
                    edges.setdefault((row[1], row[2]), Figures()).add(row[3], cell)
        spent = sum(figures.total_ms for figures, _, _ in topics.values()) or 1.0
        ranked = sorted(topics.items(), key=lambda item: (-item[1][0].errors, -item[1][0].total_ms, item[0]))
        windows[name] = {
            "since": rfc3339(first * 60),
            "until": rfc3339((now + 1) * 60),
            "topics": [
                {"service": service, "topic": topic, "version": version, **figures.wire(minutes),
                 "impact": figures.total_ms / spent,
                 "sparkline": {"stepMinutes": step, "calls": calls, "errors": errors}}
                for (service, topic, version), (figures, calls, errors) in ranked
            ],
            "edges": [{"client": client, "server": server, **figures.wire(minutes)}
                      for (client, server), figures in sorted(edges.items())],
        }
    return {"generatedAtUtc": generated_at, "windowEndUtc": rfc3339((now + 1) * 60), "windows": windows}


def _well_formed(row: Any) -> bool:
    if not isinstance(row, list) or not row or row[0] not in ("t", "e"):
        return False
    width = (8 if row[0] == "t" else 6) + CELL_WIDTH
    return len(row) == width and isinstance(row[width - CELL_WIDTH - 1], int) and row[width - CELL_WIDTH - 2] in (1, 10)
