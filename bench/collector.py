"""Collector cost: trace ingest with the JSON-file store (every batch logged), at two sizes (throughput and
memory must not grow with history); the fleet query with a fleet of registered services; and four concurrent
reporters against `svcgen collector serve --store FILE` over HTTP, on an empty store and on one with every table
at its cap, in the same run (ingest and query cost must follow the change, not the state); trace ingest on
PostgreSQL with one and with two replicas (processes) beside the in-memory store, at both sizes (throughput must
stay flat; two replicas should take at least 1.5x one's).

    PYTHONPATH=. python -m bench.collector [--small 200000] [--large 2000000] [--batch 100] [--services 200]
        [--seconds 8] [--postgres URL] [--only-postgres] [--json FILE]

PostgreSQL: --postgres URL, else $SVCGEN_TEST_POSTGRES, else the local server; each run gets a database of its
own, dropped after it.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import multiprocessing
import os
import resource
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson

from bench.harness import Figure, Recorder, per_call_us, run
from bench.http import free_port
from svcgen.collector import Collector, CollectorLimits, JsonFileStore

STARTED_AT = "2027-01-15T08:00:00.000Z"
SERVICES = ("shop", "pay", "stock", "ship", "mail")
STATUSES = ("ok", "ok", "ok", "not-found", "timeout")
SLICE = 100
"""Batches built ahead of timing at a time; small, so they barely show in the RSS figures."""


def rss_mib() -> float:
    """Current resident set size (Linux), else the peak so far."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def batch(offset: int, size: int) -> dict[str, Any]:
    events = []
    for n in range(offset, offset + size):
        service = SERVICES[n % len(SERVICES)]
        event: dict[str, Any] = {
            "traceId": f"{n // 4:032x}",
            "spanId": f"{n:016x}",
            "service": service,
            "topic": f"{service}:op{n % 3}",
            "status": STATUSES[n % len(STATUSES)],
            "instanceId": f"{service}-1",
            "durationMs": 1.5 + n % 7,
            "startedAt": STARTED_AT,
        }
        if n % 4:
            event["parentSpanId"] = f"{n - 1:016x}"
        events.append(event)
    return {"events": events}


def ingest(total: int, size: int) -> tuple[float, float, float, int]:
    """(events/s, RSS at start, highest RSS sampled, store file bytes) for `total` events in batches of `size`."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "collector.json"
        collector = Collector(JsonFileStore(path))
        start_rss = highest = rss_mib()
        batches = total // size
        elapsed = 0.0
        for first in range(0, batches, SLICE):
            prepared = [batch((first + b) * size, size) for b in range(min(SLICE, batches - first))]
            started = time.perf_counter()
            for body in prepared:
                collector.traces(body)
            elapsed += time.perf_counter() - started
            highest = max(highest, rss_mib())
        assert collector.store_failures == 0
        collector.flush()
        return total / elapsed, start_rss, highest, path.stat().st_size


def fleet_collector(services: int) -> Collector:
    collector = Collector()
    for n in range(services):
        name = f"svc{n:03d}"
        topics = [{"id": f"{name}:op{t}", "requestSchema": {"type": "object"}, "responseSchema": {}} for t in range(5)]
        collector.register({"service": name, "instanceId": f"{name}-1", "topics": topics,
                            "produces": [{"id": f"svc{(n + 1) % services:03d}:op0"}],
                            "descriptorHash": f"sha256:{name}"})
        collector.heartbeat({"service": name, "instanceId": f"{name}-1", "descriptorHash": f"sha256:{name}",
                             "health": {"isHealthy": n % 10 != 0, "healthChecks": {}}})
        collector.traces({"events": [
            {"traceId": f"{n:032x}", "spanId": f"{n * 10 + t:016x}", "service": name, "topic": f"{name}:op{t}",
             "status": "ok", "durationMs": 1.0, "startedAt": STARTED_AT}
            for t in range(5)
        ]})
        collector.issues({"service": name, "issues": []})
    return collector


REPORTERS = 4
FULL_SERVICES = 1_000
"""Services of the full store: the catalog's cap."""


def fill_to_the_caps(path: Path) -> None:
    """Every table of the collector at its default cap, in the store at `path` (compacted into its snapshot)."""
    limits = CollectorLimits()
    collector = Collector(JsonFileStore(path), limits=limits)
    filler = "d" * 12_000  # some 13 KB per descriptor: the 1,000 of them near the catalog's byte budget
    for n in range(FULL_SERVICES):
        name = f"svc{n:04d}"
        topics = [{"id": f"{name}:op{t}", "requestSchema": {"type": "object", "description": filler if t == 0 else ""},
                   "responseSchema": {}} for t in range(10)]  # fmt: skip
        collector.register({"service": name, "topics": topics, "descriptorHash": f"sha256:{name}"})
        collector.record_poll(name, f"http://{name}", spec={"service": name, "topics": topics[1:]},
                              health={"isHealthy": True, "healthChecks": {}}, error=None)  # fmt: skip
        collector.issues({"service": name, "batchId": f"fill-i{n}", "issues": [{
            "fingerprint": f"{n:032x}", "classification": "exception", "topic": f"{name}:op0", "status": "timeout",
            "count": 1, "firstSeen": STARTED_AT, "lastSeen": STARTED_AT, "exemplarTraceIds": []}]})
    for n in range(limits.instances):
        name = f"svc{n % FULL_SERVICES:04d}"
        collector.heartbeat({"service": name, "instanceId": f"{name}-{n}", "descriptorHash": f"sha256:{name}",
                             "health": {"isHealthy": True, "healthChecks": {"db": {"status": "ok"}}}})
    # 10,000 counters (1,000 services x 10 topics) and 10,000 edges (each service calling ten others), one batch
    # id each.
    for n in range(limits.counters):
        client, server = n // 10, (n // 10 + 1 + n % 10) % FULL_SERVICES
        parent = {"traceId": f"{n:032x}", "spanId": f"{2 * n:016x}", "service": f"svc{client:04d}",
                  "topic": f"svc{client:04d}:op{n % 10}", "status": "ok", "durationMs": 2.0, "startedAt": STARTED_AT}
        child = {**parent, "spanId": f"{2 * n + 1:016x}", "parentSpanId": parent["spanId"],
                 "service": f"svc{server:04d}", "topic": f"svc{server:04d}:op{n % 10}"}
        collector.traces({"events": [parent, child], "batchId": f"fill-t{n}"})
    collector.flush()
    counts = collector.snapshot()
    assert len(counts["catalog"]) == limits.catalog and len(counts["instances"]) == limits.instances
    assert len(counts["counters"]) == limits.counters and len(counts["edges"]) == limits.edges
    assert len(counts["issues"]) == limits.issues and len(counts["traces"]["events"]) == limits.trace_window


def serve(store: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "svcgen", "collector", "serve", "--host", "127.0.0.1", "--port", str(port), "--store",
         str(store), "--artifacts-interval", "3600"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    return server, answering(server, port)


def answering(server: subprocess.Popen[bytes], port: int) -> str:
    """The base URL of the collector `server` serves on `port`, once its health answers (60 s at most)."""
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(base + "/svc/health", timeout=1)
            return base
        except httpx.TransportError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.kill()
                raise RuntimeError("the collector did not start") from None
            time.sleep(0.1)


def envelope(topic: str, body: Any) -> bytes:
    return orjson.dumps({"topic": topic, "body": orjson.dumps(body).decode()})


async def reporters(base: str, seconds: float) -> tuple[float, float]:
    """(ingests/s over REPORTERS concurrent reporters each sending 10-event traces batches and heartbeats, p50 ms
    of the trace query asked meanwhile)."""
    url = base + "/svc/invoke"
    stop = time.monotonic() + seconds
    ingests = 0
    latencies: list[float] = []

    async def reporter(number: int, client: httpx.AsyncClient) -> None:
        nonlocal ingests
        sent = 0
        while time.monotonic() < stop:
            sent += 1
            name = f"svc{number:04d}"
            if sent % 10:
                events = [{"traceId": f"{number:08x}{sent:024x}", "spanId": f"{number:04x}{sent:08x}{e:04x}",
                           "service": name, "topic": f"{name}:op{e}", "status": "ok", "durationMs": 1.5,
                           "startedAt": STARTED_AT} for e in range(10)]  # fmt: skip
                body = envelope("svc:mesh:traces", {"events": events, "batchId": f"r{number}-{sent}"})
            else:
                body = envelope("svc:mesh:heartbeat", {"service": name, "instanceId": f"{name}-bench",
                                                       "health": {"isHealthy": True, "healthChecks": {}}})
            answer = await client.post(url, content=body)
            assert answer.status_code == 200 and answer.json()["statusCode"] == "ok", answer.text
            ingests += 1

    async def asker(client: httpx.AsyncClient) -> None:
        while time.monotonic() < stop:
            started = time.perf_counter()
            answer = await client.post(url, content=envelope("svc:mesh:query:trace", {"traceId": f"{1:032x}"}))
            latencies.append((time.perf_counter() - started) * 1e3)
            assert answer.status_code == 200
            await asyncio.sleep(0.02)

    async with httpx.AsyncClient(timeout=30) as client:
        began = time.monotonic()
        await asyncio.gather(*(reporter(n, client) for n in range(REPORTERS)), asker(client))
        elapsed = time.monotonic() - began
    return ingests / elapsed, statistics.median(latencies)


WARM_UP = 3.0
"""Seconds of load before measuring: the start-up artifact write of a full store is not an ingest's cost."""


def reporters_on(store: Path, seconds: float) -> tuple[float, float]:
    server, base = serve(store)
    try:
        asyncio.run(reporters(base, WARM_UP))
        return asyncio.run(reporters(base, seconds))
    finally:
        server.terminate()
        server.wait(timeout=30)


LOCAL_POSTGRES = "postgresql://postgres@127.0.0.1:5432/postgres"


def replica_ingest(
    url: str | None, replica: int, replicas: int, total: int, size: int, go: Any
) -> tuple[float, float, float]:
    """One replica's share of `total` events (every `replicas`-th batch), into PostgreSQL at `url` or, without
    one, into memory: (seconds from `go` to done, RSS growth in MiB, CPU seconds). Runs in a process of its own."""
    from svcgen.collector.postgres import PostgresStore

    logging.getLogger("svcgen.mesh.collector").setLevel(logging.ERROR)
    collector = Collector(PostgresStore(url) if url else None)
    start_rss = highest = rss_mib()
    go.wait()
    started, cpu = time.perf_counter(), time.process_time()
    for number in range(replica, total // size, replicas):
        answer = collector.traces(batch(number * size, size))
        assert answer.is_successful, answer.detail
        if number % 200 == replica:
            highest = max(highest, rss_mib())
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    collector.flush()
    return elapsed, highest - start_rss, cpu


def server_cpu_seconds() -> float:
    """CPU seconds used so far by the processes named postgres on this machine (the local server's backends)."""
    ticks = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)
            if fields[0].endswith("(postgres"):
                parts = fields[1].split()
                ticks += int(parts[11]) + int(parts[12])
        except (OSError, IndexError, ValueError):
            continue
    return ticks / os.sysconf("SC_CLK_TCK")


def replicas_ingest(url: str | None, replicas: int, total: int, size: int) -> tuple[float, float, float]:
    """(events/s of `replicas` processes ingesting `total` events at once, highest RSS growth of one, cores busy
    meanwhile with the replicas and the local PostgreSQL server)."""
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager, context.Pool(replicas) as pool:
        go = manager.Event()
        running = [pool.apply_async(replica_ingest, (url, n, replicas, total, size, go)) for n in range(replicas)]
        time.sleep(3.0)  # the processes start and open their pools
        server_cpu = server_cpu_seconds()
        go.set()
        results = [result.get(timeout=3600) for result in running]
        server_cpu = server_cpu_seconds() - server_cpu
    wall = max(elapsed for elapsed, _, _ in results)
    busy = (sum(cpu for _, _, cpu in results) + server_cpu) / wall
    return total / wall, max(growth for _, growth, _ in results), busy


def postgres_server(given: str | None) -> str:
    return given or os.environ.get("SVCGEN_TEST_POSTGRES") or LOCAL_POSTGRES


def fresh_database(server: str) -> str:
    import psycopg

    name = f"svcgen_bench_{secrets.token_hex(4)}"
    with psycopg.connect(server, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    return urlsplit(server)._replace(path=f"/{name}").geturl()


def drop_database(server: str, url: str) -> None:
    import psycopg

    with psycopg.connect(server, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{urlsplit(url).path.lstrip("/")}" WITH (FORCE)')


def measure_postgres(record: Recorder, args: argparse.Namespace) -> None:
    server = postgres_server(args.postgres)
    rates: dict[tuple[str, int], float] = {}
    for total in (args.small, args.large):
        for label, replicas in (("memory", 1), ("postgres", 1), ("postgres", 2)):
            url = fresh_database(server) if label == "postgres" else None
            try:
                rate, growth, busy = replicas_ingest(url, replicas, total, args.batch)
            finally:
                if url is not None:
                    drop_database(server, url)
            rates[(f"{label}-{replicas}", total)] = rate
            name = (f"trace ingest, {total:,} events, in memory" if label == "memory" else
                    f"trace ingest, {total:,} events, PostgreSQL, {replicas} replica{'s' if replicas > 1 else ''}")
            record(name, rate, "ev/s", baseline=f"trace ingest, {total:,} events, in memory" if url else None)
            run_name = f"{label} process during {total:,}" + (f" ({replicas} replicas)" if replicas > 1 else "")
            record(f"  RSS growth of a {run_name}", growth, "MiB")
            if url is not None:
                record(f"  cores busy with the replicas and PostgreSQL, {total:,} events, {replicas} replica(s)",
                       busy, "cores")  # fmt: skip
    record("  PostgreSQL throughput loss, large vs small, 1 replica",
           (1 - rates[("postgres-1", args.large)] / rates[("postgres-1", args.small)]) * 100, "%", target=20)
    for total in (args.small, args.large):
        record(f"  2 replicas / 1 replica, {total:,} events",
               rates[("postgres-2", total)] / rates[("postgres-1", total)], "x")


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--small", type=int, default=200_000)
    parser.add_argument("--large", type=int, default=2_000_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--services", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=8.0, help="load time per store of the reporters' run")
    parser.add_argument("--postgres", help="PostgreSQL server URL for the replica runs (a database is made per run)")
    parser.add_argument("--only-postgres", action="store_true", help="measure the PostgreSQL runs only")
    return parser


def measure(record: Recorder, args: argparse.Namespace) -> None:
    logging.getLogger("svcgen.mesh.collector").setLevel(logging.ERROR)  # "store does not exist yet" is expected
    measure_postgres(record, args)
    if args.only_postgres:
        return
    small_rate, small_start, small_peak, small_file = ingest(args.small, args.batch)
    large_rate, large_start, large_peak, large_file = ingest(args.large, args.batch)
    small_name = f"trace ingest, {args.small:,} events, JSON store logging every batch"
    record(small_name, small_rate, "ev/s")
    record(f"trace ingest, {args.large:,} events, JSON store logging every batch", large_rate, "ev/s",
           baseline=small_name)
    record("  throughput loss, large vs small", (1 - large_rate / small_rate) * 100, "%", target=20)
    record(f"  RSS growth during {args.small:,}", small_peak - small_start, "MiB")
    record(f"  RSS growth during {args.large:,}", large_peak - large_start, "MiB")
    record("  store file after small run", small_file / 2**20, "MiB")
    record("  store file after large run", large_file / 2**20, "MiB")

    collector = fleet_collector(args.services)
    latency = per_call_us(collector.query_fleet, 50) / 1000
    record(f"svc:mesh:query:fleet, {args.services} services registered", latency, "ms")

    with tempfile.TemporaryDirectory() as directory:
        full = Path(directory) / "full.json"
        fill_to_the_caps(full)
        empty_rate, empty_p50 = reporters_on(Path(directory) / "empty.json", args.seconds)
        full_rate, full_p50 = reporters_on(full, args.seconds)
        store_mib = sum(path.stat().st_size for path in Path(directory).glob("full.json*")) / 2**20
    empty_name = f"{REPORTERS} reporters over HTTP, empty store: ingests"
    record(empty_name, empty_rate, "/s")
    record(f"{REPORTERS} reporters, every table at its cap: ingests", full_rate, "/s", baseline=empty_name)
    record("  ingest slowdown, full vs empty store", empty_rate / full_rate, "x", target=2)
    p50_name = "  trace query p50 meanwhile, empty store"
    record(p50_name, empty_p50, "ms")
    record("  trace query p50 meanwhile, full store", full_p50, "ms", baseline=p50_name)
    record("  query slowdown, full vs empty store", full_p50 / empty_p50, "x", target=2)
    record("  full store on disk after the run", store_mib, "MiB")


def main(argv: list[str] | None = None) -> list[Figure]:
    return run("bench/collector.py", measure, argv, parser())


if __name__ == "__main__":
    main()
