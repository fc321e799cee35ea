"""manifest.json and services/<name>.json: field sets, health mapping, drift, per-service spec."""

from __future__ import annotations

import hashlib
import json

from svcgen.collector.artifacts import (
    HEALTHY,
    UNHEALTHY,
    UNREACHABLE,
    build_estate_manifest,
    build_service_documents,
)
from svcgen.collector.artifacts.health import HealthVerdict, service_health
from tests.support.snapshots import (
    NOW,
    ORDERS_PREVIOUS_SPEC_HASH,
    ORDERS_SPEC,
    catalog_entry,
    descriptor,
    empty_snapshot,
    instance,
    sample_snapshot,
    spec_hash,
    topic,
)
from tests.support.snapshots import poll as poll_entry

MANIFEST_SERVICE_KEYS = {"name", "status", "contractDrift", "specUrl", "healthUrl"}
SERVICE_KEYS = {"name", "fetchedAtUtc", "specJson", "specHash", "previousSpecHash", "contractDrift", "health", "error",
                "instances", "staleInstances"}


def _services() -> dict[str, dict[str, object]]:
    manifest = build_estate_manifest(sample_snapshot(), generated_at=NOW)
    return {service["name"]: service for service in manifest["services"]}


def test_manifest_has_exactly_the_design_field_set() -> None:
    manifest = build_estate_manifest(sample_snapshot(), generated_at=NOW)
    assert set(manifest) == {"generatedAtUtc", "services"}
    assert manifest["generatedAtUtc"] == NOW
    assert [service["name"] for service in manifest["services"]] == [
        "inventory",
        "mesh-collector",
        "orders",
        "payments",
        "payments-eu",
    ]
    for service in manifest["services"]:
        assert set(service) == MANIFEST_SERVICE_KEYS


def test_status_maps_poll_and_heartbeats() -> None:
    services = _services()
    assert services["orders"]["status"] == HEALTHY  # poll newer than the heartbeat, healthy aggregate
    assert services["payments"]["status"] == UNHEALTHY  # heartbeat says isHealthy false
    assert services["inventory"]["status"] == UNREACHABLE  # newest poll failed, no heartbeat
    assert services["payments-eu"]["status"] == UNREACHABLE  # registered only: no health ever seen


def test_contract_drift_from_issue_or_hash_mismatch() -> None:
    services = _services()
    assert services["orders"]["contractDrift"] is True  # contract-drift issue
    assert services["payments"]["contractDrift"] is True  # heartbeat hash differs
    assert services["payments-eu"]["contractDrift"] is False


def test_surface_urls_only_for_a_known_base_url() -> None:
    services = _services()
    assert services["orders"]["specUrl"] == "http://orders.internal:8000/svc/spec"
    assert services["orders"]["healthUrl"] == "http://orders.internal:8000/svc/health"
    assert services["payments"]["specUrl"] is None
    assert services["payments"]["healthUrl"] is None
    manifest = build_estate_manifest(sample_snapshot(), generated_at=NOW, prefix="ops/")
    assert manifest["services"][0]["specUrl"] == "http://inventory.internal:8000/ops/spec"


def test_surface_urls_leave_out_the_poll_urls_credentials() -> None:
    """`--poll stock=http://user:secret@stock:8000`: the poller authenticates with them; the published artifacts
    (served beside the dashboard) name the surfaces without them."""
    snapshot = empty_snapshot()
    snapshot["polls"] = [poll_entry("stock", NOW, base_url="http://user:s3cret@stock.internal:8000")]
    service = build_estate_manifest(snapshot, generated_at=NOW)["services"][0]
    assert service["specUrl"] == "http://stock.internal:8000/svc/spec"
    assert service["healthUrl"] == "http://stock.internal:8000/svc/health"


def test_service_document_of_a_polled_service() -> None:
    document = build_service_documents(sample_snapshot())["orders"]
    assert set(document) == SERVICE_KEYS
    assert isinstance(document["specJson"], str)
    assert json.loads(document["specJson"]) == ORDERS_SPEC
    assert document["specHash"] == spec_hash(ORDERS_SPEC)
    assert document["specHash"] == "sha256:" + hashlib.sha256(document["specJson"].encode()).hexdigest()
    assert document["previousSpecHash"] == ORDERS_PREVIOUS_SPEC_HASH
    assert document["fetchedAtUtc"] == "2026-11-22T10:05:00.000Z"
    assert document["health"]["healthChecks"]["cache"] == {"status": "warning", "detail": "slow"}
    assert document["error"] is None


def test_failed_poll_shows_its_error_and_no_health() -> None:
    document = build_service_documents(sample_snapshot())["inventory"]
    assert document["error"] == "connection refused"
    assert document["health"] is None
    assert document["specJson"] is not None  # the last successful spec is still shown


def test_registered_only_service_shows_the_spec_its_descriptor_implies() -> None:
    document = build_service_documents(sample_snapshot())["payments-eu"]
    spec = json.loads(document["specJson"])
    assert spec["service"] == "payments-eu"
    assert [entry["id"] for entry in spec["topics"]] == ["payments:capture"]
    assert document["specHash"] == spec_hash(spec)
    assert document["previousSpecHash"] is None
    assert document["fetchedAtUtc"] == "2026-11-22T10:02:00.000Z"
    assert document["health"] is None


def test_a_service_with_no_contract_has_nulls_not_missing_keys() -> None:
    snapshot = empty_snapshot()
    snapshot["instances"] = [instance("ghost", "g-1")]
    document = build_service_documents(snapshot)["ghost"]
    assert set(document) == SERVICE_KEYS
    assert document["specJson"] is None and document["specHash"] is None and document["fetchedAtUtc"] is None


def test_heartbeat_after_a_failed_poll_overrides_unreachable() -> None:
    failed = poll_entry("orders", "2026-11-22T10:00:00.000Z", ok=False, error="timeout")
    late_beat = instance("orders", "o-1", at="2026-11-22T10:01:00.000Z")
    early_beat = instance("orders", "o-1", at="2026-11-22T09:59:00.000Z")
    assert service_health(failed, [late_beat]).status == HEALTHY
    assert service_health(failed, [early_beat]).status == UNREACHABLE
    assert service_health(failed, []).health is None


def test_any_unhealthy_recent_heartbeat_makes_the_service_unhealthy() -> None:
    beats = [
        instance("orders", "o-1", at="2026-11-22T10:02:00.000Z"),
        instance("orders", "o-2", at="2026-11-22T10:01:00.000Z", healthy=False),
    ]
    verdict = service_health(None, beats)
    assert verdict.status == UNHEALTHY
    assert verdict.health == {"isHealthy": False, "healthChecks": {}}


def test_successful_poll_without_an_aggregate_is_healthy_and_no_evidence_is_null() -> None:
    assert service_health(poll_entry("orders", "2026-11-22T10:00:00.000Z"), []).status == HEALTHY
    assert service_health(None, [instance("orders", "o-1")]) == HealthVerdict(UNREACHABLE, None)


def test_503_aggregate_from_a_poll_is_unhealthy_with_its_checks() -> None:
    health = {"isHealthy": False, "healthChecks": {"database": {"status": "failed"}}}
    verdict = service_health(poll_entry("orders", "2026-11-22T10:00:00.000Z", health=health), [])
    assert verdict.status == UNHEALTHY
    assert verdict.health == health


def test_newest_service_version_stands_for_the_service() -> None:
    snapshot = empty_snapshot()
    snapshot["catalog"] = [
        catalog_entry(
            "orders",
            serviceVersion="2.0.0",
            descriptor=descriptor("orders", "2.0.0", [topic("orders:get", {}, {})]),
            registeredAt="2026-11-22T10:00:00.000Z",
        ),
        catalog_entry(
            "orders",
            serviceVersion="1.0.0",
            descriptor=descriptor("orders", "1.0.0", [topic("orders:old", {}, {})]),
            registeredAt="2026-11-22T09:00:00.000Z",
        ),
    ]
    spec = json.loads(build_service_documents(snapshot)["orders"]["specJson"])
    assert [entry["id"] for entry in spec["topics"]] == ["orders:get"]
