"""Fault: poll targets that hang, trickle, answer garbage or cut the body off, over real sockets on 127.0.0.1,
polled in one sweep beside a healthy service."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable

from svcgen.collector import Collector
from svcgen.collector.poller import Poller
from svcgen.runtime import HealthCheck, HealthChecks, HttpApp, Identity, Registry, Result, Service
from tests.support.reliability import report
from tests.support.server import free_port, running

TIMEOUT = 1.0
SLACK = 1.0
"""What a sweep may take beyond the poll timeout: scheduling on a busy 2-core machine, not waiting."""
JSON = "application/json"

Behaviour = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def head(status: str, length: int, content_type: str = JSON) -> bytes:
    return f"HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {length}\r\n\r\n".encode()


async def answer(writer: asyncio.StreamWriter, status: str, body: bytes, content_type: str = JSON) -> None:
    writer.write(head(status, len(body), content_type) + body)
    await writer.drain()


async def hang(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Accepts and reads the request, never answers."""
    await asyncio.Event().wait()


async def trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Headers promising 100 kB, then one byte every 50 ms: every read makes progress, the body never ends."""
    writer.write(head("200 OK", 100_000))
    while True:
        writer.write(b" ")
        await writer.drain()
        await asyncio.sleep(0.05)


async def not_json(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await answer(writer, "200 OK", b"<html>certainly not JSON</html>", "text/html")


async def wrong_shape(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await answer(writer, "200 OK", b'{"service": "x", "topics": "none", "isHealthy": "yes"}')


async def json_array(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await answer(writer, "200 OK", b'[{"topics": []}]')


async def server_error(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A 500 carrying a well-formed spec and health: a non-2xx answer is a failed poll, never data."""
    await answer(writer, "500 Internal Server Error", b'{"service": "x", "topics": [], "isHealthy": true}')


async def cut_off(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Content-Length 4096, 12 bytes of body, then the connection closes."""
    writer.write(head("200 OK", 4096) + b'{"topics": [')
    await writer.drain()
    writer.close()


BEHAVIOURS: dict[str, tuple[Behaviour, tuple[str, ...]]] = {
    "hang": (hang, (f"spec: no answer within {TIMEOUT:g}s", f"health: no answer within {TIMEOUT:g}s")),
    "trickle": (trickle, (f"spec: no answer within {TIMEOUT:g}s", f"health: no answer within {TIMEOUT:g}s")),
    "not-json": (not_json, ("spec: body is not valid JSON", "health: body is not valid JSON")),
    "wrong-shape": (wrong_shape, ("spec: not a service spec (no topics array)",
                                  "health: not a health aggregate (no boolean isHealthy)")),
    "json-array": (json_array, ("spec: body is not a JSON object", "health: body is not a JSON object")),
    "server-error": (server_error, ("spec: HTTP 500", "health: HTTP 500")),
    "cut-off": (cut_off, ("spec: RemoteProtocolError", "health: RemoteProtocolError")),
}  # fmt: skip


@contextlib.asynccontextmanager
async def raw_server(behaviour: Behaviour) -> AsyncIterator[str]:
    """A raw asyncio socket server on 127.0.0.1 that reads each request head and then behaves."""
    tasks: set[asyncio.Task[None]] = set()

    async def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        tasks.add(task)
        try:
            await reader.readuntil(b"\r\n\r\n")
            await behaviour(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(connected, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()


def healthy_app() -> HttpApp:
    async def get(request: dict[str, str], context: object) -> Result[dict[str, str]]:
        return Result.ok({"sku": "s-1"})

    registry = Registry()
    registry.add("stock:get", get, request=dict[str, str], response=dict[str, str])
    health = HealthChecks([HealthCheck("db", lambda: True)])
    return HttpApp(Service(Identity("stock"), registry, health=health))


def test_one_sweep_survives_hostile_targets_within_its_timeout_and_ingests_the_healthy_one() -> None:
    """Serves seven hostile poll targets from raw asyncio socket servers on 127.0.0.1 (hang: accept, read, never
    answer; trickle: a byte every 50 ms of a never-ending body; not-json; wrong-shape; a JSON array; a 500 with
    a well-formed body; cut-off: Content-Length 4096 then 12 bytes and close), a port nobody listens on, and a
    healthy service (HttpApp on uvicorn), and runs one Poller sweep (timeout 1 s) into a real Collector.
    Measures: the sweep's duration and each target's recorded error. Asserts: the sweep ends within the
    timeout plus 1 s of slack; every hostile target is a failed poll with an error naming both surfaces and
    why, recorded in the collector as a failed, unhealthy poll with nothing ingested; the healthy target is
    ingested (its spec's topics in the fleet, health healthy)."""
    collector = Collector()
    refused = f"http://127.0.0.1:{free_port()}"

    async def sweep(healthy: str) -> tuple[float, dict[str, str | None]]:
        async with contextlib.AsyncExitStack() as stack:
            fleet = [(name, await stack.enter_async_context(raw_server(behaviour)))
                     for name, (behaviour, _) in BEHAVIOURS.items()]  # fmt: skip
            fleet += [("refused", refused), ("stock", healthy)]
            poller = Poller(collector, fleet, timeout=TIMEOUT, interval=3600.0)
            started = time.monotonic()
            polls = await poller.sweep()
            elapsed = time.monotonic() - started
        return elapsed, {poll.service: poll.error for poll in polls}

    with running(healthy_app()) as healthy:
        elapsed, errors = asyncio.run(sweep(healthy))
    snapshot = collector.snapshot()
    polls = {poll["service"]: poll for poll in snapshot["polls"]}
    described = {entry["service"] for entry in snapshot["catalog"] if "spec" in entry}
    answer = collector.query_fleet({}).payload
    assert answer is not None
    fleet = {entry["service"]: entry for entry in answer["services"]}
    figures = report("poll sweep", elapsed_s=f"{elapsed:.2f}", timeout_s=TIMEOUT,
                     **{name: repr(error) for name, error in errors.items()})  # fmt: skip

    assert elapsed < TIMEOUT + SLACK, figures
    for name, (_, expected) in BEHAVIOURS.items():
        error = errors[name]
        assert error is not None and all(part in error for part in expected), f"{name}: {error!r}; {figures}"
    assert errors["refused"] is not None and "ConnectError" in errors["refused"], figures
    for name in [*BEHAVIOURS, "refused"]:
        assert polls[name]["ok"] is False and polls[name]["error"] == errors[name], figures
        assert polls[name]["failures"] == 1 and "health" not in polls[name], figures
        assert fleet[name]["health"] == "unhealthy" and fleet[name]["topics"] == 0, figures
    assert described == {"stock"}, figures
    assert errors["stock"] is None and polls["stock"]["ok"] is True, figures
    assert fleet["stock"]["topics"] == 1 and fleet["stock"]["health"] == "healthy", figures
