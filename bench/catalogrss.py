"""What the collector's byte budgets cost in memory (issue 31: the catalog budget understated RSS about 13 times):
a memory collector's catalog filled to its budget (`catalog_bytes`, JSON bytes of the descriptors held) and its
trace window to its cap, each measured as the process's RSS growth beside the budget it fills.

    PYTHONPATH=. python -m bench.catalogrss [--budget-mib 32] [--json FILE]
"""

from __future__ import annotations

import argparse
import gc

import orjson

from bench.collector import rss_mib
from bench.harness import Recorder, run
from svcgen.collector import Collector, CollectorLimits

TOPICS = 20


def descriptor(n: int) -> dict[str, object]:
    """A descriptor of about 16 KiB of JSON (20 topics with small object schemas), decoded from its JSON text as
    a register's body is: every object its own."""
    fields = {f"field{f}": {"type": "string", "maxLength": 64} for f in range(8)}
    document = {"service": f"svc{n:05d}", "descriptorHash": f"sha256:{n}", "topics": [
        {"id": f"svc{n:05d}:op{t}", "requestSchema": {"type": "object", "properties": fields},
         "responseSchema": {"type": "object", "properties": fields}} for t in range(TOPICS)]}  # fmt: skip
    decoded: dict[str, object] = orjson.loads(orjson.dumps(document))
    return decoded


def measure(record: Recorder, args: argparse.Namespace) -> None:
    budget = args.budget_mib * 2**20
    limits = CollectorLimits(catalog=1_000_000, instances=1_000_000, catalog_bytes=budget)
    gc.collect()
    before = rss_mib()
    collector = Collector(limits=limits)
    n = 0
    while collector.dropped()["catalog"] == 0:  # until the budget makes the first eviction
        collector.register(descriptor(n))
        n += 1
    gc.collect()
    grown = rss_mib() - before
    record(f"catalog at its budget ({args.budget_mib} MiB of JSON, {n:,} descriptors): RSS growth", grown, "MiB")
    record("  RSS per budgeted JSON byte, catalog", grown / args.budget_mib, "x")
    window = CollectorLimits().trace_window
    before = rss_mib()
    for start in range(0, window, 500):
        collector.traces({"events": [{"traceId": f"{e:032x}", "spanId": f"{e:016x}", "service": "svc00001",
                                      "topic": "svc00001:op1", "status": "ok", "durationMs": 1.5,
                                      "startedAt": "2027-01-15T08:00:00.000Z"}
                                     for e in range(start, start + 500)]})  # fmt: skip
    gc.collect()
    record(f"trace window at its cap ({window:,} events, default 8 MiB budget): RSS growth", rss_mib() - before, "MiB")


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--budget-mib", type=int, default=32)
    return parser


def main(argv: list[str] | None = None) -> None:
    run("bench/catalogrss.py", measure, argv, parser())


if __name__ == "__main__":
    main()
