"""End to end: two generated services on 127.0.0.1, A's handler calling B through the generated client,
both reporting to a recording collector (register, heartbeats, one trace spanning both, issues)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from svcgen.runtime import Identity, Registry, Result, Service, create_app
from tests.support.processes import stop_process, wait_for, wait_until_up
from tests.support.server import free_port, running

TYPES = """
types:
  Buy:
    fields:
      item: string
      fail: {type: boolean, default: false}
  Bought:
    fields:
      item: string
      chargeId: string
  Charge:
    fields:
      item: string
  Charged:
    fields:
      chargeId: string
"""
SHOP = """svcgen: 1
service: shop
mesh: {collector: "COLLECTOR", heartbeatSeconds: 0.2}
""" + TYPES + """
topics:
  - {id: "shop:buy", request: Buy, response: Bought, routes: ["POST /buy"]}
produces:
  - {id: "pay:charge", request: Charge, response: Charged}
"""
PAY = """svcgen: 1
service: pay
mesh: {collector: "COLLECTOR", heartbeatSeconds: 0.2}
types:
  Charge:
    fields:
      item: string
  Charged:
    fields:
      chargeId: string
topics:
  - {id: "pay:charge", request: Charge, response: Charged, routes: ["POST /charge"]}
"""
SHOP_HANDLER = '''
import os

from svcgen.runtime import Context, Result

from ..clients import Clients
from ..models import Bought, Buy, Charge


async def handle(request: Buy, context: Context) -> Result[Bought]:
    if request.fail:
        raise RuntimeError("the shelf collapsed")
    async with Clients(os.environ["PAY_URL"]) as clients:
        charged = await clients.pay_charge(Charge(item=request.item))
    if charged.payload is None:
        return Result.service_unavailable(f"payment failed: {charged.status}")
    return Result.ok(Bought(item=request.item, charge_id=charged.payload.charge_id))
'''
PAY_HANDLER = '''
from svcgen.runtime import Context, Result

from ..models import Charge, Charged


async def handle(request: Charge, context: Context) -> Result[Charged]:
    return Result.ok(Charged(charge_id="ch-" + request.item))
'''
FEEDS = ("svc:mesh:register", "svc:mesh:heartbeat", "svc:mesh:traces", "svc:mesh:issues")


def recording_collector(received: list[tuple[str, Any]]) -> Any:
    registry = Registry(allow_reserved=True)

    def recorder(topic: str) -> Any:
        async def record(request: Any, context: Any) -> Result[dict[str, int]]:
            received.append((topic, request))
            events = request.get("events") if isinstance(request, dict) else None
            issues = request.get("issues") if isinstance(request, dict) else None
            count = len(events) if isinstance(events, list) else len(issues) if isinstance(issues, list) else 1
            return Result.ok({"accepted": count})

        return record

    for topic in FEEDS:
        registry.add(topic, recorder(topic))
    return create_app(Service(Identity("collector"), registry))


def build(manifest: str, name: str, handler: str, module: str, out: Path, collector: str) -> None:
    path = out / f"{name}.yaml"
    path.write_text(manifest.replace("COLLECTOR", collector))
    subprocess.run([sys.executable, "-m", "svcgen", "build", str(path), "-o", str(out)], check=True,
                   capture_output=True)
    (out / f"{name}_service" / "handlers" / f"{module}.py").write_text(handler)


@contextmanager
def serve(package: Path, env: dict[str, str]) -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "svcgen", "serve", str(package), "--port", str(port)],
        env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(process, base + "/svc/spec")
        yield base
    finally:
        stop_process(process)  # graceful: the lifespan shutdown flushes the feeds once more


def test_two_services_one_trace_and_every_feed(tmp_path: Path) -> None:
    received: list[tuple[str, Any]] = []
    with running(recording_collector(received)) as collector:
        build(SHOP, "shop", SHOP_HANDLER, "shop_buy", tmp_path, collector)
        build(PAY, "pay", PAY_HANDLER, "pay_charge", tmp_path, collector)
        with (
            serve(tmp_path / "pay_service", {}) as pay,
            serve(tmp_path / "shop_service", {"PAY_URL": pay + "/svc/invoke"}) as shop,
        ):
            bought = httpx.post(shop + "/buy", json={"item": "book"}, timeout=10)
            assert bought.status_code == 200, bought.text
            assert bought.json() == {"item": "book", "chargeId": "ch-book"}
            failed = httpx.post(shop + "/buy", json={"item": "vase", "fail": True}, timeout=10)
            assert failed.status_code == 503
            assert "shelf" not in failed.text

            def beats(service: str) -> int:
                return sum(1 for t, body in received if t == "svc:mesh:heartbeat" and body["service"] == service)

            wait_for(lambda: beats("shop") >= 2 and beats("pay") >= 2)

    registered = {body["service"] for topic, body in received if topic == "svc:mesh:register"}
    assert registered == {"shop", "pay"}
    events = [event for topic, body in received if topic == "svc:mesh:traces" for event in body["events"]]
    buy = next(e for e in events if e["topic"] == "shop:buy" and e["status"] == "ok")
    charge = next(e for e in events if e["topic"] == "pay:charge")
    assert charge["traceId"] == buy["traceId"]
    assert charge["parentSpanId"] == buy["spanId"]
    assert {buy["service"], charge["service"]} == {"shop", "pay"}
    failure = next(e for e in events if e["topic"] == "shop:buy" and e["status"] != "ok")
    assert failure["status"] == "service-unavailable"
    assert failure["exceptionType"] == "RuntimeError"
    issues = [issue for topic, body in received if topic == "svc:mesh:issues" for issue in body["issues"]]
    exploded = next(issue for issue in issues if issue["topic"] == "shop:buy")
    assert exploded["classification"] == "exception"
    assert exploded["exceptionType"] == "RuntimeError"
    assert exploded["exemplarTraceIds"] == [failure["traceId"]]
