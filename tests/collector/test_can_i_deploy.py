"""`svcgen can-i-deploy` against a real fleet: a locked collector and two generated services on 127.0.0.1
(blocked while the producer still declares the version, safe once it moved and re-registered), the collector
unable to say (exit 2), PostgreSQL replicas answering for each other, and the verdict rules on their own."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from svcgen.candeploy import judge, parse_window
from svcgen.cli import main
from svcgen.collector.postgres import PostgresStore
from svcgen.collector.service import collector_service
from svcgen.runtime._http.app import create_app
from tests.support.feeds import collector, descriptor, event, ok, topic
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
    assert blocked.line().endswith("12 invocations, last seen 2026-11-25T09:30:00Z")
    assert judge(change, answer, window=parse_window("1h"), window_text="1h", now=NOW).blocked == 0


def test_renaming_the_service_is_blocked_by_anyone_using_any_topic() -> None:
    answer = running_contract([usage("orders:get", providers=("shop",))])
    change = {**answer["descriptor"], "service": "ordering"}
    report = judge(change, answer, window=parse_window("7d"), window_text="7d", now=NOW)
    (renamed,) = report.judged
    assert (renamed.finding.rule, renamed.verdict, renamed.usage.declared_by) == ("service-renamed", "blocked",
                                                                                  ("shop",))


@pytest.mark.parametrize("text", ["7", "0d", "7 days", "-1h", ""])
def test_a_window_must_be_a_number_and_a_unit(text: str) -> None:
    with pytest.raises(ValueError, match="like 7d or 24h"):
        parse_window(text)
