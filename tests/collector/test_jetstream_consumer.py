"""The collector's JetStream feed consumer against a real NATS server: a message is acked only after the store
committed it, a redelivered batch is counted once, a malformed message is terminated, counted and logged once, and
replicas on one PostgreSQL database share one durable consumer and count every batch exactly once."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import nats
import orjson
import pytest

from svcgen.collector import Collector, JsonFileStore, collector_service
from svcgen.collector.jetstream import FeedConsumer
from svcgen.collector.postgres import PostgresStore
from svcgen.runtime._mesh.feeds import FeedSender, feed_envelope
from svcgen.runtime._mesh.jetstream import JetStreamSender, MeshStream
from tests.support import feeds as documents
from tests.support.broker import ThrowawayNats, delete_stream, mesh_stream, nats_url
from tests.support.databases import postgres_session_url, postgres_url
from tests.support.server import free_port

__all__ = ["mesh_stream", "nats_url", "postgres_session_url", "postgres_url"]

DEADLINE = 20.0


def consumer(url: str, collector: Collector, stream: MeshStream, **options: Any) -> FeedConsumer:
    return FeedConsumer(url, collector_service(collector), stream, fetch_timeout=0.2, **options)


async def publish(url: str, stream: MeshStream, send: Callable[[FeedSender], Awaitable[Any]]) -> None:
    sender = JetStreamSender(url, stream)
    try:
        answer = await send(FeedSender(sender))
        assert answer.is_successful, answer
    finally:
        await sender.aclose()


async def pull_until(consumers: list[FeedConsumer], done: Callable[[], bool]) -> None:
    """Pull with every consumer until `done`; fails after DEADLINE seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE
    while not done():
        assert loop.time() < deadline, "the consumers did not get there in time"
        await asyncio.gather(*(each.pull() for each in consumers))


async def unacknowledged(url: str, stream: MeshStream, durable: str) -> tuple[int, int]:
    """(messages not yet delivered, delivered but not acked) of the durable consumer."""
    client = await nats.connect(url)
    try:
        info = await client.jetstream().consumer_info(stream.name, durable)
        return info.num_pending or 0, info.num_ack_pending or 0
    finally:
        await client.close()


def invocations(collector: Collector, topic: str = "orders:get") -> int:
    answer = documents.ok(collector.query_topic({"topic": topic}))
    return int(answer["invocations"])


def test_a_message_is_acked_only_after_the_store_committed_it(
    nats_url: str, mesh_stream: MeshStream, tmp_path: Path
) -> None:
    """The store's directory is a file, so nothing can be written: the batch is given back (nak), not acked, and
    nothing counted. The directory is made: the redelivered batch is taken, acked, counted once."""
    blocker = tmp_path / "store"
    blocker.write_text("")
    collector = documents.collector(JsonFileStore(blocker / "collector.json"))
    feeds = consumer(nats_url, collector, mesh_stream, durable="c1", retry_delay=0.2)

    async def run() -> tuple[tuple[int, int], tuple[int, int]]:
        await publish(nats_url, mesh_stream, lambda f: f.traces([documents.event(1), documents.event(2)], "b-1"))
        try:
            await pull_until([feeds], lambda: feeds.retried >= 1)
            refused = await unacknowledged(nats_url, mesh_stream, "c1")
            blocker.unlink()
            blocker.mkdir()
            await pull_until([feeds], lambda: feeds.ingested == 1)
            return refused, await unacknowledged(nats_url, mesh_stream, "c1")
        finally:
            await feeds.stop()

    refused, after = asyncio.run(run())
    assert refused != (0, 0), "a batch the store refused must stay in the stream"
    assert after == (0, 0)
    assert invocations(collector) == 2
    assert (feeds.malformed, collector.store_failures >= 1) == (0, True)


def test_a_batch_redelivered_after_a_crash_before_its_ack_is_counted_once(
    nats_url: str, mesh_stream: MeshStream
) -> None:
    """A first collector takes the batch into its store and dies before acking it (here: its message is fetched,
    ingested, never acked); after the ack wait the durable consumer delivers it again and it is not counted again.
    A batch published twice under two message ids (past JetStream's duplicate window) is counted once too."""
    collector = documents.collector()

    async def run() -> None:
        await publish(nats_url, mesh_stream, lambda f: f.traces([documents.event(1)], "b-1"))
        first = consumer(nats_url, collector, mesh_stream, durable="c2", ack_wait=1.0)
        crashed = await first._subscribe()
        (message,) = await crashed.fetch(1, timeout=5)
        assert collector.traces(orjson.loads(orjson.loads(message.data)["body"])).is_successful  # no ack follows
        await first.stop()
        client = await nats.connect(nats_url)
        try:  # the same batch again under another message id
            envelope = feed_envelope("svc:mesh:traces", {"events": [documents.event(1)], "batchId": "b-1"})
            await client.jetstream().publish(f"{mesh_stream.subject_prefix}.traces", orjson.dumps(envelope),
                                             headers={"Nats-Msg-Id": "another-id"})  # fmt: skip
        finally:
            await client.close()
        second = consumer(nats_url, collector, mesh_stream, durable="c2", ack_wait=1.0)
        try:
            await pull_until([second], lambda: second.ingested == 2)
            assert await unacknowledged(nats_url, mesh_stream, "c2") == (0, 0)
        finally:
            await second.stop()

    asyncio.run(run())
    assert invocations(collector) == 1
    assert collector.dropped()["duplicateBatches"] == 2


def test_a_malformed_message_is_terminated_counted_and_logged_once_without_holding_the_stream(
    nats_url: str, mesh_stream: MeshStream, caplog: pytest.LogCaptureFixture
) -> None:
    collector = documents.collector()
    feeds = consumer(nats_url, collector, mesh_stream, durable="c3")
    subject = f"{mesh_stream.subject_prefix}.traces"
    bad = [
        b"not json",
        orjson.dumps(feed_envelope("svc:mesh:query:fleet", {})),  # not a feed
        orjson.dumps(feed_envelope("svc:mesh:traces", {"events": "nope"})),  # the collector's bad-request
    ]

    async def run() -> tuple[int, int]:
        await publish(nats_url, mesh_stream, lambda f: f.register(documents.descriptor()))
        client = await nats.connect(nats_url)
        try:
            for data in bad:
                await client.jetstream().publish(subject, data)
        finally:
            await client.close()
        await publish(nats_url, mesh_stream, lambda f: f.traces([documents.event(1)], "b-1"))
        try:
            with caplog.at_level(logging.WARNING, "svcgen.collector.jetstream"):
                await pull_until([feeds], lambda: feeds.ingested + feeds.malformed == 5)
                for _ in range(3):  # nothing comes back
                    await feeds.pull()
            return await unacknowledged(nats_url, mesh_stream, "c3")
        finally:
            await feeds.stop()

    assert asyncio.run(run()) == (0, 0)
    assert (feeds.ingested, feeds.malformed) == (2, 3)
    assert invocations(collector) == 1
    warnings = [record.getMessage() for record in caplog.records if "cannot be taken" in record.getMessage()]
    assert len(warnings) == 3, warnings
    assert "envelope" in warnings[0] and "not a mesh feed" in warnings[1] and "bad-request" in warnings[2]


def test_replicas_on_one_database_share_one_durable_consumer_and_count_every_batch_once(
    nats_url: str, mesh_stream: MeshStream, postgres_url: str
) -> None:
    batches = 60

    async def run() -> tuple[FeedConsumer, FeedConsumer]:
        jetstream = JetStreamSender(nats_url, mesh_stream)
        sender = FeedSender(jetstream)
        try:
            for number in range(batches):  # the last ten resent: published twice, counted once
                await sender.traces([documents.event(number)], f"b-{number}")
            for number in range(batches - 10, batches):
                await sender.traces([documents.event(number)], f"b-{number}")
        finally:
            await jetstream.aclose()
        one = consumer(nats_url, replicas[0], mesh_stream, durable="shared", batch=5)
        two = consumer(nats_url, replicas[1], mesh_stream, durable="shared", batch=5)
        try:
            await pull_until([one, two], lambda: one.ingested + two.ingested == batches)
        finally:
            await one.stop()
            await two.stop()
        return one, two

    replicas = [Collector(PostgresStore(postgres_url)), Collector(PostgresStore(postgres_url))]
    try:
        one, two = asyncio.run(run())
        assert one.ingested > 0 and two.ingested > 0, (one.ingested, two.ingested)
        assert invocations(replicas[0]) == invocations(replicas[1]) == batches
    finally:
        for replica in replicas:
            replica.flush()


def test_a_collector_whose_nats_server_is_down_says_so_once_and_takes_the_feeds_when_it_is_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = ThrowawayNats()
    collector = documents.collector()
    # A message JetStream handed to a fetch that had just timed out (0.2 s, on a loaded machine) comes again after
    # ack_wait: 2 s here, well inside the deadline, where the default 30 s would not be.
    feeds = FeedConsumer(server.url, collector_service(collector), fetch_timeout=0.2, retry_delay=0.2,
                         connect_timeout=0.5, ack_wait=2.0)  # fmt: skip

    async def run() -> None:
        feeds.start()
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + DEADLINE
            while not any("cannot pull" in record.getMessage() for record in caplog.records):
                assert loop.time() < deadline, "the consumer never said the server is unreachable"
                await asyncio.sleep(0.05)
            await asyncio.sleep(1.0)  # several retries, still one warning
            await asyncio.to_thread(server.start)
            await publish(server.url, MeshStream(), lambda f: f.traces([documents.event(1)], "b-1"))
            while feeds.ingested < 1:
                assert loop.time() < deadline, "the consumer did not take the feed once the server was back"
                await asyncio.sleep(0.05)
        finally:
            await feeds.stop()

    try:
        with caplog.at_level(logging.WARNING, "svcgen.collector.jetstream"):
            asyncio.run(run())
    finally:
        server.remove()
    said_once_then_back(caplog)
    assert invocations(collector) == 1


def said_once_then_back(caplog: pytest.LogCaptureFixture) -> None:
    """The consumer said it cannot pull once while the server was down, however many retries, then that it pulls
    again. A loaded machine may time a pull out after the server is back, which is a new outage and may say so
    again."""
    messages = [record.getMessage() for record in caplog.records if record.name == "svcgen.collector.jetstream"]
    back = next((n for n, text in enumerate(messages) if "again" in text), None)
    assert back is not None, messages
    assert len([text for text in messages[:back] if "cannot pull" in text]) == 1, messages


def test_a_nats_server_lost_mid_run_is_said_once_and_the_feeds_are_taken_when_it_is_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = ThrowawayNats()
    server.start()
    collector = documents.collector()
    feeds = FeedConsumer(server.url, collector_service(collector), fetch_timeout=0.2, retry_delay=0.2,
                         connect_timeout=0.5)  # fmt: skip

    async def wait(what: str, done: Callable[[], bool]) -> None:
        deadline = asyncio.get_running_loop().time() + DEADLINE
        while not done():
            assert asyncio.get_running_loop().time() < deadline, what
            await asyncio.sleep(0.05)

    def said(text: str) -> bool:
        return any(text in record.getMessage() for record in caplog.records)

    async def run() -> None:
        await publish(server.url, MeshStream(), lambda f: f.traces([documents.event(1)], "b-1"))
        feeds.start()
        try:
            await wait("the consumer did not take the first feed", lambda: feeds.ingested == 1)
            await asyncio.to_thread(server.stop)  # mid-run: the consumer's connection was up
            await wait("the consumer never said the server went away", lambda: said("cannot pull"))
            await asyncio.sleep(1.0)  # several retries, still one warning
            await asyncio.to_thread(server.start)
            await publish(server.url, MeshStream(), lambda f: f.traces([documents.event(2)], "b-2"))
            # What the collector counted, not the consumer's `ingested`: nats-py sends an ack without waiting for
            # it, so a server stopped just after one may not have it and, back, hands b-1 over again with b-2; the
            # collector counts b-1 once (its batch id), `ingested` once more.
            await wait("the collector did not count the feed once the server was back",
                       lambda: invocations(collector) == 2)  # fmt: skip
        finally:
            await feeds.stop()

    try:
        with caplog.at_level(logging.WARNING, "svcgen.collector.jetstream"):
            asyncio.run(run())
    finally:
        server.remove()
    said_once_then_back(caplog)
    assert invocations(collector) == 2
    assert feeds.ingested - 2 == collector.dropped()["duplicateBatches"], "anything taken again was counted once"


def test_a_stream_deleted_and_made_again_mid_run_gets_its_durable_consumer_back(
    nats_url: str, mesh_stream: MeshStream, caplog: pytest.LogCaptureFixture
) -> None:
    collector = documents.collector()
    feeds = consumer(nats_url, collector, mesh_stream, retry_delay=0.2, consumer_check=0.2)

    async def wait(what: str, done: Callable[[], bool]) -> None:
        deadline = asyncio.get_running_loop().time() + DEADLINE
        while not done():
            assert asyncio.get_running_loop().time() < deadline, what
            await asyncio.sleep(0.05)

    async def run() -> None:
        await publish(nats_url, mesh_stream, lambda f: f.traces([documents.event(1)], "b-1"))
        feeds.start()
        try:
            await wait("the consumer did not take the first feed", lambda: feeds.ingested == 1)
            await delete_stream(nats_url, mesh_stream.name)  # its durable consumer goes with it
            # A reporter finds the stream missing and makes it again (docs/collector.md), without the consumer.
            await publish(nats_url, mesh_stream, lambda f: f.traces([documents.event(2)], "b-2"))
            await wait("the collector never took the feeds of the stream made again", lambda: feeds.ingested == 2)
        finally:
            await feeds.stop()

    with caplog.at_level(logging.WARNING, "svcgen.collector.jetstream"):
        asyncio.run(run())
    messages = [record.getMessage() for record in caplog.records if record.name == "svcgen.collector.jetstream"]
    assert any(f"durable consumer svc-collector of {mesh_stream.name} is gone" in text for text in messages), messages
    assert invocations(collector) == 2


def test_the_consumer_never_logs_the_password_of_its_nats_url(caplog: pytest.LogCaptureFixture) -> None:
    url = f"nats://bob:hunter2@127.0.0.1:{free_port()}"  # nothing listens there
    feeds = FeedConsumer(url, collector_service(documents.collector()), fetch_timeout=0.2, retry_delay=0.2,
                         connect_timeout=0.5)  # fmt: skip

    async def run() -> None:
        feeds.start()
        try:
            deadline = asyncio.get_running_loop().time() + DEADLINE
            while not any("cannot pull" in record.getMessage() for record in caplog.records):
                assert asyncio.get_running_loop().time() < deadline, "the consumer never said it cannot pull"
                await asyncio.sleep(0.05)
        finally:
            await feeds.stop()

    with caplog.at_level(logging.WARNING, "svcgen.collector.jetstream"):
        asyncio.run(run())
    (line,) = [record.getMessage() for record in caplog.records if "cannot pull" in record.getMessage()]
    assert f"from nats://127.0.0.1:{url.rpartition(':')[2]} (" in line and "hunter2" not in line


def test_svcgen_collector_serve_nats_without_nats_py_fails_with_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from click.testing import CliRunner

    from svcgen.cli import main

    monkeypatch.setitem(sys.modules, "nats", None)  # as if svcgen[nats] were not installed
    result = CliRunner().invoke(main, ["collector", "serve", "--nats", "nats://127.0.0.1:4222"])
    assert result.exit_code == 1
    assert "mesh feeds over NATS need nats-py: pip install 'svcgen[nats]'" in result.output
    assert "Traceback" not in result.output


def test_a_poisoned_event_over_jetstream_is_skipped_and_its_batch_acked_on_postgresql(
    nats_url: str, mesh_stream: MeshStream, postgres_url: str
) -> None:
    """Issue 31: one event PostgreSQL could not hold failed its batch on every try, and over JetStream the batch
    was redelivered every second forever. The event is skipped and counted; the batch is acked at once."""
    collector = documents.collector(PostgresStore(postgres_url))
    feeds = consumer(nats_url, collector, mesh_stream, durable="c-poison", retry_delay=0.1)
    wide = "\U0001f600" * 256
    events = [documents.event(1), {**documents.event(2), "topic": "junk\x00topic"},
              {**documents.event(3), "service": wide, "topic": wide, "topicVersion": wide}]  # fmt: skip

    async def run() -> tuple[int, int]:
        await publish(nats_url, mesh_stream, lambda f: f.traces([documents.event(4)], "before"))  # makes the stream
        client = await nats.connect(nats_url)
        try:  # published as it is: no sender's checks in the way
            envelope = feed_envelope("svc:mesh:traces", {"events": events, "batchId": "poisoned"})
            await client.jetstream().publish(f"{mesh_stream.subject_prefix}.traces", orjson.dumps(envelope))
        finally:
            await client.close()
        try:
            await pull_until([feeds], lambda: feeds.ingested == 2)
            return await unacknowledged(nats_url, mesh_stream, "c-poison")
        finally:
            await feeds.stop()

    assert asyncio.run(run()) == (0, 0)
    assert (feeds.retried, feeds.malformed) == (0, 0)
    assert invocations(collector) == 2
    assert invocations(collector, wide) == 1
    assert documents.ok(collector.query_fleet())["dropped"]["skipped"] == 1
    assert collector.store_problem is None
    collector.flush()


def test_a_message_the_store_never_takes_is_given_up_after_the_delivery_cap_and_logged(
    nats_url: str, mesh_stream: MeshStream, caplog: pytest.LogCaptureFixture
) -> None:
    """A store that cannot persist (a database that is not there) answers service-unavailable on every delivery:
    past `max_deliveries` the message is terminated and logged with what it was, not redelivered forever."""
    store = PostgresStore(f"postgresql://postgres@127.0.0.1:{free_port()}/none", timeout=0.5, probe_interval=0.2)
    collector = documents.collector(store)
    feeds = consumer(nats_url, collector, mesh_stream, durable="c-cap", retry_delay=0.05, max_retry_delay=0.1,
                     max_deliveries=3)  # fmt: skip
    caplog.set_level(logging.WARNING, logger="svcgen.collector.jetstream")

    async def run() -> tuple[int, int]:
        await publish(nats_url, mesh_stream, lambda f: f.traces([documents.event(1)], "never-taken"))
        try:
            await pull_until([feeds], lambda: feeds.given_up == 1)
            return await unacknowledged(nats_url, mesh_stream, "c-cap")
        finally:
            await feeds.stop()

    try:
        assert asyncio.run(run()) == (0, 0)
    finally:
        collector.flush()
    assert (feeds.retried, feeds.given_up, feeds.ingested) == (2, 1, 0)
    (line,) = [record.getMessage() for record in caplog.records if "given up" in record.getMessage()]
    assert "after 3 deliveries" in line and "batchId never-taken" in line
