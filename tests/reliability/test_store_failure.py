"""Fault: the collector's store stops taking writes while the collector serves; feeds are refused (never
acknowledged and lost), the failure is counted, logged once per interval and shown in health, and once the store
comes back everything acknowledged is saved."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import httpx
import pytest

from svcgen.collector import Collector, JsonFileStore
from svcgen.collector.host import CollectorHost, CollectorSettings
from tests.support.processes import wait_for
from tests.support.reliability import invoke, report
from tests.support.server import running

LOG_INTERVAL = 60.0
START = 1_800_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


def store_directory_is_a_file(store: Path) -> None:
    """The temp file cannot be created in a directory that is a regular file (ENOTDIR), for root too."""
    shutil.rmtree(store.parent)
    store.parent.write_text("not a directory")


def repair(store: Path) -> None:
    if store.parent.is_file():
        store.parent.unlink()
        store.parent.mkdir()
    if store.is_dir():
        store.rmdir()


ORDERS = {"service": "orders", "topics": [{"id": "orders:place", "requestSchema": {}, "responseSchema": {}}]}
"""The register: a service whose descriptor declares the topic its events are of."""


def event(number: int) -> dict[str, object]:
    return {"traceId": f"{number + 1:032x}", "spanId": f"{number + 1:016x}", "service": "orders",
            "topic": "orders:place", "status": "ok", "durationMs": 1.5}  # fmt: skip


def test_a_store_that_refuses_writes_refuses_feeds_says_so_in_health_and_loses_nothing_acknowledged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Runs CollectorHost on uvicorn (127.0.0.1) over Collector(JsonFileStore) with a settable clock and a 60 s
    log interval. Registers a service and compacts (the snapshot file exists), then breaks the store (running as
    root, chmod does not stop writes, so: its directory replaced by a regular file, which fails for root too;
    the log segment goes with it), and sends 30 trace batches over HTTP 1 s of
    collector time apart, then 5 more 61 s later. Measures: the answers, store_failures, the 'cannot persist'
    warnings, the health answer. Asserts: while the store cannot take a change every feed is answered
    `service-unavailable` (never acknowledged and then lost) and nothing is counted; one warning for the first
    60 s of failures and one more after the interval; /svc/health answers 503 with the store check failed and
    its reason; after the store is repaired the next feed is accepted, health is 200 again, and a restarted
    collector holds the register and that feed."""
    clock = Clock()
    store = tmp_path / "state" / "collector.json"
    store.parent.mkdir()
    json_store = JsonFileStore(store)
    collector = Collector(json_store, clock=clock, log_interval=LOG_INTERVAL)
    host = CollectorHost(CollectorSettings(artifacts=tmp_path / "artifacts", artifacts_interval=3600.0),
                         collector=collector)  # fmt: skip
    caplog.set_level(logging.WARNING, logger="svcgen.mesh.collector")

    def warnings() -> int:
        return sum("cannot persist" in record.getMessage() for record in caplog.records)

    answers: list[tuple[str, object]] = []
    with running(host.app) as base:
        registered = invoke(base, "svc:mesh:register", ORDERS)
        json_store.compact(collector.snapshot())
        json_store.close()
        assert registered == ("ok", {"accepted": 1}) and store.is_file()
        store_directory_is_a_file(store)
        for number in range(30):
            clock.now += 1.0
            answers.append(invoke(base, "svc:mesh:traces", {"events": [event(number)]}))
        warnings_first_minute = warnings()
        clock.now += LOG_INTERVAL + 1.0
        for number in range(30, 35):
            answers.append(invoke(base, "svc:mesh:traces", {"events": [event(number)]}))
        warnings_total = warnings()
        failures = collector.store_failures
        broken_health = httpx.get(base + "/svc/health", timeout=10)
        topic_status, topic_answer = invoke(base, "svc:mesh:query:topic", {"topic": "orders:place"})
        repair(store)
        clock.now += 1.0
        recovered = invoke(base, "svc:mesh:traces", {"events": [event(35)]})
        healed_health = httpx.get(base + "/svc/health", timeout=10)
    saved = Collector(JsonFileStore(store))
    saved_topic = saved.query_topic({"topic": "orders:place"})
    saved_services = [entry["service"] for entry in saved.query_fleet().payload["services"]]  # type: ignore[index]
    store_check = broken_health.json()["healthChecks"]["store"]
    figures = report(
        "store failure (its directory is a file)",
        ingests=len(answers) + 1,
        refused=sum(answer[0] == "service-unavailable" for answer in answers),
        store_failures=failures,
        warnings_first_60s=warnings_first_minute,
        warnings_after_interval=warnings_total,
        health_broken=f"{broken_health.status_code} {store_check}",
        health_repaired=healed_health.status_code,
        topic_during_failure=(topic_status, topic_answer["invocations"]),
        recovered=recovered,
        invocations_saved_after_repair=saved_topic.payload["invocations"] if saved_topic.payload else None,
    )
    assert {answer[0] for answer in answers} == {"service-unavailable"}, figures
    assert failures == 35, figures
    assert warnings_first_minute == 1 and warnings_total == 2, figures
    assert broken_health.status_code == 503 and broken_health.json()["isHealthy"] is False, figures
    assert store_check["status"] == "failed" and "cannot be written" in store_check["detail"], figures
    assert (topic_status, topic_answer["invocations"]) == ("ok", 0), figures  # nothing acknowledged, nothing counted
    assert recovered == ("ok", {"accepted": 1}) and healed_health.status_code == 200, figures
    assert saved_services == ["orders"], figures
    assert saved_topic.payload is not None and saved_topic.payload["invocations"] == 1, figures


def test_a_snapshot_that_cannot_be_written_fails_health_while_the_log_keeps_every_feed(tmp_path: Path) -> None:
    """Runs CollectorHost on uvicorn (127.0.0.1) over Collector(JsonFileStore) compacting after every change.
    Registers a service, then replaces the snapshot file by a directory (os.replace onto it fails, for root too)
    while the log beside it stays writable, and sends 10 trace batches over HTTP. Measures: the answers and the
    health answer, before and after the directory is removed. Asserts: every feed is accepted (the log holds
    it); health is 503 with the store check failed and the reason while no snapshot can be written, 200 once
    one can; a restarted collector holds the register and all 10 events."""
    store = tmp_path / "state" / "collector.json"
    store.parent.mkdir()
    collector = Collector(JsonFileStore(store, compact_after=1, compact_retry=0.0))
    host = CollectorHost(CollectorSettings(artifacts=tmp_path / "artifacts", artifacts_interval=3600.0),
                         collector=collector)  # fmt: skip
    with running(host.app) as base:
        assert invoke(base, "svc:mesh:register", ORDERS) == ("ok", {"accepted": 1})
        wait_for(store.is_file, 10, "the first snapshot")
        store.unlink()
        store.mkdir()
        answers = [invoke(base, "svc:mesh:traces", {"events": [event(number)]}) for number in range(10)]

        def health() -> httpx.Response:
            return httpx.get(base + "/svc/health", timeout=10)

        broken = wait_for(lambda: (answer := health()).status_code == 503 and answer, 10, "a failed store check")
        store.rmdir()
        invoke(base, "svc:mesh:traces", {"events": [event(10)]})
        healed = wait_for(lambda: (answer := health()).status_code == 200 and answer, 10, "a healthy store")
    saved = Collector(JsonFileStore(store))
    invocations = saved.query_topic({"topic": "orders:place"}).payload
    figures = report("snapshot not writable", answers={answer[0] for answer in answers},
                     health_broken=broken.json()["healthChecks"]["store"], health_repaired=healed.status_code,
                     saved=invocations)  # fmt: skip
    assert answers == [("ok", {"accepted": 1})] * 10, figures
    assert "the snapshot cannot be written" in broken.json()["healthChecks"]["store"]["detail"], figures
    assert invocations is not None and invocations["invocations"] == 11, figures
    assert [entry["service"] for entry in saved.query_fleet().payload["services"]] == ["orders"], figures  # type: ignore[index]
