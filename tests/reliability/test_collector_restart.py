"""Fault: the collector (`svcgen collector serve --store FILE`) killed with SIGKILL mid-run and started again on the
same port and store, while the generated orders service keeps taking traffic."""

from __future__ import annotations

import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from svcgen.collector import JsonFileStore, MemoryBackend, SnapshotError, StoreError
from tests.support.processes import wait_for
from tests.support.reliability import ORDER, CollectorProcess, build_orders, invoke, report, served, traceparent

OUTAGE_SECONDS = 2.0
"""Four heartbeats of 0.5 s: long enough that the reporter must notice the collector is gone."""
KNOWN_TRACE = "7e57ab1e" * 4


class Traffic(threading.Thread):
    """Posts orders back to back from one keep-alive client, recording (started, code, seconds) per request."""

    def __init__(self, base: str) -> None:
        super().__init__(daemon=True)
        self.base = base
        self.records: list[tuple[float, int | str, float]] = []
        self.halt = threading.Event()

    def run(self) -> None:
        with httpx.Client(base_url=self.base, timeout=10) as client:
            while not self.halt.is_set():
                started = time.monotonic()
                try:
                    code: int | str = client.post("/orders", json=ORDER).status_code
                except httpx.HTTPError as exc:
                    code = type(exc).__name__
                self.records.append((started, code, time.monotonic() - started))

    def between(self, start: float, end: float) -> list[tuple[float, int | str, float]]:
        return [record for record in self.records if start <= record[0] < end]


def slowest_ms(records: list[tuple[float, int | str, float]]) -> str:
    return f"{max((seconds for *_, seconds in records), default=0.0) * 1000:.1f}"


def store_entry(store: Path, service: str) -> dict[str, Any] | None:
    """The catalog entry the collector's store holds for `service` (its snapshot and log, read as a restart
    would)."""
    saved = MemoryBackend()
    try:
        saved.restore_stored(JsonFileStore(store).load())
    except (StoreError, SnapshotError):
        return None
    entry = next((entry for entry in saved.snapshot()["catalog"] if entry["service"] == service), None)
    return dict(entry) if entry is not None else None


def registered_after(store: Path, moment: float) -> bool:
    entry = store_entry(store, "orders")
    registered = entry.get("registeredAt") if entry else None
    return registered is not None and datetime.fromisoformat(registered).timestamp() > moment


def test_collector_killed_and_restarted_on_its_store_loses_no_request_and_gets_the_service_back(
    tmp_path: Path,
) -> None:
    """Starts `svcgen collector serve --store FILE` on a free port and the orders service (`svcgen serve`, 0.5 s
    heartbeat) reporting to it; waits for the register; sends one request with a known traceparent and keeps
    the trace query's answer; starts a client posting orders back to back; after 1 s kills the collector with
    SIGKILL, waits 2 s, starts it again on the same port and store. Measures: requests and failures before,
    during and after the outage, the slowest request of each phase, how long until the service re-registered
    (registeredAt in the store, newer than the kill), and the trace events received vs lost in batches.
    Asserts: no failed request in any phase; the trace query answers the same after the restart as before;
    the service registers again by itself and the fleet shows it with its descriptor's topics, its instance
    heard with a matching descriptor hash; every trace event is received, counted lost, or dropped (none
    disappears silently)."""
    collector = CollectorProcess(store=tmp_path / "state" / "collector.json", workdir=tmp_path)
    collector.store.parent.mkdir()
    package = build_orders(tmp_path / "build")
    traffic: Traffic | None = None
    try:
        collector.start()
        with served(package, collector.base, tmp_path) as service:
            _, descriptor = invoke(service.base, "svc:mesh", {})

            def fleet_services() -> dict[str, Any]:
                _, fleet = invoke(collector.base, "svc:mesh:query:fleet", {})
                return {entry["service"]: entry for entry in fleet["services"]}

            wait_for(lambda: "orders" in fleet_services(), 15, "the first register")
            traced = httpx.post(service.base + "/orders", json=ORDER, timeout=10,
                                headers={"traceparent": traceparent(KNOWN_TRACE)})  # fmt: skip
            assert traced.status_code == 201, traced.text

            def trace_answer() -> Any:
                status, body = invoke(collector.base, "svc:mesh:query:trace", {"traceId": KNOWN_TRACE})
                return (status, body) if status == "ok" else None

            before = wait_for(trace_answer, 15, "the known trace at the collector")

            traffic = Traffic(service.base)
            traffic.start()
            time.sleep(1.0)
            killed_at, killed_wall = time.monotonic(), time.time()
            collector.kill()
            time.sleep(OUTAGE_SECONDS)
            collector.start()
            restarted_at = time.monotonic()

            after = trace_answer()
            wait_for(lambda: registered_after(collector.store, killed_wall), 15, "the service to register again")
            reregistered_after = time.monotonic() - restarted_at
            entry = store_entry(collector.store, "orders")
            fleet = fleet_services()
            _, seen = invoke(collector.base, "svc:mesh:query:service", {"service": "orders"})
            time.sleep(0.5)
            traffic.halt.set()
            traffic.join(timeout=15)
            ended_at = time.monotonic()
        counts = service.counts()
        _, topic = invoke(collector.base, "svc:mesh:query:topic", {"topic": "orders:place"})
    finally:
        if traffic is not None:
            traffic.halt.set()
        collector.stop()

    phases = {"before": (0.0, killed_at), "outage": (killed_at, restarted_at), "after": (restarted_at, ended_at)}
    observed = {name: traffic.between(*bounds) for name, bounds in phases.items()}
    requests = len(traffic.records) + 1
    figures = report(
        "collector restart",
        outage_s=f"{restarted_at - killed_at:.2f}",
        **{f"{name}_requests": len(records) for name, records in observed.items()},
        **{f"{name}_failed": sum(code != 201 for _, code, _ in records) for name, records in observed.items()},
        **{f"{name}_slowest_ms": slowest_ms(records) for name, records in observed.items()},
        reregistered_s_after_restart=f"{reregistered_after:.2f}",
        requests=requests,
        events_received=topic["invocations"],
        lost_in_batches=counts["lostTraceEvents"],
        queue_dropped=counts["dropped"],
    )
    assert all(observed.values()), figures  # traffic in every phase
    assert [record for record in traffic.records if record[1] != 201] == [], figures
    assert after == before, figures
    assert entry is not None and entry["descriptorHash"] == descriptor["descriptorHash"], figures
    assert entry["descriptor"]["topics"] == descriptor["topics"], figures
    assert fleet["orders"]["topics"] == 2, figures  # orders:get, orders:place
    (instance,) = (i for i in seen["instances"] if i["instanceId"] == descriptor["instanceId"])
    assert instance["hashMatches"] is True and instance["registerExpected"] is False, figures
    assert datetime.fromisoformat(instance["lastHeartbeatAt"]).timestamp() > killed_wall, figures
    # A batch the collector took just before SIGKILL, whose answer never came back, is resent with the same
    # batchId and counted once (the collector remembers batch ids in its store); nothing falls short.
    assert topic["invocations"] <= requests, figures
    assert topic["invocations"] + counts["lostTraceEvents"] + counts["dropped"] >= requests, figures
