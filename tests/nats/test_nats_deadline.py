"""Deadlines over NATS: `NatsSender` sends how long it still waits as `svc-deadline`, and the binding's handler
never runs past it (a message whose deadline has already passed is dropped unrun: test_nats_budgets.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import nats

from svcgen.runtime import Context, Identity, NatsBinding, NatsSender, Registry, Result, Service, deadline
from tests.support.broker import unique_name

WAIT = 20.0


def test_a_nats_handler_is_cancelled_at_the_deadline_its_requester_sent(nats_url: str) -> None:
    seen: list[tuple[float | None, str]] = []
    cancelled = asyncio.Event()

    async def handle(request: dict[str, Any], context: Context) -> Result[dict[str, Any]]:
        seen.append((context.deadline, context.headers.get("svc-deadline", "")))
        if request.get("quick"):
            return Result.ok({})
        try:
            await asyncio.Event().wait()  # only the deadline ends it
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return Result.ok({})

    async def run() -> tuple[Result[Any], Result[Any]]:
        name = unique_name("dl")
        registry = Registry()
        registry.add("d:wait", handle, request=dict[str, Any], response=dict[str, Any])
        connection = await nats.connect(nats_url)
        binding = NatsBinding(Service(Identity(name), registry), connection, stop_timeout=0.5)
        await binding.start()
        try:
            async with NatsSender(f"{nats_url}/{name}", timeout=WAIT) as sender:
                quick = await sender.send("d:wait", {"quick": True})
                with deadline(0.2):
                    bounded = await sender.send("d:wait", {})
                await asyncio.wait_for(cancelled.wait(), WAIT)
        finally:
            await binding.stop()
            await connection.close()
        return quick, bounded

    quick, bounded = asyncio.run(run())
    assert (quick.status, bounded.status) == ("ok", "timeout")
    (quick_deadline, quick_sent), (bounded_deadline, bounded_sent) = seen
    assert quick_deadline is not None and 0 < int(quick_sent) <= WAIT * 1000  # the sender's own timeout
    assert bounded_deadline is not None and 0 < int(bounded_sent) <= 200  # what was left of deadline(0.2)
