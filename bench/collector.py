"""Collector cost: trace ingest with the JSON-file store saving after every batch, at two sizes (throughput and
memory must not grow with history), and the fleet query with a fleet of registered services.

    PYTHONPATH=. python -m bench.collector [--small 200000] [--large 2000000] [--batch 100] [--services 200]
        [--json FILE]
"""

from __future__ import annotations

import argparse
import logging
import os
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.harness import Figure, Recorder, per_call_us, run
from svcgen.runtime._mesh.collector import Collector, JsonFileStore

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
        assert collector.save_failures == 0
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


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--small", type=int, default=200_000)
    parser.add_argument("--large", type=int, default=2_000_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--services", type=int, default=200)
    return parser


def measure(record: Recorder, args: argparse.Namespace) -> None:
    logging.getLogger("svcgen.mesh.collector").setLevel(logging.ERROR)  # "store does not exist yet" is expected
    small_rate, small_start, small_peak, small_file = ingest(args.small, args.batch)
    large_rate, large_start, large_peak, large_file = ingest(args.large, args.batch)
    small_name = f"trace ingest, {args.small:,} events, JSON store saved per batch"
    record(small_name, small_rate, "ev/s")
    record(f"trace ingest, {args.large:,} events, JSON store saved per batch", large_rate, "ev/s", baseline=small_name)
    record("  throughput loss, large vs small", (1 - large_rate / small_rate) * 100, "%", target=20)
    record(f"  RSS growth during {args.small:,}", small_peak - small_start, "MiB")
    record(f"  RSS growth during {args.large:,}", large_peak - large_start, "MiB")
    record("  store file after small run", small_file / 2**20, "MiB")
    record("  store file after large run", large_file / 2**20, "MiB")

    collector = fleet_collector(args.services)
    latency = per_call_us(collector.query_fleet, 50) / 1000
    record(f"svc:mesh:query:fleet, {args.services} services registered", latency, "ms")


def main(argv: list[str] | None = None) -> list[Figure]:
    return run("bench/collector.py", measure, argv, parser())


if __name__ == "__main__":
    main()
