"""Ingest answers (spec "Collector ingest"): accepted counts, bad-request, not-found, malformed entries skipped."""

from __future__ import annotations

from typing import Any

import pytest

from svcgen.runtime._mesh.feeds import REREGISTER_KEY
from tests.support.feeds import collector, descriptor, event, heartbeat, issue, ok


@pytest.mark.usefixtures("any_store")
def test_each_feed_answers_its_accepted_count() -> None:
    c = collector()
    assert ok(c.register(descriptor())) == {"accepted": 1}
    assert ok(c.heartbeat(heartbeat())) == {"accepted": 1}
    assert ok(c.traces({"events": [event(1), event(2)]})) == {"accepted": 2}
    assert ok(c.issues({"service": "orders", "issues": [issue()]})) == {"accepted": 1}
    assert ok(c.issues({"service": "orders", "issues": []})) == {"accepted": 0}


@pytest.mark.usefixtures("any_store")
@pytest.mark.parametrize("feed", ["register", "heartbeat", "issues"])
@pytest.mark.parametrize("body", [{}, {"service": ""}, {"service": 7}, [], "orders", None])
def test_service_missing_is_bad_request(feed: str, body: Any) -> None:
    c = collector()
    payload = {**body, "issues": []} if isinstance(body, dict) and feed == "issues" else body
    assert getattr(c, feed)(payload).status == "bad-request"


@pytest.mark.usefixtures("any_store")
@pytest.mark.parametrize("body", [{}, {"events": {}}, {"events": "x"}, None])
def test_traces_without_an_event_list_is_bad_request(body: Any) -> None:
    assert collector().traces(body).status == "bad-request"


@pytest.mark.usefixtures("any_store")
def test_malformed_heartbeat_health_is_bad_request() -> None:
    c = collector()
    assert c.heartbeat({"service": "orders", "health": {"isHealthy": "yes"}}).status == "bad-request"
    # Health is optional on the wire side: it defaults to healthy with no checks.
    assert ok(c.heartbeat({"service": "orders", "sentAt": "2027-01-15T08:00:00Z"})) == {
        "accepted": 1,
        REREGISTER_KEY: True,  # nothing registered yet
    }


def test_1000_traces_with_10_malformed_accepts_990() -> None:
    c = collector()
    events: list[Any] = [event(n) for n in range(990)]
    malformed: list[Any] = [
        None,
        "event",
        {"spanId": "a", "service": "s", "topic": "t", "status": "ok"},  # no traceId
        {**event(1), "service": ""},
        {**event(2), "durationMs": "slow"},
        {**event(3), "durationMs": -1},
        {**event(4), "startedAt": "yesterday"},
        {**event(5), "topic": "x" * 10_000},
        {**event(6), "parentSpanId": 12},
        {**event(7), "status": None},
    ]
    for index, bad in enumerate(malformed):
        events.insert(index * 97, bad)
    assert len(events) == 1000
    assert ok(c.traces({"events": events})) == {"accepted": 990}
    assert c.dropped()["skipped"] == 10
    assert ok(c.query_topic({"topic": "orders:get"}))["invocations"] == 990


def test_malformed_issue_entries_are_skipped_and_the_batch_accepted() -> None:
    c = collector()
    entries: list[Any] = [
        issue(fingerprint="a" * 32),
        {**issue(), "count": 0},
        {**issue(), "count": True},
        {**issue(), "firstSeen": "never"},
        {**issue(), "service": "payments"},
        {**issue(), "exemplarTraceIds": [1]},
        "issue",
        issue(fingerprint="b" * 32),
    ]
    assert ok(c.issues({"service": "orders", "issues": entries})) == {"accepted": 2}
    assert c.dropped()["skipped"] == 6


@pytest.mark.parametrize(
    ("query", "body"),
    [
        ("query_service", {}),
        ("query_topic", {"service": "orders"}),
        ("query_trace", {"traceId": 5}),
        ("query_service", None),
    ],
)
@pytest.mark.usefixtures("any_store")
def test_a_missing_query_key_is_bad_request(query: str, body: Any) -> None:
    assert getattr(collector(), query)(body).status == "bad-request"


@pytest.mark.usefixtures("any_store")
def test_unknown_service_topic_or_trace_is_not_found() -> None:
    c = collector()
    c.register(descriptor())
    assert c.query_service({"service": "nobody"}).status == "not-found"
    assert c.query_topic({"topic": "nothing:here"}).status == "not-found"
    assert c.query_trace({"traceId": "0" * 32}).status == "not-found"
    assert ok(c.query_service({"service": "orders"}))["service"] == "orders"
    assert ok(c.query_topic({"topic": "orders:get"}))["consumers"] == ["orders"]


@pytest.mark.usefixtures("any_store")
def test_queries_answer_the_design_shapes() -> None:
    c = collector()
    c.register(descriptor("shop", [{"id": "shop:buy"}], produces=[{"id": "pay:charge"}]))
    c.register(descriptor("pay", [{"id": "pay:charge"}], instance="p-1"))
    c.heartbeat(heartbeat("shop", digest="sha256:shop--1"))
    c.traces({"events": [
        event(1, service="shop", topic_id="shop:buy", trace="t" * 32, span="a" * 16),
        event(2, service="pay", topic_id="pay:charge", trace="t" * 32, span="b" * 16, parent="a" * 16,
              status="timeout"),
    ]})
    fleet = ok(c.query_fleet({}))
    assert set(fleet) == {"services", "topics", "issues", "issuesOmitted", "dropped"}
    assert [s["service"] for s in fleet["services"]] == ["pay", "shop"]
    shop = fleet["services"][1]
    assert set(shop) == {"service", "topics", "health", "instances", "staleInstances", "missingFeeds"}
    assert shop["topics"] == 1
    # The messaging sense: shop sends pay:charge (its provider), pay handles it (its consumer).
    assert fleet["topics"] == [
        {"topic": "pay:charge", "providers": ["shop"], "consumers": ["pay"], "invocations": 1},
        {"topic": "shop:buy", "providers": [], "consumers": ["shop"], "invocations": 1},
    ]
    service = ok(c.query_service({"service": "shop"}))
    assert set(service) == {"service", "health", "instances", "invocations", "missingFeeds"}
    assert service["instances"][0]["instanceId"] == "i-1"
    assert {"healthy": True, "hashMatches": True}.items() <= service["instances"][0].items()
    assert ok(c.query_topic({"topic": "pay:charge"})) == {
        "topic": "pay:charge", "providers": ["shop"], "consumers": ["pay"], "invocations": 1, "errors": 1,
        "clientErrors": 0, "errorRate": 1.0, "clientErrorRate": 0.0, "statusCounts": {"timeout": 1},
        "versions": [{"version": "", "providers": ["shop"], "consumers": ["pay"], "invocations": 1,
                      "lastInvokedAt": "2027-01-15T08:00:00.000Z"}],
    }
    trace = ok(c.query_trace({"traceId": "t" * 32}))
    assert [e["spanId"] for e in trace["events"]] == ["a" * 16, "b" * 16]


@pytest.mark.usefixtures("any_store")
def test_times_outside_years_0001_to_9999_utc_are_never_acknowledged() -> None:
    """Issue 31: `9999-12-31T23:59:59-14:00` (the year 10000 in UTC) was acknowledged, then lost at restart or
    counted twice. Such a time is refused at ingest: the entry is skipped and counted, the rest taken."""
    c = collector()
    edges = ["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00"]
    events = [event(1), *({**event(2 + n), "startedAt": moment} for n, moment in enumerate(edges))]
    events.append({**event(9), "startedAt": "9999-12-31T23:59:59Z"})  # the last moment there is: taken
    assert ok(c.traces({"events": events})) == {"accepted": 2}
    entries = [issue(fingerprint="a" * 32), {**issue(fingerprint="b" * 32), "lastSeen": edges[0]}]
    assert ok(c.issues({"service": "orders", "issues": entries})) == {"accepted": 1}
    assert ok(c.query_fleet())["dropped"]["skipped"] == 3
    assert ok(c.query_topic({"topic": "orders:get"}))["versions"][0]["lastInvokedAt"] == "9999-12-31T23:59:59.000Z"
    refused = c.heartbeat({**heartbeat("orders"), "sentAt": edges[1]})
    assert refused.status == "bad-request"


@pytest.mark.usefixtures("any_store")
def test_names_with_bidirectional_overrides_never_reach_the_dashboard() -> None:
    """Issue 31: a right-to-left override in a name made the dashboard show it reversed ("payments" spoofed by
    "stnemyap" + U+202E). The feeds carry no bidirectional override or isolate: such an entry is skipped, such a
    register refused, so every name the dashboard shows reads as it is stored."""
    c = collector()
    spoof = "orders\u202egnp.exe"
    events = [event(1), {**event(2), "service": spoof}, {**event(3), "topic": "orders:\u2066get"}]
    assert ok(c.traces({"events": events})) == {"accepted": 1}
    refused = c.register(descriptor(spoof))
    assert refused.status == "bad-request" and "service" in (refused.detail or "")
    fleet = ok(c.query_fleet())
    assert [entry["service"] for entry in fleet["services"]] == ["orders"]
    assert fleet["dropped"]["skipped"] == 2
