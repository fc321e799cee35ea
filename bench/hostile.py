"""Hostile bodies: what the worst request under the limits costs, and what it does to other clients.

1. CPU per request (`time.process_time`, in-process through the HTTP app) of 1 MiB bodies built to be
   expensive: arrays nested 62 deep (the attack that cost 0.35-1.0 s before container counting), flat runs of
   empty arrays or objects, numbers, strings full of brackets and escapes, an 88,000-key object, a duplicate key
   at the very end. The worst of them is the figure with a target (≤ 20 ms).
2. Other clients' p50 latency against a uvicorn server (its own process, started with `server_options`):
   one client posting a normal order back to back, alone and then while an attacker posts the most expensive
   body ATTACK_RATE times a second. The ratio is the figure with a target (≤ 2x).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Any

import httpx

from bench.harness import Recorder, run
from bench.http import free_port
from svcgen.runtime import Context, Identity, Registry, Result, Service
from svcgen.runtime._http.app import HttpApp, create_app
from svcgen.runtime._http.limits import DEFAULT_MAX_BODY_BYTES

ROOT = Path(__file__).resolve().parent.parent
MIB = DEFAULT_MAX_BODY_BYTES
CPU_REPEATS = 7
ATTACK_RATE = 5.0
"""Attack bodies per second in the latency part (the probe held a service at 100 % CPU with 3)."""
LATENCY_SECONDS = 4.0


@dataclasses.dataclass
class LineItem:
    sku: str
    quantity: int = 1


@dataclasses.dataclass
class PlaceOrder:
    customer_id: str
    items: list[LineItem]
    note: str | None = None


@dataclasses.dataclass
class Order:
    order_id: str
    total_items: int


async def place(request: PlaceOrder, context: Context) -> Result[Order]:
    return Result.created(Order("o-1", sum(item.quantity for item in request.items)))


def hostile_app() -> HttpApp:
    registry = Registry()
    registry.add("orders:place", place)
    return create_app(Service(Identity("orders"), registry), ["POST /orders -> orders:place"])


app = hostile_app()
"""Import target of the uvicorn process."""

ORDER = b'{"customerId": "c-1", "items": [{"sku": "a", "quantity": 2}]}'


def _fill(head: bytes, unit: bytes, tail: bytes, separator: bytes = b",") -> bytes:
    """`head unit,unit,... tail` as close to 1 MiB as it gets without passing it."""
    count = (MIB - len(head) - len(tail) + len(separator)) // (len(unit) + len(separator))
    return head + separator.join([unit] * count) + tail


def _nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


BODIES: dict[str, Callable[[], bytes]] = {
    "arrays nested 62 deep": lambda: _fill(b'{"customerId": "c", "items": [], "x": [', _nested(62), b"]}"),
    "empty arrays": lambda: _fill(b'{"customerId": "c", "items": [], "x": [', b"[]", b"]}"),
    "empty objects": lambda: _fill(b'{"customerId": "c", "items": [], "x": [', b"{}", b"]}"),
    "9,999 line items": lambda: b'{"customerId": "c", "items": ['
    + b",".join([b'{"sku": "a", "quantity": 1}'] * 9_998) + b"]}",
    "numbers": lambda: _fill(b'{"customerId": "c", "items": [], "x": [', b"1", b"]}"),
    "floats": lambda: _fill(b'{"customerId": "c", "items": [], "x": [', b"1.5", b"]}"),
    "a string of brackets": lambda: _fill(b'{"customerId": "c", "items": [], "note": "', b"[{", b'"}', b""),
    "a string of escapes": lambda: _fill(b'{"customerId": "c", "items": [], "note": "', b'\\"', b'"}', b""),
    "88,000 keys": lambda: b'{"customerId": "c", "items": [], '
    + b",".join(b'"k%d": 1' % n for n in range(88_000)) + b"}",
    "duplicate key at the end": lambda: b'{"customerId": "c", "items": [], '
    + b",".join(b'"k%d": 1' % n for n in range(86_000)) + b', "k1": 2}',
}


def cpu_ms(body: bytes) -> tuple[float, int]:
    """Median CPU ms of one request with `body` through the app in-process, and its HTTP status."""
    scope = {"type": "http", "method": "POST", "path": "/orders", "raw_path": b"/orders", "query_string": b"",
             "headers": [(b"content-type", b"application/json")]}  # fmt: skip
    status = [0]

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status[0] = message["status"]

    async def measure() -> float:
        samples = []
        for _ in range(CPU_REPEATS):
            started = time.process_time()
            await app(scope, receive, send)
            samples.append((time.process_time() - started) * 1e3)
        return statistics.median(samples)

    return asyncio.run(measure()), status[0]


def started_server() -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    launch = ("import uvicorn\nfrom svcgen.runtime._http.limits import server_options\n"
              f"uvicorn.run('bench.hostile:app', host='127.0.0.1', port={port}, "
              "**server_options() | {'log_level': 'warning', 'access_log': False})")  # fmt: skip
    server = subprocess.Popen([sys.executable, "-c", launch], cwd=ROOT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 15
    while True:
        try:
            httpx.post(base + "/orders", content=ORDER, timeout=1)
            return server, base
        except httpx.TransportError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.kill()
                raise
            time.sleep(0.1)


async def p50_ms(base: str, attack: bytes | None) -> tuple[float, int]:
    """The normal client's p50 over LATENCY_SECONDS, with the attacker posting `attack` ATTACK_RATE times a
    second when given; and how many attack bodies were answered."""
    latencies: list[float] = []
    attacks = 0
    end = time.monotonic() + LATENCY_SECONDS

    async def client() -> None:
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            while time.monotonic() < end:
                started = time.perf_counter()
                answer = await http.post("/orders", content=ORDER)
                latencies.append((time.perf_counter() - started) * 1e3)
                assert answer.status_code == 201, answer.text

    async def attacker() -> None:
        nonlocal attacks
        if attack is None:
            return
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:

            async def one() -> None:
                nonlocal attacks
                await http.post("/orders", content=attack)
                attacks += 1

            sent: list[asyncio.Task[None]] = []
            while time.monotonic() < end:
                sent.append(asyncio.create_task(one()))
                await asyncio.sleep(1 / ATTACK_RATE)
            await asyncio.gather(*sent)

    await asyncio.gather(client(), attacker())
    return statistics.median(latencies), attacks


def measure(record: Recorder, args: argparse.Namespace) -> None:
    print(f"CPU per request of 1 MiB hostile bodies, in-process, median of {CPU_REPEATS}")
    costs: dict[str, float] = {}
    for name, build in BODIES.items():
        body = build()
        assert len(body) <= MIB, (name, len(body))
        costs[name], status = cpu_ms(body)
        record(f"CPU, {name}", costs[name], "ms", note=f"(HTTP {status})")
    worst = max(costs, key=costs.__getitem__)
    record("CPU of the worst body", costs[worst], "ms", target=20, note=f"({worst})")

    print()
    print(f"other clients' p50 under attack: {ATTACK_RATE:g} x '{worst}' per second, uvicorn on 127.0.0.1")
    server, base = started_server()
    try:
        alone, _ = asyncio.run(p50_ms(base, None))
        attacked, answered = asyncio.run(p50_ms(base, BODIES[worst]()))
    finally:
        server.terminate()
        server.wait(timeout=10)
    record("p50 of a normal client, alone", alone, "ms")
    record("p50 of a normal client, under attack", attacked, "ms", baseline="p50 of a normal client, alone",
           note=f"({answered} attack bodies answered)")  # fmt: skip
    record("  ratio under attack / alone", attacked / alone, "x", target=2)


def main(argv: list[str] | None = None) -> Any:
    return run("bench/hostile.py", measure, argv)


if __name__ == "__main__":
    main()
