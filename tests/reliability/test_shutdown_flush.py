"""Shutdown while a trace batch is on its way to the collector: the batch is delivered, or counted as lost when the
shutdown deadline cuts it off; never dropped silently (docs/wire.md, Feed batches).

Before the fix in svcgen/runtime/_mesh/reporter.py, `Reporter.stop` cancelled the beat task mid-send: the batch
already drained from the queue was neither delivered nor counted in `lost_trace_events`.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from svcgen.runtime import Identity, Registry, Result
from svcgen.runtime._descriptor import build_descriptor
from svcgen.runtime._mesh.feeds import FeedSender
from svcgen.runtime._mesh.reporter import Reporter
from tests.support.feeds import event
from tests.support.reliability import report

DESCRIPTOR = build_descriptor(Identity("orders", instance_id="i-1"), Registry(), [])
EVENTS = 25
SHUTDOWN_TIMEOUT = 0.5


class SlowCollector:
    """Answers every feed; the first trace batch takes `delay` seconds (forever when None)."""

    def __init__(self, delay: float | None) -> None:
        self.delay = delay
        self.delivered: list[Any] = []
        self.sending = asyncio.Event()

    async def send(self, topic: str, payload: Any = None, headers: Any = None) -> Result[Any]:
        if topic == "svc:mesh:traces":
            self.sending.set()
            if not self.delivered:
                await asyncio.sleep(self.delay if self.delay is not None else 3600)
            self.delivered.extend(payload["events"])
        return Result.ok({"accepted": 1})


def stop_mid_send(delay: float | None) -> tuple[Reporter, SlowCollector, float]:
    queue = [event(n) for n in range(EVENTS)]

    def drain(n: int) -> list[dict[str, Any]]:
        batch = queue[:n]
        del queue[:n]
        return batch

    async def run() -> tuple[Reporter, SlowCollector, float]:
        collector = SlowCollector(delay)
        reporter = Reporter(FeedSender(collector), DESCRIPTOR, service="orders", traces=drain, interval=3600,
                            shutdown_timeout=SHUTDOWN_TIMEOUT)  # fmt: skip
        await reporter.start()
        await asyncio.wait_for(collector.sending.wait(), timeout=5)  # the batch is drained and on its way
        started = time.monotonic()
        await reporter.stop()
        return reporter, collector, time.monotonic() - started

    return asyncio.run(run())


def test_a_batch_in_flight_at_shutdown_is_delivered() -> None:
    """Starts a Reporter whose collector takes 0.2 s to answer the first trace batch, and calls stop() while that
    batch of 25 events is in flight. Measures: events delivered, events counted lost, how long stop took.
    Asserts: all 25 delivered, none lost, stop within the 0.5 s shutdown timeout."""
    reporter, collector, took = stop_mid_send(0.2)
    figures = report("stop mid-send", delivered=len(collector.delivered), lost=reporter.lost_trace_events,
                     stop_s=f"{took:.2f}")  # fmt: skip
    assert len(collector.delivered) == EVENTS and reporter.lost_trace_events == 0, figures
    assert took < SHUTDOWN_TIMEOUT + 0.25, figures


def test_a_batch_cut_off_by_the_shutdown_deadline_is_counted_lost() -> None:
    """As above, but the collector never answers the batch. Measures: events delivered, events counted lost, how
    long stop took. Asserts: none delivered, all 25 counted in lost_trace_events, stop bounded by its 0.5 s
    shutdown timeout (plus scheduling slack)."""
    reporter, collector, took = stop_mid_send(None)
    figures = report("stop past deadline", delivered=len(collector.delivered), lost=reporter.lost_trace_events,
                     stop_s=f"{took:.2f}")  # fmt: skip
    assert collector.delivered == [] and reporter.lost_trace_events == EVENTS, figures
    assert took < SHUTDOWN_TIMEOUT + 0.5, figures
