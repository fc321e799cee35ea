"""Subscribers and publishers over real JetStream for the event tests: unique names per test, streams and the
test's dead letters removed after it."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import nats
from nats.aio.client import Client

from svcgen.runtime import (
    Context,
    Delivery,
    EventBus,
    EventSpec,
    Identity,
    JetStreamBroker,
    Registry,
    Result,
    Retention,
    Service,
    Subscriptions,
)
from svcgen.runtime._eventnames import DEAD_LETTER_STREAM, DEAD_SUBJECT_ROOT, event_subject, stream_name
from svcgen.runtime._nats.events import DEAD_LETTER_RETENTION, MAX_IN_FLIGHT

DEADLINE = 30.0


@dataclass
class Placed:
    order_id: str
    total: int = 0


async def wait_for(predicate: Callable[[], bool], what: str, deadline: float = DEADLINE) -> None:
    """Polls until `predicate` holds; fails naming `what` after a generous deadline (never a timing assertion)."""
    end = time.monotonic() + deadline
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"gave up waiting for {what}")
        await asyncio.sleep(0.02)


def publisher_bus(client: Client, service: str, **options: Any) -> EventBus:
    return EventBus(service, [EventSpec("orders:placed", Placed, key="orderId")], Subscriptions(),
                    JetStreamBroker(client), **options)  # fmt: skip


def subscriber(
    client: Client,
    service: str,
    publisher: str,
    handler: Callable[[Placed, Context], Awaitable[Result[None]]],
    delivery: Delivery | None = None,
    max_in_flight: int = MAX_IN_FLIGHT,
    dead_letters: Retention = DEAD_LETTER_RETENTION,
    **options: Any,
) -> tuple[EventBus, Service]:
    subscriptions = Subscriptions()
    subscriptions.add("orders:placed", handler, publisher=publisher, payload=Placed, delivery=delivery)
    broker = JetStreamBroker(client, max_in_flight=max_in_flight, dead_letters=dead_letters)
    bus = EventBus(service, [], subscriptions, broker, **options)
    return bus, Service(Identity(service), Registry())


@contextlib.asynccontextmanager
async def connected(url: str) -> AsyncIterator[Client]:
    client = await nats.connect(url)
    try:
        yield client
    finally:
        await client.close()


async def cleanup(url: str, publisher: str, *subscribers: str) -> None:
    """Deletes the publisher's stream (its consumers with it) and the dead letters of `subscribers` (the test's
    own: SVC_DEAD_LETTERS is shared, so it is purged by their subjects, never whole)."""
    async with connected(url) as client:
        js = client.jetstream()
        with contextlib.suppress(Exception):
            await js.delete_stream(stream_name(publisher))
        for name in subscribers:
            with contextlib.suppress(Exception):
                await js.purge_stream(DEAD_LETTER_STREAM, subject=f"{DEAD_SUBJECT_ROOT}.{name}.>")


async def accept(event: Placed, context: Context) -> Result[None]:
    """A subscriber's handler that takes every event."""
    return Result.ok()


def run_then_clean(url: str, main: Callable[[], Coroutine[Any, Any, None]], publisher: str, *subscribers: str) -> None:
    """`asyncio.run(main())`, then `cleanup` of what the test made on the server, whether it passed or not."""
    try:
        asyncio.run(main())
    finally:
        asyncio.run(cleanup(url, publisher, *subscribers))


async def publish_raw(client: Client, publisher: str, data: bytes, headers: dict[str, str] | None = None) -> None:
    await client.jetstream().publish(event_subject(publisher, "orders:placed"), data, stream=stream_name(publisher),
                                     headers=headers)  # fmt: skip
