"""Deadlines over NATS: the binding honours `svc-deadline` as HTTP does, and `NatsSender` sends what is left."""

from __future__ import annotations

import asyncio
from typing import Any

import nats

from svcgen.runtime import Context, Identity, NatsBinding, NatsSender, Registry, Result, Service, deadline
from tests.support.broker import unique_name

WAIT = 20.0


def test_a_nats_request_past_its_deadline_is_not_started_and_a_slow_one_is_cancelled(nats_url: str) -> None:
    ran: list[float | None] = []
    cancelled = asyncio.Event()

    async def handle(request: dict[str, Any], context: Context) -> Result[dict[str, Any]]:
        ran.append(context.deadline)
        try:
            await asyncio.Event().wait()  # only the deadline ends it
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return Result.ok({})

    async def run() -> tuple[Result[Any], Result[Any], list[float | None]]:
        name = unique_name("dl")
        registry = Registry()
        registry.add("d:wait", handle, request=dict[str, Any], response=dict[str, Any])
        connection = await nats.connect(nats_url)
        binding = NatsBinding(Service(Identity(name), registry), connection, stop_timeout=0.5)
        await binding.start()
        try:
            async with NatsSender(f"{nats_url}/{name}", timeout=WAIT) as sender:
                passed = await sender.send("d:wait", {}, {"svc-deadline": "0"})
                started = list(ran)
                with deadline(0.2):
                    bounded = await sender.send("d:wait", {})
                await asyncio.wait_for(cancelled.wait(), WAIT)
        finally:
            await binding.stop()
            await connection.close()
        return passed, bounded, started

    passed, bounded, started = asyncio.run(run())
    assert (passed.status, passed.detail) == ("timeout", "the deadline passed before d:wait started")
    assert started == []
    assert bounded.status == "timeout"
    assert len(ran) == 1 and ran[0] is not None  # the second request carried its deadline over NATS
