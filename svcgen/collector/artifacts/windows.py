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
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from ...runtime._mesh.clock import parse_rfc3339, rfc3339
from ..buckets import CELL_WIDTH, WINDOWS, BucketBook, Figures, is_server_failure, minute_of
from ..queries import spark_step
from ..snapshot import Json, Snapshot

SeriesCells = Callable[[int, int, int], Iterable[tuple[str, tuple[str, ...], list[tuple[int, Sequence[float]]]]]]
"""(first, last, resolution) → per series with cells in [first, last]: (kind `t`/`e`, key, [(minute, cell)])."""


def build_windows(snapshot: Snapshot, *, generated_at: str) -> Json:
    """From the collector's precomputed `windows` (what a running collector hands the artifact writer), else from
    the snapshot's bucket rows (a snapshot read back from a store)."""
    now = minute_of(parse_rfc3339(snapshot.get("savedAt")) or 0.0)
    held = snapshot.get("windows")
    windows = held if isinstance(held, dict) else compute_windows(_from_rows(snapshot.get("buckets", [])), now)
    return {"generatedAtUtc": generated_at, "windowEndUtc": rfc3339((now + 1) * 60), "windows": windows}


def from_book(book: BucketBook) -> SeriesCells:
    def cells(first: int, last: int, resolution: int) -> Iterator[tuple[str, tuple[str, ...], list[Any]]]:
        for kind, table in (("t", book.topics), ("e", book.edges)):
            for key, series in table.items():
                held = list(series.window(first, last))
                if held:
                    yield kind, key, held

    return cells


def _from_rows(rows: list[Any]) -> SeriesCells:
    grouped: dict[tuple[str, tuple[str, ...]], list[tuple[int, int, Sequence[float]]]] = {}
    for row in rows:
        if _well_formed(row):
            width = 6 if row[0] == "t" else 4
            grouped.setdefault((row[0], tuple(row[1:width])), []).append((row[width], row[width + 1],
                                                                          row[width + 2 :]))  # fmt: skip

    def cells(first: int, last: int, resolution: int) -> Iterator[tuple[str, tuple[str, ...], list[Any]]]:
        for (kind, key), held in grouped.items():
            inside = [(minute, cell) for step, minute, cell in held
                      if step <= resolution and first - step < minute <= last]  # fmt: skip
            if inside:
                yield kind, key, inside

    return cells


def compute_windows(series: SeriesCells, now: int) -> Json:
    """The three windows ending at minute `now`; per series its cells are summed column-wise first (in C), so the
    cost follows the series and their cells, a few operations per cell."""
    windows: Json = {}
    for name, minutes in WINDOWS.items():
        first = now - minutes + 1
        step = spark_step(minutes)
        points = math.ceil(minutes / step)
        topics: dict[tuple[str, ...], tuple[Figures, list[int], list[int]]] = {}
        edges: dict[tuple[str, ...], Figures] = {}
        for kind, key, cells in series(first, now, BucketBook.step(minutes)):
            totals = list(map(math.fsum, zip(*(cell for _, cell in cells), strict=True)))
            if kind == "e":
                edges.setdefault(key[:2], Figures()).add(key[2], totals)
                continue
            group = topics.get(key[:3])
            if group is None:
                group = topics[key[:3]] = (Figures(), [0] * points, [0] * points)
            status = key[4]
            group[0].add(status, totals)
            calls = group[1]
            for minute, cell in cells:
                calls[min(max(minute - first, 0) // step, points - 1)] += int(cell[0])
            if is_server_failure(status):
                errors = group[2]
                for minute, cell in cells:
                    errors[min(max(minute - first, 0) // step, points - 1)] += int(cell[0])
        spent = sum(figures.total_ms for figures, _, _ in topics.values()) or 1.0
        ranked = sorted(topics.items(), key=lambda item: (-item[1][0].errors, -item[1][0].total_ms, item[0]))
        windows[name] = {
            "since": rfc3339(first * 60),
            "until": rfc3339((now + 1) * 60),
            "topics": [
                {"service": key[0], "topic": key[1], "version": key[2], **figures.wire(minutes),
                 "impact": figures.total_ms / spent,
                 "sparkline": {"stepMinutes": step, "calls": calls, "errors": errors}}
                for key, (figures, calls, errors) in ranked
            ],
            "edges": [{"client": key[0], "server": key[1], **figures.wire(minutes)}
                      for key, figures in sorted(edges.items())],
        }
    return windows


def _well_formed(row: Any) -> bool:
    if not isinstance(row, list) or not row or row[0] not in ("t", "e"):
        return False
    width = (8 if row[0] == "t" else 6) + CELL_WIDTH
    return len(row) == width and isinstance(row[width - CELL_WIDTH - 1], int) and row[width - CELL_WIDTH - 2] in (1, 10)
