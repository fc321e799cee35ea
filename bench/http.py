"""HTTP binding: in-process cost against a raw ASGI app, route matching at scale, and server CPU under load."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from bench.harness import Figure, Recorder, per_await_us, per_call_us, run
from svcgen.runtime import Context, Identity, Registry, Result, Service
from svcgen.runtime._http.app import HttpApp, create_app
from svcgen.runtime._http.routing import Route, Router, split_path

LOAD_REQUESTS = int(os.environ.get("BENCH_LOAD_REQUESTS", "4000"))
LOAD_CONCURRENCY = 16


@dataclasses.dataclass
class UpdateOrder:
    order_id: str
    customer_id: str
    quantity: int
    price: float
    express: bool = False


@dataclasses.dataclass
class Order:
    order_id: str
    customer_id: str
    total: float


async def update(request: UpdateOrder, context: Context) -> Result[Order]:
    return Result.ok(Order(request.order_id, request.customer_id, request.quantity * request.price))


def typed_app() -> HttpApp:
    registry = Registry()
    registry.add("orders:update", update)
    return create_app(Service(Identity("orders"), registry), ["POST /orders/{orderId} -> orders:update"])


async def raw_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The same JSON work by hand: read body, merge the path field, build, compute, encode."""
    if scope["type"] != "http":
        return
    message = await receive()
    data = json.loads(message.get("body") or b"{}")
    order_id = scope["path"].rsplit("/", 1)[-1]
    request = UpdateOrder(order_id, data["customerId"], data["quantity"], data["price"], data.get("express", False))
    order = Order(request.order_id, request.customer_id, request.quantity * request.price)
    body = json.dumps({"orderId": order.order_id, "customerId": order.customer_id, "total": order.total}).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def constant_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    await receive()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": b'{"ok":true}'})


BODY = json.dumps({"customerId": "c-1", "quantity": 3, "price": 2.5}).encode()
SCOPE = {"type": "http", "method": "POST", "path": "/orders/o-17", "raw_path": b"/orders/o-17", "query_string": b"",
         "headers": [(b"content-type", b"application/json"), (b"host", b"bench")]}


def in_process(app: Any) -> Any:
    async def call() -> None:
        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": BODY, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            pass

        await app(dict(SCOPE), receive, send)

    return call


def routing_us(count: int) -> float:
    router = Router(Route.parse(f"GET /area{i}/{{id}}/items/{{item}}", f"t{i}") for i in range(count))
    segments = split_path(f"/area{count - 1}/42/items/7")
    assert router.match("GET", segments) is not None
    return per_call_us(lambda: router.match("GET", segments), 50_000)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_cpu_us_per_request(
    target: str, path: str, body: bytes, *, warmup_requests: int = 0, settle_seconds: float = 0.0
) -> float:
    """Run `target` under uvicorn in its own process, load it from here, and divide its CPU time by requests.
    `warmup_requests` more are sent before measuring, then `settle_seconds` waited (one-time work done first)."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", target, "--host", "127.0.0.1", "--port", str(port),
         "--log-level", "warning", "--no-access-log"],
        cwd=Path(__file__).parent.parent,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 15
        while True:
            try:
                httpx.post(base + path, content=body, timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        with httpx.Client(timeout=10) as client:
            for _ in range(warmup_requests):
                client.post(base + path, content=body)
        time.sleep(settle_seconds)
        before = cpu_seconds(server.pid)
        asyncio.run(_load(base + path, body))
        return (cpu_seconds(server.pid) - before) / LOAD_REQUESTS * 1e6
    finally:
        server.terminate()
        server.wait(timeout=10)


async def _load(url: str, body: bytes) -> None:
    limits = httpx.Limits(max_connections=LOAD_CONCURRENCY, max_keepalive_connections=LOAD_CONCURRENCY)
    async with httpx.AsyncClient(limits=limits, timeout=10) as client:
        remaining = LOAD_REQUESTS

        async def worker() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                response = await client.post(url, content=body)
                assert response.status_code == 200, response.text

        await asyncio.gather(*(worker() for _ in range(LOAD_CONCURRENCY)))


# Import targets for the load test's uvicorn processes.
typed = typed_app()
raw = raw_app
constant = constant_app


def measure(record: Recorder, args: argparse.Namespace) -> None:
    raw_us = per_await_us(in_process(raw_app), 20_000)
    ours_us = per_await_us(in_process(typed), 20_000)
    record(RAW, raw_us, "µs")
    record("POST /orders/{orderId}, typed (in-process)", ours_us, "µs", baseline=RAW)
    record("  ratio to raw ASGI app", ours_us / raw_us, "x", target=3)

    print()
    ten, thousand = routing_us(10), routing_us(1000)
    record("route match, 10 routes", ten, "µs")
    record("route match, 1000 routes", thousand, "µs", baseline="route match, 10 routes")
    record("  ratio 1000/10 routes", thousand / ten, "x", note="(about 1 expected: trie, not a scan)")

    print()
    print(f"under load: {LOAD_REQUESTS} requests, {LOAD_CONCURRENCY} concurrent, uvicorn on 127.0.0.1")
    constant_cpu = server_cpu_us_per_request("bench.http:constant", "/orders/o-17", BODY)
    typed_cpu = server_cpu_us_per_request("bench.http:typed", "/orders/o-17", BODY)
    record(CONSTANT, constant_cpu, "µs")
    record("server CPU per request, typed route", typed_cpu, "µs", baseline=CONSTANT)
    record("  ratio to raw ASGI constant", typed_cpu / constant_cpu, "x", target=1.8)


RAW = "raw ASGI app, same JSON work (in-process)"
CONSTANT = "server CPU per request, raw ASGI constant"


def main(argv: list[str] | None = None) -> list[Figure]:
    return run("bench/http.py", measure, argv)


if __name__ == "__main__":
    main()
