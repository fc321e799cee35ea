"""The on-call view's costs (issue 29), in one run:

- memory of 24 h of time buckets for a fleet of 200 services x 50 topics (10,000 topic series, every slot of every
  series held: the worst case), measured as the RSS growth while filling them and as the rings' own bytes;
- the fleet query and a 1 h window topic query at that full store (10,000 counters, 200 registered services of
  50 topics each, the buckets full): medians of many calls, target p50 <= 50 ms;
- trace ingest throughput with the buckets counted, against the same ingest with bucket counting switched off
  (today's path without the buckets), alternating rounds in the same run: target within 10 %.

    PYTHONPATH=. python -m bench.oncall [--services 200] [--topics 50] [--events 100000] [--json FILE]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import time
from typing import Any

from bench.collector import batch, rss_mib
from bench.harness import Figure, Recorder, run
from svcgen.collector import Collector, CollectorLimits
from svcgen.collector.artifacts import build_windows
from svcgen.collector.buckets import BLOCK_MINUTES, CELL_WIDTH, RECENT_MINUTES, SERIES_BYTES, minute_of

NOW = 1_800_000_000.0


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--services", type=int, default=200)
    parser.add_argument("--topics", type=int, default=50, help="topics per service")
    parser.add_argument("--events", type=int, default=100_000, help="trace events per ingest round")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--ingest-only", action="store_true", help="measure only the ingest throughput")
    return parser


def full_store(services: int, topics: int) -> Collector:
    """A memory collector with every service registered (`topics` each), a counter per (service, topic) and 24 h of
    buckets in every series: one full cell per minute of the last hour and per ten minutes of the day."""
    collector = Collector(limits=CollectorLimits(counters=services * topics, bucket_series=services * topics),
                          clock=lambda: NOW)  # fmt: skip
    for n in range(services):
        name = f"svc{n:03d}"
        collector.register({"service": name, "instanceId": f"{name}-1", "descriptorHash": f"sha256:{name}",
                            "topics": [{"id": f"{name}:op{t}", "requestSchema": {"type": "object"},
                                        "responseSchema": {}} for t in range(topics)]})  # fmt: skip
        collector.heartbeat({"service": name, "instanceId": f"{name}-1", "descriptorHash": f"sha256:{name}"})
        collector.traces({"events": [{"traceId": f"{n:016x}{t:016x}", "spanId": f"{n:08x}{t:08x}", "service": name,
                                      "topic": f"{name}:op{t}", "status": "ok", "durationMs": 2.0}
                                     for t in range(topics)]})  # fmt: skip
    return collector


def fill_buckets(collector: Collector, services: int, topics: int) -> None:
    book = collector.backend.trace_log.buckets  # type: ignore[attr-defined]
    now = minute_of(NOW)
    cell = [600.0, 600.0, 1800.0] + [0.0] * (CELL_WIDTH - 3)
    cell[3 + 3] = 600.0
    for n in range(services):
        for t in range(topics):
            key = (f"svc{n:03d}", f"svc{n:03d}:op{t}", "", "http", "ok")
            for minute in range(now - RECENT_MINUTES + 1, now + 1):
                book.merge_topic(key, minute, cell, 1)
            for block in range(now - 1440 + 1, now + 1, BLOCK_MINUTES):
                book.merge_topic(key, block, cell, BLOCK_MINUTES)


def p50_ms(call: Any, times: int) -> float:
    samples = []
    for _ in range(times):
        started = time.perf_counter()
        answer = call()
        samples.append((time.perf_counter() - started) * 1000)
        assert answer.status == "ok", answer
    print(f"    (fastest of {times}: {min(samples):.2f} ms; load average {os.getloadavg()[0]:.1f})")
    return statistics.median(samples)


def ingest_rate(events: int, buckets: bool) -> float:
    collector = Collector()
    if not buckets:
        collector.backend.trace_log._minute = lambda _: None  # type: ignore[attr-defined]
    batches = [batch(offset, 100) for offset in range(0, events, 100)]
    gc.collect()
    started = time.process_time()  # this process's CPU time: what other processes on a shared machine take shows less
    for body in batches:
        collector.traces(body)
    return events / (time.process_time() - started)


def measure(record: Recorder, args: argparse.Namespace) -> None:
    if not args.ingest_only:
        measure_store(record, args)
    measure_ingest(record, args)


def measure_store(record: Recorder, args: argparse.Namespace) -> None:
    series = args.services * args.topics
    gc.collect()
    before = rss_mib()
    collector = full_store(args.services, args.topics)
    gc.collect()
    registered = rss_mib()
    fill_buckets(collector, args.services, args.topics)
    gc.collect()
    filled = rss_mib()
    book = collector.backend.trace_log.buckets  # type: ignore[attr-defined]
    assert len(book.topics) == series
    held = sum(ring.values.buffer_info()[1] * 8 + ring.stamps.buffer_info()[1] * 8
               for one in book.topics.values() for ring in (one.recent, one.older) if ring is not None)  # fmt: skip
    record(f"24 h of buckets, {args.services} services x {args.topics} topics ({series:,} series, every slot "
           "held): the rings' bytes", held / 2**20, "MiB")  # fmt: skip
    record("  RSS of the whole full store (catalog, counters, buckets)", filled - before, "MiB")
    record("  RSS growth while the day's buckets were filled", filled - registered, "MiB")
    record("  per series at most", SERIES_BYTES / 1024, "KiB")

    gc.freeze()  # as `svcgen collector serve` does after each artifact write (host.py)
    record("fleet query p50, full store", p50_ms(collector.query_fleet, 30), "ms", target=50)
    name = f"svc{args.services // 2:03d}:op{args.topics // 2}"
    topic = {"topic": name, "window": "1h"}
    record("topic query p50, 1 h window, full store", p50_ms(lambda: collector.query_topic(topic), 200), "ms",
           target=50)  # fmt: skip
    day = {"topic": name, "window": "24h"}
    record("topic query p50, 24 h window, full store", p50_ms(lambda: collector.query_topic(day), 200), "ms")
    ranked = {"window": "1h"}
    record("fleet query with a 1 h window (ranking every series) p50", p50_ms(lambda: collector.query_fleet(ranked),
                                                                               5), "ms")  # fmt: skip
    started = time.perf_counter()
    build_windows(collector.artifact_snapshot(), generated_at="now")
    record("artifact snapshot + windows.json at the full store (every artifact write)", time.perf_counter() - started,
           "s")  # fmt: skip
    gc.unfreeze()
    gc.collect()


def measure_ingest(record: Recorder, args: argparse.Namespace) -> None:
    with_rates, without_rates = [], []
    for _ in range(args.rounds):  # alternating, so drift of a shared machine hits both alike
        without_rates.append(ingest_rate(args.events, buckets=False))
        with_rates.append(ingest_rate(args.events, buckets=True))
    without, with_ = statistics.median(without_rates), statistics.median(with_rates)
    ratios = sorted(w / o for w, o in zip(with_rates, without_rates, strict=True))
    print(f"    (per-round ratios with/without: {', '.join(f'{r:.2f}' for r in ratios)})")
    base = "trace ingest, memory store, bucket counting off (median)"
    record(base, without, "ev/s")
    record("trace ingest, memory store, buckets counted (median)", with_, "ev/s", baseline=base)
    record("  ingest throughput loss from the buckets", (1 - with_ / without) * 100, "%", target=10)


def main(argv: list[str] | None = None) -> list[Figure]:
    return run("bench/oncall.py", measure, argv, parser())


if __name__ == "__main__":
    main()
