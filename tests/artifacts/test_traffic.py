"""topology.json and usage.json: figures from the trace feed, null where there is no feed."""

from __future__ import annotations

import pytest

from svcgen.collector.artifacts import build_topology, build_usage
from svcgen.collector.artifacts.topology import percentile
from tests.support.snapshots import NOW, counter, edge, empty_snapshot, sample_snapshot

EDGE_KEYS = {
    "client",
    "server",
    "source",
    "requestsPerMinute",
    "errorRate",
    "clientErrorRate",
    "p50LatencyMs",
    "p95LatencyMs",
    "p99LatencyMs",
}
USAGE_KEYS = {"topic", "version", "service", "transport", "status", "count", "avgDurationMs", "source"}


def test_edges_field_set_and_figures() -> None:
    document = build_topology(sample_snapshot(), generated_at=NOW)
    assert set(document) == {"generatedAtUtc", "edges"}
    measured, unmeasured = document["edges"]
    assert set(measured) == EDGE_KEYS
    assert (measured["client"], measured["server"], measured["source"]) == ("orders", "payments", "traces")
    assert measured["errorRate"] == pytest.approx(2 / 40)
    assert measured["requestsPerMinute"] == pytest.approx(40 / 10)  # 40 calls over 10 minutes
    assert (measured["p50LatencyMs"], measured["p95LatencyMs"], measured["p99LatencyMs"]) == (50.0, 95.0, 99.0)
    assert (unmeasured["client"], unmeasured["server"]) == ("web", "orders")


def test_no_durations_or_window_gives_nulls() -> None:
    document = build_topology(sample_snapshot(), generated_at=NOW)
    unmeasured = document["edges"][1]
    assert unmeasured["requestsPerMinute"] is None
    assert (
        unmeasured["p50LatencyMs"] is None and unmeasured["p95LatencyMs"] is None and unmeasured["p99LatencyMs"] is None
    )


def test_zero_length_window_and_zero_calls_give_nulls() -> None:
    snapshot = empty_snapshot()
    at = "2026-11-22T10:00:00.000Z"
    snapshot["edges"] = [edge("a", "b", 0, firstStartedAt=at, lastStartedAt=at)]
    figures = build_topology(snapshot, generated_at=NOW)["edges"][0]
    assert figures["requestsPerMinute"] is None
    assert figures["errorRate"] is None


def test_a_burst_is_rated_over_at_least_a_minute() -> None:
    snapshot = empty_snapshot()
    snapshot["edges"] = [edge("a", "b", 2, firstStartedAt="2026-11-22T10:00:00.000Z",
                              lastStartedAt="2026-11-22T10:00:00.300Z")]
    assert build_topology(snapshot, generated_at=NOW)["edges"][0]["requestsPerMinute"] == pytest.approx(2.0)
    snapshot["edges"][0]["count"] = 1
    snapshot["edges"][0]["lastStartedAt"] = snapshot["edges"][0]["firstStartedAt"]
    assert build_topology(snapshot, generated_at=NOW)["edges"][0]["requestsPerMinute"] == pytest.approx(1.0)


def test_the_rate_runs_to_the_end_of_the_trace_window() -> None:
    snapshot = empty_snapshot()
    snapshot["edges"] = [edge("a", "b", 30, firstStartedAt="2026-11-22T10:00:00.000Z",
                              lastStartedAt="2026-11-22T10:01:00.000Z")]
    # Other traffic went on for 9 more minutes after the edge's last call: 30 calls over 10 minutes.
    snapshot["counters"] = [counter("c", "c:get", "ok", 5, firstStartedAt="2026-11-22T10:00:00.000Z",
                                    lastStartedAt="2026-11-22T10:10:00.000Z")]
    assert build_topology(snapshot, generated_at=NOW)["edges"][0]["requestsPerMinute"] == pytest.approx(3.0)


def test_percentile_is_nearest_rank() -> None:
    assert percentile([], 50) is None
    assert percentile([7.0], 99) == 7.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 95) == 4.0


def test_non_finite_durations_are_ignored() -> None:
    snapshot = empty_snapshot()
    snapshot["edges"] = [edge("a", "b", 2, durations=[float("nan"), 5.0, float("inf")])]
    assert build_topology(snapshot, generated_at=NOW)["edges"][0]["p99LatencyMs"] == 5.0


def test_usage_entries_and_window() -> None:
    document = build_usage(sample_snapshot(), generated_at=NOW)
    assert set(document) == {"generatedAtUtc", "windowStartUtc", "windowEndUtc", "entries"}
    assert document["windowStartUtc"] == "2026-11-22T10:00:00.000Z"
    assert document["windowEndUtc"] == "2026-11-22T10:09:00.000Z"
    entries = document["entries"]
    assert [(e["topic"], e["version"], e["service"], e["status"]) for e in entries] == [
        ("orders:place", "v2", "orders", "ok"),
        ("payments:capture", "", "payments", "ok"),
        ("payments:capture", "", "payments", "service-unavailable"),
    ]
    for entry in entries:
        assert set(entry) == USAGE_KEYS
        assert entry["transport"] is None  # a trace event carries no transport
        assert entry["source"] == "traces"
    assert entries[0]["count"] == 12
    assert entries[0]["avgDurationMs"] == pytest.approx(12.0)  # 120 ms over the 10 timed events


def test_usage_without_timing_or_window_is_null() -> None:
    snapshot = empty_snapshot()
    snapshot["counters"] = [counter("orders", "orders:get", "ok", 3)]
    document = build_usage(snapshot, generated_at=NOW)
    assert document["windowStartUtc"] is None and document["windowEndUtc"] is None
    assert document["entries"][0]["avgDurationMs"] is None


def test_empty_traffic_has_empty_arrays() -> None:
    assert build_topology(empty_snapshot(), generated_at=NOW) == {"generatedAtUtc": NOW, "edges": []}
    assert build_usage(empty_snapshot(), generated_at=NOW) == {
        "generatedAtUtc": NOW,
        "windowStartUtc": None,
        "windowEndUtc": None,
        "entries": [],
    }


def test_one_clock_from_the_future_does_not_collapse_every_rate() -> None:
    """Issue 31: one service whose clock ran years ahead pushed the window's end out, and every rate fell to
    nearly nothing. Start times are held to the collector's own clock (the snapshot's savedAt)."""
    snapshot = empty_snapshot()
    snapshot["savedAt"] = "2026-11-22T10:10:00.000Z"
    snapshot["edges"] = [edge("a", "b", 30, firstStartedAt="2026-11-22T10:00:00.000Z",
                              lastStartedAt="2026-11-22T10:09:00.000Z"),
                         edge("x", "y", 4, firstStartedAt="2099-01-01T00:00:00.000Z",
                              lastStartedAt="2099-01-01T00:00:01.000Z")]  # fmt: skip
    rates = [e["requestsPerMinute"] for e in build_topology(snapshot, generated_at=NOW)["edges"]]
    assert rates == [pytest.approx(3.0), pytest.approx(4.0)]  # 30 calls over 10 minutes; 4 within the last minute
