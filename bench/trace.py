"""Tracing cost: the typed HTTP route in-process, with and without trace middleware, queue and issues.

In-process, plain and traced runs alternate (plain, traced, traced, plain, ...) so that a machine slowing down or
speeding up during the run weighs on both alike; the overhead is the median of the per-round ratios. After each
traced round the reporter's share is done as it is on every beat (drain the queue into wire entries, frame the
batch and its envelope as JSON) and timed on its own: a request no longer waits for it, but the process still pays
it.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from bench.harness import REPEATS, Figure, Recorder, run
from bench.http import BODY, LOAD_CONCURRENCY, LOAD_REQUESTS, in_process, server_cpu_us_per_request, update
from svcgen.runtime import Identity, Registry, Service
from svcgen.runtime._http.app import create_app
from svcgen.runtime._mesh.exporters import QueueExporter
from svcgen.runtime._mesh.feeds import feed_envelope, trace_batch
from svcgen.runtime._mesh.issues import IssueAggregator
from svcgen.runtime._mesh.traces import TraceMiddleware
from svcgen.runtime._topics import TRACES_TOPIC

CALLS = 20_000
ROUNDS = 2 * REPEATS


def app(traced: bool, queue: QueueExporter | None = None) -> Any:
    registry = Registry()
    registry.add("orders:update", update)
    identity = Identity("orders")
    middleware = []
    if traced:
        # Capacity above a round's calls: the bench measures recording, not dropping.
        queue = queue if queue is not None else QueueExporter(cap=2 * CALLS)
        issues = IssueAggregator("orders")
        middleware = [TraceMiddleware(identity, queue, on_failure=[issues.observe])]
    service = Service(identity, registry, middleware=middleware)
    return create_app(service, ["POST /orders/{orderId} -> orders:update"])


def alternating_rounds(queue: QueueExporter) -> tuple[list[float], list[float], list[float]]:
    """µs per call, plain and traced, for each round; and µs per event of the reporter's drain after it."""
    calls: dict[str, Callable[[], Awaitable[None]]] = {
        "plain": in_process(app(False)),
        "traced": in_process(app(True, queue)),
    }

    async def timed(name: str) -> float:
        call = calls[name]
        started = time.perf_counter()
        for _ in range(CALLS):
            await call()
        return (time.perf_counter() - started) / CALLS * 1e6

    async def rounds() -> tuple[list[float], list[float], list[float]]:
        plain, traced, drained = [], [], []
        for number in range(ROUNDS):
            order = ("plain", "traced") if number % 2 == 0 else ("traced", "plain")
            for name in order:
                (plain if name == "plain" else traced).append(await timed(name))
            started = time.perf_counter()
            events = queue.drain_wire()
            orjson.dumps(feed_envelope(TRACES_TOPIC, trace_batch(events, "bench")))
            drained.append((time.perf_counter() - started) / len(events) * 1e6)
        return plain, traced, drained

    return asyncio.run(rounds())


def measure(record: Recorder, args: argparse.Namespace) -> None:
    plain, traced, drained = alternating_rounds(QueueExporter(cap=2 * CALLS))
    plain_us, drain_us = statistics.median(plain), statistics.median(drained)
    record(PLAIN, plain_us, "µs")
    record("POST /orders/{orderId}, trace + queue + issues", statistics.median(traced), "µs", baseline=PLAIN)
    ratios = [t / p for p, t in zip(plain, traced, strict=True)]
    record("  overhead", (statistics.median(ratios) - 1) * 100, "%", target=15,
           note="(what a request waits for: median of the per-round ratios)")
    record("reporter: drain and encode, per event", drain_us, "µs")
    record("  request path and reporter together", (statistics.median(ratios) - 1 + drain_us / plain_us) * 100, "%",
           note="(the CPU tracing costs the process)")

    print()
    print(f"under load: {LOAD_REQUESTS} requests, {LOAD_CONCURRENCY} concurrent, uvicorn on 127.0.0.1")
    # Plain, traced, traced, plain: successive server runs drift on a shared machine, and this order cancels a
    # steady drift out of the comparison.
    order = ("plain_app", "traced_app", "traced_app", "plain_app")
    cpu = [server_cpu_us_per_request(f"bench.trace:{target}", "/orders/o-17", BODY) for target in order]
    plain_cpu, traced_cpu = (cpu[0] + cpu[3]) / 2, (cpu[1] + cpu[2]) / 2
    record(PLAIN_CPU, plain_cpu, "µs")
    record("server CPU per request, trace + queue + issues", traced_cpu, "µs", baseline=PLAIN_CPU)
    record("  overhead under load", (traced_cpu / plain_cpu - 1) * 100, "%",
           note="(what a served request pays; the target is stated in-process)")


PLAIN = "POST /orders/{orderId}, no mesh (in-process)"
PLAIN_CPU = "server CPU per request, no mesh"

# Import targets for the load test's uvicorn processes.
plain_app = app(False)
traced_app = app(True)


def main(argv: list[str] | None = None) -> list[Figure]:
    return run("bench/trace.py", measure, argv)


if __name__ == "__main__":
    main()
