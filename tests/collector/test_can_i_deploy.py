"""`svcgen can-i-deploy` against a real fleet: a locked collector and two generated services on 127.0.0.1
(blocked while the producer still declares the version, safe once it moved and re-registered), the collector
unable to say (exit 2), PostgreSQL replicas answering for each other, traffic counted within the window from the
collector's time buckets, subscriptions against the live publishers, published events against the live
subscribers, and the verdict rules on their own."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from svcgen.candeploy import CollectorUnavailable, DeployReport, PeerCheck, fetch_contract, judge, parse_window
from svcgen.cli import main
from svcgen.collector.postgres import PostgresStore
from svcgen.collector.service import collector_service
from svcgen.runtime._http.app import create_app
from tests.support.feeds import Clock, collector, descriptor, event, ok, topic
from tests.support.meshrun import SVCGEN, TOKEN, MeshService, locked_mesh, process
from tests.support.processes import wait_for
from tests.support.server import free_port, running

ORDERS = """svcgen: 1
service: orders
types:
  Place: {fields: {sku: string}}
  PlaceV2: {fields: {sku: string, quantity: {type: integer, default: 1}}}
  Placed: {fields: {orderId: string}}
topics:
  - {id: orders:place, version: v1, request: Place, response: Placed}
  - {id: orders:place, version: v2, request: PlaceV2, response: Placed}
"""
ORDERS_WITHOUT_V1 = """svcgen: 1
service: orders
types:
  PlaceV2: {fields: {sku: string, quantity: {type: integer, default: 1}}}
  Placed: {fields: {orderId: string}}
topics:
  - {id: orders:place, version: v2, request: PlaceV2, response: Placed}
"""
CHECKOUT = """svcgen: 1
service: checkout
mesh: {{collector: "http://127.0.0.1:9", heartbeatSeconds: 0.2}}
types:
  Cart: {{fields: {{sku: string}}}}
  Order: {{fields: {{sku: string}}}}
  Placed: {{fields: {{orderId: string}}}}
topics:
  - {{id: checkout:buy, request: Cart, response: Placed}}
produces:
  - {{id: orders:place, version: {version}, request: Order, response: Placed}}
"""
ORDERS_MESH = ORDERS.replace("service: orders\n", 'service: orders\nmesh: {collector: "http://127.0.0.1:9", '
                                                  "heartbeatSeconds: 0.2}\n")


def can_i_deploy(manifest: Path, collector_url: str, *extra: str, token: str | None = TOKEN) -> tuple[int, str]:
    env = {"SVCGEN_COLLECTOR_TOKEN": token or ""}
    result = CliRunner(env=env).invoke(main, ["can-i-deploy", str(manifest), "--collector", collector_url, *extra],
                                       catch_exceptions=False)
    return result.exit_code, result.stdout + result.stderr


def providers_of(mesh: Any, version: str) -> list[str]:
    answer = mesh.query("svc:mesh:query:topic", {"topic": "orders:place"})
    return next((item["providers"] for item in answer["versions"] if item["version"] == version), [])


def test_blocked_while_the_producer_declares_the_version_then_safe_once_it_moved(tmp_path: Path) -> None:
    with locked_mesh(tmp_path, [MeshService("orders", ORDERS_MESH)]) as mesh:
        checkout_dir = tmp_path / "checkout"
        checkout_dir.mkdir()

        def serve_checkout(version: str) -> Any:
            manifest = checkout_dir / "checkout.yaml"
            manifest.write_text(CHECKOUT.format(version=version))
            subprocess.run([*SVCGEN, "build", str(manifest), "-o", str(checkout_dir)], check=True,
                           capture_output=True, timeout=120)
            port = free_port()
            return process([*SVCGEN, "serve", str(checkout_dir / "checkout_service"), "--port", str(port)],
                           f"http://127.0.0.1:{port}/svc/spec", tmp_path / f"checkout-{version}.log",
                           {"SVCGEN_COLLECTOR": mesh.collector, "SVCGEN_COLLECTOR_TOKEN": TOKEN})

        change = tmp_path / "orders-next.yaml"
        change.write_text(ORDERS_WITHOUT_V1)
        with serve_checkout("v1"):
            wait_for(lambda: providers_of(mesh, "v1") == ["checkout"], timeout=60, what="checkout registered")
            status, output = can_i_deploy(change, mesh.collector)
            assert status == 1, output
            assert "blocked: orders:place@v1: topic-version-removed: " in output
            assert "declared by checkout" in output
            document = json.loads(can_i_deploy(change, mesh.collector, "--format", "json")[1])
            (finding,) = document["findings"]
            assert (finding["verdict"], finding["declaredBy"], finding["path"]) == ("blocked", ["checkout"],
                                                                                      "orders:place@v1")
            assert document["summary"] == {"blocked": 1, "safe": 0, "breaking": True}

            # checkout's own change, sending a version orders does not run, is blocked by the live owner
            moved_too_far = tmp_path / "checkout-v3.yaml"
            moved_too_far.write_text(CHECKOUT.format(version="v3"))
            status, output = can_i_deploy(moved_too_far, mesh.collector)
            assert status == 1 and "blocked: produces orders:place@v3 -> orders: orders:place@v3: " \
                                   "topic-version-removed" in output, output

        with serve_checkout("v2"):  # the producer moves to v2 and re-registers
            wait_for(lambda: providers_of(mesh, "v2") == ["checkout"], timeout=60, what="checkout re-registered")
            status, output = can_i_deploy(change, mesh.collector)
            assert status == 0, output
            assert "safe: orders:place@v1: topic-version-removed: " in output
            assert output.strip().endswith("safe to deploy")

        # the collector cannot say: locked without the token, a service it never heard of, nobody listening
        status, output = can_i_deploy(change, mesh.collector, token=None)
        assert status == 2 and "locked" in output and "Traceback" not in output
        stranger = tmp_path / "stranger.yaml"
        stranger.write_text(ORDERS.replace("service: orders", "service: stranger"))
        status, output = can_i_deploy(stranger, mesh.collector)
        assert status == 2 and "never heard of service stranger" in output
    status, output = can_i_deploy(change, f"http://127.0.0.1:{free_port()}")
    assert status == 2 and "unreachable" in output


def test_a_postgresql_replica_answers_for_what_another_one_took(postgres_url: str, tmp_path: Path) -> None:
    taking, answering = (collector(PostgresStore(postgres_url)) for _ in range(2))
    request = {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}
    ok(taking.register(descriptor("orders", [topic("orders:place", request, version="v1")])))
    ok(taking.register({**descriptor("checkout", [], instance="c-1"),
                        "produces": [topic("orders:place", request, version="v1")]}))
    ok(taking.traces({"events": [event(1, service="orders", topic_id="orders:place")]}))
    change = tmp_path / "orders.yaml"
    change.write_text(ORDERS_WITHOUT_V1)
    with running(create_app(collector_service(answering), [])) as url:
        status, output = can_i_deploy(change, url, token=None)
    assert status == 1, output
    assert "blocked: orders:place@v1: topic-version-removed: " in output and "declared by checkout" in output
    # the same call sent again through the other replica is not counted twice within the window
    ok(taking.traces({"events": [placed(7, "2027-01-15T08:00:00.000Z")]}))
    ok(answering.traces({"events": [placed(7, "2027-01-15T08:00:00.000Z")]}))
    with running(create_app(collector_service(answering), [])) as url:
        status, output = can_i_deploy(change, url, "--window", "1h", token=None)
    assert status == 1 and "declared by checkout; 1 invocation, last seen " in output, output
    assert "invocations counted " in output
    for replica in (taking, answering):
        replica.flush()


NOW = dt.datetime(2026, 11, 26, 12, 0, tzinfo=dt.UTC)
STRING = {"type": "string"}


def running_contract(usage: list[dict[str, Any]]) -> dict[str, Any]:
    request = {"type": "object", "properties": {"sku": STRING}, "required": ["sku"]}
    return {
        "service": "orders", "registeredAt": "2026-11-26T11:00:00Z", "usage": usage, "declared": [],
        "descriptor": {"service": "orders", "topics": [
            {"id": "orders:place", "version": "v1", "requestSchema": request, "responseSchema": STRING},
            {"id": "orders:get", "requestSchema": request, "responseSchema": STRING},
        ]},
    }


def usage(topic_id: str, version: str = "", providers: tuple[str, ...] = (), invocations: int = 0,
          last: str | None = None) -> dict[str, Any]:
    return {"topic": topic_id, "version": version, "providers": list(providers), "consumers": ["orders"],
            "invocations": invocations, "lastInvokedAt": last}


def test_traffic_within_the_window_blocks_and_older_traffic_does_not() -> None:
    tightened = {"type": "object", "properties": {"sku": STRING, "coupon": STRING}, "required": ["sku", "coupon"]}
    change = {"service": "orders", "topics": [
        {"id": "orders:place", "version": "v1", "requestSchema": tightened, "responseSchema": STRING},
        {"id": "orders:get", "requestSchema": tightened, "responseSchema": STRING},
    ]}
    answer = running_contract([
        usage("orders:place", "v1", invocations=12, last="2026-11-25T09:30:00Z"),  # a day ago
        usage("orders:get", invocations=3, last="2026-11-01T09:30:00Z"),  # weeks ago
    ])
    report = judge(change, answer, window=parse_window("7d"), window_text="7d", now=NOW)
    verdicts = {item.finding.path: item.verdict for item in report.judged}
    assert verdicts == {"orders:place@v1.request.coupon": "blocked", "orders:get.request.coupon": "safe"}
    blocked = next(item for item in report.judged if item.verdict == "blocked")
    assert blocked.line().endswith(f"12 invocations, last seen 2026-11-25T09:30:00Z [{blocked.finding.fingerprint}]")
    assert judge(change, answer, window=parse_window("1h"), window_text="1h", now=NOW).blocked == 0


def test_the_summary_counts_only_the_entries_checked_and_says_how_many_had_no_owner() -> None:
    # As `svcgen compat` says it: an entry nobody registered serves (or publishes) is not counted as checked.
    produced = (PeerCheck("produces", "payments:capture", ("payments",)),
                PeerCheck("produces", "stock:reserve", ("stock",)),
                PeerCheck("produces", "mail:send", ()))
    subscribed = (PeerCheck("subscribes", "ledger/bookings:booked@v1", ()),)
    report = DeployReport("orders", {}, "7d", (), produced, None, subscribed)
    assert report.summary() == ("0 blocked, 0 safe breaking changes, 2 produces entries and 0 subscriptions checked, "
                                "2 without an owner: safe to deploy")
    everything = DeployReport("orders", {}, "7d", (), produced[:1], None, ())
    assert everything.summary() == ("0 blocked, 0 safe breaking changes, 1 produces entry and 0 subscriptions "
                                    "checked: safe to deploy")


def test_renaming_the_service_is_blocked_by_anyone_using_any_topic() -> None:
    answer = running_contract([usage("orders:get", providers=("shop",))])
    change = {**answer["descriptor"], "service": "ordering"}
    report = judge(change, answer, window=parse_window("7d"), window_text="7d", now=NOW)
    (renamed,) = report.judged
    assert (renamed.finding.rule, renamed.verdict, renamed.usage.declared_by) == ("service-renamed", "blocked",
                                                                                  ("shop",))


@pytest.mark.parametrize("answer", [{"status": "not-found", "detail": "no route for POST /ops/invoke"}, [], "ok"])
def test_a_json_answer_that_is_not_an_envelope_is_named_as_such(answer: Any) -> None:
    # A URL whose path is not the collector's prefix answers the app's own 404 JSON, which has no statusCode.
    transport = httpx.MockTransport(lambda request: httpx.Response(404, json=answer))
    with pytest.raises(CollectorUnavailable) as raised:
        fetch_contract("http://collector.invalid/ops", "orders", [], transport=transport)
    assert str(raised.value) == ("collector http://collector.invalid/ops answered HTTP 404 with something that is "
                                 "not an envelope; is the URL a svcgen collector?")


@pytest.mark.parametrize(("token", "why"), [(None, "it is locked; give its token"),
                                            ("wrong", "the token given is not its token")])
def test_a_locked_collector_says_whether_a_token_was_given(token: str | None, why: str) -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(401, json={"status": "unauthorized"}))
    with pytest.raises(CollectorUnavailable) as raised:
        fetch_contract("http://collector.invalid", "orders", [], token=token, transport=transport)
    assert str(raised.value) == (f"collector http://collector.invalid refused the request: {why} (--token-file FILE "
                                 "or SVCGEN_COLLECTOR_TOKEN)")


@pytest.mark.parametrize("text", ["7", "0d", "7 days", "-1h", ""])
def test_a_window_must_be_a_number_and_a_unit(text: str) -> None:
    with pytest.raises(ValueError, match="like 7d or 24h"):
        parse_window(text)


def placed(n: int, started_at: str) -> dict[str, Any]:
    return {**event(n, service="orders", topic_id="orders:place"), "topicVersion": "v1", "startedAt": started_at}


def test_traffic_is_counted_within_the_window_from_the_collectors_time_buckets(tmp_path: Path) -> None:
    clock = Clock()  # 2027-01-15T08:00:00Z
    fleet = collector(clock=clock)
    request = {"type": "object", "properties": {"sku": STRING}, "required": ["sku"]}
    ok(fleet.register(descriptor("orders", [topic("orders:place", request, version="v1")])))
    ok(fleet.traces({"events": [placed(1, "2027-01-15T08:00:00.000Z"), placed(2, "2027-01-15T05:00:00.000Z")]}))
    change = tmp_path / "orders.yaml"
    change.write_text(ORDERS_WITHOUT_V1)

    def ask(window: str) -> tuple[int, str]:
        with running(create_app(collector_service(fleet), [])) as url:
            return can_i_deploy(change, url, "--window", window, token=None)

    status, output = ask("1h")  # the call three hours ago is outside the window: not counted
    assert status == 1 and "blocked: orders:place@v1: topic-version-removed: " in output, output
    assert "; 1 invocation, last seen 2027-01-15T08:00:00" in output
    assert "invocations counted 2027-01-15T07:01:00" in output and "all-time" not in output
    clock.advance(2 * 3600)
    status, output = ask("1h")  # two hours later nothing was sent within the hour
    assert status == 0 and "safe: orders:place@v1: topic-version-removed: " in output, output
    status, output = ask("24h")
    assert status == 1 and "; 2 invocations, last seen 2027-01-15T08:00:00" in output, output
    status, output = ask("7d")  # beyond the buckets: the all-time counters, and the report says so
    assert status == 1 and "invocation counts are all-time" in output and "; 2 invocations" in output, output
    with running(create_app(collector_service(fleet), [])) as url:
        document = json.loads(can_i_deploy(change, url, "--window", "7d", "--format", "json", token=None)[1])
    assert document["invocationsCounted"] == "all-time" and document["findings"][0]["invocations"] == 2

    # the query is typed: a window is a positive number of minutes; asked beyond the buckets it has no window
    assert fleet.query_contract({"service": "orders", "windowMinutes": 0}).status == "bad-request"
    beyond = ok(fleet.query_contract({"service": "orders", "windowMinutes": 10_000}))
    assert "window" not in beyond and all("windowInvocations" not in item for item in beyond["usage"])
    within = ok(fleet.query_contract({"service": "orders", "windowMinutes": 300}))
    assert within["window"]["minutes"] == 300
    assert [(item["version"], item["invocations"], item["windowInvocations"]) for item in within["usage"]] == [
        ("v1", 2, 2)]


def booked(type_name: str = "string") -> dict[str, Any]:
    return {"type": "object", "properties": {"orderId": {"type": type_name}}, "required": ["orderId"]}


def with_events(document: dict[str, Any], publishes: Sequence[dict[str, Any]] = (),
                subscribes: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    return {**document, "events": {"publishes": list(publishes), "subscribes": list(subscribes)}}


def published(version: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"id": "bookings:booked", "version": version, "payloadSchema": payload}


def subscribed(version: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"id": "bookings:booked", "version": version, "publisher": "bookings", "payloadSchema": payload}


def subscriber(version: str, publisher: str) -> str:
    return ORDERS_WITHOUT_V1 + (f"subscribes:\n  - {{id: \"bookings:booked\", version: {version}, "
                                f"publisher: {publisher}, payload: Placed}}\n")


def test_a_subscription_is_checked_against_the_live_publishers_payload(tmp_path: Path) -> None:
    fleet = collector()
    request = {"type": "object", "properties": {"sku": STRING}, "required": ["sku"]}
    ok(fleet.register(descriptor("orders", [topic("orders:place", request, version="v2")])))
    ok(fleet.register(with_events(descriptor("bookings", version="1"), [published("v1", booked())])))
    change = tmp_path / "orders.yaml"

    def check(version: str, publisher: str = "bookings") -> tuple[int, str, dict[str, Any]]:
        change.write_text(subscriber(version, publisher))
        status, output = can_i_deploy(change, url, token=None)
        return status, output, json.loads(can_i_deploy(change, url, "--format", "json", token=None)[1])

    with running(create_app(collector_service(fleet), [])) as url:
        status, output, document = check("v1")
        assert status == 0, output
        assert "safe: subscribes bookings/bookings:booked@v1 -> bookings: compatible" in output
        assert document["subscriptions"] == [{"subscription": "bookings/bookings:booked@v1", "publisher": "bookings",
                                              "verdict": "compatible", "findings": []}]

        # the subscription to a version the live publisher does not publish waits for nothing
        status, output, document = check("v2")
        assert status == 1, output
        assert "blocked: subscribes bookings/bookings:booked@v2 -> bookings: bookings:booked@v2: " \
               "topic-version-removed" in output
        assert document["summary"]["breaking"] is True

        # nobody registered publishes it: not checked, said so, and not a failure
        status, output, document = check("v1", publisher="ledger")
        assert status == 0, output
        assert "warning: subscribes ledger/bookings:booked@v1: no registered service publishes it; not checked" \
               in output
        assert document["subscriptions"][0]["verdict"] == "unknown"

        # the publisher's newest descriptor changed the payload under the subscriber's feet
        ok(fleet.register(with_events(descriptor("bookings", version="2", instance="i-2"),
                                      [published("v1", booked("integer"))])))
        status, output, document = check("v1")
        assert status == 1, output
        assert "blocked: subscribes bookings/bookings:booked@v1 -> bookings: bookings:booked@v1.payload.orderId: " \
               "response-type-changed" in output
        (finding,) = document["subscriptions"][0]["findings"]
        assert (finding["rule"], finding["path"]) == ("response-type-changed", "bookings:booked@v1.payload.orderId")


def test_an_event_the_service_publishes_is_blocked_while_a_registered_service_subscribes() -> None:
    running_bookings = with_events({"service": "bookings", "topics": []}, [published("v1", booked())])
    answer: dict[str, Any] = {
              "service": "bookings", "registeredAt": "2026-11-26T11:00:00Z", "usage": [], "declared": [],
              "descriptor": running_bookings,
              "events": [{"service": "bookings", "role": "publisher", "event": "bookings:booked", "version": "v1",
                          "publisher": "bookings", "payloadSchema": booked()},
                         {"service": "orders", "role": "subscriber", "event": "bookings:booked", "version": "v1",
                          "publisher": "bookings", "payloadSchema": booked()}]}
    moved = with_events({"service": "bookings", "topics": []}, [published("v2", booked())])
    report = judge(moved, answer, window=parse_window("7d"), window_text="7d", now=NOW)
    (removed,) = report.judged
    assert (removed.finding.rule, removed.finding.path, removed.verdict, removed.usage.declared_by) == (
        "topic-version-removed", "bookings:booked@v1", "blocked", ("orders",))
    assert report.breaking

    retyped = with_events({"service": "bookings", "topics": []}, [published("v1", booked("integer"))])
    (changed,) = judge(retyped, answer, window=parse_window("7d"), window_text="7d", now=NOW).judged
    assert (changed.finding.path, changed.verdict) == ("bookings:booked@v1.payload.orderId", "blocked")

    # once the subscriber moved on (its newest descriptor no longer subscribes to v1), the removal is safe
    answer["events"] = answer["events"][:1]
    report = judge(moved, answer, window=parse_window("7d"), window_text="7d", now=NOW)
    assert [item.verdict for item in report.judged] == ["safe"] and not report.breaking


def test_event_declarations_are_answered_by_another_postgresql_replica(postgres_url: str) -> None:
    taking, answering = (collector(PostgresStore(postgres_url)) for _ in range(2))
    ok(taking.register(with_events(descriptor("bookings"), [published("v1", booked())])))
    ok(taking.register(with_events(descriptor("orders"), subscribes=[subscribed("v1", booked())])))
    ok(taking.register(descriptor("ledger")))
    answer = ok(answering.query_contract({"service": "bookings"}))
    assert [(item["service"], item["role"], item["version"]) for item in answer["events"]] == [
        ("bookings", "publisher", "v1"), ("orders", "subscriber", "v1")]
    asked = ok(answering.query_contract({"service": "ledger", "events": ["bookings:booked"]}))
    assert [item["service"] for item in asked["events"]] == ["bookings", "orders"]
    assert ok(answering.query_contract({"service": "ledger"}))["events"] == []


FLEET_ORDERS = """svcgen: 1
service: orders
enums:
  Size: {values: [small, large]}
types:
  Place: {fields: {sku: {type: string, maxLength: 20}, size: Size, note: string?, qty: integer}}
  Placed: {fields: {orderId: string, eta: integer, label: string}}
topics:
  - {id: orders:place, version: v1, request: Place, response: Placed}
events:
  - {id: orders:placed, payload: Placed, key: orderId}
"""
FLEET_ORDERS_NEXT = """svcgen: 1
service: orders
enums:
  Size: {values: [small]}
types:
  Place:
    closed: true
    fields: {sku: {type: string, maxLength: 10}, size: Size, note: string, qty: string, coupon: string}
  Placed: {fields: {orderId: string, eta: string}}
topics:
  - {id: orders:place, version: v1, request: Place, response: Placed}
events:
  - {id: orders:placed, payload: Placed, key: orderId}
"""


def test_an_approval_written_from_the_diff_is_honoured_by_can_i_deploy_and_the_reverse(tmp_path: Path) -> None:
    # can-i-deploy compares JSON Schemas and left old and new out of its findings, so the same change had another
    # fingerprint than in `svcgen diff`: an approval written from the diff never covered it (nor could be given).
    from svcgen.codegen.render import descriptor_document
    from svcgen.manifest import load_manifest

    old, new = tmp_path / "orders.yaml", tmp_path / "orders-next.yaml"
    old.write_text(FLEET_ORDERS)
    new.write_text(FLEET_ORDERS_NEXT)
    fleet = collector()
    ok(fleet.register({**descriptor_document(load_manifest(str(old))), "instanceId": "i-1"}))
    place = {"type": "object", "properties": {"sku": STRING}, "required": ["sku"]}
    ok(fleet.register(descriptor("checkout", [], instance="c-1", produces=[topic("orders:place", place, "v1")])))
    ok(fleet.register(with_events(descriptor("shipping", [], instance="s-1"),
                                  subscribes=[{"id": "orders:placed", "version": "", "publisher": "orders",
                                               "payloadSchema": {"type": "object"}}])))
    diffed = CliRunner().invoke(main, ["diff", str(old), str(new), "--format", "json"], catch_exceptions=False)
    by_change = {(item["rule"], item["path"]): item["fingerprint"] for item in json.loads(diffed.stdout)["findings"]}
    with running(create_app(collector_service(fleet), [])) as url:
        status, output = can_i_deploy(new, url, "--format", "json", token=None)
        judged = json.loads(output)["findings"]
        # every kind of change can-i-deploy judges: values (an enum value, a constraint, closed, required) and types
        assert {item["rule"] for item in judged} == {
            "request-enum-value-removed", "request-constraint-tightened", "request-record-closed",
            "request-property-became-required", "request-nullable-removed", "request-type-changed",
            "request-property-added-required", "response-type-changed", "response-property-removed",
        }
        assert status == 1 and all(item["verdict"] == "blocked" for item in judged)
        assert {(item["rule"], item["path"]): item["fingerprint"] for item in judged}.items() <= by_change.items()

        approvals = tmp_path / "approvals.yaml"
        approvals.write_text("".join(f"- {{fingerprint: '{fingerprint}', reason: agreed with checkout}}\n"
                                     for fingerprint in by_change.values()))
        status, output = can_i_deploy(new, url, "--accept", str(approvals), token=None)
        assert status == 0, output
        lines = output.splitlines()
        assert "accepted blocked: orders:place@v1.request.sku: request-constraint-tightened: " in output
        assert all(line.endswith(": agreed with checkout]") for line in lines[1:-1]), output
        assert lines[-1] == ("0 blocked, 0 safe breaking changes, 11 accepted, 0 produces entries and 0 subscriptions "
                             "checked: safe to deploy")
        document = json.loads(can_i_deploy(new, url, "--accept", str(approvals), "--format", "json", token=None)[1])
        assert all(item["accepted"] and item["reason"] == "agreed with checkout" for item in document["findings"])
        assert document["summary"] == {"blocked": 0, "safe": 0, "accepted": 11, "breaking": False}

        # the reverse: the fingerprint can-i-deploy prints for a blocked change approves it in the diff
        status, output = can_i_deploy(new, url, token=None)
        line = next(line for line in output.splitlines() if "response.eta: response-type-changed" in line)
        fingerprint = line.rsplit("[", 1)[1].rstrip("]")
    approvals.write_text(f"- {{fingerprint: '{fingerprint}', reason: shipping reads eta as text}}\n")
    accepted = CliRunner().invoke(main, ["diff", str(old), str(new), "--accept", str(approvals)],
                                  catch_exceptions=False)
    assert ("accepted error: orders:place@v1.response.eta: response-type-changed (integer → string): what the service "
            f"answers no longer decodes in old callers [{fingerprint}: shipping reads eta as text]") in accepted.stdout
