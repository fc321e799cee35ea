"""Events over the real JetStream server: publish acknowledged, deduplicated by key, one handling per event across
replicas, backoff and dead letters after exactly maxDeliver attempts, hostile messages never wedge a subscriber."""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
from collections.abc import Iterator

import orjson
import pytest
from nats.aio.client import Client

from svcgen.deadletters import dead_letters, drop, replay
from svcgen.runtime import Context, Delivery, EventsError, Result, Retention, Subscriptions, Wiring, WiringError
from svcgen.runtime._eventnames import DEAD_LETTER_STREAM
from svcgen.runtime._nats.events import DEAD_LETTER_RETENTION
from tests.events.harness import (
    DEADLINE,
    Placed,
    accept,
    cleanup,
    connected,
    publish_raw,
    publisher_bus,
    run_then_clean,
    subscriber,
    wait_for,
)
from tests.support.broker import ThrowawayNats, unique_name
from tests.support.codegen import REPO, run_cli

FAST = Delivery(max_deliver=3, backoff=(0.05,), ack_wait=5.0)


async def _letters(client: object, name: str) -> list[object]:
    return [letter async for letter in dead_letters(client, subscriber=name)]  # type: ignore[arg-type]


def test_publish_is_accepted_once_stored_and_a_repeated_key_is_stored_once(nats_url: str) -> None:
    publisher = unique_name("pub")

    async def main() -> None:
        async with connected(nats_url) as client:
            bus = publisher_bus(client, publisher)
            await bus.start(None)  # type: ignore[arg-type]  # a publisher alone needs no service
            first = await bus.publish("orders:placed", Placed("o-1", 5))
            again = await bus.publish("orders:placed", Placed("o-1", 5))
            other = await bus.publish("orders:placed", Placed("o-2", 7))
            assert (first.status, again.status, other.status) == ("accepted", "accepted", "accepted")
            assert again.headers.get("svc-duplicate") == "true" and "svc-duplicate" not in first.headers
            info = await client.jetstream().stream_info(f"SVC_EVENTS_{publisher.upper()}")
            assert info.state.messages == 2
            assert info.config.subjects == [f"svc.event.{publisher}.>"]
            assert info.config.max_age and info.config.max_bytes and info.config.max_bytes > 0
            await bus.stop()

    run_then_clean(nats_url, main, publisher)


def test_keys_that_differ_only_where_a_header_cannot_carry_them_are_not_taken_for_duplicates(nats_url: str) -> None:
    # The key became the Nats-Msg-Id header as it was; nats-py trims a header value and turns CR/LF into spaces, so
    # "o-1 " was stored as a duplicate of "o-1" (and "a\nb" of "a b"): accepted, svc-duplicate, and never delivered.
    publisher = unique_name("pub")
    keys = ["o-1", "o-1 ", " o-1", "a\nb", "a b", "a\r\nb", "a  b", "a%20b", "ü", "%C3%BC"]

    async def main() -> None:
        async with connected(nats_url) as client:
            bus = publisher_bus(client, publisher)
            await bus.start(None)  # type: ignore[arg-type]
            for key in keys:
                result = await bus.publish("orders:placed", Placed(key))
                assert result.status == "accepted" and "svc-duplicate" not in result.headers, repr(key)
            again = await bus.publish("orders:placed", Placed("a\nb"))
            assert again.headers.get("svc-duplicate") == "true"  # the same key is still one event
            info = await client.jetstream().stream_info(f"SVC_EVENTS_{publisher.upper()}")
            assert info.state.messages == len(keys)
            await bus.stop()

    run_then_clean(nats_url, main, publisher)


def test_publish_without_a_stream_server_is_a_failure_never_a_silent_drop() -> None:
    bus_result = asyncio.run(_publish_to_unreachable())
    assert bus_result.status in ("service-unavailable", "timeout")


async def _publish_to_unreachable() -> Result[None]:
    from svcgen.runtime import EventBus, EventSpec, JetStreamBroker

    async def refuse() -> object:
        raise ConnectionRefusedError("no server")

    bus = EventBus("lonely", [EventSpec("orders:placed", Placed)], Subscriptions(), JetStreamBroker(refuse))  # type: ignore[arg-type]
    return await bus.publish("orders:placed", Placed("o-1"))


def test_two_replicas_share_one_durable_consumer_and_each_event_is_handled_once(nats_url: str) -> None:
    publisher, name = unique_name("pub"), unique_name("sub")
    handled: collections.Counter[str] = collections.Counter()
    by_replica: collections.Counter[int] = collections.Counter()
    count = 60

    def handler_for(replica: int):  # type: ignore[no-untyped-def]
        async def handle(event: Placed, context: Context) -> Result[None]:
            handled[event.order_id] += 1
            by_replica[replica] += 1
            await asyncio.sleep(0.005)
            return Result.ok()

        return handle

    async def main() -> None:
        async with connected(nats_url) as one, connected(nats_url) as two, connected(nats_url) as pub:
            sender = publisher_bus(pub, publisher)
            await sender.start(None)  # type: ignore[arg-type]
            replicas = [subscriber(client, name, publisher, handler_for(index), FAST)
                        for index, client in enumerate((one, two))]  # fmt: skip
            for bus, service in replicas:
                await bus.start(service)
            for number in range(count):
                assert (await sender.publish("orders:placed", Placed(f"o-{number}"))).status == "accepted"
            await wait_for(lambda: len(handled) == count, f"{count} events handled")
            await asyncio.sleep(0.5)  # room for a wrong second handling to show
            for bus, _ in replicas:
                await bus.stop()
        assert set(handled.values()) == {1}
        assert sum(by_replica.values()) == count

    run_then_clean(nats_url, main, publisher, name)


def test_a_failing_handler_is_retried_then_dead_lettered_after_exactly_max_deliver_attempts(
    nats_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    publisher, name = unique_name("pub"), unique_name("sub")
    attempts: list[int] = []

    async def handle(event: Placed, context: Context) -> Result[None]:
        assert context.delivery is not None
        attempts.append(context.delivery.attempt)
        if event.order_id == "poison":
            raise RuntimeError("cannot handle this one")
        return Result.ok()

    async def main() -> None:
        async with connected(nats_url) as client:
            sender = publisher_bus(client, publisher)
            await sender.start(None)  # type: ignore[arg-type]
            bus, service = subscriber(client, name, publisher, handle, FAST)
            caplog.set_level("WARNING", logger="svcgen.events")
            await bus.start(service)
            await sender.publish("orders:placed", Placed("poison"))
            letters: list[object] = []

            async def poll() -> None:
                while not letters:
                    letters.extend(await _letters(client, name))
                    await asyncio.sleep(0.1)

            await asyncio.wait_for(poll(), 30)
            # The subscriber goes on: a good event after the poison one is handled.
            await sender.publish("orders:placed", Placed("fine"))
            await wait_for(lambda: len(attempts) == 4, "the good event")
            await asyncio.sleep(1.0)  # a loop would show as more attempts
            await bus.stop()
            assert attempts == [1, 2, 3, 1]
            (letter,) = letters
            assert letter.attempts == "3" and letter.status == "service-unavailable"  # type: ignore[attr-defined]
            assert letter.original_subject == f"svc.event.{publisher}.orders_placed"  # type: ignore[attr-defined]
            assert letter.subject == f"svc.dead.{name}.orders_placed"  # type: ignore[attr-defined]
            assert orjson.loads(letter.data)["orderId"] == "poison"  # type: ignore[attr-defined]
            # The logger's name says "svcgen.events" on every line already: the message does not say "events:" again.
            (line,) = [record.getMessage() for record in caplog.records if "dead-lettered" in record.getMessage()]
            assert line.startswith(f"svc.event.{publisher}.orders_placed dead-lettered for {name} after 3 attempt(s): ")

    run_then_clean(nats_url, main, publisher, name)


def test_hostile_messages_are_dead_lettered_at_once_and_never_wedge_the_subscriber(nats_url: str) -> None:
    publisher, name = unique_name("pub"), unique_name("sub")
    handled: list[str] = []

    async def handle(event: Placed, context: Context) -> Result[None]:
        handled.append(event.order_id)
        return Result.ok()

    hostile = [
        (b"\xff\xfe garbage", None),
        (b"[" * 5000 + b"]" * 5000, None),
        (b'{"orderId": 12}', None),
        (orjson.dumps({"orderId": "x" * 70_000}), None),
        (b'{"orderId": "h-1"}', {"traceparent": "not-a-traceparent", "X-Huge": "v" * 9000}),
        (b'{"orderId": "h-2"', {"svc-version": "\u00e9\u00e9"}),
    ]

    async def main() -> None:
        async with connected(nats_url) as client:
            sender = publisher_bus(client, publisher)
            await sender.start(None)  # type: ignore[arg-type]
            bus, service = subscriber(client, name, publisher, handle, FAST, max_event_bytes=64_000)
            await bus.start(service)
            for data, headers in hostile:
                await publish_raw(client, publisher, data, headers)
            await sender.publish("orders:placed", Placed("after"))
            await wait_for(lambda: "after" in handled, "the event after the hostile ones")
            found: list[object] = []

            async def poll() -> None:
                while len(found) < 5:
                    found[:] = await _letters(client, name)
                    await asyncio.sleep(0.1)

            await asyncio.wait_for(poll(), 30)
            await bus.stop()
            assert sorted(handled) == ["after", "h-1"]
            assert {letter.attempts for letter in found} == {"1"}  # type: ignore[attr-defined]
            reasons = " ".join(letter.reason for letter in found)  # type: ignore[attr-defined]
            assert "undecodable" in reasons and "exceeds 64000 bytes" in reasons

    run_then_clean(nats_url, main, publisher, name)


def test_a_replayed_dead_letter_is_delivered_again_under_a_new_message_id(nats_url: str) -> None:
    publisher, name = unique_name("pub"), unique_name("sub")
    fixed = {"value": False}
    handled: list[str] = []

    async def handle(event: Placed, context: Context) -> Result[None]:
        if not fixed["value"]:
            return Result.service_unavailable("downstream is down")
        handled.append(event.order_id)
        return Result.ok()

    async def main() -> None:
        async with connected(nats_url) as client:
            sender = publisher_bus(client, publisher)
            await sender.start(None)  # type: ignore[arg-type]
            bus, service = subscriber(client, name, publisher, handle, Delivery(max_deliver=1, backoff=(0.05,)))
            await bus.start(service)
            await sender.publish("orders:placed", Placed("o-9"))  # key o-9: Nats-Msg-Id
            letters: list[object] = []

            async def poll() -> None:
                while not letters:
                    letters.extend(await _letters(client, name))
                    await asyncio.sleep(0.1)

            await asyncio.wait_for(poll(), 30)
            fixed["value"] = True
            await replay(client, letters[0])  # type: ignore[arg-type]
            await wait_for(lambda: handled == ["o-9"], "the replayed event")
            assert await _letters(client, name) == []
            await bus.stop()

    run_then_clean(nats_url, main, publisher, name)


def test_a_service_with_events_and_no_nats_refuses_to_start_with_one_line() -> None:
    wiring = Wiring(environ={})
    subscriptions = Subscriptions()

    subscriptions.add("orders:placed", accept, publisher="orders", payload=Placed)
    with pytest.raises(WiringError) as caught:
        wiring.events("notify", [], subscriptions)
    message = str(caught.value)
    assert "\n" not in message and "SVCGEN_NATS" in message and "subscribes to 1 event" in message


def test_the_dead_letters_command_lists_replays_and_drops(nats_url: str) -> None:
    publisher, name = unique_name("pub"), unique_name("sub")
    handled: list[str] = []

    async def handle(event: Placed, context: Context) -> Result[None]:
        handled.append(event.order_id)
        return Result.service_unavailable("down") if len(handled) <= 2 else Result.ok()

    async def dead_letter_two() -> None:
        async with connected(nats_url) as client:
            sender = publisher_bus(client, publisher)
            await sender.start(None)  # type: ignore[arg-type]
            bus, service = subscriber(client, name, publisher, handle, Delivery(max_deliver=1, backoff=(0.05,)))
            await bus.start(service)
            await sender.publish("orders:placed", Placed("o-1", 10))
            await sender.publish("orders:placed", Placed("o-2", 20))

            async def poll() -> None:
                while len(await _letters(client, name)) < 2:
                    await asyncio.sleep(0.1)

            await asyncio.wait_for(poll(), 30)
            listed = run_cli("events", "dead-letters", "list", "--nats", nats_url, "--subscriber", name, cwd=REPO)
            assert listed.returncode == 0, listed.stderr
            lines = listed.stdout.splitlines()
            assert len(lines) == 2 and all("orders:placed attempts=1 status=service-unavailable" in x for x in lines)
            assert '"orderId":"o-1"' in lines[0] and "2 dead letter(s)" in listed.stderr
            replayed = run_cli("events", "dead-letters", "replay", "--nats", nats_url, "--subscriber", name,
                               "--event", "orders:placed", cwd=REPO)  # fmt: skip
            assert replayed.returncode == 0 and "2 replayed" in replayed.stderr, replayed.stderr
            await wait_for(lambda: sorted(handled[2:]) == ["o-1", "o-2"], "both replayed events handled")
            await bus.stop()
        dropped = run_cli("events", "dead-letters", "drop", "--nats", nats_url, "--subscriber", name, cwd=REPO)
        assert dropped.returncode == 0 and "0 dropped" in dropped.stderr

    run_then_clean(nats_url, dead_letter_two, publisher, name)


def test_replay_takes_the_dead_letters_there_when_it_starts_not_those_its_replays_make(nats_url: str) -> None:
    # A poison message dead-letters again at once when replayed: the replay must not pick that one up too and go
    # round for ever (it once republished the same payload hundreds of thousands of times).
    publisher, name = unique_name("pub"), unique_name("sub")

    async def main() -> None:
        async with connected(nats_url) as client:
            sender = publisher_bus(client, publisher)
            await sender.start(None)  # type: ignore[arg-type]
            bus, service = subscriber(client, name, publisher, accept, FAST)
            await bus.start(service)
            try:
                await publish_raw(client, publisher, b"not json")

                async def poll() -> None:
                    while not await _letters(client, name):
                        await asyncio.sleep(0.1)

                await asyncio.wait_for(poll(), 30)
                # The command in a thread, so this loop's subscriber dead-letters the replayed message meanwhile.
                replayed = await asyncio.to_thread(run_cli, "events", "dead-letters", "replay", "--nats", nats_url,
                                                   "--subscriber", name, cwd=REPO, timeout=30)  # fmt: skip
                assert replayed.returncode == 0 and "1 replayed" in replayed.stderr, replayed.stderr[-300:]
                assert len(replayed.stdout.splitlines()) == 1
            finally:
                await bus.stop()
        async with connected(nats_url) as client:
            for letter in await _letters(client, name):
                await drop(client, letter)  # type: ignore[arg-type]

    run_then_clean(nats_url, main, publisher, name)


def test_a_traced_publish_is_its_own_span_whose_traceparent_the_message_carries(nats_url: str) -> None:
    from svcgen.runtime import Identity
    from svcgen.runtime._mesh.exporters import QueueExporter
    from svcgen.runtime._mesh.tracecontext import TraceContext, activate, deactivate
    from svcgen.runtime._mesh.traces import TraceMiddleware

    publisher = unique_name("pub")
    queue = QueueExporter(cap=100)
    handler_span = TraceContext("a" * 32, "b" * 16)

    async def main() -> tuple[str, str]:
        async with connected(nats_url) as client:
            bus = publisher_bus(client, publisher)
            bus.tracer = TraceMiddleware(Identity(publisher), queue)
            await bus.start(None)  # type: ignore[arg-type]  # a publisher alone needs no service
            token = activate(handler_span)
            try:
                inside = await bus.publish("orders:placed", Placed("t-1", 1))
            finally:
                deactivate(token)
            outside = await bus.publish("orders:placed", Placed("t-2", 2))
            assert (inside.status, outside.status) == ("accepted", "accepted")
            sub = await client.jetstream().pull_subscribe(f"svc.event.{publisher}.>", durable=None)
            messages = await sub.fetch(2, timeout=DEADLINE)
            carried = [(message.headers or {}).get("traceparent", "") for message in messages]
            await bus.stop()
            return carried[0], carried[1]

    try:
        first, second = asyncio.run(main())
    finally:
        asyncio.run(cleanup(nats_url, publisher))
    inside, outside = queue.drain()
    # Inside an invocation the publish is a child of it; the message names the publish, not the handler, as parent.
    assert (inside.topic, inside.transport, inside.status) == ("orders:placed", "event", "accepted")
    assert inside.trace_id == handler_span.trace_id and inside.parent_span_id == handler_span.span_id
    assert inside.span_id != handler_span.span_id
    assert first == f"00-{inside.trace_id}-{inside.span_id}-01"
    # Outside one, the publish is the root of a new trace.
    assert outside.parent_span_id is None and outside.trace_id != handler_span.trace_id
    assert second == f"00-{outside.trace_id}-{outside.span_id}-01"


def test_a_stream_in_the_way_stops_the_start_with_one_line_saying_what(nats_url: str) -> None:
    # A stream of the publisher's name with other subjects, or another stream holding its subjects, was a raw
    # nats-py traceback at startup (NotFoundError, BadRequestError) instead of a line naming the stream and why.
    taken, other, overlapping = unique_name("pub"), unique_name("pub"), unique_name("QAEV")

    async def main() -> None:
        async with connected(nats_url) as client:
            js = client.jetstream()
            await js.add_stream(name=f"SVC_EVENTS_{taken.upper()}", subjects=[f"elsewhere.{taken}.>"])
            await js.add_stream(name=overlapping, subjects=[f"svc.event.{other}.>"])
            bus, service = subscriber(client, unique_name("sub"), taken, accept, FAST)
            with pytest.raises(EventsError) as caught:
                await bus.start(service)
            assert str(caught.value) == (
                f"JetStream stream SVC_EVENTS_{taken.upper()} exists with subjects ['elsewhere.{taken}.>'], not "
                f"svc.event.{taken}.>; add svc.event.{taken}.> to it, or delete it to have it created"
            )
            with pytest.raises(EventsError) as caught:
                await publisher_bus(client, other).start(None)  # type: ignore[arg-type]
            assert str(caught.value) == (
                f"JetStream stream SVC_EVENTS_{other.upper()} (svc.event.{other}.>) cannot be created: subjects "
                "overlap with an existing stream"
            )
            await bus.stop()

    try:
        asyncio.run(main())
    finally:
        asyncio.run(cleanup(nats_url, taken))
        asyncio.run(_delete_stream(nats_url, overlapping))


async def _delete_stream(url: str, name: str) -> None:
    async with connected(url) as client:
        await client.jetstream().delete_stream(name)


def test_a_retention_shorter_than_the_default_duplicate_window_makes_its_stream(nats_url: str) -> None:
    # Retention(max_age=60) kept the default 2-minute duplicate window, which JetStream refuses as longer than the
    # age: the stream could not be created at all. The default window is cut to the age; one given stays as given.
    publisher = unique_name("pub")
    assert Retention(max_age=60.0).duplicate_window == 60.0
    assert Retention(max_age=60.0, duplicate_window=30.0).duplicate_window == 30.0
    assert Retention().duplicate_window == 120.0

    async def main() -> None:
        async with connected(nats_url) as client:
            bus = publisher_bus(client, publisher, retention=Retention(max_age=60.0))
            await bus.start(None)  # type: ignore[arg-type]
            assert (await bus.publish("orders:placed", Placed("kept"))).status == "accepted"
            await bus.stop()
            info = await client.jetstream().stream_info(f"SVC_EVENTS_{publisher.upper()}")
            assert (info.config.max_age, info.config.duplicate_window) == (60.0, 60.0)

    try:
        asyncio.run(main())
    finally:
        asyncio.run(_delete_stream(nats_url, f"SVC_EVENTS_{publisher.upper()}"))


def test_a_changed_event_retention_is_applied_to_the_publishers_existing_stream_at_start(
    nats_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The stream was used as it was: a changed wiring.event_retention reached only a stream created after it, so an
    # existing one kept 7 days and 1 GiB whatever wiring.py said. JetStream updates these limits in place.
    publisher, name = unique_name("pub"), unique_name("sub")
    shorter = Retention(max_age=3600.0, max_bytes=1 << 20, duplicate_window=60.0)

    async def main() -> None:
        async with connected(nats_url) as client:
            js = client.jetstream()
            stream = f"SVC_EVENTS_{publisher.upper()}"
            first = publisher_bus(client, publisher)
            await first.start(None)  # type: ignore[arg-type]  # creates the stream with the default retention
            assert (await first.publish("orders:placed", Placed("kept"))).status == "accepted"
            await first.stop()
            caplog.set_level("INFO", logger="svcgen.events")
            again = publisher_bus(client, publisher, retention=shorter)
            await again.start(None)  # type: ignore[arg-type]
            await again.stop()
            (line,) = [record for record in caplog.records if "retention" in record.getMessage()]
            assert line.levelname == "INFO" and line.getMessage() == (
                f"updated the JetStream stream {stream} to wiring.event_retention: max_age 604800s → 3600s, "
                "max_bytes 1073741824 → 1048576, duplicate_window 120s → 60s"
            )
            info = await js.stream_info(stream)
            assert (info.config.max_age, info.config.max_bytes, info.config.duplicate_window) == (3600.0, 1 << 20, 60.0)
            assert info.state.messages == 1  # in place: what the stream held is still there
            caplog.clear()
            # A subscriber creates the stream with its own retention when it starts first, but an existing one is
            # the publisher's: the subscriber's (here the default) does not undo it.
            bus, service = subscriber(client, name, publisher, accept, FAST)
            await bus.start(service)
            await bus.stop()
            third = publisher_bus(client, publisher, retention=shorter)
            await third.start(None)  # type: ignore[arg-type]
            await third.stop()
            assert not [record for record in caplog.records if "retention" in record.getMessage()]  # nothing to do
            assert (await js.stream_info(stream)).config.max_age == 3600.0
            # A retention JetStream refuses is one line with the server's words, and the stream is left as it was.
            with pytest.raises(EventsError) as caught:
                refused = Retention(max_age=30.0, duplicate_window=90.0)
                await publisher_bus(client, publisher, retention=refused).start(None)  # type: ignore[arg-type]
            assert str(caught.value) == (
                f"JetStream stream {stream} cannot take wiring.event_retention (max_age 3600s → 30s, max_bytes "
                "1048576 → 1073741824, duplicate_window 60s → 90s): duplicates window can not be larger then max age"
            )
            assert (await js.stream_info(stream)).config.max_age == 3600.0

    run_then_clean(nats_url, main, publisher, name)


@pytest.fixture
def own_nats() -> Iterator[str]:
    """A NATS server of the test's own: SVC_DEAD_LETTERS on the shared one is every test's, never reconfigured."""
    server = ThrowawayNats()
    server.start()
    try:
        yield server.url
    finally:
        server.remove()


def test_a_changed_dead_letter_retention_is_applied_to_the_existing_dead_letter_stream_at_start(
    own_nats: str, caplog: pytest.LogCaptureFixture
) -> None:
    # SVC_DEAD_LETTERS kept the retention it was created with: the broker's dead_letters reached only a stream
    # created after it, where the event streams' retention and the consumers' settings are applied in place.
    publisher, name = unique_name("pub"), unique_name("sub")
    shorter = Retention(max_age=3600.0, max_bytes=1 << 20, duplicate_window=60.0)

    async def start(client: Client, dead_letters: Retention = DEAD_LETTER_RETENTION) -> list[logging.LogRecord]:
        caplog.clear()
        bus, service = subscriber(client, name, publisher, accept, FAST, dead_letters=dead_letters)
        with caplog.at_level("INFO", logger="svcgen.events"):
            await bus.start(service)
        await bus.stop()
        return [record for record in caplog.records if DEAD_LETTER_STREAM in record.getMessage()]

    async def main() -> None:
        async with connected(own_nats) as client:
            js = client.jetstream()
            await start(client)  # creates SVC_DEAD_LETTERS with the default retention
            await js.publish(f"svc.dead.{name}.orders_placed", b"{}", stream=DEAD_LETTER_STREAM)
            (line,) = await start(client, shorter)
            assert line.levelname == "INFO" and line.getMessage() == (
                f"updated the JetStream stream {DEAD_LETTER_STREAM} to JetStreamBroker(dead_letters=...): "
                "max_age 2592000s → 3600s, max_bytes 1073741824 → 1048576, duplicate_window 120s → 60s"
            )
            info = await js.stream_info(DEAD_LETTER_STREAM)
            assert (info.config.max_age, info.config.max_bytes, info.config.duplicate_window) == (3600.0, 1 << 20, 60.0)
            assert info.state.messages == 1  # in place: the dead letter is still there
            assert await start(client, shorter) == []  # nothing to do
            # One JetStream refuses is one line with the server's words, and the stream is left as it was.
            with pytest.raises(EventsError) as caught:
                await start(client, Retention(max_age=30.0, max_bytes=1 << 20, duplicate_window=90.0))
            assert str(caught.value) == (
                f"JetStream stream {DEAD_LETTER_STREAM} cannot take JetStreamBroker(dead_letters=...) (max_age 3600s → "
                "30s, duplicate_window 60s → 90s): duplicates window can not be larger then max age"
            )
            assert (await js.stream_info(DEAD_LETTER_STREAM)).config.max_age == 3600.0

    asyncio.run(main())


def test_a_stream_whose_storage_cannot_change_in_place_stops_the_start_with_one_line(nats_url: str) -> None:
    # JetStream refuses to change a stream's storage or retention policy in place; a stream made by hand in memory
    # (lost with the server) or as a work queue (one consumer per subject) was used as it was.
    from nats.js.api import RetentionPolicy, StorageType

    publisher, queue = unique_name("pub"), unique_name("pub")

    async def main() -> None:
        async with connected(nats_url) as client:
            js = client.jetstream()
            stream = f"SVC_EVENTS_{publisher.upper()}"
            await js.add_stream(name=stream, subjects=[f"svc.event.{publisher}.>"], storage=StorageType.MEMORY)
            with pytest.raises(EventsError) as caught:
                await publisher_bus(client, publisher).start(None)  # type: ignore[arg-type]
            assert str(caught.value) == (
                f"JetStream stream {stream} has storage memory, not file, which JetStream cannot change in place: "
                f"delete it (`nats stream rm {stream}`; its messages and consumers go with it) to have it created"
            )
            bus, service = subscriber(client, unique_name("sub"), publisher, accept, FAST)
            with pytest.raises(EventsError) as caught:
                await bus.start(service)
            assert "has storage memory, not file" in str(caught.value)
            await bus.stop()
            await js.add_stream(name=f"SVC_EVENTS_{queue.upper()}", subjects=[f"svc.event.{queue}.>"],
                                retention=RetentionPolicy.WORK_QUEUE)  # fmt: skip
            with pytest.raises(EventsError) as caught:
                await publisher_bus(client, queue).start(None)  # type: ignore[arg-type]
            assert "has retention policy workqueue, not limits, which JetStream cannot change in place" in str(
                caught.value
            )

    try:
        asyncio.run(main())
    finally:
        asyncio.run(cleanup(nats_url, publisher))
        asyncio.run(cleanup(nats_url, queue))


def test_a_changed_manifest_ack_wait_is_applied_to_the_existing_consumer_at_start(
    nats_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The durable consumer was reused as it was: a raised ackWait only warned, and stayed unapplied until someone
    # edited the consumer by hand. JetStream updates a durable consumer's ack_wait in place, so the start does.
    publisher, name = unique_name("pub"), unique_name("sub")
    attempts: list[int] = []

    async def slow(event: Placed, context: Context) -> Result[None]:
        assert context.delivery is not None
        attempts.append(context.delivery.attempt)
        await asyncio.sleep(3.0)
        return Result.ok()

    async def main() -> None:
        async with connected(nats_url) as client:
            js = client.jetstream()
            stream, durable = f"SVC_EVENTS_{publisher.upper()}", f"{name}__orders_placed"
            sender = publisher_bus(client, publisher)
            await sender.start(None)  # type: ignore[arg-type]
            first, service = subscriber(client, name, publisher, slow, Delivery(ack_wait=30.0))
            await first.start(service)  # creates the consumer with ack_wait 30 s
            await first.stop()
            before = (await js.consumer_info(stream, durable)).delivered
            again, service = subscriber(client, name, publisher, slow, Delivery(ack_wait=1.0))
            with caplog.at_level("INFO", logger="svcgen.events"):
                await again.start(service)
            (line,) = [record for record in caplog.records if "ack_wait" in record.getMessage()]
            assert line.levelname == "INFO" and line.getMessage() == (
                f"updated the ack_wait of durable consumer {durable} on {stream} to the manifest's "
                "ackWait: 30s → 1s"
            )
            assert (await js.consumer_info(stream, durable)).config.ack_wait == 1.0
            # In place: the same consumer, its position kept (a new one would deliver every retained event again).
            assert (await js.consumer_info(stream, durable)).delivered == before
            await sender.publish("orders:placed", Placed("slow"))
            await wait_for(lambda: bool(attempts), "the slow event")
            await asyncio.sleep(4.5)  # past the handler's end, and past several of the consumer's new ack_wait
            await again.stop()
            caplog.clear()
            third, service = subscriber(client, name, publisher, slow, Delivery(ack_wait=1.0))
            with caplog.at_level("INFO", logger="svcgen.events"):
                await third.start(service)
            await third.stop()
            assert not [record for record in caplog.records if "ack_wait" in record.getMessage()]  # nothing to do
        assert attempts == [1]  # the keep-alive follows the new 1 s: the slow handler ran once

    run_then_clean(nats_url, main, publisher, name)


def test_a_changed_max_in_flight_is_applied_to_the_existing_consumers_max_ack_pending_at_start(
    nats_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The consumer kept the max_ack_pending it was created with: raising the broker's max_in_flight left the
    # replicas sharing it starved at the old cap, lowering it left the old cap in place.
    publisher, name = unique_name("pub"), unique_name("sub")

    async def main() -> None:
        async with connected(nats_url) as client:
            js = client.jetstream()
            stream, durable = f"SVC_EVENTS_{publisher.upper()}", f"{name}__orders_placed"
            await publisher_bus(client, publisher).start(None)  # type: ignore[arg-type]

            async def start(max_in_flight: int, ack_wait: float) -> list[str]:
                caplog.clear()
                bus, service = subscriber(client, name, publisher, accept, Delivery(ack_wait=ack_wait),
                                          max_in_flight=max_in_flight)  # fmt: skip
                with caplog.at_level("INFO", logger="svcgen.events"):
                    await bus.start(service)
                await bus.stop()
                return [record.getMessage() for record in caplog.records if "updated" in record.getMessage()]

            assert await start(4, 30.0) == []  # created with 4 × 16
            created = await js.consumer_info(stream, durable)
            assert created.config.max_ack_pending == 64
            assert await start(8, 30.0) == [
                f"updated the max_ack_pending of durable consumer {durable} on {stream} to the broker's "
                "max_in_flight 8 × 16: 64 → 128"
            ]
            assert (await js.consumer_info(stream, durable)).config.max_ack_pending == 128
            # Both changed: both applied (one update of the consumer), each on its line.
            assert await start(2, 10.0) == [
                f"updated the ack_wait of durable consumer {durable} on {stream} to the manifest's ackWait: 30s → 10s",
                f"updated the max_ack_pending of durable consumer {durable} on {stream} to the broker's "
                "max_in_flight 2 × 16: 128 → 32",
            ]
            info = await js.consumer_info(stream, durable)
            assert (info.config.max_ack_pending, info.config.ack_wait) == (32, 10.0)
            assert info.created == created.created  # in place: the same consumer, its position kept
            assert await start(2, 10.0) == []  # nothing to do

    run_then_clean(nats_url, main, publisher, name)


def test_a_consumer_whose_backoff_decides_its_ack_wait_is_followed_without_a_warning_at_every_start(
    nats_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Every start asked such a consumer for the manifest's ackWait, JetStream answered with the backoff's first step
    # (its rule, no error), and the start warned again: a standing, harmless difference (the keep-alive follows
    # what the consumer has) warned about at each start of each replica, with a futile update of the consumer.
    from nats.js.api import AckPolicy, ConsumerConfig

    publisher, name = unique_name("pub"), unique_name("sub")

    async def main() -> None:
        async with connected(nats_url) as client:
            js = client.jetstream()
            await publisher_bus(client, publisher).start(None)  # type: ignore[arg-type]
            stream, durable = f"SVC_EVENTS_{publisher.upper()}", f"{name}__orders_placed"
            config = ConsumerConfig(durable_name=durable, filter_subject=f"svc.event.{publisher}.orders_placed",
                                    ack_policy=AckPolicy.EXPLICIT, backoff=[2.0, 4.0], max_deliver=5)  # fmt: skip
            await js.add_consumer(stream, config)
            followed = (
                f"durable consumer {durable} on {stream} has a backoff, whose first step 2s is its ack_wait "
                "(JetStream's rule), not the manifest's ackWait 5s; 2s is followed"
            )
            for start in (1, 2):
                caplog.clear()
                bus, service = subscriber(client, name, publisher, accept, FAST)
                with caplog.at_level("INFO", logger="svcgen.events"):
                    await bus.start(service)
                await bus.stop()
                assert [record.levelname for record in caplog.records if record.levelno >= logging.WARNING] == []
                (line,) = [record.getMessage() for record in caplog.records if "ack_wait" in record.getMessage()]
                assert line == followed
                # The consumer is updated only where it can be (the first start's max_ack_pending), never asked
                # for an ack_wait it cannot take.
                updated = [record.getMessage() for record in caplog.records if "updated" in record.getMessage()]
                assert updated == ([
                    f"updated the max_ack_pending of durable consumer {durable} on {stream} to the broker's "
                    "max_in_flight 64 × 16: 1000 → 1024"
                ] if start == 1 else [])  # fmt: skip
            info = await js.consumer_info(stream, durable)
            assert (info.config.ack_wait, info.config.backoff) == (2.0, [2.0, 4.0])

    run_then_clean(nats_url, main, publisher, name)


def test_an_existing_consumer_of_another_subject_stops_the_start_with_one_line(nats_url: str) -> None:
    from nats.js.api import AckPolicy, ConsumerConfig

    publisher, name = unique_name("pub"), unique_name("sub")
    handled: list[str] = []

    async def handle(event: Placed, context: Context) -> Result[None]:
        handled.append(event.order_id)
        return Result.ok()

    async def main() -> None:
        async with connected(nats_url) as client:
            sender = publisher_bus(client, publisher)
            await sender.start(None)  # type: ignore[arg-type]
            stream = f"SVC_EVENTS_{publisher.upper()}"
            wrong = f"svc.event.{publisher}.other"
            config = ConsumerConfig(durable_name=f"{name}__orders_placed", filter_subject=wrong,
                                    ack_policy=AckPolicy.EXPLICIT)  # fmt: skip
            await client.jetstream().add_consumer(stream, config)
            bus, service = subscriber(client, name, publisher, handle, FAST)
            with pytest.raises(EventsError) as caught:
                await bus.start(service)
            message = str(caught.value)
            assert "\n" not in message and f"{name}__orders_placed" in message and wrong in message
            assert f"svc.event.{publisher}.orders_placed" in message
            await bus.stop()

    run_then_clean(nats_url, main, publisher, name)


def test_the_pull_loop_ends_when_its_connection_is_closed_before_the_broker(nats_url: str) -> None:
    # nats-py turns the cancellation of a fetch on a closed connection into ConnectionClosedError: the loop took it
    # for an outage and retried for ever, so asyncio.run never returned when the connection closed first.
    import nats

    publisher, name = unique_name("pub"), unique_name("sub")

    async def main() -> None:
        client = await nats.connect(nats_url)
        try:
            sender = publisher_bus(client, publisher)
            await sender.start(None)  # type: ignore[arg-type]
            bus, service = subscriber(client, name, publisher, accept, FAST)
            await bus.start(service)
            loops = {task for task in asyncio.all_tasks() if task.get_name().startswith("svcgen-events-")}
            assert loops
            await asyncio.sleep(0.2)
        finally:
            await client.close()
        _, pending = await asyncio.wait(loops, timeout=5)
        await bus.stop()  # ends a loop that went on (so this fails rather than hangs)
        assert not pending, "the pull loop went on after its connection closed"

    async def cancelled_on_exit() -> None:
        client = await nats.connect(nats_url)
        bus, service = subscriber(client, name, publisher, accept, FAST)
        await bus.start(service)
        await asyncio.sleep(0.2)
        await client.close()  # and return: asyncio.run cancels the loop, which must end

    try:
        asyncio.run(main())
        # In a daemon thread bounded by a join timeout: without the fix asyncio.run there never returns.
        thread = threading.Thread(target=asyncio.run, args=(cancelled_on_exit(),), daemon=True)
        thread.start()
        thread.join(20)
        assert not thread.is_alive(), "asyncio.run hung on exit: the pull loop ignored its cancellation"
    finally:
        asyncio.run(cleanup(nats_url, publisher, name))


def test_the_harness_cleanup_removes_its_subscribers_dead_letters_and_only_theirs(nats_url: str) -> None:
    # It deleted only the publisher's stream: every run left its dead letters in the shared SVC_DEAD_LETTERS.
    publisher, mine, other = unique_name("pub"), unique_name("sub"), unique_name("sub")

    async def dead_letters_of_both() -> None:
        async with connected(nats_url) as client:
            bus, service = subscriber(client, mine, publisher, accept, FAST)
            await bus.start(service)  # makes the publisher's stream and SVC_DEAD_LETTERS when missing
            await bus.stop()
            for name in (mine, other):
                await client.jetstream().publish(f"svc.dead.{name}.orders_placed", b"{}", stream="SVC_DEAD_LETTERS")

    async def left(name: str) -> int:
        async with connected(nats_url) as client:
            return len(await _letters(client, name))

    try:
        asyncio.run(dead_letters_of_both())
        asyncio.run(cleanup(nats_url, publisher, mine))
        assert (asyncio.run(left(mine)), asyncio.run(left(other))) == (0, 1)
    finally:
        asyncio.run(cleanup(nats_url, publisher, mine, other))
    assert asyncio.run(left(other)) == 0


def test_a_nats_server_without_jetstream_is_named_as_such_at_start_and_by_the_dead_letters_command() -> None:
    # A NATS server started without -js answered the publisher's and the subscriber's start with "JetStream stream
    # SVC_EVENTS_... cannot be used: ServiceUnavailableError: nats: ServiceUnavailableError: code=None err_code=None
    # description='None'", and the dead-letters command the same: nothing said JetStream was off.
    server = ThrowawayNats(jetstream=False)
    server.start()
    publisher = unique_name("pub")
    wanted = "the NATS server has no JetStream (start nats-server with -js, or enable jetstream in its config)"

    async def main() -> None:
        async with connected(server.url) as client:
            with pytest.raises(EventsError) as caught:
                await publisher_bus(client, publisher).start(None)  # type: ignore[arg-type]
            assert str(caught.value) == f"JetStream stream SVC_EVENTS_{publisher.upper()} cannot be used: {wanted}"
            bus, service = subscriber(client, unique_name("sub"), publisher, accept, FAST)
            with pytest.raises(EventsError) as caught:
                await bus.start(service)
            assert str(caught.value) == f"JetStream stream SVC_EVENTS_{publisher.upper()} cannot be used: {wanted}"
            await bus.stop()

    try:
        asyncio.run(main())
        listed = run_cli("events", "dead-letters", "list", "--nats", server.url, cwd=REPO)
    finally:
        server.remove()
    assert listed.returncode == 1
    assert listed.stderr.strip().splitlines()[-1].endswith(f"dead letters at {server.url}: {wanted}"), listed.stderr


def test_the_dead_letters_command_takes_an_event_as_its_list_lines_name_it_with_its_version(nats_url: str) -> None:
    # `list` names a versioned event's dead letter `orders:placed@v2`; given back as `--event orders:placed@v2`, it
    # matched nothing ("0 dead letter(s)", and replay or drop did nothing) with no word of why.
    import click.testing

    from svcgen.cli import main as cli
    from svcgen.runtime import EventBus, Identity, JetStreamBroker, Registry, Service
    from svcgen.runtime._eventnames import event_subject, stream_name

    publisher, name = unique_name("pub"), unique_name("sub")

    async def refuse(event: Placed, context: Context) -> Result[None]:
        return Result.service_unavailable("down")

    async def main() -> None:
        async with connected(nats_url) as client:
            await publisher_bus(client, publisher).start(None)  # type: ignore[arg-type]  # makes the stream
            subscriptions = Subscriptions()
            for version in ("v1", "v2"):
                subscriptions.add("orders:placed", refuse, publisher=publisher, payload=Placed, version=version,
                                  delivery=Delivery(max_deliver=1, backoff=(0.05,)))  # fmt: skip
            bus = EventBus(name, [], subscriptions, JetStreamBroker(client))
            await bus.start(Service(Identity(name), Registry()))
            for version in ("v1", "v2"):
                await client.jetstream().publish(event_subject(publisher, "orders:placed", version),
                                                 orjson.dumps({"orderId": f"o-{version}"}),
                                                 stream=stream_name(publisher))  # fmt: skip
            end = asyncio.get_running_loop().time() + DEADLINE
            while len(await _letters(client, name)) < 2:
                assert asyncio.get_running_loop().time() < end, "gave up waiting for both dead letters"
                await asyncio.sleep(0.1)
            await bus.stop()

    def listed(*options: str) -> click.testing.Result:
        # In process (the command as a user types it, without an interpreter start-up per call).
        command = ["events", "dead-letters", "list", "--nats", nats_url, "--subscriber", name, *options]
        return click.testing.CliRunner().invoke(cli, command, catch_exceptions=False)

    def run() -> None:
        asyncio.run(main())
        v2 = [line for line in listed().stdout.splitlines() if " orders:placed@v2 " in line]
        assert len(v2) == 1 and '"o-v2"' in v2[0], v2
        one = listed("--event", "orders:placed@v2")
        assert one.exit_code == 0 and one.stdout.splitlines() == v2, (one.stdout, one.stderr)
        every = listed("--event", "orders:placed")
        assert len(every.stdout.splitlines()) == 2, every.stdout

    try:
        run()
    finally:
        asyncio.run(cleanup(nats_url, publisher, name))


def test_a_running_subscriber_whose_durable_consumer_was_deleted_makes_it_again_and_handles_on(
    nats_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # A durable consumer deleted while its subscriber ran (by hand, or with its stream, as "delete it to have it
    # created" says) left the subscriber fetching from nothing: no event handled, not a word logged, until a restart.
    from svcgen.runtime._eventnames import stream_name

    publisher, name = unique_name("pub"), unique_name("sub")
    handled: list[str] = []

    async def handle(event: Placed, context: Context) -> Result[None]:
        handled.append(event.order_id)
        return Result.ok()

    async def main() -> None:
        async with connected(nats_url) as client:
            sender = publisher_bus(client, publisher)
            await sender.start(None)  # type: ignore[arg-type]
            bus, service = subscriber(client, name, publisher, handle, FAST)
            bus.broker.consumer_check = 0.5  # type: ignore[attr-defined]  # how often an idle one looks
            await bus.start(service)
            await sender.publish("orders:placed", Placed("o-1"))
            await wait_for(lambda: handled == ["o-1"], "the first event handled")
            await client.jetstream().delete_consumer(stream_name(publisher), f"{name}__orders_placed")
            await sender.publish("orders:placed", Placed("o-2"))
            await wait_for(lambda: "o-2" in handled, "the event published after the consumer was deleted handled")
            await bus.stop()

    with caplog.at_level(logging.WARNING, logger="svcgen.events"):
        run_then_clean(nats_url, main, publisher, name)
    assert any(f"durable consumer {name}__orders_placed" in record.getMessage() and "made again" in
               record.getMessage() for record in caplog.records), [r.getMessage() for r in caplog.records]
