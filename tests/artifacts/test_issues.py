"""issues.json: the merged issues with a fixed field set, newest first, from a real collector."""

from __future__ import annotations

from svcgen.collector import Collector
from svcgen.collector.artifacts import build_issues
from tests.support.snapshots import NOW, empty_snapshot, sample_snapshot

ISSUE_KEYS = {"fingerprint", "classification", "service", "topic", "version", "transport", "status", "exceptionType",
              "count", "firstSeen", "lastSeen", "exemplarTraceIds", "consumer", "detail"}


def _issue(fingerprint: str, last: str, **fields: object) -> dict[str, object]:
    return {"fingerprint": fingerprint, "classification": "client", "service": "orders", "topic": "orders:get",
            "status": "not-found", "count": 2, "firstSeen": "2026-11-22T10:00:00Z", "lastSeen": last,
            "exemplarTraceIds": ["a" * 32], **fields}


def test_merged_issues_newest_first_with_every_key() -> None:
    collector = Collector(clock=lambda: 1795342200.0)
    collector.issues({"service": "orders", "issues": [
        _issue("1" * 32, "2026-11-22T10:01:00Z"),
        _issue("2" * 32, "2026-11-22T10:05:00+00:00", classification="exception", status="service-unavailable",
               exceptionType="KeyError", transport="http", version="v2"),
    ]})
    collector.issues({"service": "orders", "issues": [_issue("1" * 32, "2026-11-22T10:02:00Z", count=3)]})
    document = build_issues(collector.snapshot(), generated_at=NOW)
    assert set(document) == {"generatedAtUtc", "issues"}
    newest, older = document["issues"]
    assert set(newest) == ISSUE_KEYS and set(older) == ISSUE_KEYS
    assert (newest["fingerprint"], newest["exceptionType"], newest["transport"], newest["version"]) == (
        "2" * 32, "KeyError", "http", "v2")
    assert newest["lastSeen"] == "2026-11-22T10:05:00.000Z"  # one UTC form
    assert (older["fingerprint"], older["count"], older["classification"]) == ("1" * 32, 5, "client")
    assert (older["version"], older["transport"], older["exceptionType"]) == (None, None, None)
    assert (older["consumer"], older["detail"]) == (None, None)  # only a contract mismatch has them
    assert older["exemplarTraceIds"] == ["a" * 32]


def test_the_collectors_own_issues_are_listed_and_malformed_entries_are_not() -> None:
    snapshot = sample_snapshot()
    snapshot["issues"].append({"service": "x"})
    snapshot["issues"].append("junk")  # type: ignore[arg-type]
    mismatch, drift = build_issues(snapshot, generated_at=NOW)["issues"]
    assert drift["classification"] == "contract-drift" and drift["exemplarTraceIds"] == []
    # orders' copy of payments:capture sends a flat amount; payments wants an `amount` object (payments-eu agrees).
    assert (mismatch["classification"], mismatch["service"], mismatch["consumer"], mismatch["topic"]) == (
        "contract-mismatch", "orders", "payments", "payments:capture")
    assert mismatch["detail"].startswith("orders -> payments: payments:capture.request.amount")
    assert mismatch["lastSeen"] == "2026-11-22T10:05:00.000Z"  # orders' newest statement (its polled spec)


def test_no_issues_is_an_empty_array() -> None:
    assert build_issues(empty_snapshot(), generated_at=NOW) == {"generatedAtUtc": NOW, "issues": []}
