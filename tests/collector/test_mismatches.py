"""Producers checked live against consumers: a producer's copy of a topic that does not fit the consumer's is one
`contract-mismatch` issue (fleet query, issues.json) and `schemaMismatch` in topics.json, gone once a register fixes
it; the topic query tells per version who declares it and when it was last invoked. On every store kind."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import httpx
import pytest

from svcgen.collector import Collector
from svcgen.collector.artifacts import build_issues, build_topics
from svcgen.collector.postgres import PostgresStore
from tests.support.browser import Element, chromium_dump_dom, parse_dom
from tests.support.feeds import START_TEXT, Clock, collector, descriptor, event, ok, topic
from tests.support.meshrun import TOKEN, MeshService, locked_mesh
from tests.support.processes import wait_for

STRING = {"type": "string"}
INTEGER = {"type": "integer"}
CAPTURE_REQUEST = {"type": "object", "properties": {"orderId": STRING, "amount": INTEGER},
                   "required": ["orderId", "amount"]}
CAPTURE_RESPONSE = {"type": "object", "properties": {"captureId": STRING, "capturedAt": STRING},
                    "required": ["captureId", "capturedAt"]}
WITHOUT_AMOUNT = {"type": "object", "properties": {"orderId": STRING}, "required": ["orderId"]}
WITHOUT_CAPTURED_AT = {"type": "object", "properties": {"captureId": STRING}, "required": ["captureId"]}


def short_hash(document: Any) -> str:
    """A descriptor hash that changes with the schemas (the collector keeps at most 256 characters of one)."""
    return hashlib.sha256(repr(document).encode()).hexdigest()[:16]


def capture(request: dict[str, Any] = CAPTURE_REQUEST, response: dict[str, Any] = CAPTURE_RESPONSE,
            version: str = "v1") -> dict[str, Any]:
    return topic("payments:capture", request, version, response)


def orders(copy: dict[str, Any], *, version: str | None = None) -> dict[str, Any]:
    """orders, which sends payments:capture with its own copy of the schemas."""
    return descriptor("orders", [topic("orders:place")], version=version, produces=[copy],
                      digest=f"sha256:orders-{version}-{short_hash(copy)}")


def payments(handled: dict[str, Any]) -> dict[str, Any]:
    digest = f"sha256:payments-{short_hash(handled['requestSchema'])}"
    return descriptor("payments", [handled], instance="p-1", digest=digest)


def mismatches(c: Collector) -> list[dict[str, Any]]:
    return [issue for issue in ok(c.query_fleet())["issues"] if issue["classification"] == "contract-mismatch"]


def schema_mismatch(c: Collector) -> bool:
    """topics.json flags some version of payments:capture."""
    return any(t["schemaMismatch"] for t in build_topics(c.snapshot(), generated_at="x")["topics"]
               if t["topic"] == "payments:capture")


@pytest.mark.usefixtures("any_store")
def test_a_copy_missing_a_required_field_is_one_mismatch_until_a_register_fixes_it() -> None:
    clock = Clock()
    c = collector(clock=clock)
    c.register(payments(capture()))
    clock.advance(5)
    c.register(orders(capture(WITHOUT_AMOUNT)))
    (issue,) = mismatches(c)
    assert issue["detail"].startswith("orders -> payments: payments:capture@v1.request.amount: ")
    assert {key: value for key, value in issue.items() if key not in ("fingerprint", "detail")} == {
        "classification": "contract-mismatch", "service": "orders", "topic": "payments:capture", "version": "v1",
        "status": "validation-error", "count": 1, "firstSeen": "2027-01-15T08:00:05.000Z",
        "lastSeen": "2027-01-15T08:00:05.000Z", "exemplarTraceIds": [], "consumer": "payments",
    }
    assert schema_mismatch(c)
    (listed,) = [i for i in build_issues(c.snapshot(), generated_at="x")["issues"]
                 if i["classification"] == "contract-mismatch"]
    assert (listed["fingerprint"], listed["detail"], listed["consumer"]) == (
        issue["fingerprint"], issue["detail"], "payments")

    # Registering the same again, from another instance too, is still the one issue, counted once.
    c.register(orders(capture(WITHOUT_AMOUNT)))
    c.register({**orders(capture(WITHOUT_AMOUNT)), "instanceId": "i-2"})
    (again,) = mismatches(c)
    assert (again["fingerprint"], again["count"]) == (issue["fingerprint"], 1)

    c.register(orders(capture()))
    assert mismatches(c) == [] and not schema_mismatch(c)
    assert [i["classification"] for i in build_issues(c.snapshot(), generated_at="x")["issues"]] == []


@pytest.mark.usefixtures("any_store")
def test_an_answer_the_producer_cannot_decode_is_a_response_mismatch() -> None:
    c = collector()
    c.register(orders(capture()))
    c.register(payments(capture(response=WITHOUT_CAPTURED_AT)))
    (issue,) = mismatches(c)
    assert issue["detail"].startswith("orders -> payments: payments:capture@v1.response.capturedAt: ")
    assert issue["status"] == "unexpected-error"


@pytest.mark.usefixtures("any_store")
def test_a_consumer_whose_polled_spec_changes_is_checked_again() -> None:
    clock = Clock()
    c = collector(clock=clock)
    c.register(orders(capture(WITHOUT_AMOUNT)))
    c.register(payments(capture(WITHOUT_AMOUNT)))
    assert mismatches(c) == []
    clock.advance(30)
    c.record_poll("payments", "http://payments", spec={"service": "payments", "topics": [capture()]}, health=None,
                  error=None)  # fmt: skip
    (issue,) = mismatches(c)
    assert (issue["consumer"], issue["lastSeen"]) == ("payments", "2027-01-15T08:00:30.000Z")


@pytest.mark.usefixtures("any_store")
def test_compatible_copies_and_other_versions_are_no_mismatch() -> None:
    c = collector()
    # orders sends less than payments accepts in its answer and more optional fields: both fit.
    c.register(orders(capture(response={"type": "object", "properties": {"captureId": STRING},
                                        "required": ["captureId"]})))  # fmt: skip
    c.register(payments(capture()))
    # A version nobody handles, and a handler of another version, are nothing to compare.
    c.register(descriptor("refunds", [capture(WITHOUT_AMOUNT, version="v2")], instance="r-1"))
    assert mismatches(c) == [] and not schema_mismatch(c)


@pytest.mark.usefixtures("any_store")
def test_a_schema_that_is_not_json_schema_is_not_judged_and_breaks_nothing() -> None:
    c = collector()
    # `enum: null` is no JSON Schema: the rules cannot compare it (they raise on it).
    c.register(orders(capture({"type": "object", "properties": {"orderId": {"enum": None}}})))
    c.register(payments(capture({"type": "object", "properties": {"orderId": {"enum": ["o-1"]}}})))
    assert mismatches(c) == [] and not schema_mismatch(c)
    assert build_issues(c.snapshot(), generated_at="x")["issues"] == []


@pytest.mark.usefixtures("any_store")
def test_only_a_services_current_register_is_checked() -> None:
    clock = Clock()
    c = collector(clock=clock)
    c.register(payments(capture()))
    c.register(orders(capture(WITHOUT_AMOUNT), version="1.0.0"))
    assert len(mismatches(c)) == 1
    clock.advance(10)
    c.register(orders(capture(), version="1.1.0"))  # the fix ships as a new serviceVersion
    assert mismatches(c) == []
    assert [s.get("serviceVersion") for s in ok(c.query_fleet())["services"] if s["service"] == "orders"] == [
        "1.0.0", "1.1.0"]


def test_replicas_on_one_database_list_the_same_mismatch_once(postgres_url: str) -> None:
    replicas = [collector(PostgresStore(postgres_url)) for _ in range(2)]
    try:
        replicas[0].register(payments(capture()))
        replicas[1].register(orders(capture(WITHOUT_AMOUNT)))
        replicas[0].register(orders(capture(WITHOUT_AMOUNT)))
        first, second = (mismatches(replica) for replica in replicas)
        assert len(first) == 1 and first == second
        replicas[1].register(orders(capture()))
        assert mismatches(replicas[0]) == mismatches(replicas[1]) == []
    finally:
        for replica in replicas:
            replica.flush()


@pytest.mark.usefixtures("any_store")
def test_the_topic_query_tells_per_version_who_declares_it_and_when_it_was_last_invoked() -> None:
    c = collector()
    c.register(orders(capture(version="v1")))
    c.register(payments(capture(version="v2")) | {"topics": [capture(version="v1"), capture(version="v2")]})
    later = "2027-01-15T09:30:00.000Z"
    c.traces({"events": [
        {**event(1, service="payments", topic_id="payments:capture"), "topicVersion": "v1"},
        {**event(2, service="payments", topic_id="payments:capture", status="conflict"), "topicVersion": "v1",
         "startedAt": later},
        {**event(3, service="payments", topic_id="payments:capture"), "topicVersion": "v3"},
    ]})  # fmt: skip
    answer = ok(c.query_topic({"topic": "payments:capture"}))
    assert answer["versions"] == [
        {"version": "v1", "providers": ["orders"], "consumers": ["payments"], "invocations": 2,
         "lastInvokedAt": later},
        {"version": "v2", "providers": [], "consumers": ["payments"], "invocations": 0, "lastInvokedAt": None},
        {"version": "v3", "providers": [], "consumers": [], "invocations": 1, "lastInvokedAt": START_TEXT},
    ]
    # v1 dropped by both: it stays listed, with nobody declaring it and its traffic.
    c.register(orders(capture(version="v2")))
    c.register(payments(capture(version="v2")))
    (v1, *_) = ok(c.query_topic({"topic": "payments:capture"}))["versions"]
    assert v1 == {"version": "v1", "providers": [], "consumers": [], "invocations": 2, "lastInvokedAt": later}


# ---- Live: a running collector fed by two generated services ---------------------------------------------------

PAYMENTS = """svcgen: 1
service: payments
mesh: {collector: "http://127.0.0.1:9", heartbeatSeconds: 0.2}
types:
  CapturePayment: {fields: {orderId: string, amountMinor: integer}}
  Capture: {fields: {captureId: string}}
topics:
  - {id: "payments:capture", version: v1, request: CapturePayment, response: Capture, routes: ["POST /captures"]}
"""
# orders' own copy of payments' types lost `amountMinor`: payments would refuse every capture with a 422.
ORDERS = """svcgen: 1
service: orders
mesh: {collector: "http://127.0.0.1:9", heartbeatSeconds: 0.2}
types:
  PlaceOrder: {fields: {orderId: string}}
  CapturePayment: {fields: {orderId: string}}
  Capture: {fields: {captureId: string}}
topics:
  - {id: "orders:place", request: PlaceOrder, response: Capture, routes: ["POST /orders"]}
produces:
  - {id: "payments:capture", version: v1, request: CapturePayment, response: Capture}
"""
BROKEN = "orders -> payments: payments:capture@v1.request.amountMinor: "


def test_a_running_collector_shows_the_broken_copy_in_the_fleet_query_and_the_dashboard(tmp_path: Path) -> None:
    services = [MeshService("payments", PAYMENTS), MeshService("orders", ORDERS)]
    with locked_mesh(tmp_path / "mesh", services) as mesh:

        def mismatch() -> list[Any]:
            issues = mesh.query("svc:mesh:query:fleet", {})["issues"]
            return [issue for issue in issues if issue["classification"] == "contract-mismatch"]

        (issue,) = wait_for(mismatch, timeout=30, what="the contract mismatch in the fleet query")

        def written() -> bool:
            answer = httpx.get(f"{mesh.collector}/issues.json", headers=mesh.headers(), timeout=5)
            return answer.status_code == 200 and any(i["classification"] == "contract-mismatch"
                                                     for i in answer.json()["issues"])

        wait_for(written, timeout=30, what="the contract mismatch in issues.json")
        dom = parse_dom(chromium_dump_dom(f"{mesh.collector}/#token={TOKEN}", tmp_path / "chromium"))

    assert (issue["service"], issue["consumer"], issue["topic"], issue["version"]) == (
        "orders", "payments", "payments:capture", "v1")
    assert issue["detail"].startswith(BROKEN)
    (body,) = dom.find_all(lambda e: e.tag == "body")
    errors = [item.text() for item in dom.by_id("dashboard-errors").find_all(lambda e: e.tag == "li")]
    assert (body.attrs.get("data-state"), errors) == ("ready", [])
    panel = dom.by_id("issues")
    assert texts(panel, "issue-classification") == ["contract-mismatch"]
    assert texts(panel, "issue-detail") == [issue["detail"]]
    (warnings,) = texts(panel, "estate-warnings")
    assert f"contract mismatch: {issue['detail']}" in warnings
    assert texts(dom.by_id("topics"), "schema-mismatch") == [issue["detail"]]


def texts(root: Element, css_class: str) -> list[str]:
    return [element.text() for element in root.by_class(css_class)]


def _publisher(payload: dict[str, Any]) -> dict[str, Any]:
    document = descriptor("orders", [topic("orders:place")], digest=f"sha256:orders-{short_hash(payload)}")
    document["events"] = {"publishes": [{"id": "orders:placed", "version": "", "payloadSchema": payload}],
                          "subscribes": []}
    return document


def _subscriber(payload: dict[str, Any]) -> dict[str, Any]:
    document = descriptor("billing", [], instance="b-1", digest=f"sha256:billing-{short_hash(payload)}")
    document["events"] = {"publishes": [], "subscribes": [
        {"id": "orders:placed", "version": "", "publisher": "orders", "payloadSchema": payload}]}
    return document


@pytest.mark.usefixtures("any_store")
def test_a_subscriber_whose_payload_copy_the_publisher_does_not_fill_is_a_contract_mismatch() -> None:
    c = collector()
    c.register(_subscriber(CAPTURE_REQUEST))  # billing needs orderId and amount
    c.register(_publisher(WITHOUT_AMOUNT))  # orders publishes orderId only
    (issue,) = mismatches(c)
    assert issue["detail"].startswith("orders -> billing: orders:placed.payload.amount: ")
    assert (issue["service"], issue["consumer"], issue["topic"]) == ("orders", "billing", "orders:placed")
    # A subscriber asking for less than is published is fine (payload flows publisher -> subscriber).
    c.register(_subscriber(WITHOUT_AMOUNT))
    c.register(_publisher(CAPTURE_REQUEST))
    assert mismatches(c) == []
    # A subscription whose publisher declares no such event is not judged.
    c.register(descriptor("orders", [topic("orders:place")], digest="sha256:orders-none"))
    assert mismatches(c) == []
