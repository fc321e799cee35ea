"""Issue batches merge by fingerprint across instances: deltas accrue, earliest first, latest last, newest 5."""

from __future__ import annotations

import pytest

from svcgen.collector import CollectorLimits
from svcgen.runtime._mesh.issues import IssueAggregator
from tests.support.feeds import collector, issue, memory, ok


@pytest.mark.usefixtures("any_store")
def test_batches_from_two_instances_merge_by_fingerprint() -> None:
    c = collector()
    c.issues({"service": "orders", "issues": [
        issue(count=3, first="2027-01-15T08:00:05.000Z", last="2027-01-15T08:00:09.000Z", exemplars=["t1", "t2"])
    ]})
    c.issues({"service": "orders", "issues": [
        issue(count=2, first="2027-01-15T08:00:01.000Z", last="2027-01-15T08:00:30.000Z",
              exemplars=["t3", "t4", "t5", "t6"])
    ]})
    (merged,) = ok(c.query_fleet())["issues"]
    assert merged["count"] == 5
    assert merged["firstSeen"] == "2027-01-15T08:00:01.000Z"
    assert merged["lastSeen"] == "2027-01-15T08:00:30.000Z"
    assert merged["exemplarTraceIds"] == ["t2", "t3", "t4", "t5", "t6"]


@pytest.mark.usefixtures("any_store")
def test_an_older_batch_arriving_late_does_not_push_out_newer_exemplars() -> None:
    c = collector()
    c.issues({"service": "orders", "issues": [
        issue(last="2027-01-15T09:00:00.000Z", exemplars=["n1", "n2", "n3", "n4", "n5"])
    ]})
    c.issues({"service": "orders", "issues": [issue(last="2027-01-15T08:00:00.000Z", exemplars=["o1"])]})
    (merged,) = ok(c.query_fleet())["issues"]
    assert merged["exemplarTraceIds"] == ["n1", "n2", "n3", "n4", "n5"]
    assert merged["lastSeen"] == "2027-01-15T09:00:00.000Z"


@pytest.mark.usefixtures("any_store")
def test_other_time_forms_are_normalised() -> None:
    c = collector()
    c.issues({"service": "orders", "issues": [issue(first="2027-01-15T09:00:00+01:00", last="2027-01-15T08:30:00Z")]})
    (merged,) = ok(c.query_fleet())["issues"]
    assert (merged["firstSeen"], merged["lastSeen"]) == ("2027-01-15T08:00:00.000Z", "2027-01-15T08:30:00.000Z")


@pytest.mark.usefixtures("any_store")
def test_aggregator_batches_keep_their_wire_shape_and_fingerprint() -> None:
    clock_value = [1_800_000_000.0]
    aggregator = IssueAggregator("orders", clock=lambda: clock_value[0])
    aggregator.record("orders:get", "service-unavailable", exception_type="LookupError", trace_id="t1")
    aggregator.record("orders:get", "service-unavailable", exception_type="LookupError", trace_id="t2")
    batch = aggregator.flush()
    c = collector()
    assert ok(c.issues(batch)) == {"accepted": 1}
    aggregator.record("orders:get", "service-unavailable", exception_type="LookupError", trace_id="t3")
    c.issues(aggregator.flush())
    (merged,) = ok(c.query_fleet())["issues"]
    assert merged["fingerprint"] == batch["issues"][0]["fingerprint"]
    assert merged["count"] == 3
    assert merged["exemplarTraceIds"] == ["t1", "t2", "t3"]
    assert list(merged) == list(batch["issues"][0])


def test_the_issue_table_is_bounded_and_drops_the_least_recently_seen() -> None:
    c = collector(limits=CollectorLimits(issues=3))
    for n in range(5):
        c.issues({"service": "orders", "issues": [issue(fingerprint=f"{n:032x}")]})
    assert [i["fingerprint"][-1] for i in c.snapshot()["issues"]] == ["2", "3", "4"]
    assert memory(c).issue_book.dropped == 2
