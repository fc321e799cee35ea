"""Tracing cost: the typed HTTP route in-process, with and without trace middleware, queue and issues."""

from __future__ import annotations

import argparse

from bench.harness import Figure, Recorder, per_await_us, run
from bench.http import in_process, update
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


PLAIN = "POST /orders/{orderId}, no mesh (in-process)"


def main(argv: list[str] | None = None) -> list[Figure]:
    return run("bench/trace.py", measure, argv)


if __name__ == "__main__":
    main()
