"""Issue 31, over NATS: 256 slow handlers blocked every topic, callers' deadlines were ignored, and SIGTERM waited
for the whole backlog. Each topic has its own slots, a message past its requester's deadline is never run, and
`stop` stops taking queued messages (answered `service-unavailable`, unrun)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import nats
import orjson
from nats.aio.client import Client
from nats.aio.msg import Msg

from svcgen.runtime import Context, Identity, NatsBinding, NatsSender, Registry, Result, Service
from svcgen.runtime._deadline import DEADLINE_HEADER
from svcgen.runtime._nats.subjects import topic_subject
from tests.support.broker import unique_name

DEADLINE = 30.0
"""Generous: how long a test waits for an event before it fails."""


class Gate:
    """The slow topic's handler waits on it; counts how many handlers started and what headers they saw."""

    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.started = 0
        self.headers: list[dict[str, str]] = []

    async def slow(self, request: dict[str, Any], context: Context) -> Result[dict[str, Any]]:
        self.started += 1
        self.headers.append(dict(context.headers))
        await self.open.wait()
        return Result.ok({"slow": True})

    async def fast(self, request: dict[str, Any], context: Context) -> Result[dict[str, Any]]:
        self.headers.append(dict(context.headers))
        return Result.ok({"fast": True})


def service(name: str, gate: Gate) -> Service:
    registry = Registry()
    registry.add("jobs:slow", gate.slow)
    registry.add("jobs:fast", gate.fast)
    return Service(Identity(name), registry)


@contextlib.asynccontextmanager
async def served(nats_url: str, binding_of: Any) -> AsyncIterator[tuple[NatsBinding, Client]]:
    connection = await nats.connect(nats_url)
    binding: NatsBinding = binding_of(connection)
    await binding.start()
    caller = await nats.connect(nats_url)
    try:
        yield binding, caller
    finally:
        await caller.close()
        await binding.stop()
        await connection.close()


async def until(condition: Any) -> None:
    give_up = time.monotonic() + DEADLINE
    while not condition():
        assert time.monotonic() < give_up, "the condition did not come true in time"
        await asyncio.sleep(0.01)


async def status_of(caller: Client, subject: str, timeout: float = DEADLINE) -> str:
    reply = await caller.request(subject, b"{}", timeout=timeout)
    return str(orjson.loads(reply.data)["statusCode"])


def test_a_slow_topic_takes_its_own_slots_and_the_others_keep_answering(nats_url: str) -> None:
    name, gate = unique_name("budget"), Gate()

    async def scenario() -> tuple[list[str], str, list[str]]:
        async with served(nats_url, lambda c: NatsBinding(service(name, gate), c, max_in_flight=8,
                                                          topic_slots=3)) as (_, caller):  # fmt: skip
            slow = [asyncio.create_task(status_of(caller, topic_subject(name, "jobs:slow"))) for _ in range(3)]
            await until(lambda: gate.started == 3)
            refused = [await status_of(caller, topic_subject(name, "jobs:slow")) for _ in range(2)]
            fast = await status_of(caller, topic_subject(name, "jobs:fast"))  # while the slow ones still run
            gate.open.set()
            return refused, fast, list(await asyncio.gather(*slow))

    refused, fast, slow = asyncio.run(scenario())
    assert refused == ["too-many-requests"] * 2
    assert fast == "ok"
    assert slow == ["ok"] * 3
    assert gate.started == 3  # the refused ones never ran


def test_a_message_past_its_requesters_deadline_is_dropped_unrun(nats_url: str) -> None:
    name, gate = unique_name("deadline"), Gate()

    async def scenario() -> tuple[int, int, str]:
        async with served(nats_url, lambda c: NatsBinding(service(name, gate), c)) as (binding, caller):
            past = {DEADLINE_HEADER: "0"}  # the requester waits no longer: nothing is left of its deadline
            inbox = caller.new_inbox()
            replies: list[bytes] = []

            async def collect(msg: Msg) -> None:
                replies.append(msg.data)

            await caller.subscribe(inbox, cb=collect)
            await caller.publish(topic_subject(name, "jobs:fast"), b"{}", reply=inbox, headers=past)
            await until(lambda: binding.expired == 1)
            # The same binding answers a message whose deadline is ahead, as NatsSender sends it.
            sender = NatsSender(f"{nats_url}/{name}", timeout=DEADLINE)
            try:
                answer = await sender.send("jobs:fast", {})
            finally:
                await sender.aclose()
            await caller.flush()
            return len(replies), len(gate.headers), answer.status

    replies, handled, status = asyncio.run(scenario())
    assert (replies, handled, status) == (0, 1, "ok")  # only the sender's message ran
    (seen,) = gate.headers
    assert 0 < int(seen[DEADLINE_HEADER]) <= DEADLINE * 1000  # the sender stated how long it still waits


def test_the_deadline_header_is_read_whatever_the_case_of_its_name(nats_url: str) -> None:
    """NATS header names are case-sensitive on the wire; the binding lower-cases them (docs/nats.md), the deadline's
    too: `Svc-Deadline: 0` is dropped unrun on both subjects, not run and answered `timeout`."""
    name, gate = unique_name("deadline"), Gate()

    async def scenario() -> tuple[int, int, str]:
        async with served(nats_url, lambda c: NatsBinding(service(name, gate), c)) as (binding, caller):
            inbox = caller.new_inbox()
            replies: list[bytes] = []

            async def collect(msg: Msg) -> None:
                replies.append(msg.data)

            await caller.subscribe(inbox, cb=collect)
            past = {"Svc-Deadline": "0"}
            envelope = orjson.dumps({"topic": "jobs:fast", "body": "{}"})
            await caller.publish(topic_subject(name, "jobs:fast"), b"{}", reply=inbox, headers=past)
            await caller.publish(f"svc.invoke.{name}", envelope, reply=inbox, headers=past)
            await until(lambda: binding.expired == 2)
            reply = await caller.request(topic_subject(name, "jobs:fast"), b"{}", timeout=DEADLINE,
                                         headers={"SVC-DEADLINE": "30000"})  # fmt: skip
            await caller.flush()
            return len(replies), len(gate.headers), str(orjson.loads(reply.data)["statusCode"])

    replies, handled, status = asyncio.run(scenario())
    assert (replies, handled, status) == (0, 1, "ok")  # only the one whose deadline was ahead ran
    (seen,) = gate.headers
    assert [header for header in seen if header.lower() == DEADLINE_HEADER] == [DEADLINE_HEADER]
    assert 0 < int(seen[DEADLINE_HEADER]) <= 30000


def test_stop_answers_the_queued_messages_unrun_and_returns(nats_url: str) -> None:
    name, gate = unique_name("stop"), Gate()
    queued = 40

    async def scenario() -> tuple[list[str], int, int]:
        async with served(nats_url, lambda c: NatsBinding(service(name, gate), c, max_in_flight=2, topic_slots=64,
                                                          stop_timeout=1.0)) as (binding, caller):  # fmt: skip
            # The two that run are cancelled by stop, unanswered: their requesters give up after 5 s.
            calls = [asyncio.create_task(status_of(caller, topic_subject(name, "jobs:slow"), 5.0))
                     for _ in range(queued)]  # fmt: skip
            await until(lambda: gate.started == 2)  # both slots held; the rest wait in the subscription's queue
            await asyncio.wait_for(binding.stop(), DEADLINE)  # the handlers never finish: stop must not wait on them
            answers = await asyncio.gather(*calls, return_exceptions=True)
            return [a if isinstance(a, str) else type(a).__name__ for a in answers], gate.started, binding.refused

    answers, started, refused = asyncio.run(scenario())
    assert started == 2  # no queued message ran after stop began
    assert answers.count("service-unavailable") == refused >= queued - 3
    assert set(answers) <= {"service-unavailable", "NoRespondersError", "TimeoutError"}, answers
