"""The PostgreSQL store on its own: versioned tables created on start, exact counts from several stores on one
database at once, the trace window bounded in the database, values PostgreSQL cannot hold refused, and an
unreachable database answered `service-unavailable` with the reason in health."""

from __future__ import annotations

import threading

import psycopg
import pytest

from svcgen.collector import CollectorLimits, StoreError
from svcgen.collector.postgres import SCHEMA_VERSION, PostgresStore
from tests.support.feeds import collector, event, issue, ok
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


def test_a_value_postgresql_cannot_hold_is_refused_and_nothing_counted(postgres_url: str) -> None:
    c = collector(PostgresStore(postgres_url))
    refused = c.traces({"events": [event(1, service="nul\x00here")]})
    assert refused.status == "bad-request" and "cannot be stored" in (refused.detail or "")
    assert c.issues({"service": "orders", "issues": [issue(fingerprint="f\x00")]}).status == "bad-request"
    ok(c.issues({"service": "orders", "issues": [issue(exemplars=["a\x00"])]}))  # a JSON document holds it
    assert c.heartbeat({"service": "lone\ud800"}).status == "bad-request"
    assert c.store_problem is None
    fleet = ok(c.query_fleet())
    assert fleet["dropped"]["refused"] == 3
    assert [entry["exemplarTraceIds"] for entry in fleet["issues"]] == [["a\x00"]]
    assert c.query_topic({"topic": "orders:get"}).status == "not-found"
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
