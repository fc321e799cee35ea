"""HTTP binding against the frameworks around it: server CPU per request of the same typed JSON route under
svcgen (plain; traced as a user runs it; traced with OTLP export too), Starlette (untyped JSON route),
FastAPI+pydantic, a raw ASGI app decoding and validating with msgspec Structs (the floor), a raw ASGI app doing
the same JSON work by hand and a raw ASGI app answering a constant; in-process ASGI calls; route matching at scale.

The traced apps run what a user runs: a real `svcgen collector serve` process receives every feed (register,
heartbeats, trace batches, issues) over HTTP, and the OTLP variant also exports to a real OTLP/HTTP receiver in
its own process; the run fails if either received nothing. Under load every app runs under uvicorn (1 worker,
httptools + uvloop) in its own process pinned to one core, wrk (`make wrk`) pinned to the other (the collector
and the receiver too); the servers take turns within each round (A B C ... A B C ...), and each round's server
CPU per request comes from /proc/<pid>/stat. Ratios are the median of per-round ratios.

    PYTHONPATH=. python -m bench.http [--rounds 5] [--seconds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from bench.harness import REPEATS, Figure, Recorder, per_call_us, run
from svcgen.runtime import (
    Context,
    HealthCheck,
    HealthChecks,
    Identity,
    MeshHost,
    MeshSettings,
    Registry,
    Result,
    Service,
)
from svcgen.runtime._http.app import HttpApp, create_app
from svcgen.runtime._http.routing import COMPILED_ROUTES_MAX, Route, Router
from svcgen.runtime._mesh.otlp import TRACES_ENDPOINT_ENV

ROOT = Path(__file__).resolve().parent.parent
CONNECTIONS = 16
SPREAD_TARGET = 10.0
"""Percent: (max - min) / median of a server's per-round figures; more is too noisy to trust."""
# Kept for bench/trace.py's load figures.
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


async def ping(request: None, context: Context) -> Result[None]:
    return Result.ok()


ROUTES = ["POST /orders/{orderId} -> orders:update"]


def typed_app() -> HttpApp:
    registry = Registry()
    registry.add("orders:update", update)
    return create_app(Service(Identity("orders"), registry), ROUTES)


COLLECTOR_ENV = "BENCH_COLLECTOR"
"""The collector the traced apps report to (set by `under_load` for its uvicorn processes)."""


def traced_app(*, otlp: bool) -> HttpApp | None:
    """The typed app as a user runs it traced: the mesh host's trace middleware and issues, its reporter sending
    every feed to the collector at $BENCH_COLLECTOR each second; with `otlp`, spans exported to
    $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as well. None where those are not set (an import outside the load run)."""
    collector = os.environ.get(COLLECTOR_ENV)
    endpoint = os.environ.get(TRACES_ENDPOINT_ENV)
    if not collector or (otlp and not endpoint):
        return None
    registry = Registry()
    registry.add("orders:update", update)
    identity = Identity("orders")
    environ = {key: value for key, value in os.environ.items() if otlp or key != TRACES_ENDPOINT_ENV}
    mesh = MeshHost(identity, MeshSettings(collector=collector, heartbeat_seconds=1.0), environ=environ)
    return mesh.attach(create_app(Service(identity, registry, middleware=mesh.middleware), ROUTES))


def health_app() -> HttpApp:
    """A service with one plain sync health check and a trivial topic, for health against invoke."""
    registry = Registry()
    registry.add("orders:ping", ping)
    health = HealthChecks([HealthCheck("memory", lambda: True)])
    return create_app(Service(Identity("orders"), registry, health=health))


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


class FloorOrder(msgspec.Struct, rename="camel"):
    customer_id: str
    quantity: int
    price: float
    express: bool = False


class FloorAnswer(msgspec.Struct, rename="camel"):
    order_id: str
    customer_id: str
    total: float


_FLOOR_DECODER = msgspec.json.Decoder(FloorOrder)
_FLOOR_ENCODER = msgspec.json.Encoder()


async def floor_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The floor: a raw ASGI app decoding and validating the same request with msgspec Structs, typed answer."""
    if scope["type"] != "http":
        return
    message = await receive()
    order_id = scope["path"].rsplit("/", 1)[-1]
    try:
        request = _FLOOR_DECODER.decode(message.get("body") or b"{}")
    except msgspec.ValidationError as exc:
        body, status = _FLOOR_ENCODER.encode({"status": "validation-error", "detail": str(exc)}), 422
    else:
        body, status = _FLOOR_ENCODER.encode(
            FloorAnswer(order_id, request.customer_id, request.quantity * request.price)), 200
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def constant_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    await receive()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": b'{"ok":true}'})


def starlette_app() -> Any:
    """Starlette's untyped JSON route doing the same work: request.json(), a dataclass, JSONResponse."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route as StarletteRoute

    async def update_order(request: Request) -> JSONResponse:
        data = await request.json()
        order_id = request.path_params["orderId"]
        order = UpdateOrder(order_id, data["customerId"], data["quantity"], data["price"], data.get("express", False))
        total = Order(order.order_id, order.customer_id, order.quantity * order.price)
        return JSONResponse({"orderId": total.order_id, "customerId": total.customer_id, "total": total.total})

    return Starlette(routes=[StarletteRoute("/orders/{orderId}", update_order, methods=["POST"])])


class _Camel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class UpdateOrderBody(_Camel):
    customer_id: str
    quantity: int
    price: float
    express: bool = False


class OrderModel(_Camel):
    order_id: str
    customer_id: str
    total: float


def fastapi_app() -> Any:
    """FastAPI with pydantic models: validated request, declared response model."""
    from fastapi import FastAPI

    app = FastAPI()

    @app.post("/orders/{orderId}", response_model=OrderModel, response_model_by_alias=True)
    async def update_order(orderId: str, body: UpdateOrderBody) -> OrderModel:
        return OrderModel(order_id=orderId, customer_id=body.customer_id, total=body.quantity * body.price)

    return app


BODY = json.dumps({"customerId": "c-1", "quantity": 3, "price": 2.5}).encode()
PATH = "/orders/o-17"
SCOPE = {"type": "http", "method": "POST", "path": PATH, "raw_path": PATH.encode(), "query_string": b"",
         "headers": [(b"content-type", b"application/json"), (b"host", b"bench")]}


def in_process(app: Any, scope: dict[str, Any] = SCOPE, body: bytes = BODY) -> Callable[[], Awaitable[None]]:
    """One ASGI call of `app` without a server; fails loudly unless it answers 200."""

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start" and message["status"] != 200:
            raise AssertionError(f"{scope['method']} {scope['path']} answered {message['status']}")

    async def call() -> None:
        await app(dict(scope), receive, send)

    return call


def routing_us(count: int) -> float:
    """`Router.find_path` as the app calls it, for the last of `count` routes registered (the compiled expression's
    worst case up to `COMPILED_ROUTES_MAX` routes, the trie past it)."""
    router = Router(Route.parse(f"GET /area{i}/{{id}}/items/{{item}}", f"t{i}") for i in range(count))
    raw_path = f"/area{count - 1}/42/items/7".encode()
    found = router.find_path("GET", raw_path)
    assert found is not None and found[0].topic == f"t{count - 1}"
    return per_call_us(lambda: router.find_path("GET", raw_path), 50_000)


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
    server = start_server(target, port)
    try:
        with httpx.Client(timeout=10) as client:
            for _ in range(warmup_requests):
                client.post(f"http://127.0.0.1:{port}{path}", content=body)
        time.sleep(settle_seconds)
        before = cpu_seconds(server.pid)
        asyncio.run(_load(f"http://127.0.0.1:{port}{path}", body))
        return (cpu_seconds(server.pid) - before) / LOAD_REQUESTS * 1e6
    finally:
        stop_server(server)


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


def cores() -> tuple[set[int], set[int]]:
    """(server core, load core): two different cores when the machine has them."""
    available = sorted(os.sched_getaffinity(0))
    return {available[0]}, {available[-1]}


def start_server(target: str, port: int) -> subprocess.Popen[bytes]:
    """uvicorn, 1 worker, httptools + uvloop, pinned to the server core; returns once it answers 200."""
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", target, "--host", "127.0.0.1", "--port", str(port), "--http", "httptools",
         "--loop", "uvloop", "--workers", "1", "--log-level", "warning", "--no-access-log"],
        cwd=ROOT, stdout=subprocess.DEVNULL,
    )
    os.sched_setaffinity(server.pid, cores()[0])
    deadline = time.monotonic() + 30
    while True:
        try:
            answer = httpx.post(f"http://127.0.0.1:{port}{PATH}", content=BODY,
                                headers={"content-type": "application/json"}, timeout=1)
            break
        except httpx.TransportError:
            if server.poll() is not None or time.monotonic() > deadline:
                stop_server(server)
                raise SystemExit(f"{target} did not come up") from None
            time.sleep(0.1)
    # Every app but the constant one does the JSON work: 3 x 2.5.
    if answer.status_code != 200 or answer.json().get("total", 7.5) != 7.5:
        stop_server(server)
        raise SystemExit(f"{target} answered {answer.status_code} {answer.text}")
    return server


def stop_server(server: subprocess.Popen[bytes]) -> None:
    server.terminate()
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def wrk_requests(url: str, seconds: float, script: Path) -> int:
    """Requests wrk answered while loading `url` from the load core; any non-2xx answer fails the bench."""
    load_core = ",".join(str(core) for core in cores()[1])
    done = subprocess.run(
        ["taskset", "-c", load_core, "wrk", "-t1", f"-c{CONNECTIONS}", f"-d{seconds:g}s", "--timeout", "10s",
         "-s", str(script), url],
        capture_output=True, text=True, check=True,
    )
    # A timeout is a stalled machine, not a failed request; a refused, broken or non-2xx answer fails the bench.
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+)", done.stdout)
    if "Non-2xx" in done.stdout or (errors is not None and any(int(n) for n in errors.groups())):
        raise SystemExit(f"wrk saw failed requests:\n{done.stdout}")
    found = re.search(r"(\d+) requests in", done.stdout)
    assert found, done.stdout
    return int(found.group(1))


TYPED = "svcgen typed route"
TRACED = "svcgen typed route, traced, live collector"
TRACED_OTLP = "svcgen typed route, traced, live collector + OTLP"
FLOOR = "raw ASGI + msgspec Structs (floor)"
STARLETTE = "Starlette untyped JSON route"
FASTAPI = "FastAPI + pydantic"
RAW_SAME = "raw ASGI, same JSON work"
RAW_CONSTANT = "raw ASGI, constant"
TARGETS = {
    TYPED: "bench.http:typed",
    TRACED: "bench.http:traced",
    TRACED_OTLP: "bench.http:traced_otlp",
    FLOOR: "bench.http:floor",
    STARLETTE: "bench.http:starlette",
    FASTAPI: "bench.http:fastapi",
    RAW_SAME: "bench.http:raw",
    RAW_CONSTANT: "bench.http:constant",
}


def under_load(rounds: int, seconds: float, busy: dict[str, list[float]]) -> dict[str, list[float]]:
    """Server CPU µs per request of each app, one figure per round, the apps taking turns in every round; each
    round's busy share in `busy` (`served_rounds`)."""
    from bench.otlpexport import receiver  # it imports this module's apps

    if not shutil.which("wrk"):
        raise SystemExit("wrk is missing: run `make wrk` (Debian package wrk)")
    with live_collector() as collector, receiver() as (spans, _):
        per_request = served_rounds(TARGETS, rounds, seconds, busy)
        received = collector_invocations(collector)
        print(f"the collector counted {received:,} invocations of orders:update; the OTLP receiver took "
              f"{spans.value:,} POSTs")
        if not received or not spans.value:
            raise SystemExit("the traced apps' feeds did not arrive: the traced figures would not measure tracing")
    return per_request


def served_rounds(
    targets: dict[str, str], rounds: int, seconds: float, busy: dict[str, list[float]] | None = None
) -> dict[str, list[float]]:
    """Serve each `module:app` target under uvicorn (`start_server`) and load them in turns with wrk, `rounds` times:
    server CPU µs per request of each, one figure per round. `busy`, when given, gets each round's server CPU as a
    percentage of the wall time under load: below ~95 % the load did not keep the server saturated (wrk shares its
    core with the collector), and a server that waits pays more per request (more wake-ups per answer)."""
    per_request: dict[str, list[float]] = {name: [] for name in targets}
    servers: dict[str, subprocess.Popen[bytes]] = {}
    ports = {name: free_port() for name in targets}
    with tempfile.TemporaryDirectory() as scratch:
        script = Path(scratch) / "post.lua"
        script.write_text(f'wrk.method = "POST"\nwrk.body = \'{BODY.decode()}\'\n'
                          'wrk.headers["Content-Type"] = "application/json"\n')
        try:
            for name, target in targets.items():
                servers[name] = start_server(target, ports[name])
            names = list(targets)
            for number in range(rounds):
                # Rotate who goes first, so a slow moment of the machine does not always hit the same app.
                shift = number % len(names)
                for name in names[shift:] + names[:shift]:
                    pid = servers[name].pid
                    before, started = cpu_seconds(pid), time.monotonic()
                    answered = wrk_requests(f"http://127.0.0.1:{ports[name]}{PATH}", seconds, script)
                    used = cpu_seconds(pid) - before
                    per_request[name].append(used / answered * 1e6)
                    if busy is not None:
                        busy.setdefault(name, []).append(used / (time.monotonic() - started) * 100)
        finally:
            for server in servers.values():
                stop_server(server)
    return per_request


@contextlib.contextmanager
def live_collector() -> Iterator[str]:
    """`svcgen collector serve` (in memory) in its own process on the load core; its URL in $BENCH_COLLECTOR for the
    traced apps' uvicorn processes."""
    port = free_port()
    with tempfile.TemporaryDirectory() as artifacts:
        process = subprocess.Popen(
            [sys.executable, "-m", "svcgen", "collector", "serve", "--port", str(port), "--artifacts", artifacts],
            cwd=ROOT, stdout=subprocess.DEVNULL,
        )
        os.sched_setaffinity(process.pid, cores()[1])
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"{url}/svc/health", timeout=1)
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    stop_server(process)
                    raise SystemExit("the collector did not come up") from None
                time.sleep(0.1)
        os.environ[COLLECTOR_ENV] = url
        try:
            yield url
        finally:
            os.environ.pop(COLLECTOR_ENV, None)
            stop_server(process)


def collector_invocations(url: str) -> int:
    """Invocations of the bench topic the collector counted (the traced apps' feeds arrived)."""
    time.sleep(2.5)  # the last beat after the last round
    envelope = {"topic": "svc:mesh:query:topic", "body": json.dumps({"topic": "orders:update"})}
    answer = httpx.post(f"{url}/svc/invoke", json=envelope, timeout=10).json()
    return int(json.loads(answer.get("body") or "{}").get("invocations", 0)) if answer.get("isSuccessful") else 0


def spread(values: list[float]) -> float:
    """(max - min) / median, in percent."""
    return (max(values) - min(values)) / statistics.median(values) * 100


def ratio(numerators: list[float], denominators: list[float]) -> float:
    """Median of the per-round ratios."""
    return statistics.median(n / d for n, d in zip(numerators, denominators, strict=True))


def interleaved_us(
    calls: dict[str, Callable[[], Awaitable[None]]], rounds: int, per_round: int
) -> dict[str, list[float]]:
    """µs per call of each in-process call, one figure per round, the calls taking turns within every round."""

    async def go() -> dict[str, list[float]]:
        figures: dict[str, list[float]] = {name: [] for name in calls}
        names = list(calls)
        for number in range(rounds):
            shift = number % len(names)
            for name in names[shift:] + names[:shift]:
                call = calls[name]
                started = time.perf_counter()
                for _ in range(per_round):
                    await call()
                figures[name].append((time.perf_counter() - started) / per_round * 1e6)
        return figures

    return asyncio.run(go())


def measure(record: Recorder, args: argparse.Namespace) -> None:
    invoke_scope = {**SCOPE, "path": "/svc/invoke", "raw_path": b"/svc/invoke"}
    health_scope = {**SCOPE, "method": "GET", "path": "/svc/health", "raw_path": b"/svc/health"}
    calls = {
        IN_RAW: in_process(raw_app),
        IN_TYPED: in_process(typed),
        IN_INVOKE: in_process(health, invoke_scope, b'{"topic": "orders:ping", "body": ""}'),
        IN_HEALTH: in_process(health, health_scope, b""),
    }
    us = interleaved_us(calls, 4 * REPEATS, 5_000)
    print(f"in-process: {4 * REPEATS} rounds of 5,000 calls each, taking turns; ratios are medians of per-round ratios")
    record(IN_RAW, statistics.median(us[IN_RAW]), "µs")
    record(IN_TYPED, statistics.median(us[IN_TYPED]), "µs", baseline=IN_RAW)
    record("  ratio typed / raw same JSON work (in-process)", ratio(us[IN_TYPED], us[IN_RAW]), "x", target=2)
    record(IN_INVOKE, statistics.median(us[IN_INVOKE]), "µs")
    record(IN_HEALTH, statistics.median(us[IN_HEALTH]), "µs", baseline=IN_INVOKE)
    record("  ratio health / invoke (in-process)", ratio(us[IN_HEALTH], us[IN_INVOKE]), "x", target=1.5)

    print()
    one, most, thousand = routing_us(1), routing_us(COMPILED_ROUTES_MAX), routing_us(1000)
    record("route match, 1 route (compiled expression)", one, "µs")
    record(f"route match, {COMPILED_ROUTES_MAX} routes (compiled expression, its maximum)", most, "µs")
    record("route match, 1000 routes (trie)", thousand, "µs", baseline="route match, 1 route (compiled expression)")
    record("  ratio 1000/1 routes", thousand / one, "x", note="(the trie's cost follows the path's depth, not the "
           "route count; the compiled expression's the routes before the match)")  # fmt: skip

    print()
    print(f"under load: {args.rounds} rounds of {args.seconds:g} s per app, wrk -c{CONNECTIONS}, "
          "uvicorn 1 worker httptools+uvloop, server and wrk on separate cores")
    busy: dict[str, list[float]] = {}
    cpu = under_load(args.rounds, args.seconds, busy)
    for name in TARGETS:
        label = f"server CPU per request, {name}"
        baseline = None if name == STARLETTE else f"server CPU per request, {STARLETTE}"
        record(label, statistics.median(cpu[name]), "µs", baseline=baseline)
        record(f"  spread across rounds, {name}", spread(cpu[name]), "%", target=SPREAD_TARGET,
               note="((max - min) / median)")
        record(f"  server busy under load, {name}", statistics.median(busy[name]), "%",
               note="(its CPU over the wall time: under ~95 % the load did not saturate it)")
    typed_ratios = [t / s for t, s in zip(cpu[TYPED], cpu[STARLETTE], strict=True)]
    record("  ratio typed / Starlette", statistics.median(typed_ratios), "x", target=1.0,
           note="(median of the per-round ratios)")
    record("  spread of that ratio across rounds", spread(typed_ratios), "%", note="((max - min) / median)")
    record("  ratio traced / Starlette", ratio(cpu[TRACED], cpu[STARLETTE]), "x")
    record("  ratio traced / typed", ratio(cpu[TRACED], cpu[TYPED]), "x",
           target=1.10, note="(tracing with a live collector over the untraced route)")
    record("  ratio traced + OTLP / traced", ratio(cpu[TRACED_OTLP], cpu[TRACED]), "x", target=1.10,
           note="(OTLP export to a live receiver on top of the collector feed)")
    record("  ratio typed / msgspec floor", ratio(cpu[TYPED], cpu[FLOOR]), "x", target=1.4)
    record("  ratio msgspec floor / raw constant", ratio(cpu[FLOOR], cpu[RAW_CONSTANT]), "x")
    record("  ratio FastAPI / Starlette", ratio(cpu[FASTAPI], cpu[STARLETTE]), "x")
    record("  ratio typed / raw same JSON work", ratio(cpu[TYPED], cpu[RAW_SAME]), "x")
    record("  ratio typed / raw constant", ratio(cpu[TYPED], cpu[RAW_CONSTANT]), "x")


IN_RAW = "raw ASGI, same JSON work (in-process)"
IN_TYPED = "svcgen typed route (in-process)"
IN_INVOKE = "POST /svc/invoke, trivial topic (in-process)"
IN_HEALTH = "GET /svc/health, one sync check (in-process)"

# Import targets for the load test's uvicorn processes.
typed = typed_app()
traced = traced_app(otlp=False)
traced_otlp = traced_app(otlp=True)
floor = floor_app
health = health_app()
raw = raw_app
constant = constant_app
starlette = starlette_app()
fastapi = fastapi_app()


def main(argv: list[str] | None = None) -> list[Figure]:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5, help="rounds; each loads every app once")
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds of load per app and round")
    return run("bench/http.py", measure, argv, parser)


if __name__ == "__main__":
    main()
