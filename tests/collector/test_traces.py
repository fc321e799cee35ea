"""The trace window, exact counters beyond it, edges by parent span, and flat memory under an endless feed."""

from __future__ import annotations

import gc
import tracemalloc

import pytest

from svcgen.collector import CollectorLimits
from svcgen.collector.artifacts import build_topology
from svcgen.runtime._topics import UNKNOWN_TOPIC
from tests.support.feeds import collector, descriptor, event, memory, ok, topic


@pytest.mark.usefixtures("any_store")
def test_the_window_drops_oldest_and_counters_stay_exact() -> None:
    c = collector(limits=CollectorLimits(trace_window=50))
    for batch in range(10):
        c.traces({"events": [event(batch * 100 + n, status="ok" if n % 4 else "timeout") for n in range(100)]})
    window = c.snapshot()["traces"]
    assert window["cap"] == 50
    assert window["dropped"] == 950
    assert [e["spanId"] for e in window["events"]] == [f"{n:016x}" for n in range(950, 1000)]
    counters = {(k["status"]): k for k in c.snapshot()["counters"]}
    assert counters["ok"]["count"] == 750
    assert counters["timeout"]["count"] == 250
    assert counters["ok"]["timedCount"] == 750
    assert counters["ok"]["totalDurationMs"] == 1500.0
    assert ok(c.query_topic({"topic": "orders:get"}))["errors"] == 250
    # A trace that left the window is unknown.
    assert c.query_trace({"traceId": f"{0:032x}"}).status == "not-found"
    assert ok(c.query_trace({"traceId": f"{999:032x}"}))["events"][0]["spanId"] == f"{999:016x}"


@pytest.mark.usefixtures("any_store")
def test_edges_are_found_whichever_span_arrives_first() -> None:
    c = collector()
    client = event(1, service="shop", topic_id="shop:buy", span="c" * 16)
    server = event(2, service="pay", topic_id="pay:charge", span="s" * 16, parent="c" * 16, duration=4.0)
    failing = event(3, service="pay", topic_id="pay:charge", span="f" * 16, parent="d" * 16, status="timeout")
    late_client = event(4, service="shop", topic_id="shop:buy", span="d" * 16)
    internal = event(5, service="shop", topic_id="shop:inner", span="i" * 16, parent="c" * 16)
    c.traces({"events": [client, server]})
    c.traces({"events": [failing]})  # the server reports before its client
    c.traces({"events": [late_client, internal]})
    (edge,) = c.snapshot()["edges"]
    assert edge["client"] == "shop"
    assert edge["server"] == "pay"
    assert edge["count"] == 2
    assert edge["errors"] == 1
    assert edge["recentDurationsMs"] == [4.0, 2.0]


def test_tables_are_bounded_and_count_what_they_evict() -> None:
    c = collector(limits=CollectorLimits(counters=2, span_index=10, pending_children=5))
    c.traces({"events": [event(n, topic_id=f"t:{n}", parent=f"{n + 10_000:016x}") for n in range(20)]})
    assert len(memory(c).trace_log.counters) == 2
    assert memory(c).trace_log.evicted_counters == 18
    assert ok(c.query_fleet())["dropped"]["counters"] == 18
    assert len(memory(c).trace_log.spans) == 10
    assert len(memory(c).trace_log.pending) == 5


def test_memory_is_flat_under_an_endless_trace_feed() -> None:
    c = collector(limits=CollectorLimits(trace_window=1_000, span_index=2_000, pending_children=500))

    def feed(batches: int, offset: int) -> None:
        for b in range(batches):
            base = offset + b * 100
            c.traces({"events": [
                event(base + n, service=f"svc{n % 5}", topic_id=f"t:{n % 7}", parent=f"{base + n - 1:016x}",
                      status="ok" if n % 3 else "timeout")
                for n in range(100)
            ]})

    tracemalloc.start()
    try:
        feed(50, 0)
        gc.collect()
        after_n = tracemalloc.get_traced_memory()[0]
        feed(500, 10_000_000)
        gc.collect()
        after_10n = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert after_10n - after_n < 256 * 1024, (after_n, after_10n)
    assert memory(c).trace_log.dropped == 55_000 - 1_000
    assert sum(k["count"] for k in c.snapshot()["counters"]) == 55_000


@pytest.mark.usefixtures("any_store")
def test_counters_are_held_against_the_descriptor_whatever_the_reporter_sends() -> None:
    """A reporter that sends events of made-up topics itself (an old svcgen, a hostile sender with the token): once
    the service is described, its undeclared topics are counted in the bucket; before that, by name."""
    c = collector(limits=CollectorLimits(counters=6))
    before = [{**event(n), "topic": f"early:{n}"} for n in range(3)]
    assert ok(c.traces({"events": before})) == {"accepted": 3}
    assert ok(c.register(descriptor("orders", [topic("orders:get")]))) == {"accepted": 1}
    junk = [{**event(100 + n), "topic": f"junk:{n}"} for n in range(50)]
    real = [{**event(200 + n), "topic": "orders:get"} for n in range(4)]
    assert ok(c.traces({"events": [*real[:2], *junk, *real[2:]]})) == {"accepted": 54}
    assert ok(c.query_topic({"topic": "orders:get"}))["invocations"] == 4
    assert ok(c.query_topic({"topic": UNKNOWN_TOPIC}))["invocations"] == 50
    assert ok(c.query_topic({"topic": "early:1"}))["invocations"] == 1
    assert c.dropped()["counters"] == 0


@pytest.mark.usefixtures("any_store")
def test_the_events_a_service_publishes_and_subscribes_to_are_counted_under_their_own_names() -> None:
    """A publish and each delivery are trace events of the event's id (docs/events.md, Traces): a described
    service's declared events are its own, not made-up topics for the `svc:unknown` bucket."""
    c = collector()
    payload = {"type": "object"}
    booked = {"id": "bookings:booked", "payloadSchema": payload}
    ok(c.register({**descriptor("bookings", [topic("bookings:book")]), "events": {"publishes": [booked],
                                                                                   "subscribes": []}}))
    ok(c.register({**descriptor("notify", [topic("notify:sent")]),
                   "events": {"publishes": [], "subscribes": [{**booked, "publisher": "bookings"}]}}))
    published = {**event(1, service="bookings", topic_id="bookings:booked", status="accepted"), "transport": "event"}
    delivered = {**event(2, service="notify", topic_id="bookings:booked", parent=published["spanId"]),
                 "transport": "event"}
    assert ok(c.traces({"events": [published, delivered]})) == {"accepted": 2}
    answer = ok(c.query_topic({"topic": "bookings:booked"}))
    assert answer["invocations"] == 2
    assert answer["statusCounts"] == {"accepted": 1, "ok": 1}
    assert c.query_topic({"topic": UNKNOWN_TOPIC}).status == "not-found"


@pytest.mark.usefixtures("any_store")
def test_a_service_never_described_is_counted_under_a_bounded_number_of_names() -> None:
    """The same hole before a service registers: once it is counted under `undescribed_topics` names, further
    made-up names go to the bucket, the names it had keep counting."""
    c = collector(limits=CollectorLimits(undescribed_topics=5))
    first = [{**event(n), "topic": f"t{n}"} for n in range(5)]
    assert ok(c.traces({"events": first})) == {"accepted": 5}
    more = [{**event(10 + n), "topic": f"t{n}"} for n in range(10)]  # t0..t4 again, t5..t9 new
    assert ok(c.traces({"events": more})) == {"accepted": 10}
    counted = {counter["topic"]: counter["count"] for counter in c.snapshot()["counters"]}
    assert counted == {"t0": 2, "t1": 2, "t2": 2, "t3": 2, "t4": 2, UNKNOWN_TOPIC: 5}


@pytest.mark.usefixtures("any_store")
def test_server_side_failures_and_client_answers_are_counted_apart_on_edges_topics_and_topology() -> None:
    c = collector()
    calls = [("ok", 1), ("not-found", 2), ("not-found", 3), ("validation-error", 4), ("service-unavailable", 5),
             ("made-up", 6)]  # fmt: skip
    events = []
    for status, n in calls:
        events.append(event(n, service="shop", topic_id="shop:buy", span=f"{n:015x}c"))
        events.append(event(n, service="pay", topic_id="pay:charge", span=f"{n:015x}s", parent=f"{n:015x}c",
                            status=status))  # fmt: skip
    c.traces({"events": events})
    (edge,) = c.snapshot()["edges"]
    assert (edge["count"], edge["errors"], edge["clientErrors"]) == (6, 2, 3)
    charge = ok(c.query_topic({"topic": "pay:charge"}))
    assert (charge["errors"], charge["clientErrors"]) == (2, 3)
    assert (charge["errorRate"], charge["clientErrorRate"]) == (2 / 6, 3 / 6)
    (figures,) = build_topology(c.snapshot(), generated_at="2027-01-15T08:00:00Z")["edges"]
    assert (figures["errorRate"], figures["clientErrorRate"]) == (2 / 6, 3 / 6)
    assert ok(c.query_topic({"topic": "shop:buy"}))["errorRate"] == 0.0
