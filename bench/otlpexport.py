"""OTLP export cost: the traced HTTP route with and without its records also leaving as OTLP/HTTP spans.

Baseline: tracing as the collector feed has it (trace middleware, bounded queue, issues). With OTLP: the same, the
records also handed to the OTLP exporter's own queue. In-process, the two alternate round by round and the
request-path overhead is the median of the per-round ratios; after each round the exporter's share off the request
path (drain its queue, build the spans, encode the `ExportTraceServiceRequest`) is timed per span. Under load
(uvicorn in its own process, three pairs of runs in alternating order, the overhead the median of the per-pair
ratios) the OTLP app really exports, batch by batch, to a receiver in a third process, so the server CPU per
request includes the POSTs: that ratio is the one judged.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import statistics
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from bench.harness import REPEATS, Figure, Recorder, awaited_us, run
from bench.http import (
    BODY,
    LOAD_CONCURRENCY,
    LOAD_REQUESTS,
    free_port,
    in_process,
    server_cpu_us_per_request,
    update,
)
from svcgen.runtime import Identity, Registry, Service
from svcgen.runtime._http.app import create_app
from svcgen.runtime._mesh.exporters import Exporter, FanOutExporter, QueueExporter
from svcgen.runtime._mesh.issues import IssueAggregator
from svcgen.runtime._mesh.otlp import DEFAULT_BATCH_SIZE, TRACES_ENDPOINT_ENV, OtlpExporter
from svcgen.runtime._mesh.traces import TraceMiddleware

CALLS = 20_000
ROUNDS = 2 * REPEATS
LOAD_PAIRS = 3
WARMUP = DEFAULT_BATCH_SIZE + 1
"""Requests sent to both servers before measuring: the exporting one has sent its first batch by then, so the
one-time work of a first POST (httpx importing and setting up its transport, some 40 ms) is not counted per
request."""
IDENTITY = Identity("orders", service_version="1.0.0", instance_id="bench")
UNUSED = "http://127.0.0.1:9/v1/traces"
"""In-process rounds never send: the exporter's task is not started, its share is timed on its own."""


def app(otlp: OtlpExporter | None, queue: QueueExporter | None = None) -> Any:
    registry = Registry()
    registry.add("orders:update", update)
    # Capacity above a round's calls: the bench measures recording and exporting, not dropping.
    queue = queue if queue is not None else QueueExporter(cap=2 * CALLS)
    exporter: Exporter = queue if otlp is None else FanOutExporter(queue, otlp.queue)  # as MeshHost wires it
    issues = IssueAggregator("orders")
    service = Service(IDENTITY, registry, middleware=[TraceMiddleware(IDENTITY, exporter, on_failure=[issues.observe])])
    built = create_app(service, ["POST /orders/{orderId} -> orders:update"])
    if otlp is not None:
        built.on_startup.append(otlp.start)
        built.on_shutdown.append(otlp.stop)
    return built


def alternating_rounds() -> tuple[list[float], list[float], list[float]]:
    """µs per call, traced and traced + OTLP, for each round; and µs per span of the exporter's share after it."""
    base_queue, otlp_queue = QueueExporter(cap=2 * CALLS), QueueExporter(cap=2 * CALLS)
    otlp = OtlpExporter(UNUSED, IDENTITY, cap=2 * CALLS)
    calls: dict[str, Callable[[], Awaitable[None]]] = {
        "traced": in_process(app(None, base_queue)),
        "otlp": in_process(app(otlp, otlp_queue)),
    }

    async def rounds() -> tuple[list[float], list[float], list[float]]:
        traced: list[float] = []
        exported: list[float] = []
        encoded: list[float] = []
        for number in range(ROUNDS):
            order = ("traced", "otlp") if number % 2 == 0 else ("otlp", "traced")
            for name in order:
                (traced if name == "traced" else exported).append(await awaited_us(calls[name], CALLS))
            base_queue.clear()  # the collector queues: not what this bench measures
            otlp_queue.clear()
            started = time.perf_counter()
            spans = 0
            while events := otlp.queue.drain(otlp.batch_size):
                otlp.encoder.encode(events)
                spans += len(events)
            encoded.append((time.perf_counter() - started) / spans * 1e6)
        return traced, exported, encoded

    return asyncio.run(rounds())


def _sink(port: int, requests: Any, sent: Any) -> None:
    """The receiver process: takes every POST (200, empty answer, connection kept) and counts requests and bytes."""

    class Sink(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as OTLP receivers do

        def do_POST(self) -> None:
            size = int(self.headers.get("content-length", "0"))
            self.rfile.read(size)
            with requests.get_lock():
                requests.value += 1
                sent.value += size
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    ThreadingHTTPServer(("127.0.0.1", port), Sink).serve_forever()


@contextmanager
def receiver() -> Iterator[tuple[Any, Any]]:
    """An OTLP/HTTP sink in its own process (so neither the server's CPU nor the load client's includes it), its
    endpoint in OTEL_EXPORTER_OTLP_TRACES_ENDPOINT for the server processes; yields (requests, bytes) counters."""
    port = free_port()
    requests, sent = multiprocessing.Value("q", 0), multiprocessing.Value("q", 0)
    sink = multiprocessing.Process(target=_sink, args=(port, requests, sent), daemon=True)
    sink.start()
    previous = os.environ.get(TRACES_ENDPOINT_ENV)
    os.environ[TRACES_ENDPOINT_ENV] = f"http://127.0.0.1:{port}/v1/traces"
    try:
        yield requests, sent
    finally:
        if previous is None:
            os.environ.pop(TRACES_ENDPOINT_ENV, None)
        else:
            os.environ[TRACES_ENDPOINT_ENV] = previous
        sink.terminate()
        sink.join(timeout=10)


def measure(record: Recorder, args: argparse.Namespace) -> None:
    traced, exported, encoded = alternating_rounds()
    traced_us, encode_us = statistics.median(traced), statistics.median(encoded)
    record(TRACED, traced_us, "µs")
    record("POST /orders/{orderId}, trace + queue + issues + OTLP export", statistics.median(exported), "µs",
           baseline=TRACED)
    ratios = [e / t for t, e in zip(traced, exported, strict=True)]
    record("  request-path overhead of OTLP export", (statistics.median(ratios) - 1) * 100, "%",
           note="(what a request waits for: median of the per-round ratios)")
    record("OTLP exporter: drain, build and encode, per span", encode_us, "µs")
    record("  request path and exporter together", (statistics.median(ratios) - 1 + encode_us / traced_us) * 100,
           "%", note="(the CPU OTLP export costs the process, in-process)")

    print()
    print(f"under load: {LOAD_REQUESTS} requests, {LOAD_CONCURRENCY} concurrent, uvicorn on 127.0.0.1, spans POSTed "
          "to a receiver in its own process")
    with receiver() as (requests, sent):
        # Pairs in alternating order (traced first, then exporting first, ...): successive server runs drift on a
        # shared machine, and each pair's ratio compares two runs next to each other.
        pairs = []
        for number in range(LOAD_PAIRS):
            order = ("traced_app", "otlp_app") if number % 2 == 0 else ("otlp_app", "traced_app")
            cpu = {target: server_cpu_us_per_request(f"bench.otlpexport:{target}", "/orders/o-17", BODY,
                                                     warmup_requests=WARMUP, settle_seconds=1.0)
                   for target in order}
            pairs.append((cpu["traced_app"], cpu["otlp_app"]))
    print(f"the receiver took {requests.value} POSTs, {sent.value / max(requests.value, 1):,.0f} bytes each")
    if not requests.value:
        raise SystemExit("the OTLP app sent nothing to the receiver: the under-load figures would not measure export")
    record(TRACED_CPU, statistics.median(traced for traced, _ in pairs), "µs")
    record("server CPU per request, tracing + OTLP export", statistics.median(otlp for _, otlp in pairs), "µs",
           baseline=TRACED_CPU)
    record("  OTLP export overhead under load", (statistics.median(o / t for t, o in pairs) - 1) * 100, "%",
           target=10, note="(what a served request costs the server, POSTs included: median of the per-pair ratios)")


TRACED = "POST /orders/{orderId}, tracing without OTLP (in-process)"
TRACED_CPU = "server CPU per request, tracing without OTLP"


def _served_otlp_app() -> Any:
    # Imported by the load test's uvicorn process, which inherits the receiver's endpoint from this one.
    endpoint = os.environ.get(TRACES_ENDPOINT_ENV)
    return app(OtlpExporter(endpoint, IDENTITY, cap=2 * CALLS)) if endpoint else None


# Import targets for the load test's uvicorn processes.
traced_app = app(None)
otlp_app = _served_otlp_app()


def main(argv: list[str] | None = None) -> list[Figure]:
    return run("bench/otlpexport.py", measure, argv)


if __name__ == "__main__":
    main()
