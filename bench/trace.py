"""Tracing cost: the typed HTTP route in-process, with and without trace middleware, queue and issues."""

from __future__ import annotations

import argparse

from bench.harness import Figure, Recorder, per_await_us, run
from bench.http import BODY, LOAD_CONCURRENCY, LOAD_REQUESTS, in_process, server_cpu_us_per_request, update
from svcgen.runtime import Identity, Registry, Service
from svcgen.runtime.http.app import create_app
from svcgen.runtime.mesh.exporters import QueueExporter
from svcgen.runtime.mesh.issues import IssueAggregator
from svcgen.runtime.mesh.traces import TraceMiddleware

CALLS = 20_000


def app(traced: bool) -> object:
    registry = Registry()
    registry.add("orders:update", update)
    identity = Identity("orders")
    middleware = []
    if traced:
        # Capacity above the call count: the bench measures recording, not dropping.
        queue = QueueExporter(cap=10 * CALLS)
        issues = IssueAggregator("orders")
        middleware = [TraceMiddleware(identity, queue, on_event=[issues.observe])]
    service = Service(identity, registry, middleware=middleware)
    return create_app(service, ["POST /orders/{orderId} -> orders:update"])


def measure(record: Recorder, args: argparse.Namespace) -> None:
    plain = per_await_us(in_process(app(False)), CALLS)
    traced = per_await_us(in_process(app(True)), CALLS)
    record(PLAIN, plain, "µs")
    record("POST /orders/{orderId}, trace + queue + issues", traced, "µs", baseline=PLAIN)
    record("  overhead", (traced / plain - 1) * 100, "%", target=15)

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
