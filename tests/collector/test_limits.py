"""Hostile and heavy input (issue 18): every value accepted can be written and read back, documents are bounded
in bytes and depth, what a limit drops is counted, retried batches count once, unchanged specs are not stored
again."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from svcgen.collector import Collector, CollectorLimits, JsonFileStore
from tests.support.feeds import collector, descriptor, event, heartbeat, issue, ok, topic


def restarted(path: Path, **options: Any) -> Collector:
    """A second collector on the same store, as after a restart (the first one never flushed)."""
    return collector(JsonFileStore(path), **options)


def nested(depth: int) -> dict[str, Any]:
    document: dict[str, Any] = {}
    for _ in range(depth - 1):
        document = {"a": document}
    return document


def log_bytes(directory: Path) -> int:
    return sum(path.stat().st_size for path in directory.iterdir() if path.name.endswith(".log"))


def test_an_event_whose_duration_would_overflow_the_sums_is_skipped_and_the_rest_taken(tmp_path: Path) -> None:
    path = tmp_path / "collector.json"
    c = collector(JsonFileStore(path))
    assert ok(c.traces({"events": [event(1, duration=9e15)]})) == {"accepted": 1}
    assert ok(c.traces({"events": [event(2), event(3, duration=1.7e308)]})) == {"accepted": 1}
    assert ok(c.query_fleet())["dropped"]["skipped"] == 1
    again = restarted(path)
    assert ok(again.query_topic({"topic": "orders:get"}))["invocations"] == 2
    assert again.snapshot()["counters"][0]["totalDurationMs"] == 9e15 + 2.0


def test_issue_counts_beyond_64_bits_are_skipped_and_sums_saturate(tmp_path: Path) -> None:
    path = tmp_path / "collector.json"
    c = collector(JsonFileStore(path))
    skipped = c.issues({"service": "orders", "issues": [issue(count=18446744073709551615)]})
    assert ok(skipped) == {"accepted": 0}
    assert ok(c.query_fleet())["dropped"]["skipped"] == 1
    assert ok(c.issues({"service": "orders", "issues": [issue(count=2**63 - 1)]})) == {"accepted": 1}
    assert ok(c.issues({"service": "orders", "issues": [issue(count=1)]})) == {"accepted": 1}
    assert ok(c.query_fleet())["issues"][0]["count"] == 2**63 - 1
    assert ok(c.register(descriptor("later"))) == {"accepted": 1}
    again = restarted(path)
    fleet = ok(again.query_fleet())
    assert fleet["issues"][0]["count"] == 2**63 - 1
    assert "later" in [entry["service"] for entry in fleet["services"]]


@pytest.mark.usefixtures("any_store")
@pytest.mark.parametrize("value", [float("nan"), float("inf"), 2**64, -(2**63) - 1])
def test_a_descriptor_with_an_unstorable_number_is_refused_with_its_path(value: Any) -> None:
    c = collector()
    body = descriptor("orders", [topic("orders:get", {"type": "object", "maximum": value})])
    refused = c.register(body)
    assert refused.status == "bad-request"
    assert refused.detail == (
        "register: descriptor.topics[0].requestSchema.maximum "
        + ("is not a finite number" if isinstance(value, float) else "is an integer outside 64 bits")
    )
    assert ok(c.query_fleet())["services"] == []


def test_a_polled_spec_nested_too_deeply_is_a_failed_poll_and_saving_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "collector.json"
    c = collector(JsonFileStore(path))
    deep = {"service": "stock", "topics": [topic("stock:get", nested(253))]}
    c.record_poll("stock", "http://stock", spec=deep, health=None, error=None)
    poll = c.snapshot()["polls"][0]
    assert poll["ok"] is False and "spec.topics[0].requestSchema" in poll["error"]
    assert "nested deeper than 64 levels" in poll["error"]
    assert all("spec" not in entry for entry in c.snapshot()["catalog"])
    c.register(descriptor("orders"))
    c.flush()
    again = restarted(path)
    assert [s["service"] for s in ok(again.query_fleet())["services"]] == ["orders", "stock"]


@pytest.mark.usefixtures("any_store")
def test_documents_are_limited_in_bytes_and_the_catalog_by_a_byte_budget() -> None:
    limits = CollectorLimits(descriptor_bytes=20_000, health_bytes=2_000, spec_bytes=20_000, catalog_bytes=50_000)
    c = collector(limits=limits)
    padding = {"description": "x" * 30_000}
    refused = c.register(descriptor("big", [topic("big:get", padding)]))
    assert refused.status == "bad-request" and refused.detail is not None
    assert "descriptor is" in refused.detail and "more than the limit of 20000" in refused.detail
    beat = heartbeat("orders")
    beat["health"]["healthChecks"] = {f"check{n}": {"status": "ok", "detail": "y" * 100} for n in range(50)}
    assert c.heartbeat(beat).status == "bad-request"
    # Ten descriptors of some 15 KB each: the 50 KB budget keeps the newest three, the rest are counted.
    for n in range(10):
        assert ok(c.register(descriptor(f"svc{n}", [topic(f"svc{n}:get", {"description": "z" * 15_000})])))
    assert [entry["service"] for entry in c.snapshot()["catalog"]] == ["svc7", "svc8", "svc9"]
    fleet = ok(c.query_fleet())
    assert fleet["dropped"]["catalog"] == 7
    assert fleet["dropped"]["refused"] == 2


@pytest.mark.usefixtures("any_store")
def test_a_large_health_in_a_poll_is_a_failed_poll_never_stored() -> None:
    c = collector(limits=CollectorLimits(health_bytes=1_000))
    health = {"isHealthy": True, "healthChecks": {"db": {"status": "ok", "detail": "d" * 2_000}}}
    c.record_poll("stock", "http://stock", spec=None, health=health, error=None)
    (poll,) = c.snapshot()["polls"]
    assert poll["ok"] is False and "health is" in poll["error"] and "health" not in poll


def test_made_up_statuses_are_folded_and_never_fill_the_counter_table(tmp_path: Path) -> None:
    path = tmp_path / "collector.json"
    c = collector(JsonFileStore(path))
    for batch in range(2):
        made_up = [event(batch * 5_000 + n, status=f"weird-{batch}-{n}") for n in range(5_000)]
        assert ok(c.traces({"events": made_up})) == {"accepted": 5_000}
    assert ok(c.traces({"events": [event(20_000, status="timeout")]})) == {"accepted": 1}
    topic_answer = ok(c.query_topic({"topic": "orders:get"}))
    assert topic_answer["statusCounts"] == {"other": 10_000, "timeout": 1}
    assert topic_answer["errors"] == 10_001  # a status outside the table counts as a failure, as before
    assert ok(c.query_fleet())["dropped"]["otherStatuses"] == 10_000
    assert ok(restarted(path).query_topic({"topic": "orders:get"}))["statusCounts"]["timeout"] == 1


@pytest.mark.usefixtures("any_store")
def test_a_full_counter_table_makes_room_and_counts_what_it_evicted(caplog: pytest.LogCaptureFixture) -> None:
    c = collector(limits=CollectorLimits(counters=3))
    with caplog.at_level(logging.WARNING):
        for n in range(5):
            c.traces({"events": [event(n, topic_id=f"t:{n}")]})
    assert ok(c.query_topic({"topic": "t:4"}))["invocations"] == 1  # a new key is never refused
    assert ok(c.query_fleet())["dropped"]["counters"] == 2
    assert any("limits dropped" in record.getMessage() for record in caplog.records)


@pytest.mark.usefixtures("any_store")
def test_the_trace_window_is_bounded_in_bytes() -> None:
    c = collector(limits=CollectorLimits(trace_window_bytes=20_000))
    c.traces({"events": [{**event(n), "correlationId": "c" * 200} for n in range(500)]})
    window = c.snapshot()["traces"]
    assert 0 < len(window["events"]) < 100
    assert window["dropped"] == 500 - len(window["events"])
    assert ok(c.query_topic({"topic": "orders:get"}))["invocations"] == 500  # the counters keep every event


@pytest.mark.parametrize("feed", ["traces", "issues"])
def test_a_retried_batch_is_answered_again_and_counted_once_across_a_restart(tmp_path: Path, feed: str) -> None:
    path = tmp_path / "collector.json"
    c = collector(JsonFileStore(path))

    def send(target: Collector, batch_id: str | None) -> Any:
        if feed == "traces":
            body: dict[str, Any] = {"events": [event(1), event(2), {"broken": True}]}
        else:
            body = {"service": "orders", "issues": [issue(count=3), issue(fingerprint="e" * 32)]}
        if batch_id is not None:
            body["batchId"] = batch_id
        return ok(getattr(target, feed)(body))

    first = send(c, "batch-1")
    assert send(c, "batch-1") == first
    again = restarted(path)
    assert send(again, "batch-1") == first
    send(again, None)
    send(again, None)  # without a batchId an issue batch counts every arrival; an event is unique by its span
    if feed == "traces":
        assert ok(again.query_topic({"topic": "orders:get"}))["invocations"] == 2
        assert again.dropped()["skipped"] == 3
    else:
        counts = sorted(entry["count"] for entry in ok(again.query_fleet())["issues"])
        assert counts == [3, 9]
    assert ok(again.query_fleet())["dropped"]["duplicateBatches"] == 1


@pytest.mark.usefixtures("any_store")
def test_an_invalid_batch_id_is_bad_request() -> None:
    assert collector().traces({"events": [], "batchId": 7}).status == "bad-request"
    assert collector().issues({"service": "s", "issues": [], "batchId": ""}).status == "bad-request"


def test_an_unchanged_spec_is_not_stored_again(tmp_path: Path) -> None:
    path = tmp_path / "collector.json"
    c = collector(JsonFileStore(path, compact_after=2**30))
    spec = {"service": "stock", "topics": [topic(f"stock:op{n}", {"description": "s" * 100}) for n in range(200)]}
    c.record_poll("stock", "http://stock", spec=spec, health=None, error=None)
    first = log_bytes(tmp_path)
    assert first > 20_000
    for _ in range(10):
        c.record_poll("stock", "http://stock", spec=spec, health=None, error=None)  # the poller's same object
    c.record_poll("stock", "http://stock", spec={**spec}, health=None, error=None)  # an equal copy
    assert log_bytes(tmp_path) - first < 11 * 300
    entry = c.snapshot()["catalog"][0]
    assert "previousSpecHash" not in entry
    changed = {**spec, "topics": spec["topics"][:-1]}
    c.record_poll("stock", "http://stock", spec=changed, health=None, error=None)
    assert c.snapshot()["catalog"][0]["previousSpecHash"] == entry["specHash"]
    assert restarted(path).snapshot()["catalog"][0]["spec"] == changed


def test_the_longest_durations_sum_past_64_bits_and_still_reload(tmp_path: Path) -> None:
    path = tmp_path / "collector.json"
    c = collector(JsonFileStore(path))
    assert ok(c.traces({"events": [event(n, duration=2.0**53) for n in range(2_000)]})) == {"accepted": 2_000}
    c.flush()
    total = collector(JsonFileStore(path)).snapshot()["counters"][0]["totalDurationMs"]
    assert total == 2_000 * 2.0**53 > 2**63


def test_text_json_cannot_carry_is_refused_not_acknowledged(tmp_path: Path) -> None:
    c = collector(JsonFileStore(tmp_path / "collector.json"))
    refused = c.traces({"events": [event(1, status="\ud800")]})  # a lone surrogate: no UTF-8 for it
    assert refused.status == "bad-request" and "cannot be written as JSON" in (refused.detail or "")
    assert c.store_problem is None and c.query_topic({"topic": "orders:get"}).status == "not-found"
    descriptor_refused = c.register(descriptor("orders", [topic("orders:get", {"title": "\udfff"})]))
    assert descriptor_refused.status == "bad-request"
