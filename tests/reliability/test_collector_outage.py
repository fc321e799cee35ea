"""Fault: the database of a running collector replica (`svcgen collector serve --store postgresql://...`) stopped
and started again. The cluster is a throwaway one the test starts itself (initdb and pg_ctl of Debian's postgresql
package) on a free port, so the machine's shared server is never stopped."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.databases import ThrowawayCluster
from tests.support.processes import wait_for
from tests.support.reliability import CollectorProcess, invoke, report


@pytest.fixture
def cluster() -> Iterator[ThrowawayCluster]:
    made = ThrowawayCluster()
    try:
        made.start()
        yield made
    finally:
        made.remove()


def event(number: int) -> dict[str, Any]:
    return {"traceId": f"{number:032x}", "spanId": f"{number:016x}", "service": "orders", "topic": "orders:place",
            "status": "ok"}  # fmt: skip


def test_a_replica_whose_database_stops_refuses_feeds_says_so_and_recovers(
    cluster: ThrowawayCluster, tmp_path: Path
) -> None:
    """A replica on the throwaway cluster takes 5 batches; the cluster is stopped (fast shutdown); within 10 s
    /svc/health answers 503 with the store check naming the database; every feed and query meanwhile is
    `service-unavailable` and the process stays up; the cluster is started again; within 15 s health is 200, the
    refused batches resent with their batchIds are accepted, and the topic counts every batch exactly once."""
    replica = CollectorProcess(store=tmp_path / "unused.json", workdir=tmp_path, database=cluster.url)
    replica.start()
    try:
        base = replica.base
        for number in range(5):
            assert invoke(base, "svc:mesh:traces", {"events": [event(number)], "batchId": f"b{number}"})[0] == "ok"
        assert httpx.get(base + "/svc/health", timeout=10).status_code == 200
        stopped = time.monotonic()
        cluster.stop()
        broken = wait_for(lambda: _unhealthy(base), 10, "health to report the lost database")
        noticed = time.monotonic() - stopped
        refused = [invoke(base, "svc:mesh:traces", {"events": [event(number)], "batchId": f"b{number}"})
                   for number in range(5, 10)]  # fmt: skip
        query_status, _ = invoke(base, "svc:mesh:query:fleet", {})
        assert replica.process is not None and replica.process.poll() is None, "the replica must not crash"
        started = time.monotonic()
        cluster.start()
        wait_for(lambda: httpx.get(base + "/svc/health", timeout=10).status_code == 200, 15, "health to recover")
        recovered = time.monotonic() - started
        resent = [invoke(base, "svc:mesh:traces", {"events": [event(number)], "batchId": f"b{number}"})
                  for number in range(3, 10)]  # fmt: skip
        _, topic = invoke(base, "svc:mesh:query:topic", {"topic": "orders:place"})
    finally:
        replica.stop()
    check = broken["healthChecks"]["store"]
    assert "database" in str(check), check
    assert all(status == "service-unavailable" for status, _ in refused), refused
    assert query_status == "service-unavailable"
    assert all(status == "ok" for status, _ in resent), resent
    assert topic["invocations"] == 10  # b3 and b4 were resent too and are not counted again
    report("database outage", noticed_s=f"{noticed:.1f}", recovered_s=f"{recovered:.1f}", refused=len(refused),
           store_check=check)  # fmt: skip


def _unhealthy(base: str) -> dict[str, Any] | None:
    answer = httpx.get(base + "/svc/health", timeout=10)
    return answer.json() if answer.status_code == 503 else None
