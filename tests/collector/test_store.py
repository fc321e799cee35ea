"""Snapshot and stores: restart on the same file answers the same; a bad file starts empty with one warning;
a failing store never fails ingest; writes are atomic."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import orjson
import pytest

from svcgen.runtime._mesh.collector import Collector, JsonFileStore, Limits, MemoryStore, SnapshotError

from .helpers import Clock, collector, descriptor, event, heartbeat, issue, ok, topic


def populate(c: Collector) -> None:
    c.register(descriptor("shop", [topic("shop:buy")], produces=[{"id": "pay:charge"}]))
    c.register(descriptor("pay", [topic("pay:charge")], instance="p-1"))
    c.heartbeat(heartbeat("shop", digest="sha256:shop--1"))
    c.heartbeat(heartbeat("pay", instance="p-1", digest="sha256:drifted"))
    c.traces({"events": [
        event(1, service="shop", topic_id="shop:buy", trace="t" * 32, span="a" * 16),
        event(2, service="pay", topic_id="pay:charge", trace="t" * 32, span="b" * 16, parent="a" * 16,
              status="timeout"),
    ]})
    c.issues({"service": "pay", "issues": [issue("pay", exemplars=["t" * 32])]})
    c.record_poll("stock", "http://stock", spec={"service": "stock", "topics": [topic("stock:get")]},
                  health={"isHealthy": False, "healthChecks": {"db": {"status": "failed"}}}, error=None)


def answers(c: Collector) -> list[Any]:
    return [
        ok(c.query_fleet()),
        ok(c.query_service({"service": "shop"})),
        ok(c.query_service({"service": "pay"})),
        ok(c.query_topic({"topic": "pay:charge"})),
        ok(c.query_trace({"traceId": "t" * 32})),
    ]


def test_restart_on_the_same_file_gives_the_same_answers(tmp_path: Path) -> None:
    path = tmp_path / "collector.json"
    clock = Clock()
    first = collector(JsonFileStore(path), clock)
    populate(first)
    before = answers(first)
    second = collector(JsonFileStore(path), clock)
    assert answers(second) == before
    assert second.snapshot() == first.snapshot()
    # And the restored collector keeps working: the edge table continues from its counts.
    second.traces({"events": [event(3, service="pay", topic_id="pay:charge", span="c" * 16, parent="a" * 16)]})
    assert second.snapshot()["edges"][0]["count"] == 2


def test_snapshot_round_trips_through_json_and_memory_store() -> None:
    c = collector()
    populate(c)
    snapshot = orjson.loads(orjson.dumps(c.snapshot()))
    restored = collector(MemoryStore(snapshot))
    assert answers(restored) == answers(c)


@pytest.mark.parametrize("damage", ["truncate", "garbage", "not-object", "wrong-shape", "directory"])
def test_a_bad_store_file_starts_empty_with_exactly_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    path = tmp_path / "collector.json"
    c = collector(JsonFileStore(path))
    populate(c)
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        path.write_bytes(b"\x00\xffnot json")
    elif damage == "not-object":
        path.write_bytes(b"[1, 2, 3]")
    elif damage == "wrong-shape":
        snapshot = orjson.loads(data)
        snapshot["instances"] = [{"service": "pay"}]
        path.write_bytes(orjson.dumps(snapshot))
    else:
        path.unlink()
        path.mkdir()
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        fresh = collector(JsonFileStore(path))
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert ok(fresh.query_fleet()) == {"services": [], "topics": [], "issues": []}


def test_a_missing_store_file_starts_empty(tmp_path: Path) -> None:
    c = collector(JsonFileStore(tmp_path / "nothing-yet.json"))
    assert ok(c.query_fleet())["services"] == []


def test_restore_refuses_a_malformed_snapshot_and_keeps_the_state() -> None:
    c = collector()
    populate(c)
    before = c.snapshot()
    with pytest.raises(SnapshotError):
        c.restore({**before, "counters": [{"service": "x"}]})  # type: ignore[typeddict-item]
    with pytest.raises(SnapshotError):
        c.restore({**before, "format": 99})
    assert c.snapshot() == {**before, "savedAt": c.snapshot()["savedAt"]}


def test_a_store_that_cannot_save_never_breaks_ingest(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # The store's directory is a file: every save fails, as on a read-only or vanished directory (and as root).
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    clock = Clock()
    with caplog.at_level(logging.WARNING):
        c = collector(JsonFileStore(blocker / "collector.json"), clock, log_interval=60)
        caplog.clear()
        for n in range(5):
            assert ok(c.traces({"events": [event(n)]})) == {"accepted": 1}
        clock.advance(61)
        c.traces({"events": [event(99)]})
    assert c.save_failures == 6
    assert c.last_save_error == "NotADirectoryError"
    assert len([r for r in caplog.records if "failed to save" in r.getMessage()]) == 2
    assert ok(c.query_topic({"topic": "orders:get"}))["invocations"] == 6


class FailingStore(MemoryStore):
    def save(self, snapshot: Any) -> None:
        raise OSError("disk full")


def test_failing_store_is_reported_by_the_collector_health_check() -> None:
    import asyncio

    from svcgen.runtime._mesh.collector import collector_service

    c = collector(FailingStore())
    c.register(descriptor())
    report = asyncio.run(collector_service(c).check_health())
    assert report.is_healthy  # a warning: ingest and queries still work
    assert report.checks["store"].status == "warning"


def test_saves_are_atomic_and_leave_no_temp_files(tmp_path: Path) -> None:
    path = tmp_path / "collector.json"
    c = collector(JsonFileStore(path))
    for n in range(20):
        c.traces({"events": [event(n)]})
    assert [p.name for p in tmp_path.iterdir()] == ["collector.json"]
    assert len(orjson.loads(path.read_bytes())["traces"]["events"]) == 20


def test_save_interval_coalesces_and_flush_saves_the_rest() -> None:
    clock = Clock()
    store = MemoryStore()
    c = collector(store, clock, save_interval=1.0)
    for n in range(10):
        c.traces({"events": [event(n)]})
    assert store.saves == 1
    clock.advance(1.0)
    c.traces({"events": [event(10)]})
    assert store.saves == 2
    c.traces({"events": [event(11)]})
    c.flush()
    assert store.saves == 3
    assert store.snapshot is not None and len(store.snapshot["traces"]["events"]) == 12
    c.flush()
    assert store.saves == 3  # nothing changed since


def test_a_restored_window_keeps_the_configured_cap() -> None:
    c = collector()
    c.traces({"events": [event(n) for n in range(30)]})
    small = collector(MemoryStore(c.snapshot()), limits=Limits(trace_window=10))
    window = small.snapshot()["traces"]
    assert window["cap"] == 10
    assert [e["spanId"] for e in window["events"]] == [f"{n:016x}" for n in range(20, 30)]
