"""Hostile input over NATS never crashes the binding: garbage, messages over the limits, malformed and oversized
headers (sent on a raw socket, past any client's checks), messages without a reply subject. Each gets a failure
reply where it has a reply subject, and the service answers normally afterwards."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import nats
import orjson
from nats.aio.client import Client
from nats.aio.msg import Msg

from svcgen.runtime import Identity, Limits, NatsBinding, Service
from svcgen.runtime._nats.subjects import topic_subject
from tests.support.broker import unique_name
from tests.support.sample import build_registry

LIMITS = Limits(max_body_bytes=4096, max_headers=8)
GOOD = b'{"orderId": "o-1"}'


def raw_send(url: str, frames: list[bytes]) -> None:
    """Publish protocol frames as they are, on a socket of its own; returns once the server has read them."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 4222), timeout=5) as sock:
        reader = sock.makefile("rb")
        assert reader.readline().startswith(b"INFO")
        sock.sendall(b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"protocol":1}\r\n')
        sock.sendall(b"".join(frames) + b"PING\r\n")
        while not (line := reader.readline()).startswith(b"PONG"):
            assert line, "the server closed the raw connection"


def hpub(subject: str, reply: str, header_block: bytes, payload: bytes) -> bytes:
    head = f"HPUB {subject} {reply} {len(header_block)} {len(header_block) + len(payload)}\r\n".encode()
    return head + header_block + payload + b"\r\n"


@contextlib.asynccontextmanager
async def served(nats_url: str) -> AsyncIterator[tuple[str, NatsBinding, Client]]:
    name = unique_name("nh")
    connection = await nats.connect(nats_url)
    binding = NatsBinding(Service(Identity(name), build_registry()), connection, limits=LIMITS, stop_timeout=1)
    await binding.start()
    caller = await nats.connect(nats_url)
    try:
        yield name, binding, caller
    finally:
        await caller.close()
        await binding.stop()
        await connection.close()


def test_hostile_messages_get_failure_replies_and_the_service_keeps_serving(nats_url: str) -> None:
    async def scenario() -> tuple[dict[str, dict[str, Any]], dict[str, Any], int]:
        async with served(nats_url) as (name, binding, caller):
            topic = topic_subject(name, "orders:get")
            invoke = f"svc.invoke.{name}"
            inbox = caller.new_inbox()
            replies: dict[str, dict[str, Any]] = {}
            arrived = asyncio.Event()

            async def collect(msg: Msg) -> None:
                replies[msg.subject.rsplit(".", 1)[1]] = orjson.loads(msg.data)
                arrived.set()

            await caller.subscribe(f"{inbox}.*", cb=collect)
            await caller.flush()
            many = b"".join(f"h{n}: v\r\n".encode() for n in range(20))
            frames = {
                "garbage": hpub(invoke, f"{inbox}.garbage", b"NATS/1.0\r\n\r\n", b"\x00\xff{{{"),
                "notutf8": hpub(topic, f"{inbox}.notutf8", b"NATS/1.0\r\n\r\n", b'{"orderId": "\xff"}'),
                "deep": hpub(topic, f"{inbox}.deep", b"NATS/1.0\r\n\r\n", b"[" * 500 + b"]" * 500),
                "huge": hpub(topic, f"{inbox}.huge", b"NATS/1.0\r\n\r\n", b" " * 5000 + GOOD),
                "manyheaders": hpub(topic, f"{inbox}.manyheaders", b"NATS/1.0\r\n" + many + b"\r\n", GOOD),
                "longheader": hpub(topic, f"{inbox}.longheader", b"NATS/1.0\r\nx-big: " + b"a" * 8000 + b"\r\n\r\n",
                                   GOOD),
                "badheader": hpub(
                    topic, f"{inbox}.badheader", b"NATS/1.0\r\n\xff\xfe\x00 bad\r\n:\r\n\x80: \x81\r\n\r\n", GOOD
                ),
                "statusline": hpub(topic, f"{inbox}.statusline", b"NATS/1.0 503\r\n\r\n", GOOD),
                "noreply": hpub(topic, "", b"NATS/1.0\r\n\r\n", GOOD).replace(b"  ", b" "),
                "pubnoreply": f"PUB {topic} {len(GOOD)}\r\n".encode() + GOOD + b"\r\n",
                "badsubject": hpub(f"svc.topic.{name}.a.b.c", f"{inbox}.badsubject", b"NATS/1.0\r\n\r\n", GOOD),
            }
            await asyncio.to_thread(raw_send, nats_url, list(frames.values()))
            expected = {key for key in frames if "noreply" not in key}
            async with asyncio.timeout(10):
                while not expected <= replies.keys():
                    arrived.clear()
                    await arrived.wait()
            after = await caller.request(topic, GOOD, timeout=5)
            return replies, orjson.loads(after.data), binding.unanswerable

    replies, after, unanswerable = asyncio.run(scenario())
    statuses = {key: reply["statusCode"] for key, reply in replies.items()}
    assert statuses == {
        "garbage": "bad-request", "notutf8": "bad-request", "deep": "bad-request", "huge": "bad-request",
        "manyheaders": "bad-request", "longheader": "bad-request", "badheader": "ok", "statusline": "ok",
        "badsubject": "not-found",
    }
    details = {key: orjson.loads(reply["body"]).get("detail") for key, reply in replies.items()}
    assert details["garbage"] == "envelope is not valid UTF-8"
    assert details["huge"] == "body exceeds 4096 bytes"
    assert details["manyheaders"] == "request has 20 headers; at most 8 allowed"
    assert "nested deeper" in details["deep"] and "UTF-8" in details["notutf8"]
    assert unanswerable == 2
    assert after["statusCode"] == "ok" and orjson.loads(after["body"])["orderId"] == "o-1"


def test_a_reply_over_the_servers_payload_limit_is_a_failure_reply(nats_url: str) -> None:
    async def scenario() -> dict[str, Any]:
        async with served(nats_url) as (name, binding, caller):
            connection: Any = binding._connection
            connection._max_payload = 300  # as a server configured with a small max_payload would say
            reply = await caller.request(topic_subject(name, "svc:mesh"), b"", timeout=5)
            return dict(orjson.loads(reply.data))

    reply = asyncio.run(scenario())
    assert reply["statusCode"] == "unexpected-error"
    assert "exceeds the NATS server's limit of 300 bytes" in reply["body"]
