"""Catalog rules: re-register diffs, hash mismatch and re-register, health, missingFeeds, polls."""

from __future__ import annotations

import pytest

from svcgen.collector.issuebook import CONTRACT_DRIFT
from svcgen.runtime._mesh.feeds import REREGISTER_KEY
from tests.support.feeds import Clock, collector, descriptor, event, heartbeat, issue, ok, topic

pytestmark = pytest.mark.usefixtures("any_store")


def test_catalog_is_keyed_by_service_and_version_and_reregister_replaces_the_key() -> None:
    c = collector()
    c.register(descriptor(version="1", digest="sha256:v1"))
    c.register(descriptor(version="2", digest="sha256:v2", instance="i-2"))
    c.register(descriptor(version="1", digest="sha256:v1b"))
    entries = {(e["service"], e.get("serviceVersion")): e for e in c.snapshot()["catalog"]}
    assert set(entries) == {("orders", "1"), ("orders", "2")}
    assert entries[("orders", "1")]["descriptorHash"] == "sha256:v1b"


def test_reregister_records_schema_changes_and_removed_topics() -> None:
    clock = Clock()
    c = collector(clock=clock)
    c.register(descriptor(topics=[topic("orders:get"), topic("orders:cancel"), topic("orders:list")]))
    clock.advance(60)
    c.register(descriptor(topics=[topic("orders:get", {"type": "string"}), topic("orders:list")]))
    entry = c.snapshot()["catalog"][0]
    assert [{key: change[key] for key in ("topic", "version", "at", "fields")} for change in entry["changes"]] == [
        {"topic": "orders:get", "version": "", "at": "2027-01-15T08:01:00.000Z", "fields": ["requestSchema"]}
    ]
    assert entry["removedTopics"] == [{"topic": "orders:cancel", "version": ""}]
    # Provided again: no longer removed.
    c.register(descriptor(topics=[topic("orders:get", {"type": "string"}), topic("orders:cancel")]))
    assert c.snapshot()["catalog"][0]["removedTopics"] == [{"topic": "orders:list", "version": ""}]


def test_a_descriptor_without_a_hash_gets_the_design_hash() -> None:
    c = collector()
    document = descriptor()
    del document["descriptorHash"]
    c.register(document)
    assert c.snapshot()["catalog"][0]["descriptorHash"].startswith("sha256:")


def test_hash_mismatch_files_drift_requests_reregister_and_register_clears_it() -> None:
    c = collector()
    c.register(descriptor(digest="sha256:old"))
    assert ok(c.heartbeat(heartbeat(digest="sha256:old"))) == {"accepted": 1}

    answer = ok(c.heartbeat(heartbeat(digest="sha256:new")))
    assert answer == {"accepted": 1, REREGISTER_KEY: True}
    (instance,) = c.snapshot()["instances"]
    assert instance["hashMatches"] is False
    assert instance["registerExpected"] is True
    assert ok(c.query_service({"service": "orders"}))["instances"][0]["hashMatches"] is False
    (drift,) = ok(c.query_fleet())["issues"]
    assert drift["classification"] == CONTRACT_DRIFT
    assert drift["service"] == "orders"
    assert drift["count"] == 1

    c.register(descriptor(digest="sha256:new"))
    (instance,) = c.snapshot()["instances"]
    assert instance["hashMatches"] is True
    assert instance["registerExpected"] is False
    assert ok(c.heartbeat(heartbeat(digest="sha256:new"))) == {"accepted": 1}


def test_another_instance_reregistering_a_new_contract_makes_the_old_one_drift() -> None:
    c = collector()
    c.register(descriptor(digest="sha256:a", instance="i-1"))
    c.register(descriptor(digest="sha256:b", instance="i-2"))
    answer = ok(c.heartbeat(heartbeat(digest="sha256:a", instance="i-1")))
    assert answer[REREGISTER_KEY] is True


def test_a_heartbeat_for_an_unknown_service_asks_for_a_register_without_drift() -> None:
    c = collector()
    assert ok(c.heartbeat(heartbeat()))[REREGISTER_KEY] is True
    assert ok(c.query_fleet())["issues"] == []
    assert c.snapshot()["instances"][0]["hashMatches"] is True


def test_health_unknown_healthy_degraded_unhealthy() -> None:
    clock = Clock()
    c = collector(clock=clock)

    def health() -> str:
        return str(ok(c.query_service({"service": "orders"}))["health"])

    c.register(descriptor())
    assert health() == "unknown"
    c.heartbeat(heartbeat(instance="i-1"))
    assert health() == "healthy"
    c.heartbeat(heartbeat(instance="i-2", healthy=False))
    assert health() == "degraded"
    c.heartbeat(heartbeat(instance="i-1", healthy=False))
    assert health() == "unhealthy"
    clock.advance(c.stale_after + 1)  # no fresh heartbeat: no health data
    assert health() == "unknown"
    c.record_poll("orders", "http://orders", spec=None, health={"isHealthy": True, "healthChecks": {}}, error=None)
    assert health() == "healthy"
    c.record_poll("orders", "http://orders-2", spec=None, health=None, error="connection refused")
    assert health() == "degraded"


def test_missing_feeds_in_order_and_issues_only_when_a_failure_is_unexplained() -> None:
    c = collector()

    def missing(service: str = "orders") -> list[str]:
        return list(ok(c.query_service({"service": service}))["missingFeeds"])

    c.traces({"events": [event(1)]})
    assert missing() == ["descriptor", "health"]
    c.traces({"events": [event(2, status="timeout")]})
    assert missing() == ["descriptor", "health", "issues"]
    c.register(descriptor())
    c.heartbeat(heartbeat())
    assert missing() == ["issues"]
    c.issues({"service": "orders", "issues": []})  # an empty batch explains: the issues feed is live
    assert missing() == []

    c.register(descriptor("quiet", instance="q-1"))
    assert missing("quiet") == ["health", "traces"]


def test_a_polled_service_appears_in_the_fleet_without_pushing() -> None:
    c = collector()
    spec = {"service": "stock", "topics": [topic("stock:get")]}
    c.record_poll("stock", "http://stock:8000", spec=spec, health={"isHealthy": True, "healthChecks": {}},
                  error=None)
    (service,) = ok(c.query_fleet())["services"]
    assert service["service"] == "stock"
    assert service["topics"] == 1
    assert service["health"] == "healthy"
    assert service["missingFeeds"] == ["traces"]
    snapshot = c.snapshot()
    (entry,) = snapshot["catalog"]
    assert entry["spec"] == spec
    assert entry["baseUrl"] == "http://stock:8000"
    assert entry["specHash"].startswith("sha256:")
    assert "previousSpecHash" not in entry
    (poll,) = snapshot["polls"]
    assert poll == {"service": "stock", "baseUrl": "http://stock:8000", "at": "2027-01-15T08:00:00.000Z",
                    "ok": True, "health": {"isHealthy": True, "healthChecks": {}}, "failures": 0}


def test_a_polled_service_without_health_checks_is_healthy_in_the_fleet_as_in_its_artifact() -> None:
    """Issue 31: the fleet said `unknown` for a polled service with no health checks while its artifact status
    (manifest.json) said `healthy`. A successful poll is health evidence: the service answered."""
    from svcgen.collector.artifacts.health import service_health

    c = collector()
    c.record_poll("stock", "http://stock", spec={"service": "stock", "topics": [topic("stock:get")]}, health=None,
                  error=None)  # fmt: skip
    (service,) = ok(c.query_fleet())["services"]
    assert service["health"] == "healthy"
    assert ok(c.query_service({"service": "stock"}))["health"] == "healthy"
    (poll,) = c.snapshot()["polls"]
    assert service_health(poll, []).status == service["health"]
    c.record_poll("stock", "http://stock", spec=None, health=None, error="connection refused")
    assert ok(c.query_fleet())["services"][0]["health"] == "unhealthy"  # unreachable, in the fleet's words


def test_a_new_spec_keeps_the_previous_hash_and_diffs_topics() -> None:
    c = collector()
    first = {"service": "stock", "topics": [topic("stock:get"), topic("stock:put")]}
    second = {"service": "stock", "topics": [topic("stock:get", {"type": "integer"})]}
    c.record_poll("stock", "http://stock", spec=first, health=None, error=None)
    first_hash = c.snapshot()["catalog"][0]["specHash"]
    c.record_poll("stock", "http://stock", spec=second, health=None, error=None)
    entry = c.snapshot()["catalog"][0]
    assert entry["previousSpecHash"] == first_hash
    assert entry["specHash"] != first_hash
    assert entry["removedTopics"] == [{"topic": "stock:put", "version": ""}]
    assert [change["topic"] for change in entry["changes"]] == ["stock:get"]


def test_a_failed_poll_is_recorded_never_ingested() -> None:
    c = collector()
    spec = {"service": "stock", "topics": [topic("stock:get")]}
    c.record_poll("stock", "http://stock", spec=spec, health={"isHealthy": True, "healthChecks": {}}, error=None)
    junk = {"service": "stock", "topics": [topic("stock:junk")]}
    c.record_poll("stock", "http://stock", spec=junk, health={"isHealthy": True}, error="HTTP 500")
    c.record_poll("stock", "http://stock", spec=junk, health=None, error="timeout")
    snapshot = c.snapshot()
    (poll,) = snapshot["polls"]
    assert poll["ok"] is False
    assert poll["failures"] == 2
    assert poll["error"] == "timeout"
    assert "health" not in poll
    assert snapshot["catalog"][0]["spec"] == spec
    assert ok(c.query_service({"service": "stock"}))["health"] == "unhealthy"
    c.record_poll("stock", "http://stock", spec=spec, health=None, error=None)
    assert c.snapshot()["polls"][0]["failures"] == 0


def test_issue_liveness_counts_per_service() -> None:
    c = collector()
    c.issues({"service": "orders", "issues": [issue()]})
    assert c.snapshot()["feeds"] == [
        {"service": "orders", "traces": False, "issueBatches": 1, "unexplainedFailures": 0}
    ]
