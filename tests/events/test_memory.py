"""svcgen.testing's in-memory broker keeps the delivery rules: a key stored once, one handling per event across
replicas, redelivery with attempts counted, dead letters after exactly maxDeliver attempts or at once when
undecodable, with JetStream's dead-letter headers."""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import MutableMapping
from typing import Any

import pytest

from svcgen.runtime import (
    Context,
    Delivery,
    EventBus,
    EventsError,
    EventSpec,
    HttpApp,
    Identity,
    Registry,
    Result,
    Service,
    Subscriptions,
)
from svcgen.testing import MemoryBroker
from tests.events.harness import Placed


def _subscriber(broker: MemoryBroker, handle: object, delivery: Delivery) -> tuple[EventBus, Service]:
    subscriptions = Subscriptions()
    subscriptions.add("orders:placed", handle, publisher="orders", payload=Placed, delivery=delivery)  # type: ignore[arg-type]
    return EventBus("notify", [], subscriptions, broker), Service(Identity("notify"), Registry())


def test_the_in_memory_broker_keeps_the_delivery_rules() -> None:
    broker = MemoryBroker(backoff_scale=0.0)
    attempts: collections.Counter[str] = collections.Counter()
    replicas_seen: set[int] = set()

    def handler(replica: int):  # type: ignore[no-untyped-def]
        async def handle(event: Placed, context: Context) -> Result[None]:
            assert context.delivery is not None and context.delivery.attempt == attempts[event.order_id] + 1
            attempts[event.order_id] += 1
            replicas_seen.add(replica)
            await asyncio.sleep(0)
            return Result.conflict("not yet") if event.order_id == "poison" else Result.ok()

        return handle

    async def main() -> None:
        publisher = EventBus("orders", [EventSpec("orders:placed", Placed, key="orderId")], Subscriptions(), broker)
        await publisher.start(None)  # type: ignore[arg-type]
        replicas = [_subscriber(broker, handler(index), Delivery(max_deliver=4, backoff=(1.0,))) for index in (0, 1)]
        for bus, service in replicas:
            await bus.start(service)
        for number in range(20):
            assert (await publisher.publish("orders:placed", Placed(f"o-{number}"))).status == "accepted"
        duplicate = await publisher.publish("orders:placed", Placed("o-0"))
        assert duplicate.headers.get("svc-duplicate") == "true"
        await publisher.publish("orders:placed", Placed("poison"))
        await broker.publish("orders", "svc.event.orders.orders_placed", b"{not json", {}, 1.0)
        await broker.settled()
        await broker.close()

    asyncio.run(main())
    assert len(broker.stored("orders")) == 22
    assert {order: count for order, count in attempts.items() if order != "poison"} == {f"o-{n}": 1 for n in range(20)}
    assert attempts["poison"] == 4
    assert replicas_seen == {0, 1}
    [poison] = [letter for letter in broker.dead_letters if letter.data != b"{not json"]
    [garbage] = [letter for letter in broker.dead_letters if letter.data == b"{not json"]
    assert poison.subject == "svc.dead.notify.orders_placed"
    assert poison.headers["Svc-Attempts"] == "4" and poison.headers["Svc-Last-Status"] == "conflict"
    assert poison.headers["Svc-Original-Subject"] == "svc.event.orders.orders_placed"
    assert garbage.headers["Svc-Attempts"] == "1" and garbage.headers["Svc-Reason"].startswith("undecodable")


def test_a_broker_that_refuses_at_startup_fails_the_startup_with_its_one_line(caplog: pytest.LogCaptureFixture) -> None:
    # It was logged with a traceback and told the server only "EventsError".
    line = "JetStream stream SVC_EVENTS_X exists with subjects ['y.>'], not svc.event.x.>; delete it"

    async def refuse() -> None:
        raise EventsError(line)

    async def main() -> MutableMapping[str, Any]:
        app = HttpApp(Service(Identity("s"), Registry()), on_startup=[refuse])
        inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        outbox: asyncio.Queue[MutableMapping[str, Any]] = asyncio.Queue()
        await inbox.put({"type": "lifespan.startup"})
        await app({"type": "lifespan", "asgi": {"version": "3.0"}}, inbox.get, outbox.put)
        return await outbox.get()

    caplog.set_level(logging.ERROR, "svcgen.http")
    assert asyncio.run(main()) == {"type": "lifespan.startup.failed", "message": line}
    assert [(record.getMessage(), record.exc_info) for record in caplog.records] == [(f"startup failed: {line}", None)]
