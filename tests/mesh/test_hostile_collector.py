"""A refusing, a silent and a failing collector: requests keep answering, unblocked, and the queues stay bounded."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from svcgen.runtime import MeshHost, MeshSettings, create_app
from svcgen.runtime._mesh.feeds import EnvelopeSender
from tests.support.sample import build_service
from tests.support.server import free_port, running

FEED_TIMEOUT = 30.0
"""Far longer than the test may take: a request that waited on a feed would blow the bound below."""
REQUESTS = 300
QUEUE_CAP = 50


@contextmanager
def silent_collector() -> Iterator[str]:
    """Accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=5)
        for connection in accepted:
            connection.close()
        server.close()


@contextmanager
def failing_collector() -> Iterator[str]:
    async def app(scope: dict[str, object], receive: object, send: object) -> None:
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 500, "headers": []})  # type: ignore[operator]
        await send({"type": "http.response.body", "body": b"boom"})  # type: ignore[operator]

    with running(app) as base:
        yield base


@contextmanager
def refusing_collector() -> Iterator[str]:
    yield f"http://127.0.0.1:{free_port()}"  # nothing listens there


@pytest.mark.parametrize("collector", [refusing_collector, silent_collector, failing_collector])
def test_requests_are_never_held_by_the_feeds(collector: object) -> None:
    with collector() as url:  # type: ignore[operator]
        settings = MeshSettings(collector=url, heartbeat_seconds=0.01, trace_queue_cap=QUEUE_CAP)
        service_mesh = MeshHost(build_service().identity, settings,
                                sender=EnvelopeSender(url, timeout=FEED_TIMEOUT))
        app = service_mesh.attach(create_app(build_service(middleware=service_mesh.middleware),
                                             ["GET /orders/{orderId} -> orders:get"]))

        async def run() -> list[int]:
            for hook in app.on_startup:
                await hook()
            transport = httpx.ASGITransport(app=app)
            codes = []
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
                for number in range(REQUESTS):
                    codes.append((await client.get(f"/orders/o-{number}")).status_code)
                    if number % 50 == 0:
                        await asyncio.sleep(0.02)  # let the reporter beat against the collector
            for hook in app.on_shutdown:
                await hook()
            return codes

        started = time.monotonic()
        codes = asyncio.run(run())
        elapsed = time.monotonic() - started
    assert codes == [200] * REQUESTS
    # Bounded by construction: a request held by a feed would have waited FEED_TIMEOUT.
    assert elapsed < FEED_TIMEOUT / 2
    assert len(service_mesh.queue) <= QUEUE_CAP
    reporter = service_mesh.reporter
    assert reporter is not None and reporter.beats >= 1
    assert reporter.needs_register  # never accepted: it keeps trying to register
