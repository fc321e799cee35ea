"""The PostgreSQL store on its own: versioned tables created on start, exact counts from several stores on one
database at once, the trace window bounded in the database, values PostgreSQL cannot hold refused, and an
unreachable database answered `service-unavailable` with the reason in health."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any
from urllib.parse import urlsplit

import httpx
import psycopg
import pytest

from svcgen.collector import CollectorLimits, StoreError, collector_service
from svcgen.collector.postgres import HEARTBEAT_ROWS, SCHEMA_VERSION, PoolWarnings, PostgresStore
from svcgen.runtime import create_app
from svcgen.runtime._mesh.feeds import REREGISTER_KEY
from tests.collector.test_service import invoke
from tests.support.databases import with_database
from tests.support.feeds import Clock, collector, descriptor, event, heartbeat, issue, ok, topic
from tests.support.server import free_port


def test_tables_are_created_once_with_their_version(postgres_url: str) -> None:
    for _ in range(2):
        store = PostgresStore(postgres_url)
        ok(collector(store).traces({"events": [event(1)]}))
        store.close()
    with psycopg.connect(postgres_url) as connection:
        versions = connection.execute("SELECT version FROM collector_schema").fetchall()
        events = connection.execute("SELECT count(*) FROM collector_events").fetchone()
    assert versions == [(SCHEMA_VERSION,)]
    assert events == (1,)


def test_tables_of_version_1_are_migrated_keeping_their_counters(postgres_url: str) -> None:
    c = collector(PostgresStore(postgres_url))
    ok(c.traces({"events": [event(n) for n in range(3)]}))
    c.flush()
    with psycopg.connect(postgres_url) as connection:  # back to version 1: counters keyed by their four names
        connection.execute("ALTER TABLE collector_counters DROP CONSTRAINT collector_counters_pkey")
        connection.execute("ALTER TABLE collector_counters DROP COLUMN key")
        connection.execute("ALTER TABLE collector_counters ADD PRIMARY KEY (service, topic, version, status)")
        connection.execute("UPDATE collector_schema SET version = 1")
    again = collector(PostgresStore(postgres_url))
    ok(again.traces({"events": [event(n) for n in range(3, 5)]}))
    assert ok(again.query_topic({"topic": "orders:get"}))["invocations"] == 5  # the old row counted on
    with psycopg.connect(postgres_url) as connection:
        assert connection.execute("SELECT version FROM collector_schema").fetchall() == [(SCHEMA_VERSION,)]
        assert connection.execute("SELECT count(*) FROM collector_counters").fetchone() == (1,)
    again.flush()


def test_tables_of_a_newer_version_are_refused_not_changed(postgres_url: str) -> None:
    PostgresStore(postgres_url).close()  # nothing made yet: open makes the tables
    store = PostgresStore(postgres_url)
    collector(store)
    store.close()
    with psycopg.connect(postgres_url) as connection:
        connection.execute("UPDATE collector_schema SET version = %s", (SCHEMA_VERSION + 1,))
    newer = PostgresStore(postgres_url)
    with pytest.raises(StoreError, match="newer"):
        collector(newer)
    newer.close()


def test_stores_on_one_database_count_each_event_and_batch_once(postgres_url: str) -> None:
    """Two collectors (two replicas) on one database, four threads: every batch sent through both, half of them
    without a batchId; the events of each trace are split across batches so edges span replicas."""
    replicas = [collector(PostgresStore(postgres_url)) for _ in range(2)]
    batches = []
    for number in range(40):
        client = event(2 * number, service="shop", topic_id="shop:buy", trace=f"t{number}", span=f"c{number}")
        status = "timeout" if number % 4 == 0 else "ok"
        server = event(2 * number + 1, service="pay", topic_id="pay:charge", trace=f"t{number}",
                       span=f"s{number}", parent=f"c{number}", status=status)  # fmt: skip
        batches.append({"events": [server], **({"batchId": f"b{number}"} if number % 2 else {})})
        batches.append({"events": [client]})
    failures: list[str] = []

    def send(part: int) -> None:
        for body in batches[part::4]:
            for replica in replicas:
                answer = replica.traces(dict(body))
                if answer.status != "ok":
                    failures.append(str(answer.detail))

    threads = [threading.Thread(target=send, args=(part,)) for part in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not failures
    for replica in replicas:
        assert ok(replica.query_topic({"topic": "pay:charge"}))["statusCounts"] == {"ok": 30, "timeout": 10}
        assert ok(replica.query_topic({"topic": "shop:buy"}))["invocations"] == 40
    (edge,) = replicas[0].snapshot()["edges"]
    assert (edge["client"], edge["server"], edge["count"], edge["errors"]) == ("shop", "pay", 40, 10)
    assert ok(replicas[1].query_fleet())["dropped"]["duplicateBatches"] == 20
    assert replicas[0].snapshot() | {"savedAt": ""} == replicas[1].snapshot() | {"savedAt": ""}
    for replica in replicas:
        replica.flush()


def test_the_trace_window_is_bounded_in_the_database(postgres_url: str) -> None:
    c = collector(PostgresStore(postgres_url), limits=CollectorLimits(trace_window=50))
    for start in range(0, 200, 20):
        ok(c.traces({"events": [event(n) for n in range(start, start + 20)]}))
    with psycopg.connect(postgres_url) as connection:
        held = connection.execute("SELECT count(*), min(seq) FROM collector_events").fetchone()
    assert held is not None and held[0] == 50
    fleet = ok(c.query_fleet())
    assert fleet["dropped"]["traceWindow"] == 150
    assert ok(c.query_topic({"topic": "orders:get"}))["invocations"] == 200  # the counters keep every event
    assert c.query_trace({"traceId": f"{10:032x}"}).status == "not-found"
    assert c.query_trace({"traceId": f"{199:032x}"}).status == "ok"
    c.flush()


def test_a_poisoned_entry_is_skipped_and_counted_and_the_rest_of_its_batch_stored(postgres_url: str) -> None:
    """Issue 31: one request with a NUL in its topic made the collector refuse the whole 500-event batch, and the
    reporter resent it forever. The entry is skipped and counted; the rest of the batch is stored."""
    c = collector(PostgresStore(postgres_url))
    events = [event(n) for n in range(500)]
    events[250] = {**events[250], "topic": "junk\x00topic"}
    assert ok(c.traces({"events": events, "batchId": "b-1"})) == {"accepted": 499}
    assert ok(c.issues({"service": "orders", "issues": [issue(fingerprint="f\x00"), issue()]})) == {"accepted": 1}
    assert c.heartbeat({"service": "lone\ud800"}).status == "bad-request"  # a whole feed with no UTF-8 form
    assert c.store_problem is None  # the input, never the database
    fleet = ok(c.query_fleet())
    assert (fleet["dropped"]["skipped"], fleet["dropped"]["refused"]) == (2, 1)
    assert ok(c.query_topic({"topic": "orders:get"}))["invocations"] == 499
    assert ok(c.traces({"events": events, "batchId": "b-1"})) == {"accepted": 499}  # a resend: answered alike
    c.flush()


def test_an_event_within_every_limit_fits_the_indexes(postgres_url: str) -> None:
    """Issue 31: three 256-character names of 4-byte characters overflowed PostgreSQL's btree row limit; the store
    said "the database cannot be reached" and the batch failed on every try."""
    c = collector(PostgresStore(postgres_url))
    wide = "\U0001f600" * 256  # 1,024 bytes of UTF-8
    long_event = {**event(1), "service": wide, "topic": wide, "topicVersion": wide, "instanceId": wide,
                  "traceId": wide, "spanId": "\U0001f601" * 256, "parentSpanId": wide, "transport": wide,
                  "startedAt": "2027-01-15T08:00:00.000Z"}  # fmt: skip
    assert ok(c.traces({"events": [long_event, event(2)]})) == {"accepted": 2}
    assert c.store_problem is None
    assert ok(c.query_topic({"topic": wide}))["invocations"] == 1
    assert ok(c.query_trace({"traceId": wide}))["events"][0]["topicVersion"] == wide
    assert ok(c.query_fleet())["dropped"]["skipped"] == 0  # stored whole: counters and time buckets keyed by hash
    c.flush()


def test_any_data_error_skips_the_entry_never_unreachable(postgres_url: str) -> None:
    """Any SQLSTATE data (22) or program-limit (54) error is unstorable input: the entry is skipped and counted,
    the store stays healthy. A narrowed column stands in for whatever a future value might break."""
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        c = collector(PostgresStore(postgres_url))
        connection.execute("ALTER TABLE collector_events ALTER COLUMN service TYPE varchar(40)")
    events = [event(n) for n in range(10)]
    events[3] = {**events[3], "service": "s" * 41}  # 22001: value too long for type character varying(40)
    assert ok(c.traces({"events": events})) == {"accepted": 9}
    assert c.store_problem is None
    assert ok(c.query_fleet())["dropped"]["skipped"] == 1
    assert ok(c.query_topic({"topic": "orders:get"}))["invocations"] == 9
    c.flush()


def test_an_unreachable_database_is_service_unavailable_and_unhealthy() -> None:
    store = PostgresStore(f"postgresql://postgres@127.0.0.1:{free_port()}/none", timeout=1.0, probe_interval=0.2)
    c = collector(store)  # starts although the database is away
    try:
        answer = c.traces({"events": [event(1)], "batchId": "b1"})
        assert answer.status == "service-unavailable"
        assert "send it again later" in (answer.detail or "")
        query = c.query_fleet()
        assert query.status == "service-unavailable" and "cannot read its store" in (query.detail or "")
        assert c.register({"service": "orders"}).status == "service-unavailable"
        assert c.store_problem is not None and "database" in c.store_problem
        assert c.store_failures == 2  # the feeds refused; a query is not a feed
    finally:
        c.flush()


def test_a_database_known_away_answers_a_feed_within_one_short_wait() -> None:
    """A pool that gives no connection in time (psycopg's PoolTimeout is an OperationalError too) is not a broken
    connection worth retrying: once the database is known away, a feed is answered after one short wait, so a
    reporter (2 s timeout) hears service-unavailable instead of timing out."""
    store = PostgresStore(f"postgresql://postgres@127.0.0.1:{free_port()}/none", timeout=1.0, probe_interval=60)
    started = time.monotonic()
    c = collector(store)
    try:
        assert time.monotonic() - started < 1.8  # one wait of the timeout at start, not one per retry
        assert c.store_problem is not None
        for n in range(3):
            started = time.monotonic()
            assert c.traces({"events": [event(n)]}).status == "service-unavailable"
            assert time.monotonic() - started < 0.9  # one 0.5 s wait, not three
    finally:
        c.flush()


def test_health_names_why_the_database_cannot_be_reached(postgres_url: str) -> None:
    """Not the pool's "no connection within 1 s": the reason itself, a refused port or a database that is not
    there, without the URL's password."""
    parts = urlsplit(with_database(postgres_url, "qa_no_such_database"))
    missing = parts._replace(netloc=f"{parts.username or 'postgres'}:s3cret@{parts.hostname}:{parts.port}").geturl()
    for wrong, reason in ((missing, "does not exist"),
                          (f"postgresql://postgres:s3cret@127.0.0.1:{free_port()}/none", "refused")):  # fmt: skip
        c = collector(PostgresStore(wrong, timeout=1.0, probe_interval=0.1))
        try:
            deadline = time.monotonic() + 5
            while reason not in (c.store_problem or "") and time.monotonic() < deadline:
                time.sleep(0.05)
            assert reason in (c.store_problem or ""), c.store_problem
            assert (c.store_problem or "").startswith("the database cannot be reached (")
            assert "s3cret" not in (c.store_problem or "")
        finally:
            c.flush()


def test_a_trace_query_reads_the_trace_alone_and_a_service_query_its_own_rows(postgres_url: str) -> None:
    """Issue 31: every query read the whole state back. With the catalog, issue and feed tables locked by another
    transaction (a query reading them would wait), the trace and topic-free queries still answer: they read only
    the rows they need."""
    c = collector(PostgresStore(postgres_url))
    ok(c.register(descriptor("orders", [topic("orders:get")])))
    ok(c.traces({"events": [event(1), event(2)]}))
    with psycopg.connect(postgres_url) as holder:
        holder.execute("LOCK TABLE collector_issues, collector_edges IN ACCESS EXCLUSIVE MODE")
        assert [e["spanId"] for e in ok(c.query_trace({"traceId": f"{1:032x}"}))["events"]] == [f"{1:016x}"]
        assert c.query_trace({"traceId": "f" * 32}).status == "not-found"
        assert ok(c.query_service({"service": "orders"}))["invocations"] == 2
        assert ok(c.query_topic({"topic": "orders:get"}))["consumers"] == ["orders"]
        holder.execute("LOCK TABLE collector_catalog IN ACCESS EXCLUSIVE MODE")
        assert ok(c.query_trace({"traceId": f"{2:032x}"}))["traceId"] == f"{2:032x}"
    c.flush()


def test_queries_cannot_starve_the_feeds(postgres_url: str) -> None:
    """Issue 31: six query clients cut ingest from about 120 to 2 requests/s. Queries wait in threads and on
    connections of their own: with every query connection stuck, feeds are still taken at once."""
    c = collector(PostgresStore(postgres_url, timeout=60.0))
    app = create_app(collector_service(c))
    ok(c.traces({"events": [event(1)]}))

    async def run() -> list[tuple[str, Any]]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://c") as client:
            with psycopg.connect(postgres_url) as holder:
                holder.execute("LOCK TABLE collector_issues IN ACCESS EXCLUSIVE MODE")  # every fleet query waits
                queries = [asyncio.create_task(invoke(client, "svc:mesh:query:fleet", {})) for _ in range(6)]
                for n in range(2, 12):
                    status, answer = await invoke(client, "svc:mesh:traces", {"events": [event(n)]})
                    assert (status, answer) == ("ok", {"accepted": 1})
                assert not any(query.done() for query in queries)  # the lock held them all the while
            return await asyncio.gather(*queries)

    answers = asyncio.run(run())
    assert [status for status, _ in answers] == ["ok"] * 6
    assert ok(c.query_topic({"topic": "orders:get"}))["invocations"] == 11
    c.flush()


def test_a_heartbeat_writes_its_own_instance_row_only(postgres_url: str) -> None:
    clock = Clock()
    c = collector(PostgresStore(postgres_url), clock=clock)
    ok(c.register(descriptor("orders", [topic("orders:get")])))
    for n in range(20):
        ok(c.heartbeat(heartbeat("orders", instance=f"i-{n}")))
    with psycopg.connect(postgres_url) as connection:
        before: dict[str, int] = dict(connection.execute("SELECT key, touched FROM collector_catalog"))
    clock.advance(30)
    answer = ok(c.heartbeat(heartbeat("orders", instance="i-7")))
    assert REREGISTER_KEY not in answer
    with psycopg.connect(postgres_url) as connection:
        after: dict[str, int] = dict(connection.execute("SELECT key, touched FROM collector_catalog"))
    assert {key for key in after if after[key] != before.get(key)} == {"i-7"}
    assert ok(c.query_service({"service": "orders"}))["instances"][-1]["instanceId"] == "i-7"
    drifted = c.heartbeat(heartbeat("orders", instance="i-3", digest="sha256:other"))
    assert ok(drifted)[REREGISTER_KEY] is True  # the descriptor hashes were read: drift is still found
    c.flush()


def test_a_heartbeat_reads_two_rows_whatever_the_instances_and_the_fleet(postgres_url: str) -> None:
    """Issue 31: a heartbeat's cost grew with its service's instances (and, planned badly, with the fleet)."""
    c = collector(PostgresStore(postgres_url))
    ok(c.register(descriptor("orders", [topic("orders:get")])))
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        connection.execute(
            "INSERT INTO collector_catalog (kind, service, key, document, bytes, touched) SELECT kind, service, key, "
            "'{}'::json, 2, nextval('collector_touch') FROM (SELECT 'instances' AS kind, 'orders' AS service, "
            "'x-' || n AS key FROM generate_series(1, 5000) n UNION ALL SELECT 'catalog', 'other-' || n, '' "
            "FROM generate_series(1, 5000) n) AS rows")  # fmt: skip
        connection.execute("ANALYZE collector_catalog")
        (plan,) = connection.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + HEARTBEAT_ROWS.replace("%s", "{}").format(
            "'orders'", "'orders'", "'x-4321'")).fetchone() or ()

    def read(node: dict[str, Any]) -> int:
        """Rows the node's scans touched: the ones they returned and the ones their filters removed."""
        own = node["Actual Rows"] + node.get("Rows Removed by Filter", 0) if "Scan" in node["Node Type"] else 0
        return own + sum(read(child) for child in node.get("Plans", ()))

    assert read(plan[0]["Plan"]) == 2, plan
    c.flush()


def test_psycopg_pool_warnings_are_throttled() -> None:
    """Issue 31: while the database was away psycopg's pool logged a warning on every connection attempt."""
    clock = Clock(0.0)
    throttle = PoolWarnings(interval=60.0, clock=clock)

    def passes(message: str) -> bool:
        return throttle.filter(logging.LogRecord("psycopg.pool", logging.WARNING, "", 0, message, None, None))

    assert [passes("error connecting") for _ in range(5)] == [True, False, False, False, False]
    clock.advance(61)
    record = logging.LogRecord("psycopg.pool", logging.WARNING, "", 0, "error connecting", None, None)
    assert throttle.filter(record) and "4 similar warning(s) of the pool held back" in record.getMessage()


def test_an_unreachable_database_logs_few_pool_warnings(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="psycopg.pool")
    store = PostgresStore(f"postgresql://postgres@127.0.0.1:{free_port()}/none", timeout=0.3, probe_interval=0.05)
    c = collector(store)
    try:
        for n in range(8):  # about 8 s, in which psycopg's pool, unthrottled, warns a dozen times
            assert c.traces({"events": [event(n)]}).status == "service-unavailable"
    finally:
        c.flush()
    assert sum(record.name == "psycopg.pool" for record in caplog.records) <= 1
