"""At least once, never lost: a subscriber killed with SIGKILL mid-handler gets the message again after restart,
and a JetStream server restarted mid-stream loses no event it acknowledged."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from svcgen.runtime import Context, Delivery, Result
from svcgen.runtime._nats.connections import open_connection
from tests.events.harness import Placed, cleanup, publisher_bus, subscriber, wait_for
from tests.support.broker import ThrowawayNats, unique_name

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _start(url: str, publisher: str, name: str, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "tests.events.subscriber_process", url, publisher, name, str(log)],
                            cwd=REPO, env=env)  # fmt: skip


def _lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_a_subscriber_killed_mid_handler_gets_the_message_again_after_restart(nats_url: str, tmp_path: Path) -> None:
    publisher, name = unique_name("pub"), unique_name("sub")
    log = tmp_path / "deliveries.log"
    first = second = None

    async def publish(order_id: str) -> None:
        client = await open_connection(nats_url)
        try:
            bus = publisher_bus(client, publisher)
            await bus.start(None)  # type: ignore[arg-type]
            assert (await bus.publish("orders:placed", Placed(order_id))).status == "accepted"
        finally:
            await client.close()

    try:
        asyncio.run(publish("warmup"))  # the stream exists before the subscriber binds its consumer
        first = _start(nats_url, publisher, name, log)
        asyncio.run(wait_for(lambda: "warmup 1" in _lines(log), "the first subscriber", 60))
        asyncio.run(publish("hang-1"))
        asyncio.run(wait_for(lambda: "hang-1 1" in _lines(log), "the handler to start", 60))
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
        second = _start(nats_url, publisher, name, log)
        asyncio.run(wait_for(lambda: "hang-1 2" in _lines(log), "the redelivery after restart", 60))
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait(timeout=30)
        asyncio.run(cleanup(nats_url, publisher, name))
    assert _lines(log).count("warmup 1") == 1 and "warmup 2" not in _lines(log)


def test_a_restarted_jetstream_server_loses_nothing_it_acknowledged() -> None:
    server = ThrowawayNats()
    server.start()
    publisher, name = unique_name("pub"), unique_name("sub")
    handled: set[str] = set()
    accepted: list[str] = []
    refused: list[str] = []

    async def handle(event: Placed, context: Context) -> Result[None]:
        handled.add(event.order_id)
        return Result.ok()

    async def main() -> None:
        pub_client = await open_connection(server.url)
        sub_client = await open_connection(server.url)
        sender = publisher_bus(pub_client, publisher)
        sender.publish_timeout = 1.0  # each publish in the outage waits this long
        await sender.start(None)  # type: ignore[arg-type]
        bus, service = subscriber(sub_client, name, publisher, handle, Delivery(backoff=(0.1,), ack_wait=5.0))
        await bus.start(service)
        for number in range(300):
            if number == 100:
                await asyncio.to_thread(server.stop)
            if number == 110:
                await asyncio.to_thread(server.start)
            result = await sender.publish("orders:placed", Placed(f"o-{number}"))
            (accepted if result.status == "accepted" else refused).append(f"o-{number}")
            assert result.status in ("accepted", "service-unavailable", "timeout")
        await wait_for(lambda: set(accepted) <= handled, "every acknowledged event handled", 90)
        await bus.stop()
        await pub_client.close()
        await sub_client.close()

    try:
        asyncio.run(main())
    finally:
        server.remove()
    assert len(accepted) >= 170 and refused  # the outage showed as failed publishes, never as silent drops


def test_a_publish_while_the_connection_is_down_fails_at_once_and_is_not_stored_once_it_is_back() -> None:
    # A publish while the connection was reconnecting waited for the publish timeout and answered `timeout`, but
    # nats-py had buffered the message and sent it once the server was back: the stream stored an event whose
    # publisher had been told it failed (and had perhaps undone the work it announced). Now it waits for the
    # connection within its timeout and, still down, is `service-unavailable`, not sent.
    server = ThrowawayNats()
    server.start()
    publisher = unique_name("pub")

    async def main() -> None:
        client = await open_connection(server.url)
        sender = publisher_bus(client, publisher)
        sender.publish_timeout = 0.5
        await sender.start(None)  # type: ignore[arg-type]
        assert (await sender.publish("orders:placed", Placed("before"))).status == "accepted"
        await asyncio.to_thread(server.stop)
        await wait_for(lambda: client.is_reconnecting or not client.is_connected, "the connection seen lost")
        during = await sender.publish("orders:placed", Placed("during"))
        assert during.status == "service-unavailable", (during.status, during.detail)
        await asyncio.to_thread(server.start)
        await wait_for(lambda: client.is_connected, "the connection back")
        after = await sender.publish("orders:placed", Placed("after"))  # sent after anything still buffered
        assert after.status == "accepted", after.detail
        info = await client.jetstream().stream_info(f"SVC_EVENTS_{publisher.upper()}")
        assert info.state.messages == 2  # before and after; nothing the publisher was told failed
        await client.close()

    try:
        asyncio.run(main())
    finally:
        server.remove()
