"""Fault: the collector stopped for 30 s while a real generated service keeps reporting over JetStream
(`SVCGEN_MESH_NATS`), then started again on its store: every trace event and issue count arrives exactly once.
The NATS server is a throwaway one of the test's own, so the stream `SVC_MESH` and the durable consumer are its
alone."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.broker import ThrowawayNats
from tests.support.processes import wait_for
from tests.support.reliability import ORDER, CollectorProcess, build_orders, invoke, report, served

OUTAGE_SECONDS = 30.0
"""The issue's figure: the collector is down this long while the service keeps taking requests and reporting."""
BAD_ORDER = {**ORDER, "customerId": ""}
"""Refused with validation-error: a failed invocation, traced and filed as an issue."""


@pytest.fixture
def nats_server() -> Iterator[ThrowawayNats]:
    server = ThrowawayNats()
    try:
        server.start()
        yield server
    finally:
        server.remove()


def totals(base: str) -> tuple[int, int]:
    """(orders:place invocations, sum of the orders service's issue counts) as the collector answers them."""
    status, topic = invoke(base, "svc:mesh:query:topic", {"topic": "orders:place"})
    _, fleet = invoke(base, "svc:mesh:query:fleet", {})
    issues = sum(issue["count"] for issue in fleet["issues"] if issue["service"] == "orders")
    return (topic["invocations"] if status == "ok" else 0), issues


def send(base: str, good: int, bad: int) -> None:
    with httpx.Client(base_url=base, timeout=10) as client:
        for order in [ORDER] * good + [BAD_ORDER] * bad:
            answer = client.post("/orders", json=order)
            assert answer.status_code == (201 if order is ORDER else 422), answer.text


@pytest.mark.slow
def test_a_collector_down_for_30_s_misses_nothing_the_service_reported_over_jetstream(
    nats_server: ThrowawayNats, tmp_path: Path
) -> None:
    """The collector (`--store FILE --nats URL`) and the orders service (heartbeat 0.5 s, feeds to JetStream) run;
    40 orders and 5 refused ones are counted; the collector is stopped (SIGTERM) for 30 s while the service takes
    120 orders and 15 refused ones, spread over the outage; the collector starts again on the same store and durable
    consumer and counts 180 invocations; 5 more orders, the service stops (its final flush). Asserts: the
    collector counts exactly 185 invocations and 20 issue occurrences, and still does a few seconds later (no batch
    counted twice); the service lost or dropped no trace event."""
    package = build_orders(tmp_path / "out")
    collector = CollectorProcess(store=tmp_path / "mesh.json", workdir=tmp_path, nats=nats_server.url)
    collector.start()
    try:
        with served(package, "http://127.0.0.1:9", tmp_path, SVCGEN_MESH_NATS=nats_server.url) as service:
            send(service.base, 40, 5)
            wait_for(lambda: totals(collector.base) == (45, 5), 20, "the first requests to be counted")
            collector.stop()
            stopped = time.monotonic()
            for step in range(1, 11):  # the service keeps taking requests and reporting all through the outage
                send(service.base, 12, 1)
                time.sleep(max(0.0, stopped + OUTAGE_SECONDS / 10 * step - time.monotonic()))
            send(service.base, 0, 5)
            outage = time.monotonic() - stopped
            collector.start()
            restarted = time.monotonic()
            wait_for(lambda: totals(collector.base) == (180, 20), 30, "the outage's feeds to be counted")
            caught_up = time.monotonic() - restarted
            send(service.base, 5, 0)
        wait_for(lambda: totals(collector.base) == (185, 20), 20, "the final flush to be counted")
        time.sleep(2)  # any redelivery would have come by now
        final = totals(collector.base)
        _, fleet = invoke(collector.base, "svc:mesh:query:fleet", {})
    finally:
        collector.stop()
    assert final == (185, 20)
    assert fleet["dropped"]["skipped"] == 0
    counted = service.counts()
    assert (counted["dropped"], counted["lostTraceEvents"]) == (0, 0), counted
    assert outage >= OUTAGE_SECONDS
    report("collector outage over JetStream", outage_s=f"{outage:.1f}", caught_up_s=f"{caught_up:.1f}",
           invocations=final[0], issue_count=final[1], duplicate_batches=fleet["dropped"]["duplicateBatches"],
           services=json.dumps([entry["service"] for entry in fleet["services"]]))
