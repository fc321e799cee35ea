"""Fault: the collector's store stops taking writes while the collector serves; ingest goes on, the failure is
counted and logged once per interval, and the state is saved again once the store comes back."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from svcgen.runtime._mesh.collector import Collector, JsonFileStore
from svcgen.runtime._mesh.collector_host import CollectorHost, CollectorSettings

from ..http.server import running
from .support import invoke, report

LOG_INTERVAL = 60.0
START = 1_800_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


def store_is_a_directory(store: Path) -> None:
    """os.replace of the temp file onto a directory fails (EISDIR), for root too."""
    store.unlink()
    store.mkdir()


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


def event(number: int) -> dict[str, object]:
    return {"traceId": f"{number + 1:032x}", "spanId": f"{number + 1:016x}", "service": "orders",
            "topic": "orders:place", "status": "ok", "durationMs": 1.5}  # fmt: skip


@pytest.mark.parametrize("breakage", [store_is_a_directory, store_directory_is_a_file], ids=lambda f: f.__name__)
def test_a_store_that_refuses_writes_never_stops_ingest(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, breakage: Callable[[Path], None]
) -> None:
    """Runs CollectorHost on uvicorn (127.0.0.1) over Collector(JsonFileStore) with a settable clock and a 60 s
    log interval. Registers a service (saved), then breaks the store (running as root, chmod does not stop
    writes, so: the store path replaced by a directory, or its parent by a regular file, which fail for root
    too), and sends 30 trace batches over HTTP 1 s of collector time apart, then 5 more 61 s later. Measures:
    answers accepted, save_failures, the 'failed to save' warnings, the health answer. Asserts: every ingest
    is accepted and queryable; one warning for the first 60 s of failures and one more after the interval;
    save_failures counts every failed save; health stays 200 with the store check at `warning`; after the
    store is repaired the next ingest saves every event accepted during the failure."""
    clock = Clock()
    store = tmp_path / "state" / "collector.json"
    store.parent.mkdir()
    collector = Collector(JsonFileStore(store), clock=clock, log_interval=LOG_INTERVAL)
    host = CollectorHost(CollectorSettings(artifacts=tmp_path / "artifacts", artifacts_interval=3600.0),
                         collector=collector)  # fmt: skip
    caplog.set_level(logging.WARNING, logger="svcgen.mesh.collector")

    def save_warnings() -> int:
        return sum("failed to save" in record.getMessage() for record in caplog.records)

    answers: list[tuple[str, object]] = []
    with running(host.app) as base:
        registered = invoke(base, "svc:mesh:register", {"service": "orders", "topics": []})
        assert registered == ("ok", {"accepted": 1}) and store.is_file()
        breakage(store)
        for number in range(30):
            clock.now += 1.0
            answers.append(invoke(base, "svc:mesh:traces", {"events": [event(number)]}))
        warnings_first_minute = save_warnings()
        clock.now += LOG_INTERVAL + 1.0
        for number in range(30, 35):
            answers.append(invoke(base, "svc:mesh:traces", {"events": [event(number)]}))
        warnings_total = save_warnings()
        failures = collector.save_failures
        health = httpx.get(base + "/svc/health", timeout=10)
        _, topic = invoke(base, "svc:mesh:query:topic", {"topic": "orders:place"})
        repair(store)
        clock.now += 1.0
        answers.append(invoke(base, "svc:mesh:traces", {"events": [event(35)]}))
        recovered_error = collector.last_save_error
        saved = Collector(JsonFileStore(store))
    saved_topic = saved.query_topic({"topic": "orders:place"})
    figures = report(
        f"store failure ({breakage.__name__})",
        ingests=len(answers),
        accepted=sum(answer == ("ok", {"accepted": 1}) for answer in answers),
        save_failures=failures,
        warnings_first_60s=warnings_first_minute,
        warnings_after_interval=warnings_total,
        health=f"{health.status_code} {health.json()['healthChecks']['store']['status']}",
        invocations_during_failure=topic["invocations"],
        invocations_saved_after_repair=saved_topic.payload["invocations"] if saved_topic.payload else None,
    )
    assert answers == [("ok", {"accepted": 1})] * 36, figures
    assert failures == 35, figures
    assert warnings_first_minute == 1 and warnings_total == 2, figures
    assert health.status_code == 200 and health.json()["isHealthy"] is True, figures
    assert health.json()["healthChecks"]["store"]["status"] == "warning", figures
    assert topic["invocations"] == 35, figures
    assert recovered_error is None, figures
    assert saved_topic.payload is not None and saved_topic.payload["invocations"] == 36, figures
