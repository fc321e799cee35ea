"""topics.json: consumers and producers, reserved flags, schemas, mismatches, changes, removed topics."""

from __future__ import annotations

from typing import Any

from svcgen.collector.artifacts import build_topics
from tests.support.snapshots import (
    CAPTURE,
    CAPTURE_PAYMENT,
    GET_ORDER,
    NOW,
    ORDER,
    PLACE_ORDER_V2,
    catalog_entry,
    descriptor,
    empty_snapshot,
    sample_snapshot,
    topic,
)

TOPIC_KEYS = {
    "topic",
    "version",
    "reserved",
    "consumers",
    "producers",
    "requestSchema",
    "responseSchema",
    "schemaMismatch",
    "compatibility",
    "versionCompatibility",
    "declaredSchemas",
    "retire",
}


def _topics(snapshot: Any = None) -> dict[tuple[str, str], dict[str, Any]]:
    document = build_topics(snapshot or sample_snapshot(), generated_at=NOW)
    return {(item["topic"], item["version"]): item for item in document["topics"]}


def test_field_set_and_order() -> None:
    document = build_topics(sample_snapshot(), generated_at=NOW)
    assert set(document) == {"generatedAtUtc", "topics", "removedTopics"}
    keys = [(item["topic"], item["version"]) for item in document["topics"]]
    assert keys == sorted(keys)
    for item in document["topics"]:
        assert set(item) - {"changes"} == TOPIC_KEYS


def test_consumers_serve_and_producers_send() -> None:
    topics = _topics()
    capture = topics[("payments:capture", "")]
    assert capture["consumers"] == [{"service": "payments"}, {"service": "payments-eu"}]
    assert capture["producers"] == [{"service": "orders"}]
    assert topics[("notifications:send", "v2")]["consumers"] == []
    assert topics[("notifications:send", "v2")]["producers"] == [{"service": "payments"}]


def test_versions_and_schemas_from_the_contract() -> None:
    topics = _topics()
    assert topics[("orders:get", "")]["requestSchema"] == GET_ORDER
    assert topics[("orders:place", "v2")]["requestSchema"] == PLACE_ORDER_V2
    assert topics[("orders:place", "v2")]["responseSchema"] == ORDER
    # providers win over producers: the first provider in name order is shown
    assert topics[("payments:capture", "")]["requestSchema"] == CAPTURE_PAYMENT


def test_reserved_topics_are_flagged() -> None:
    topics = _topics()
    assert topics[("svc:mesh:query:fleet", "")]["reserved"] is True
    assert topics[("orders:get", "")]["reserved"] is False


def test_schema_mismatch_only_when_providers_disagree() -> None:
    topics = _topics()
    assert topics[("payments:capture", "")]["schemaMismatch"] is True
    assert topics[("orders:get", "")]["schemaMismatch"] is False


def test_two_providers_agreeing_is_no_mismatch() -> None:
    snapshot = empty_snapshot()
    same = [topic("payments:capture", CAPTURE_PAYMENT, CAPTURE)]
    snapshot["catalog"] = [
        catalog_entry("a", descriptor=descriptor("a", "1", same), registeredAt=NOW),
        catalog_entry("b", descriptor=descriptor("b", "1", same), registeredAt=NOW),
    ]
    assert _topics(snapshot)[("payments:capture", "")]["schemaMismatch"] is False


def test_changes_only_present_on_a_changed_topic() -> None:
    topics = _topics()
    assert topics[("orders:place", "v2")]["changes"] == [
        {"service": "orders", "at": "2026-11-22T10:03:00.000Z", "fields": ["requestSchema"],
         "kind": "request-schema-changed",
         "description": "orders re-registered orders:place@v2 with a different request schema"}
    ]
    assert "changes" not in topics[("orders:place", "v1")]


def test_removed_topics_include_dropped_and_older_version_topics_not_still_served() -> None:
    document = build_topics(sample_snapshot(), generated_at=NOW)
    assert document["removedTopics"] == [
        {"topic": "orders:cancel", "version": ""},
        {"topic": "orders:lookup", "version": ""},
    ]  # orders:get, served by the old version too, is still served


def test_newer_spec_wins_over_an_older_descriptor() -> None:
    snapshot = empty_snapshot()
    snapshot["catalog"] = [
        catalog_entry(
            "orders",
            descriptor=descriptor("orders", "1", [topic("orders:get", {}, {})]),
            registeredAt="2026-11-22T10:00:00.000Z",
            spec={"service": "orders", "topics": [topic("orders:find", {}, {})]},
            specFetchedAt="2026-11-22T10:01:00.000Z",
        )
    ]
    assert list(_topics(snapshot)) == [("orders:find", "")]


def test_malformed_topic_entries_are_skipped_and_schemas_default_open() -> None:
    snapshot = empty_snapshot()
    hostile = {
        "service": "x",
        "topics": [{"id": 3}, "nope", {"id": "x:ok", "version": 7, "requestSchema": [1]}, None],
        "produces": "nope",
    }
    snapshot["catalog"] = [catalog_entry("x", descriptor=hostile, registeredAt=NOW)]
    topics = _topics(snapshot)
    assert list(topics) == [("x:ok", "")]
    assert topics[("x:ok", "")]["requestSchema"] == {}
    assert topics[("x:ok", "")]["responseSchema"] == {}


def test_a_version_with_digits_that_are_no_number_is_ordered_not_raised() -> None:
    # A registered topic version like "1\u00b2" (a superscript two: isdigit() takes it, int() refuses it) raised
    # ValueError in the version order: topics.json, and with it every artifact, stopped being written for the whole
    # estate. Now such a run is ordered as text, after the numbers.
    snapshot = empty_snapshot()
    odd = {"service": "x", "topics": [topic("x:get", {}, {}, version) for version in ("v1\u00b2", "v10", "v2")]}
    snapshot["catalog"] = [catalog_entry("x", descriptor=odd, registeredAt=NOW)]
    topics = _topics(snapshot)
    baselines = {version: item["compatibility"]["baselineVersion"] for (_, version), item in topics.items()}
    assert baselines == {"v1\u00b2": None, "v2": "v1\u00b2", "v10": "v2"}


def test_empty_snapshot_has_empty_arrays() -> None:
    document = build_topics(empty_snapshot(), generated_at=NOW)
    assert document == {"generatedAtUtc": NOW, "topics": [], "removedTopics": []}


def test_each_version_is_judged_against_the_previous_one_by_the_diff_rules() -> None:
    topics = _topics()
    assert topics[("orders:place", "v1")]["compatibility"] == {"baselineVersion": None, "overall": "baseline",
                                                               "changes": []}
    v2 = topics[("orders:place", "v2")]["compatibility"]
    assert (v2["baselineVersion"], v2["overall"]) == ("v1", "risky")  # v1 callers' `note` is ignored now
    assert v2["changes"][0] == {
        "kind": "request-property-removed", "direction": "request", "path": "request.note",
        "description": "old callers still send the property; the service now ignores what they say",
        "compatibility": "risky",
    }
    assert {change["kind"] for change in v2["changes"][1:]} == {"request-property-added-optional"}
    assert topics[("orders:place", "v1")]["versionCompatibility"] == {"v2": "risky"}  # v2 callers gift and tags ignored
    assert topics[("orders:place", "v2")]["versionCompatibility"] == {"v1": "risky"}
    assert topics[("orders:get", "")]["versionCompatibility"] == {}


def test_declared_schemas_list_every_current_copy_with_its_role() -> None:
    capture = _topics()[("payments:capture", "")]
    assert [(item["service"], item["role"]) for item in capture["declaredSchemas"]] == [
        ("payments", "consumer"), ("payments-eu", "consumer"), ("orders", "producer")]
    assert capture["declaredSchemas"][0]["requestSchema"] == CAPTURE_PAYMENT


def test_a_version_nobody_declares_or_called_in_the_window_is_retire_ready() -> None:
    topics = _topics()
    assert topics[("orders:place", "v1")]["retire"] == {"ready": True, "producers": [], "lastInvokedAt": None,
                                                        "windowSeconds": 7 * 86400}
    assert topics[("orders:place", "v2")]["retire"]["ready"] is False  # called two minutes before NOW
    assert topics[("orders:place", "v2")]["retire"]["lastInvokedAt"] == "2026-11-22T10:08:00.000Z"
    assert topics[("payments:capture", "")]["retire"]["ready"] is False  # orders still sends it
    later = build_topics(sample_snapshot(), generated_at="2026-12-22T10:00:00.000Z")["topics"]
    (v2,) = [item for item in later if (item["topic"], item["version"]) == ("orders:place", "v2")]
    assert v2["retire"]["ready"] is True  # a month later, that traffic is outside the window
