"""Act 2 of `make demo`: a live mesh of three generated services and a collector on 127.0.0.1."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
from demo import OUT, REPO, SVCGEN, free_port, step, svcgen, wait_until_up

MESH = OUT / "mesh"
HEARTBEAT_SECONDS = "1"

HANDLERS = REPO / "examples" / "handlers" / "mesh"
"""Real handlers: orders:place v1 (calls payments:capture, raises for customer c-boom), payments:capture,
inventory:stock; copied into the built packages."""
PACKAGES = {"orders_place_v1.py": "orders_service", "payments_capture.py": "payments_service",
            "inventory_stock.py": "inventory_service"}

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"
ORDER = {"customerId": "c-7", "items": [{"sku": "apple", "quantity": 2}], "placedAt": "2026-11-23T09:00:00Z"}


@contextmanager
def background(args: list[str], ready_url: str, what: str, env: dict[str, str] | None = None) -> Iterator[None]:
    print("$ " + " ".join(["svcgen", *args[3:]]))
    process = subprocess.Popen(args, cwd=REPO, env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        wait_until_up(ready_url, process, what)
        yield
    finally:
        process.terminate()  # graceful: services flush their feeds once more, the collector saves its store
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()


def invoke(collector: str, topic: str, body: object) -> object:
    answer = httpx.post(f"{collector}/svc/invoke", json={"topic": topic, "body": json.dumps(body)}, timeout=5)
    return json.loads(answer.json()["body"])


def traffic(orders: str, inventory: str, payments: str) -> None:
    calls = [
        *[("POST", f"{orders}/orders", {**ORDER, "customerId": f"c-{n}"}) for n in range(5)],  # orders → payments
        ("POST", f"{orders}/orders", {**ORDER, "items": [{"sku": "apple", "quantity": "three"}]}),  # 422
        ("POST", f"{orders}/orders", {"customerId": "c-1"}),  # 422: items and placedAt missing
        ("POST", f"{orders}/orders", {**ORDER, "customerId": "c-boom"}),  # handler exception → 503
        ("GET", f"{orders}/orders/o-1", None),  # a stub: 501
        *[("GET", f"{inventory}/stock/{sku}", None) for sku in ("apple", "pear", "fig")],
        ("GET", f"{payments}/captures/cap-1", None),  # a stub: 501
    ]
    tally: dict[int, int] = {}
    for index, (method, url, body) in enumerate(calls):
        headers = {"traceparent": TRACEPARENT} if index == 0 else {}  # joins our trace: found again below
        code = httpx.request(method, url, json=body, headers=headers, timeout=10).status_code
        tally[code] = tally.get(code, 0) + 1
    print("sent", len(calls), "requests; answers by HTTP code:", dict(sorted(tally.items())))


def probe_all(services: dict[str, tuple[str, str]]) -> None:
    for name, (base, prefix) in services.items():
        print(f"$ svcgen probe {base} --prefix {prefix}   # {name}")
        subprocess.run([*SVCGEN, "probe", base, "--prefix", prefix], cwd=REPO)  # payments has no health: R3, exit 1


def show_fleet(collector: str) -> None:
    fleet = invoke(collector, "svc:mesh:query:fleet", {})
    assert isinstance(fleet, dict)
    print("svc:mesh:query:fleet →")
    for service in fleet["services"]:
        print(f"  {service['service']:<10} {service.get('serviceVersion', '-'):<7} health={service['health']:<9} "
              f"instances={service['instances']} topics={service['topics']} missingFeeds={service['missingFeeds']}")
    for topic in fleet["topics"]:
        print(f"  {topic['topic']:<22} providers={topic['providers']} consumers={topic['consumers']} "
              f"invocations={topic['invocations']}")
    for issue in fleet["issues"]:
        print(f"  issue {issue['classification']:<11} {issue['service']} {issue['topic']} {issue['status']} "
              f"×{issue['count']}")
    capture = invoke(collector, "svc:mesh:query:topic", {"topic": "payments:capture"})
    assert isinstance(capture, dict)
    print(f"payments:capture: {capture['invocations']} invocations, sent by (providers) {capture['providers']}, "
          f"handled by (consumers) {capture['consumers']}")


def show_cross_service_trace(collector: str) -> None:
    trace = invoke(collector, "svc:mesh:query:trace", {"traceId": TRACE_ID})
    assert isinstance(trace, dict)
    print(f"svc:mesh:query:trace {TRACE_ID} (the order placed with our traceparent) →")
    for event in trace.get("events", []):
        parent = event.get("parentSpanId", "-")
        print(f"  {event['service']:<9} {event['topic']:<17} {event['status']:<8} span {event['spanId']} "
              f"parent {parent} {event.get('durationMs', 0):.1f} ms")


def run() -> None:
    step("a live mesh: orders, payments and inventory reporting to a collector")
    for name in ("orders", "payments", "inventory"):
        svcgen("build", f"examples/manifests/{name}.yaml", "-o", "out")
    for handler, package in PACKAGES.items():
        shutil.copyfile(HANDLERS / handler, OUT / package / "handlers" / handler)
    print("wrote real handlers for orders:place v1 (calls payments:capture), payments:capture, inventory:stock")
    MESH.mkdir(parents=True, exist_ok=True)
    ports = {name: free_port() for name in ("collector", "orders", "payments", "inventory")}
    base = {name: f"http://127.0.0.1:{port}" for name, port in ports.items()}
    collector = base["collector"]
    feeds = {"SVCGEN_COLLECTOR": collector, "SVCGEN_HEARTBEAT_SECONDS": HEARTBEAT_SECONDS}
    with ExitStack() as running:
        running.enter_context(background(
            [*SVCGEN, "collector", "serve", "--port", str(ports["collector"]), "--store", "out/mesh/collector.json",
             "--artifacts", "out/mesh/artifacts", "--artifacts-interval", "1", "--poll-interval", "2",
             "--poll", f"orders={base['orders']}", "--poll", f"payments={base['payments']}",
             "--poll", f"inventory={base['inventory']}/ops"],
            collector + "/svc/health", "the collector"))
        # orders' wiring.py sends payments:capture where this variable says (one pooled client per process).
        to_payments = {"SVCGEN_TARGET_PAYMENTS_CAPTURE": base["payments"] + "/svc/invoke"}
        for name, prefix, extra in (("payments", "/svc", {}), ("inventory", "/ops", {}),
                                    ("orders", "/svc", to_payments)):
            running.enter_context(background(
                [*SVCGEN, "serve", f"out/{name}_service", "--port", str(ports[name])],
                f"{base[name]}{prefix}/spec", name, {**feeds, **extra}))
        step("mixed traffic")
        traffic(base["orders"], base["inventory"], base["payments"])
        time.sleep(2.5)  # two heartbeats: traces and issues reach the collector
        step("probe every service from outside")
        probe_all({"orders": (base["orders"], "/svc"), "payments": (base["payments"], "/svc"),
                   "inventory": (base["inventory"], "/ops")})
        step("what the collector knows")
        show_fleet(collector)
        show_cross_service_trace(collector)
        print(f"\nthe dashboard is live at {collector}/ while the mesh runs; a copy to keep:")
        svcgen("artifacts", "--store", "out/mesh/collector.json", "-o", "out/mesh/site")
        print("view it later: python3 -m http.server -d out/mesh/site 8080, then open http://127.0.0.1:8080/")
        step("stop everything")
    print(f"the collector's state is in {Path('out/mesh/collector.json')}")
