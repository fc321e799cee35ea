"""Snapshot and stores: restart on the same store answers the same; every accepted change is in the log before
it is answered; an unreadable store is moved aside, never overwritten; a store that cannot take a change makes
the feed fail and the collector unhealthy; compaction leaves one snapshot and no temp files."""

from __future__ import annotations

import asyncio
import errno
import itertools
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from svcgen.collector import (
    Collector,
    CollectorLimits,
    JsonFileStore,
    MemoryStore,
    SnapshotError,
    StoreError,
    StoreInUse,
    collector_service,
)
from svcgen.collector import store as store_module
from tests.support.feeds import Clock, collector, crash, descriptor, event, heartbeat, issue, memory, ok, topic


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


def files(directory: Path) -> list[str]:
    """The store's files but its lock file (held while a collector runs on it)."""
    return sorted(path.name for path in directory.iterdir() if not path.name.endswith(".lock"))


@pytest.mark.parametrize("flushed", [False, True], ids=["from-the-log", "from-the-snapshot"])
def test_restart_on_the_same_store_gives_the_same_answers(tmp_path: Path, flushed: bool) -> None:
    path = tmp_path / "collector.json"
    clock = Clock()
    first = collector(JsonFileStore(path), clock)
    populate(first)
    before = answers(first)
    if flushed:
        first.flush()
    second = collector(JsonFileStore(path), clock)
    assert answers(second) == before
    assert second.snapshot() == first.snapshot()
    # And the restored collector keeps working: the edge table continues from its counts.
    second.traces({"events": [event(3, service="pay", topic_id="pay:charge", span="c" * 16, parent="a" * 16)]})
    assert second.snapshot()["edges"][0]["count"] == 2


def test_every_accepted_change_is_in_the_log_before_the_answer(tmp_path: Path) -> None:
    # No flush, no close: what a SIGKILL right after the answer leaves behind is enough to restore.
    path = tmp_path / "collector.json"
    c = collector(JsonFileStore(path))
    assert ok(c.traces({"events": [event(1)]})) == {"accepted": 1}
    restored = collector(JsonFileStore(path))
    assert ok(restored.query_topic({"topic": "orders:get"}))["invocations"] == 1


def test_a_change_costs_one_log_line_not_a_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "collector.json"
    c = collector(JsonFileStore(path))
    c.traces({"events": [event(n) for n in range(2_000)]})
    sizes = []
    for n in range(5):
        log = [p for p in tmp_path.iterdir() if p.name.endswith(".log")]
        sizes.append(sum(p.stat().st_size for p in log))
        c.traces({"events": [event(10_000 + n)]})
    growth = {b - a for a, b in itertools.pairwise(sizes)}
    assert len(growth) == 1 and growth.pop() < 1_000  # one short line each, whatever the state holds


def test_the_log_is_compacted_into_the_snapshot_once_it_outgrows_it(tmp_path: Path) -> None:
    path = tmp_path / "collector.json"
    store = JsonFileStore(path, compact_after=20_000)
    c = collector(store)
    for n in range(300):
        c.traces({"events": [event(n)]})
    c.flush()
    assert files(tmp_path) == ["collector.json"]  # one snapshot, no segment, no temp file
    assert len(orjson.loads(path.read_bytes())["traces"]["events"]) == 300
    assert ok(collector(JsonFileStore(path)).query_topic({"topic": "orders:get"}))["invocations"] == 300


def test_a_line_cut_short_by_a_kill_is_ignored_and_writing_goes_on_in_a_new_segment(tmp_path: Path) -> None:
    path = tmp_path / "collector.json"
    c = collector(JsonFileStore(path))
    c.traces({"events": [event(1)]})
    (segment,) = [p for p in tmp_path.iterdir() if p.name.endswith(".log")]
    with segment.open("ab") as log:
        log.write(b'{"op": "traces", "at": "2027-')  # a write the collector never acknowledged
    restarted = collector(JsonFileStore(path))
    restarted.traces({"events": [event(2)]})
    again = collector(JsonFileStore(path))
    assert ok(again.query_topic({"topic": "orders:get"}))["invocations"] == 2


@pytest.mark.parametrize("damage", ["truncate", "garbage", "not-object", "wrong-shape", "directory", "bad-log-line"])
def test_an_unreadable_store_is_moved_aside_with_one_warning_and_the_collector_starts_empty(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    path = tmp_path / "collector.json"
    c = collector(JsonFileStore(path))
    populate(c)
    c.flush()
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
    elif damage == "directory":
        path.unlink()
        path.mkdir()
    else:
        (tmp_path / "collector.json.000009.log").write_bytes(b'{"op": "traces"}\nnot json\n{"op": "traces"}\n')
    damaged = {name: (tmp_path / name) for name in files(tmp_path)}
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        fresh = collector(JsonFileStore(path))
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, warnings
    assert ok(fresh.query_fleet())["services"] == []
    # Every damaged file is kept under a new name, and that name is in the warning.
    aside = [name for name in files(tmp_path) if ".corrupt-" in name]
    assert sorted(name.split(".corrupt-")[0] for name in aside) == sorted(damaged)
    assert all(name in warnings[0] for name in aside)
    # The collector goes on with an empty store, and what it takes now survives a restart.
    fresh.register(descriptor("after"))
    assert [s["service"] for s in ok(collector(JsonFileStore(path)).query_fleet())["services"]] == ["after"]


def test_a_directory_holding_files_is_never_moved_aside_as_a_corrupt_store(tmp_path: Path) -> None:
    # Only the store's own files go aside: a directory given as the store path keeps what it holds, where it is.
    path = tmp_path / "collector.json"
    path.mkdir()
    (path / "someone-elses.txt").write_text("kept")
    with pytest.raises(StoreError, match="is a directory"):
        collector(JsonFileStore(path))
    assert sorted(entry.name for entry in tmp_path.iterdir() if not entry.name.endswith(".lock")) == [
        "collector.json"]
    assert (path / "someone-elses.txt").read_text() == "kept"


def test_stale_temp_files_of_a_killed_compaction_are_removed_at_start(tmp_path: Path) -> None:
    path = tmp_path / "collector.json"
    collector(JsonFileStore(path)).register(descriptor())
    stale = tmp_path / ".collector.json.k1ll3d.tmp"
    stale.write_bytes(b"x" * 10_000)
    other = tmp_path / ".other.json.abc.tmp"  # not ours: left alone
    other.write_bytes(b"")
    collector(JsonFileStore(path))
    assert not stale.exists() and other.exists()


def test_a_missing_store_file_starts_empty(tmp_path: Path) -> None:
    c = collector(JsonFileStore(tmp_path / "nothing-yet.json"))
    assert ok(c.query_fleet())["services"] == []


def test_restore_refuses_a_malformed_snapshot_and_keeps_the_state() -> None:
    c = collector()
    populate(c)
    before = c.snapshot()
    with pytest.raises(SnapshotError):
        memory(c).restore({**before, "counters": [{"service": "x"}]})  # type: ignore[typeddict-item]
    with pytest.raises(SnapshotError):
        memory(c).restore({**before, "format": 99})
    with pytest.raises(SnapshotError):
        memory(c).restore(before, [{"op": "traces", "at": "2027-01-15T08:00:00.000Z"}])  # a change without events
    assert c.snapshot() == {**before, "savedAt": c.snapshot()["savedAt"]}


def test_a_store_that_cannot_write_refuses_the_feed_and_makes_the_collector_unhealthy(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The store's directory is a file: every write fails, as on a read-only or vanished directory (and as root).
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    clock = Clock()
    with caplog.at_level(logging.WARNING):
        c = collector(JsonFileStore(blocker / "collector.json"), clock, log_interval=60)
        caplog.clear()
        answers = [c.traces({"events": [event(n)]}) for n in range(5)]
        clock.advance(61)
        answers.append(c.traces({"events": [event(99)]}))
    assert {answer.status for answer in answers} == {"service-unavailable"}
    assert "cannot be written" in (answers[0].detail or "")
    assert c.store_failures == 6
    assert len([r for r in caplog.records if "cannot persist" in r.getMessage()]) == 2
    # Nothing was acknowledged, so nothing is counted that could be lost.
    assert c.query_topic({"topic": "orders:get"}).status == "not-found"
    report = asyncio.run(collector_service(c).check_health())
    assert not report.is_healthy
    assert report.checks["store"].status == "failed"
    assert "cannot be written" in (report.checks["store"].detail or "")


def test_a_store_that_recovers_makes_the_collector_healthy_again(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    c = collector(JsonFileStore(state / "collector.json"))
    c.register(descriptor())
    for segment in state.iterdir():
        segment.unlink()
    state.rmdir()
    state.write_text("in the way")
    assert c.traces({"events": [event(1)]}).status == "service-unavailable"
    state.unlink()
    state.mkdir()
    assert ok(c.traces({"events": [event(2)]})) == {"accepted": 1}
    assert c.store_problem is None
    c.flush()
    # The register, whose log segment was removed under the collector, is in the next snapshot.
    restored = collector(JsonFileStore(state / "collector.json"))
    assert [s["service"] for s in ok(restored.query_fleet())["services"]] == ["orders"]
    assert ok(restored.query_topic({"topic": "orders:get"}))["invocations"] == 1


def test_the_memory_store_is_handed_the_snapshot_on_flush() -> None:
    store = MemoryStore()
    c = collector(store)
    c.traces({"events": [event(n) for n in range(12)]})
    assert store.snapshot is None
    c.flush()
    assert store.snapshot is not None and len(store.snapshot["traces"]["events"]) == 12
    restored = collector(MemoryStore(store.snapshot))
    assert answers_of_orders(restored) == answers_of_orders(c)


def answers_of_orders(c: Collector) -> Any:
    return ok(c.query_topic({"topic": "orders:get"}))


def test_snapshot_round_trips_through_json_and_memory_store() -> None:
    c = collector()
    populate(c)
    snapshot = orjson.loads(orjson.dumps(c.snapshot()))
    restored = collector(MemoryStore(snapshot))
    assert answers(restored) == answers(c)


def test_a_restored_window_keeps_the_configured_cap() -> None:
    c = collector()
    c.traces({"events": [event(n) for n in range(30)]})
    small = collector(MemoryStore(c.snapshot()), limits=CollectorLimits(trace_window=10))
    window = small.snapshot()["traces"]
    assert window["cap"] == 10
    assert [e["spanId"] for e in window["events"]] == [f"{n:016x}" for n in range(20, 30)]


def test_changes_after_a_restart_on_a_compacted_store_survive_the_next_restart(tmp_path: Path) -> None:
    path = tmp_path / "collector.json"
    for n in range(3):
        c = collector(JsonFileStore(path))
        c.traces({"events": [event(n)]})
        if n == 0:
            c.flush()  # the snapshot now says which log segments it holds; new ones must come after them
    assert ok(collector(JsonFileStore(path)).query_topic({"topic": "orders:get"}))["invocations"] == 3


def test_a_second_collector_on_one_json_store_refuses_to_start(tmp_path: Path) -> None:
    """Issue 31: two collectors on one JSON store silently lost half of what they acknowledged. The store is
    locked: the second refuses to start, naming the first; once the first has stopped, a collector starts."""
    path = tmp_path / "collector.json"
    first = Collector(JsonFileStore(path))
    ok(first.register(descriptor("orders")))
    with pytest.raises(StoreInUse, match=rf"another collector \(pid {os.getpid()}\) is using this store"):
        Collector(JsonFileStore(path))
    first.flush()
    again = Collector(JsonFileStore(path))
    assert [entry["service"] for entry in ok(again.query_fleet())["services"]] == ["orders"]
    again.flush()


def test_svcgen_collector_serve_on_a_store_in_use_exits_with_one_line(tmp_path: Path) -> None:
    path = tmp_path / "collector.json"
    first = Collector(JsonFileStore(path))
    try:
        result = subprocess.run([sys.executable, "-m", "svcgen", "collector", "serve", "--port", "0", "--store",
                                 str(path)], capture_output=True, text=True, timeout=60)  # fmt: skip
    finally:
        first.flush()
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert "another collector" in line and "is using this store" in line


def test_a_full_disk_reuses_the_empty_segment_and_loses_nothing_acknowledged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 31: under a full disk every refused write left one more empty log segment behind."""
    path = tmp_path / "collector.json"
    c = collector(JsonFileStore(path))
    ok(c.register(descriptor("orders")))

    def full(fd: int, data: bytes) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as patched:
        patched.setattr(store_module, "_write_all", full)
        answers = {c.traces({"events": [event(n)]}).status for n in range(50)}
    assert answers == {"service-unavailable"}
    segments = [name for name in files(tmp_path) if name.endswith(".log")]
    assert len(segments) <= 2, segments  # the register's segment and at most one fresh one, reused
    assert ok(c.traces({"events": [event(99)]})) == {"accepted": 1}  # space again: taken at once
    again = collector(JsonFileStore(path))
    assert ok(again.query_topic({"topic": "orders:get"}))["invocations"] == 1


def test_a_damaged_log_line_replays_up_to_the_damage_and_repair_recovers_the_rest(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 31: one damaged byte moved the whole store aside, with no way to repair it. The collector starts with
    everything before the damage and keeps the rest aside; `svcgen collector repair` replays what it still holds."""
    path = tmp_path / "collector.json"
    store = JsonFileStore(path)
    c = collector(store)
    ok(c.register(descriptor("orders")))
    for n in range(1, 4):
        ok(c.traces({"events": [event(n)]}))
    crash(store)  # killed: the four changes are in the log only
    (segment,) = [tmp_path / name for name in files(tmp_path) if name.endswith(".log")]
    lines = segment.read_bytes().split(b"\n")
    lines[2] = b"#" + lines[2][1:]  # one damaged byte in the third change (the second traces batch)
    segment.write_bytes(b"\n".join(lines))
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        started = collector(JsonFileStore(path))
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert "line 3 is not valid JSON" in warning and "svcgen collector repair" in warning
    assert [s["service"] for s in ok(started.query_fleet())["services"]] == ["orders"]
    assert ok(started.query_topic({"topic": "orders:get"}))["invocations"] == 1  # what came before the damage
    assert [name for name in files(tmp_path) if ".damaged-" in name]
    started.flush()
    repaired = subprocess.run([sys.executable, "-m", "svcgen", "collector", "repair", "--store", str(path)],
                              capture_output=True, text=True, timeout=60)  # fmt: skip
    assert repaired.returncode == 0, repaired.stderr
    assert "replayed 1 change(s) from 1 damaged segment(s)" in repaired.stdout and "skipped 1" in repaired.stdout
    again = collector(JsonFileStore(path))
    assert ok(again.query_topic({"topic": "orders:get"}))["invocations"] == 2  # the damaged batch alone is lost
    assert not [name for name in files(tmp_path) if ".damaged-" in name]
    again.flush()
