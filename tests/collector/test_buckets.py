"""Time buckets: per-minute counts and latency histograms, windows, percentiles, bounds, and the window queries."""

from __future__ import annotations

import pytest

from svcgen.collector import CollectorLimits
from svcgen.collector.artifacts import build_windows
from svcgen.collector.buckets import BINS, SERIES_BYTES, BucketBook, Figures, MinuteReader, parse_window
from svcgen.runtime._mesh.clock import rfc3339
from tests.support.feeds import Clock, collector, event, ok

MINUTE0 = 29_000_000


def test_windows_are_named_and_anything_else_is_refused_with_the_choices() -> None:
    assert [parse_window(name) for name in ("5m", "1h", "24h")] == [5, 60, 1440]
    with pytest.raises(ValueError, match="5m, 1h, 24h"):
        parse_window("2d")


def test_the_minute_of_a_stored_start_time() -> None:
    read = MinuteReader()
    assert read("1970-01-01T00:01:59.999Z") == 1
    assert read("2026-11-22T10:00:00.000Z") == read("2026-11-22T10:00:59.999Z") != read("2026-11-22T10:01:00.000Z")
    assert read(None) is None and read("garbage") is None


def test_counts_are_exact_per_minute_and_a_window_sums_only_its_minutes() -> None:
    book = BucketBook()
    key = ("orders", "orders:get", "v1", "http", "ok")
    for minute in range(MINUTE0, MINUTE0 + 10):
        for _ in range(minute - MINUTE0 + 1):
            book.count_topic(key, minute, 3.0)
    first, last = book.span(5)
    assert (first, last) == (MINUTE0 + 5, MINUTE0 + 9)
    figures = Figures()
    for found_key, _, cell in book.topic_cells("orders:get", first, last):
        figures.add(found_key[4], cell)
    assert figures.invocations == 6 + 7 + 8 + 9 + 10
    assert figures.wire(5)["requestsPerMinute"] == 40 / 5
    assert figures.wire(5)["avgDurationMs"] == 3.0


def test_percentiles_come_from_the_histogram_within_one_bins_width() -> None:
    book = BucketBook()
    key = ("orders", "orders:get", "", "", "ok")
    for duration in range(1, 101):  # 1..100 ms
        book.count_topic(key, MINUTE0, float(duration))
    figures = Figures()
    for _, _, cell in book.topic_cells("orders:get", MINUTE0, MINUTE0):
        figures.add("ok", cell)
    p50, p95, p99 = figures.percentile(50), figures.percentile(95), figures.percentile(99)
    assert p50 is not None and 25 <= p50 <= 50  # the true p50 (50 ms) lies in the 25-50 ms bin
    assert p95 is not None and 50 <= p95 <= 100
    assert p99 is not None and 50 <= p99 <= 100
    assert Figures().percentile(50) is None


def test_server_side_failures_and_client_answers_are_apart_in_a_window() -> None:
    book = BucketBook()
    for status, calls in (("ok", 5), ("not-found", 3), ("timeout", 2)):
        book.count_topic(("pay", "pay:charge", "", "", status), MINUTE0, None, calls)
    figures = Figures()
    for key, _, cell in book.topic_cells("pay:charge", MINUTE0, MINUTE0):
        figures.add(key[4], cell)
    assert (figures.invocations, figures.errors, figures.client_errors) == (10, 2, 3)
    wire = figures.wire(1)
    assert (wire["errorRate"], wire["clientErrorRate"]) == (0.2, 0.3)
    assert "p50LatencyMs" not in wire  # no durations: not known, so not said


def test_a_window_sees_only_its_minutes_a_call_past_the_retention_is_not_counted_and_silent_series_go() -> None:
    book = BucketBook(retention=120)
    key, silent = ("orders", "orders:get", "", "", "ok"), ("orders", "orders:old", "", "", "ok")
    book.count_topic(key, MINUTE0, 1.0)
    book.count_topic(silent, MINUTE0, 1.0)
    assert book.count_topic(key, MINUTE0 + 200, 1.0)  # the clock moved past the retention (and an hour boundary)
    assert [minute for _, minute, _ in book.topic_cells("orders:get", *book.span(60))] == [MINUTE0 + 200]
    assert not book.count_topic(key, MINUTE0 + 50, 1.0)  # older than the retention: not counted
    assert "orders:old" not in book.by_topic and silent not in book.topics
    # A long window is read in ten-minute periods, and holds no more than the retention: the newest call only.
    assert sum(cell[0] for _, _, cell in book.topic_cells("orders:get", *book.span(1440))) == 1


def test_memory_per_series_is_fixed_whatever_the_traffic() -> None:
    book = BucketBook()
    for minute in range(MINUTE0, MINUTE0 + 1440):
        book.count_topic(("orders", "orders:get", "", "", "ok"), minute, 3.0)
    (series,) = book.topics.values()
    size = series.recent.values.buffer_info()[1] * 8 + series.recent.stamps.buffer_info()[1] * 8
    assert series.older is not None
    size += series.older.values.buffer_info()[1] * 8 + series.older.stamps.buffer_info()[1] * 8
    assert size == SERIES_BYTES
    assert book.cells() <= 60 + 144


def test_series_are_bounded_least_recently_counted_first() -> None:
    book = BucketBook(max_series=3)
    for n in range(5):
        book.count_topic(("s", f"t:{n}", "", "", "ok"), MINUTE0, 1.0)
    assert len(book.topics) == 3 and book.evicted == 2
    assert set(book.by_topic) == {"t:2", "t:3", "t:4"}


def test_a_snapshot_restores_the_same_cells() -> None:
    book = BucketBook()
    book.count_topic(("orders", "orders:get", "v1", "nats", "ok"), MINUTE0, 12.0)
    book.count_edge(("shop", "orders", "timeout"), MINUTE0 + 1, None)
    again = BucketBook()
    again.restore(book.snapshot())
    assert again.snapshot() == book.snapshot()
    assert len(book.snapshot()[0]) == 8 + 3 + BINS  # kind, key, step, minute; count, timed, total; the bins
    with pytest.raises(ValueError):
        again.restore([["t", "a", "b", "", "", "ok", 1, MINUTE0, -1.0] + [0.0] * (2 + BINS)])


@pytest.mark.usefixtures("any_store")
def test_window_queries_count_what_the_store_newly_accepted_once() -> None:
    clock = Clock()
    c = collector(clock=clock, limits=CollectorLimits())
    batch = {"events": [event(n, status="ok" if n % 4 else "service-unavailable", duration=float(n))
                        for n in range(1, 41)], "batchId": "b-1"}  # fmt: skip
    assert ok(c.traces(batch)) == {"accepted": 40}
    c.traces(batch)  # redelivered: counted once
    c.traces({"events": batch["events"][:10]})  # the same events without a batch id: counted once
    answer = ok(c.query_topic({"topic": "orders:get", "window": "1h"}))
    window = answer["window"]
    assert (window["window"], window["invocations"], window["errors"], window["clientErrors"]) == ("1h", 40, 10, 0)
    assert window["statusCounts"] == {"ok": 30, "service-unavailable": 10}
    assert window["errorRate"] == 0.25
    assert [version["version"] for version in window["versions"]] == [""]
    assert 10 <= window["p50LatencyMs"] <= 25 and window["p99LatencyMs"] <= 50
    assert sum(window["sparkline"]["calls"]) == 40 and sum(window["sparkline"]["errors"]) == 10
    assert len(window["sparkline"]["calls"]) == 60
    fleet = ok(c.query_fleet({"window": "5m"}))
    (top,) = fleet["ranking"]
    assert (top["topic"], top["errors"], top["impact"]) == ("orders:get", 10, 1.0)
    clock.advance(2 * 3600)  # two hours later the hour window is empty; the day still holds them
    assert ok(c.query_topic({"topic": "orders:get", "window": "1h"}))["window"]["invocations"] == 0
    assert ok(c.query_topic({"topic": "orders:get", "window": "24h"}))["window"]["invocations"] == 40
    assert c.query_topic({"topic": "orders:get", "window": "7d"}).status == "bad-request"


def test_windows_json_is_the_same_from_a_running_collector_and_from_its_stored_snapshot() -> None:
    clock = Clock()
    c = collector(clock=clock)
    for minute in range(90):  # an hour and a half: some minutes folded into ten-minute periods already
        c.traces({"events": [{**event(minute * 10 + n, status="timeout" if n == 3 else "ok", duration=float(n + 1)),
                              "startedAt": rfc3339(clock.now - (89 - minute) * 60)} for n in range(4)]})  # fmt: skip
    live = build_windows(c.artifact_snapshot(), generated_at="x")
    stored = build_windows(c.snapshot(), generated_at="x")
    assert live == stored
    day = {row["topic"]: row for row in live["windows"]["24h"]["topics"]}["orders:get"]
    hour = {row["topic"]: row for row in live["windows"]["1h"]["topics"]}["orders:get"]
    assert (day["invocations"], day["errors"]) == (360, 90)
    assert (hour["invocations"], hour["errors"]) == (240, 60)
    assert sum(hour["sparkline"]["calls"]) == 240 and sum(day["sparkline"]["errors"]) == 90
