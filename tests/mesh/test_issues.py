from __future__ import annotations

import asyncio
import hashlib
import logging
from datetime import UTC, datetime

import pytest

from svcgen.runtime._invocation import Invocation
from svcgen.runtime._mesh.issues import IssueAggregator, classify, fingerprint
from svcgen.runtime._topics import UNKNOWN_TOPIC
from tests.support.fakes import SteppingClock, traced_service

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC).timestamp()


def aggregator(**options: int) -> IssueAggregator:
    return IssueAggregator("orders", clock=SteppingClock(start=T0, step=1.0), **options)


def expected_fingerprint(text: str) -> str:
    return hashlib.sha256(text.encode()).digest()[:16].hex()


def test_fingerprint_exact_value_and_full_wire_form() -> None:
    issues = aggregator()
    issues.record("orders:get", "timeout", "v2", "http", None, "t1")
    issues.record("orders:get", "timeout", "v2", "envelope", None, "t2")  # transport is not in the fingerprint
    assert issues.flush() == {
        "service": "orders",
        "issues": [{
            "fingerprint": expected_fingerprint("orders|orders:get|v2|dependency|timeout"),
            "classification": "dependency",
            "service": "orders",
            "topic": "orders:get",
            "version": "v2",
            "transport": "http",
            "status": "timeout",
            "count": 2,
            "firstSeen": "2026-11-22T10:00:00.000Z",
            "lastSeen": "2026-11-22T10:00:01.000Z",
            "exemplarTraceIds": ["t1", "t2"],
        }],
    }


def test_exception_type_decides_the_fingerprint_and_unknown_keys_are_omitted() -> None:
    issues = aggregator()
    issues.record("orders:get", "service-unavailable", exception_type="KeyError")
    [issue] = issues.flush()["issues"]
    assert issue["fingerprint"] == expected_fingerprint("orders|orders:get||exception|KeyError")
    assert issue["exceptionType"] == "KeyError"
    assert set(issue) == {
        "fingerprint", "classification", "service", "topic", "status", "exceptionType", "count", "firstSeen",
        "lastSeen", "exemplarTraceIds",
    }
    assert issue["exemplarTraceIds"] == []
    assert fingerprint("orders", "orders:get", "", "exception", "KeyError") == issue["fingerprint"]


@pytest.mark.parametrize(
    ("status", "exception_type", "classification"),
    [
        ("bad-request", None, "validation"),
        ("validation-error", None, "validation"),
        ("validation-error", "KeyError", "validation"),  # rule 1 before rule 2
        ("service-unavailable", "RuntimeError", "exception"),
        ("not-found", "ValueError", "exception"),  # rule 2 before rule 3
        ("not-found", None, "config-wiring"),
        ("unauthorized", None, "config-wiring"),
        ("forbidden", None, "config-wiring"),
        ("not-implemented", None, "config-wiring"),
        ("", None, "config-wiring"),
        ("service-unavailable", None, "dependency"),
        ("timeout", None, "dependency"),
        ("too-many-requests", None, "dependency"),
        ("unexpected-error", None, "exception"),
        ("conflict", None, "unclassified"),
        ("payment-declined", None, "unclassified"),
    ],
)
def test_classification_rules_in_order(status: str, exception_type: str | None, classification: str) -> None:
    """What the binding answers (the handler never returned it)."""
    assert classify(status, exception_type) == classification
    issues = aggregator()
    issues.record("t", status, exception_type=exception_type)
    [issue] = issues.flush()["issues"]
    assert issue["classification"] == classification
    assert issue["fingerprint"] == expected_fingerprint(f"orders|t||{classification}|{exception_type or status}")


@pytest.mark.parametrize(
    ("status", "classification"),
    [
        ("not-found", "client"),
        ("conflict", "client"),
        ("bad-request", "client"),
        ("validation-error", "client"),
        ("unauthorized", "config-wiring"),
        ("not-implemented", "config-wiring"),
        ("timeout", "dependency"),
        ("payment-declined", "unclassified"),
    ],
)
def test_a_handlers_own_business_answer_is_client(status: str, classification: str) -> None:
    assert classify(status, handler_answered=True) == classification
    issues = aggregator()
    issues.record("t", status, handler_answered=True)
    issues.record("t", status)
    recorded = {issue["classification"]: issue for issue in issues.flush()["issues"]}
    assert recorded[classification]["fingerprint"] == expected_fingerprint(f"orders|t||{classification}|{status}")
    # The same status answered by the binding is another issue when the rules tell them apart.
    assert len(recorded) == (2 if classification == "client" else 1)


def test_counts_are_deltas_across_flushes() -> None:
    issues = aggregator()
    for _ in range(3):
        issues.record("orders:get", "not-found")
    first = issues.flush()["issues"]
    issues.record("orders:get", "not-found")
    issues.record("orders:get", "not-found")
    second = issues.flush()["issues"]
    assert [i["count"] for i in first] == [3] and [i["count"] for i in second] == [2]
    assert first[0]["fingerprint"] == second[0]["fingerprint"]
    assert (first[0]["firstSeen"], first[0]["lastSeen"]) == ("2026-11-22T10:00:00.000Z", "2026-11-22T10:00:02.000Z")
    assert (second[0]["firstSeen"], second[0]["lastSeen"]) == ("2026-11-22T10:00:03.000Z", "2026-11-22T10:00:04.000Z")
    assert issues.flush() == {"service": "orders", "issues": []}


def test_empty_flush_is_a_valid_batch() -> None:
    assert aggregator().flush() == {"service": "orders", "issues": []}


def test_at_most_five_distinct_exemplars_per_window_the_first_ones() -> None:
    issues = aggregator()
    for trace in ["t1", "t1", None, "t2", "t3", "t4", "t5", "t6", "t7"]:
        issues.record("orders:get", "timeout", trace_id=trace)
    [issue] = issues.flush()["issues"]
    assert issue["count"] == 9
    assert issue["exemplarTraceIds"] == ["t1", "t2", "t3", "t4", "t5"]
    issues.record("orders:get", "timeout", trace_id="t8")
    assert issues.flush()["issues"][0]["exemplarTraceIds"] == ["t8"]
    with pytest.raises(ValueError):
        IssueAggregator("orders", max_exemplars=6)


def test_distinct_issue_cap_drops_new_issues_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    issues = aggregator(max_issues=2)
    with caplog.at_level(logging.WARNING, logger="svcgen.mesh.issues"):
        issues.record("a", "not-found")
        issues.record("b", "not-found")
        issues.record("c", "not-found")  # dropped
        issues.record("d", "not-found")  # dropped
        issues.record("a", "not-found")  # already in the window: still counted
        batch = issues.flush()
    assert [(i["topic"], i["count"]) for i in batch["issues"]] == [("a", 2), ("b", 1)]
    assert issues.dropped == 2
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2  # once when the window fills, once at the flush with the count
    assert "dropped" in messages[0] and "2 occurrence(s)" in messages[1]
    issues.record("c", "not-found")  # a new window has room again
    assert [i["topic"] for i in issues.flush()["issues"]] == ["c"]


def test_trace_middleware_feeds_failures_only_once_each() -> None:
    traced = traced_service()

    async def run() -> None:
        service = traced.service
        await service.invoke(Invocation("orders:get", body='{"orderId": "o-1"}'))
        await service.invoke(Invocation("orders:get", body='{"orderId": "missing"}'))
        await service.invoke(Invocation("orders:nope"))
        await service.invoke(Invocation("orders:explode", body='{"orderId": "o-1"}'))
        await service.invoke(Invocation("orders:explode", body='{"orderId": "o-2"}'))
        await service.invoke(Invocation("orders:place", body="{}", headers={"svc-version": "v2"}))
        await service.invoke(Invocation("orders:place", body='{"orderId": 5}', headers={"svc-version": "v2"}))
        await service.invoke(Invocation("svc:mesh"))

    asyncio.run(run())
    events = traced.exporter.events
    batch = traced.issues.flush()
    summary = [(i["topic"], i.get("version"), i["status"], i["classification"], i["count"]) for i in batch["issues"]]
    assert summary == [
        ("orders:get", None, "not-found", "client", 1),  # the handler's answer: no such order
        (UNKNOWN_TOPIC, None, "not-found", "config-wiring", 1),  # the binding's: no such topic, in the bucket
        ("orders:explode", None, "service-unavailable", "exception", 2),
        ("orders:place", "v2", "validation-error", "validation", 2),
    ]
    explode = batch["issues"][2]
    assert explode["exceptionType"] == "LookupError" and explode["transport"] == "envelope"
    assert explode["exemplarTraceIds"] == [e.trace_id for e in events if e.topic == "orders:explode"]
