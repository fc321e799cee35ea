"""The collector on PostgreSQL at fleet scale (issue 31): a full store of 10,000 services, 1,000,000 trace events,
100,000 counters and 100,000 issue fingerprints, built in the database with generate_series (a few minutes on
2 shared cores; feeding it through the collector would take hours), then measured through a collector replica
served over HTTP:

- p50 of each query (fleet: its default page of 200, a page of 1,000 and a later page; service, topic, trace by id,
  trace of a missing id), target 50 ms;
- trace ingest alone, then with 6 query clients asking meanwhile (same run), target at least 80 % of alone;
- the replica's RSS after the run, target 300 MB;
- heartbeat cost at 10 and at 10,000 instances of one service (same run), target flat (ratio 1.5 at most).

    PYTHONPATH=. python -m bench.fullstore [--services 10000] [--events 1000000] [--issues 100000]
        [--seconds 8] [--postgres URL] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from bench.collector import answering, drop_database, envelope, fresh_database, postgres_server
from bench.harness import Recorder, run
from bench.http import free_port
from svcgen.collector import CollectorLimits
from svcgen.collector.postgres import _COUNTER_KEY as COUNTER_KEY  # the same keys the collector writes
from svcgen.collector.postgres import PostgresStore

TOPICS = 5
QUERY_CLIENTS = 6
STARTED_AT = "2027-01-15T08:00:00.000Z"


def limits(args: argparse.Namespace) -> CollectorLimits:
    """Caps a fleet of this size needs (the defaults suit a few hundred services)."""
    return CollectorLimits(trace_window=args.events, trace_window_bytes=2**40, counters=args.services * TOPICS * 2,
                           edges=args.services, issues=args.issues, catalog=args.services + 10,
                           instances=args.services + 20_000, services=args.services, catalog_bytes=2**34)  # fmt: skip


def build(url: str, args: argparse.Namespace) -> float:
    """Fill the tables in the database itself; seconds taken."""
    import psycopg

    store = PostgresStore(url)  # its tables, empty
    store.open(limits(args))
    store.close()
    started = time.monotonic()
    services, events, issues = args.services, args.events, args.issues
    with psycopg.connect(url, autocommit=True) as db:
        db.execute(
            "INSERT INTO collector_catalog (kind, service, key, document, bytes, touched) "
            "SELECT 'catalog', 'svc' || s, '', json_build_object('service', 'svc' || s, 'descriptor', "
            "json_build_object('service', 'svc' || s, 'topics', (SELECT json_agg(json_build_object('id', "
            "'svc' || s || ':op' || t, 'requestSchema', json_build_object('type', 'object'), 'responseSchema', "
            "'{}'::json)) FROM generate_series(0, %s - 1) t), 'produces', json_build_array(json_build_object('id', "
            "'svc' || ((s + 1) %% %s) || ':op0', 'requestSchema', '{}'::json, 'responseSchema', '{}'::json))), "
            "'descriptorHash', 'sha256:' || s, 'registeredAt', %s::text, 'changes', '[]'::json, 'removedTopics', "
            "'[]'::json), 300, nextval('collector_touch') FROM generate_series(0, %s - 1) s",
            (TOPICS, services, STARTED_AT, services),
        )
        db.execute(  # the topic index the collector keeps beside the catalog: handled and sent topics
            "INSERT INTO collector_topics (topic, service) SELECT 'svc' || s || ':op' || t, 'svc' || s "
            "FROM generate_series(0, %s - 1) s, generate_series(0, %s - 1) t UNION "
            "SELECT 'svc' || ((s + 1) %% %s) || ':op0', 'svc' || s FROM generate_series(0, %s - 1) s",
            (services, TOPICS, services, services),
        )
        db.execute(
            "INSERT INTO collector_catalog (kind, service, key, document, bytes, touched) "
            "SELECT 'instances', 'svc' || s, 'i-' || s, json_build_object('service', 'svc' || s, 'instanceId', "
            "'i-' || s, 'hashMatches', true, 'registerExpected', false, 'descriptorHash', 'sha256:' || s, "
            "'health', json_build_object('isHealthy', true, 'healthChecks', '{}'::json), 'lastHeartbeatAt', %s::text), "
            "40, nextval('collector_touch') FROM generate_series(0, %s - 1) s",
            (STARTED_AT, services),
        )
        db.execute(
            "INSERT INTO collector_feeds (service, traces, issue_batches, unexplained_failures, touched) "
            "SELECT 'svc' || s, true, 1, 0, nextval('collector_touch') FROM generate_series(0, %s - 1) s",
            (services,),
        )
        db.execute(
            "INSERT INTO collector_events (trace_id, span_id, parent_span_id, service, bytes, event) "
            "SELECT lpad(to_hex(n), 32, '0'), lpad(to_hex(n), 16, '0'), NULL, 'svc' || (n %% %s), 200, "
            "json_build_object('traceId', lpad(to_hex(n), 32, '0'), 'spanId', lpad(to_hex(n), 16, '0'), "
            "'service', 'svc' || (n %% %s), 'topic', 'svc' || (n %% %s) || ':op' || (n %% %s), 'status', 'ok', "
            "'durationMs', 1.5, 'startedAt', %s::text) FROM generate_series(1, %s) n",
            (services, services, services, TOPICS, STARTED_AT, events),
        )
        db.execute(
            "INSERT INTO collector_counters (key, service, topic, version, status, count, total_duration_ms, "
            f"timed_count, first_started_at, last_started_at, touched) SELECT {COUNTER_KEY}, service, topic, "
            "version, status, 20, 30.0, 20, %s, %s, nextval('collector_touch') FROM (SELECT 'svc' || s AS service, "
            "'svc' || s || ':op' || t AS topic, '' AS version, st AS status FROM generate_series(0, %s - 1) s, "
            "generate_series(0, %s - 1) t, unnest(ARRAY['ok', 'timeout']) st) AS k",
            (STARTED_AT, STARTED_AT, services, TOPICS),
        )
        db.execute(
            "INSERT INTO collector_issues (fingerprint, issue, touched) SELECT lpad(to_hex(n), 32, '0'), "
            "json_build_object('fingerprint', lpad(to_hex(n), 32, '0'), 'classification', 'dependency', "
            "'service', 'svc' || (n %% %s), 'topic', 'svc' || (n %% %s) || ':op0', 'status', 'timeout', 'count', "
            "3, 'firstSeen', %s::text, 'lastSeen', %s::text, 'exemplarTraceIds', '[]'::json), "
            "nextval('collector_touch') FROM generate_series(1, %s) n",
            (services, services, STARTED_AT, STARTED_AT, issues),
        )
        totals = {"window:events": events, "window:bytes": events * 200, "rows:collector_counters":
                  services * TOPICS * 2, "rows:collector_issues": issues, "rows:collector_feeds": services,
                  "rows:catalog": services, "rows:instances": services, "bytes:catalog": services * 300,
                  "bytes:instances": services * 40}  # fmt: skip
        for name, value in totals.items():
            db.execute("UPDATE collector_totals SET value = %s WHERE name = %s", (value, name))
        db.execute("VACUUM ANALYZE")
    return time.monotonic() - started


SERVER = """
import sys, uvicorn
from svcgen.collector import Collector, CollectorLimits, collector_service
from svcgen.collector.postgres import _COUNTER_KEY as COUNTER_KEY  # the same keys the collector writes
from svcgen.collector.postgres import PostgresStore
from svcgen.runtime._http.app import create_app
limits = CollectorLimits(**{limits!r})
app = create_app(collector_service(Collector(PostgresStore({url!r}), limits=limits)))
uvicorn.run(app, host="127.0.0.1", port={port}, log_level="warning")
"""


def serve(url: str, args: argparse.Namespace) -> tuple[subprocess.Popen[bytes], str]:
    """A collector replica on the store, with the fleet's caps, over HTTP (uvicorn) in a process of its own."""
    port = free_port()
    fields = {name: getattr(limits(args), name) for name in CollectorLimits.__dataclass_fields__}
    code = SERVER.format(limits=fields, url=url, port=port)
    server = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL)
    return server, answering(server, port)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def ask(client: httpx.AsyncClient, base: str, topic: str, body: Any) -> float:
    started = time.perf_counter()
    answer = await client.post(base + "/svc/invoke", content=envelope(topic, body))
    elapsed = (time.perf_counter() - started) * 1e3
    assert answer.status_code == 200, answer.text
    assert answer.json()["statusCode"] in ("ok", "not-found"), answer.text[:300]
    return elapsed


QUERIES = {
    "fleet": ("svc:mesh:query:fleet", {}),
    "fleet, a page of 1,000": ("svc:mesh:query:fleet", {"limit": 1000}),
    "fleet, a later page": ("svc:mesh:query:fleet", {"servicesAfter": "svc5", "topicsAfter": "svc5"}),
    "service": ("svc:mesh:query:service", {"service": "svc4242"}),
    "topic": ("svc:mesh:query:topic", {"topic": "svc4242:op1"}),
    "trace by id": ("svc:mesh:query:trace", {"traceId": f"{424242:032x}"}),
    "trace of a missing id": ("svc:mesh:query:trace", {"traceId": "f" * 32}),
}


async def query_p50s(base: str, calls: int) -> dict[str, float]:
    async with httpx.AsyncClient(timeout=120) as client:
        return {name: statistics.median([await ask(client, base, *query) for _ in range(calls)])
                for name, query in QUERIES.items()}  # fmt: skip


async def ingest(base: str, seconds: float, query_clients: int) -> float:
    """Trace batches (100 events each) per second from 2 senders, while `query_clients` ask service, topic and
    trace queries in a loop."""
    stop = time.monotonic() + seconds
    sent = 0

    async def sender(number: int, client: httpx.AsyncClient) -> None:
        nonlocal sent
        while time.monotonic() < stop:
            first = 2_000_000 + (number * 1_000_000) + sent * 100
            events = [{"traceId": f"{first + e:032x}", "spanId": f"{first + e:016x}", "service": "svc7",
                       "topic": "svc7:op1", "status": "ok", "durationMs": 1.0, "startedAt": STARTED_AT}
                      for e in range(100)]  # fmt: skip
            answer = await client.post(base + "/svc/invoke", content=envelope("svc:mesh:traces", {"events": events}))
            assert answer.json()["statusCode"] == "ok", answer.text[:300]
            sent += 1

    async def asker(number: int, client: httpx.AsyncClient) -> None:
        names = ["service", "topic", "trace by id", "trace of a missing id"]
        asked = 0
        while time.monotonic() < stop:
            await ask(client, base, *QUERIES[names[(number + asked) % len(names)]])
            asked += 1

    async with httpx.AsyncClient(timeout=120) as client:
        began = time.monotonic()
        await asyncio.gather(*(sender(n, client) for n in range(2)), *(asker(n, client) for n in range(query_clients)))
        return sent / (time.monotonic() - began)


def heartbeat_ms(url: str, args: argparse.Namespace, instances: int, beats: int = 50) -> float:
    """Median ms of one heartbeat of a service that has `instances` instances (made by heartbeats first)."""
    from svcgen.collector import Collector

    collector = Collector(PostgresStore(url), limits=limits(args))
    name = f"beating{instances}"
    collector.register({"service": name, "topics": [], "descriptorHash": "sha256:b"})
    beat = {"service": name, "descriptorHash": "sha256:b", "health": {"isHealthy": True, "healthChecks": {}}}
    with __import__("psycopg").connect(url, autocommit=True) as db:  # the instances, as heartbeats would leave them
        db.execute(
            "INSERT INTO collector_catalog (kind, service, key, document, bytes, touched) SELECT 'instances', %s, "
            "'i-' || n, json_build_object('service', %s::text, 'instanceId', 'i-' || n, 'hashMatches', true, "
            "'registerExpected', false, 'descriptorHash', 'sha256:b', 'health', json_build_object('isHealthy', "
            "true, 'healthChecks', '{}'::json), 'lastHeartbeatAt', %s::text), 40, nextval('collector_touch') "
            "FROM generate_series(1, %s) n",
            (name, name, STARTED_AT, instances),
        )
        db.execute("UPDATE collector_totals SET value = value + %s WHERE name = 'rows:instances'", (instances,))
    times = []
    for n in range(beats):
        started = time.perf_counter()
        answer = collector.heartbeat({**beat, "instanceId": f"i-{1 + n % instances}"})
        times.append((time.perf_counter() - started) * 1e3)
        assert answer.is_successful, answer
    collector.flush()
    return statistics.median(times)


def measure(record: Recorder, args: argparse.Namespace) -> None:
    server_url = postgres_server(args.postgres)
    url = fresh_database(server_url)
    try:
        built = build(url, args)
        record(f"full store built in the database ({args.services:,} services, {args.events:,} events, "
               f"{args.issues:,} fingerprints)", built, "s", note="generate_series, not through the collector")
        server, base = serve(url, args)
        try:
            for name, p50 in asyncio.run(query_p50s(base, args.calls)).items():
                record(f"query {name} p50, full store", p50, "ms", target=50)
            alone_name = "trace ingest alone (batches of 100), full store"
            alone = record(alone_name, asyncio.run(ingest(base, args.seconds, 0)), "batches/s")
            busy = record(f"trace ingest with {QUERY_CLIENTS} query clients", asyncio.run(ingest(base, args.seconds,
                          QUERY_CLIENTS)), "batches/s", baseline=alone_name)  # fmt: skip
            record("  ingest with queries / alone", busy / alone * 100, "%", note="target at least 80 %")
            record("replica RSS after the run", rss_mib(server.pid), "MiB", target=300)
        finally:
            server.terminate()
            server.wait(timeout=30)
        few = record("heartbeat p50, 10 instances", heartbeat_ms(url, args, 10), "ms")
        many = record("heartbeat p50, 10,000 instances", heartbeat_ms(url, args, 10_000), "ms",
                      baseline="heartbeat p50, 10 instances")  # fmt: skip
        record("  heartbeat cost, 10,000 vs 10 instances", many / few, "x", target=1.5)
    finally:
        drop_database(server_url, url)


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--services", type=int, default=10_000)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--issues", type=int, default=100_000)
    parser.add_argument("--calls", type=int, default=15, help="calls per query for its p50")
    parser.add_argument("--seconds", type=float, default=8.0, help="seconds per ingest run")
    parser.add_argument("--postgres", help="PostgreSQL server URL (a database is made for the run, then dropped)")
    return parser


def main(argv: list[str] | None = None) -> None:
    run("bench/fullstore.py", measure, argv, parser())


if __name__ == "__main__":
    main()
