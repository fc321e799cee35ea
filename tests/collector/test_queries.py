"""The read model against what the conformance data expects: one fleet entry per (service, serviceVersion), counts,
instances only once named, the messaging vocabulary, topics that stay known, and a schema change recorded once."""

from __future__ import annotations

import pytest

from svcgen.collector.artifacts import build_service_documents, build_topics
from svcgen.collector.collector import DEFAULT_RETENTION, DEFAULT_STALE_AFTER
from svcgen.runtime._mesh.feeds import REREGISTER_KEY
from tests.support.feeds import Clock, collector, descriptor, event, heartbeat, ok, topic

pytestmark = pytest.mark.usefixtures("any_store")


def test_the_fleet_has_one_entry_per_service_and_service_version() -> None:
    c = collector()
    c.register(descriptor(version="1.0.0", instance="i-1", topics=[topic("orders:get"), topic("orders:list")]))
    c.register(descriptor(version="2.0.0", instance="i-2", topics=[topic("orders:get")]))
    c.register(descriptor(version="2.0.0", instance="i-3", topics=[topic("orders:get")]))
    c.register(descriptor("pay", [topic("pay:charge", version="v1"), topic("pay:charge", version="v2")],
                          instance="p-1"))
    services = ok(c.query_fleet())["services"]
    assert [(s["service"], s.get("serviceVersion"), s["topics"], s["instances"]) for s in services] == [
        ("orders", "1.0.0", 2, 1),
        ("orders", "2.0.0", 1, 2),
        ("pay", None, 1, 1),  # no serviceVersion known: the key is left out; two versions of one topic id
    ]
    assert "serviceVersion" not in services[2]


def test_health_is_per_service_version_from_its_own_instances() -> None:
    c = collector()
    c.register(descriptor(version="1", instance="i-1", digest="sha256:one"))
    c.register(descriptor(version="2", instance="i-2", digest="sha256:two"))
    c.heartbeat(heartbeat(instance="i-1", digest="sha256:one", healthy=False))
    c.heartbeat(heartbeat(instance="i-2", digest="sha256:two"))
    services = ok(c.query_fleet())["services"]
    assert [(s["serviceVersion"], s["health"]) for s in services] == [("1", "unhealthy"), ("2", "healthy")]
    assert ok(c.query_service({"service": "orders"}))["health"] == "degraded"


def test_a_register_without_instance_id_creates_no_instance() -> None:
    c = collector()
    c.register(descriptor(instance=None, digest="sha256:a"))
    assert c.snapshot()["instances"] == []
    assert ok(c.query_fleet())["services"][0]["instances"] == 0
    assert ok(c.query_service({"service": "orders"}))["instances"] == []
    c.heartbeat(heartbeat(instance="i-1", digest="sha256:a"))
    assert ok(c.query_fleet())["services"][0]["instances"] == 1
    assert [i["instanceId"] for i in ok(c.query_service({"service": "orders"}))["instances"]] == ["i-1"]


def test_a_heartbeat_without_instance_id_counts_for_health_but_is_no_instance() -> None:
    c = collector()
    c.register(descriptor(instance=None, digest="sha256:a"))
    c.heartbeat(heartbeat(instance=None, digest="sha256:a", healthy=False))
    (entry,) = ok(c.query_fleet())["services"]
    assert (entry["instances"], entry["health"]) == (0, "unhealthy")


def test_a_register_without_instance_id_settles_the_drift_of_instances_on_its_hash() -> None:
    c = collector()
    c.register(descriptor(instance="i-1", digest="sha256:old"))
    assert ok(c.heartbeat(heartbeat(instance="i-1", digest="sha256:new")))[REREGISTER_KEY] is True
    c.register(descriptor(instance=None, digest="sha256:new"))
    (instance,) = c.snapshot()["instances"]
    assert (instance["hashMatches"], instance["registerExpected"]) == (True, False)
    assert REREGISTER_KEY not in ok(c.heartbeat(heartbeat(instance="i-1", digest="sha256:new")))


def test_consumers_handle_a_topic_and_providers_send_it() -> None:
    c = collector()
    c.register(descriptor("orders", [topic("orders:place")], produces=[topic("payments:capture")]))
    c.register(descriptor("payments", [topic("payments:capture")], instance="p-1"))
    assert ok(c.query_topic({"topic": "payments:capture"}))["providers"] == ["orders"]
    assert ok(c.query_topic({"topic": "payments:capture"}))["consumers"] == ["payments"]
    topics = {t["topic"]: t for t in ok(c.query_fleet())["topics"]}
    assert (topics["payments:capture"]["providers"], topics["payments:capture"]["consumers"]) == (
        ["orders"], ["payments"])
    assert (topics["orders:place"]["providers"], topics["orders:place"]["consumers"]) == ([], ["orders"])
    # topics.json says the same with its own word for the senders.
    (capture,) = [t for t in build_topics(c.snapshot(), generated_at="x")["topics"] if t["topic"] == "payments:capture"]
    assert (capture["producers"], capture["consumers"]) == ([{"service": "orders"}], [{"service": "payments"}])
    assert "events" not in build_topics(c.snapshot(), generated_at="x")  # no service declares events


def test_an_events_topic_answer_lists_its_publishers_and_subscribers_from_the_descriptors() -> None:
    c = collector()
    payload = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}
    booked = descriptor("bookings", [topic("bookings:book")])
    booked["events"] = {"publishes": [{"id": "bookings:booked", "version": "", "payloadSchema": payload}],
                        "subscribes": []}
    notified = descriptor("notifications", [], instance="n-1")
    notified["events"] = {"publishes": [], "subscribes": [
        {"id": "bookings:booked", "version": "", "publisher": "bookings", "payloadSchema": payload}]}
    billed = descriptor("billing", [], instance="b-1")
    billed["events"] = {"publishes": [], "subscribes": [
        {"id": "bookings:booked", "version": "", "publisher": "bookings", "payloadSchema": payload}]}
    for document in (booked, notified, billed):
        assert ok(c.register(document)) == {"accepted": 1}
    answer = ok(c.query_topic({"topic": "bookings:booked"}))
    assert (answer["publishers"], answer["subscribers"]) == (["bookings"], ["billing", "notifications"])
    # The answer's existing fields stay: an event is neither served nor sent as a topic.
    assert (answer["providers"], answer["consumers"], answer["invocations"]) == ([], [], 0)
    plain = ok(c.query_topic({"topic": "bookings:book"}))
    assert plain["consumers"] == ["bookings"] and "publishers" not in plain and "subscribers" not in plain
    assert c.query_topic({"topic": "bookings:cancelled"}).status == "not-found"
    # topics.json lists the same per event, with the payload schema.
    [listed] = build_topics(c.snapshot(), generated_at="x")["events"]
    assert (listed["event"], listed["version"], listed["payloadSchema"]) == ("bookings:booked", "", payload)
    assert listed["publishers"] == [{"service": "bookings"}]
    assert listed["subscribers"] == [{"service": "billing"}, {"service": "notifications"}]


def test_a_topic_once_declared_stays_known_with_its_counters() -> None:
    c = collector()
    c.register(descriptor(topics=[topic("orders:get"), topic("orders:cancel")]))
    c.traces({"events": [event(1, topic_id="orders:cancel", status="conflict"), event(2, topic_id="orders:cancel")]})
    c.register(descriptor(topics=[topic("orders:get")]))
    assert ok(c.query_topic({"topic": "orders:cancel"})) == {
        "topic": "orders:cancel", "providers": [], "consumers": [], "invocations": 2, "errors": 0,
        "clientErrors": 1, "errorRate": 0.0, "clientErrorRate": 0.5, "statusCounts": {"conflict": 1, "ok": 1},
        "versions": [{"version": "", "providers": [], "consumers": [], "invocations": 2,
                      "lastInvokedAt": "2027-01-15T08:00:00.000Z"}],
    }
    c.register(descriptor(topics=[topic("orders:get"), topic("orders:refund")]))
    c.register(descriptor(topics=[topic("orders:get")]))
    assert ok(c.query_topic({"topic": "orders:refund"}))["invocations"] == 0  # declared, dropped, never called
    assert "orders:refund" in {t["topic"] for t in ok(c.query_fleet())["topics"]}
    assert c.query_topic({"topic": "orders:never"}).status == "not-found"


def test_one_schema_change_is_recorded_once() -> None:
    clock = Clock()
    c = collector(clock=clock)
    old, new = topic("orders:get", {"type": "object"}), topic("orders:get", {"type": "string"})
    c.register(descriptor(topics=[old]))
    c.record_poll("orders", "http://orders", spec={"service": "orders", "topics": [old]}, health=None, error=None)
    clock.advance(30)
    c.register(descriptor(topics=[new]))
    clock.advance(30)
    c.record_poll("orders", "http://orders", spec={"service": "orders", "topics": [new]}, health=None, error=None)
    (entry,) = c.snapshot()["catalog"]
    assert [(change["topic"], change["at"]) for change in entry["changes"]] == [
        ("orders:get", "2027-01-15T08:00:30.000Z")]
    (listed,) = build_topics(c.snapshot(), generated_at="x")["topics"]
    assert listed["changes"] == [{"service": "orders", "at": "2027-01-15T08:00:30.000Z", "fields": ["requestSchema"],
                                  "kind": "request-schema-changed",
                                  "description": "orders re-registered orders:get with a different request schema"}]
    # Two instances of one serviceVersion disagreeing (a rolling deploy) flip the descriptor back and forth:
    # no new schema, no new change. A schema never seen before is.
    c.register(descriptor(topics=[old]))
    c.register(descriptor(topics=[new]))
    assert len(c.snapshot()["catalog"][0]["changes"]) == 1
    c.register(descriptor(topics=[topic("orders:get", {"type": "integer"})]))
    assert [change["at"] for change in c.snapshot()["catalog"][0]["changes"]] == [
        "2027-01-15T08:00:30.000Z", "2027-01-15T08:01:00.000Z"]


@pytest.mark.usefixtures("any_store")
def test_an_instance_that_missed_three_heartbeats_is_stale_not_healthy_and_a_long_silent_one_goes() -> None:
    clock = Clock()
    c = collector(clock=clock)
    c.register(descriptor(instance="i-1"))
    for instance in ("i-1", "i-2", "i-3"):
        c.heartbeat(heartbeat(instance=instance))
    clock.advance(DEFAULT_STALE_AFTER / 2)
    c.heartbeat(heartbeat(instance="i-1"))
    clock.advance(DEFAULT_STALE_AFTER / 2 + 1)  # i-2 and i-3 missed three beats; i-1 did not
    (orders,) = ok(c.query_fleet())["services"]
    assert (orders["instances"], orders["staleInstances"], orders["health"]) == (3, 2, "healthy")
    views = {view["instanceId"]: view for view in ok(c.query_service({"service": "orders"}))["instances"]}
    assert (views["i-1"]["stale"], views["i-1"]["healthy"]) == (False, True)
    assert views["i-2"]["stale"] is True and "healthy" not in views["i-2"]
    documents = build_service_documents(c.snapshot())
    assert documents["orders"]["staleInstances"] == 2
    assert [(i["instanceId"], i["stale"], i["healthy"]) for i in documents["orders"]["instances"]] == [
        ("i-1", False, True), ("i-2", True, None), ("i-3", True, None)]
    clock.advance(DEFAULT_STALE_AFTER)
    (orders,) = ok(c.query_fleet())["services"]
    assert (orders["staleInstances"], orders["health"]) == (3, "unknown")  # no live evidence: not healthy
    clock.advance(DEFAULT_RETENTION)
    (orders,) = ok(c.query_fleet())["services"]
    assert (orders["instances"], orders["staleInstances"]) == (0, 0)
    assert ok(c.query_service({"service": "orders"}))["instances"] == []
    assert build_service_documents(c.snapshot())["orders"]["instances"] == []
