"""`make demo`: a typed service driven through the envelope surface and over real HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime

import httpx
import uvicorn

from svcgen.runtime import Context, HealthCheck, HealthChecks, Identity, Registry, Result, Service
from svcgen.runtime.http.app import create_app


@dataclass
class LineItem:
    sku: str
    quantity: int = 1


@dataclass
class PlaceOrder:
    customer_id: str
    items: list[LineItem]
    placed_at: datetime
    note: str | None = None


@dataclass
class Order:
    order_id: str
    customer_id: str
    total_items: int
    tags: list[str] = field(default_factory=list)


async def place_order(request: PlaceOrder, context: Context) -> Result[Order]:
    total = sum(item.quantity for item in request.items)
    return Result.created(Order("o-1001", request.customer_id, total, ["demo"]))


def build_service() -> Service:
    registry = Registry()
    registry.add("orders:place", place_order, summary="Place an order")
    return Service(
        Identity("orders", service_version="1.0.0", binding="http"),
        registry,
        health=HealthChecks([HealthCheck("database", lambda: True)]),
        produces=[],
    )


def show(title: str, value: object) -> None:
    text = value if isinstance(value, str) else json.dumps(value, indent=2)
    print(f"--- {title}\n{text}\n")


async def envelope_part(service: Service) -> None:
    body = {"customerId": "c-42", "items": [{"sku": "apple", "quantity": 3}, {"sku": "pear"}],
            "placedAt": "2026-11-22T10:00:00+01:00"}
    envelope = {"topic": "orders:place", "headers": {"x-correlation-id": "demo-1"}, "body": json.dumps(body)}
    show("envelope in", envelope)
    show("envelope out", json.loads(await service.invoke_envelope(json.dumps(envelope))))
    bad = {**envelope, "body": json.dumps({**body, "items": [{"sku": "apple", "quantity": "three"}]})}
    show("envelope with a bad field", json.loads(await service.invoke_envelope(json.dumps(bad))))


def http_part(service: Service) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    app = create_app(service, ["POST /orders -> orders:place", "GET /descriptor -> svc:mesh"])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    base = f"http://127.0.0.1:{port}"
    print(f"=== serving on {base}\n")
    try:
        with httpx.Client(base_url=base, timeout=5) as client:
            placed = client.post("/orders", json={"customerId": "c-7", "items": [{"sku": "fig"}],
                                                  "placedAt": "2026-11-22T09:00:00Z"})
            show(f"POST /orders → {placed.status_code}", placed.json())
            bad = client.post("/orders", content=b"{not json")
            show(f"POST /orders (bad JSON) → {bad.status_code}", bad.json())
            health = client.get("/svc/health")
            show(f"GET /svc/health → {health.status_code}", health.json())
            descriptor = client.get("/descriptor")
            show(f"GET /descriptor → {descriptor.status_code}", descriptor.json())
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def main() -> None:
    service = build_service()
    print("=== one typed handler through the envelope surface\n")
    asyncio.run(envelope_part(service))
    http_part(service)
    print("=== demo done")


if __name__ == "__main__":
    main()
