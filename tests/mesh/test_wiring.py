"""The mesh pieces wired as a host would: trace middleware → queue + issues → feeds reporter."""

from __future__ import annotations

import asyncio
from typing import Any

from svcgen.runtime import Result
from svcgen.runtime._invocation import Invocation
from svcgen.runtime._mesh.exporters import QueueExporter
from svcgen.runtime._mesh.feeds import FeedSender
from svcgen.runtime._mesh.reporter import Reporter
from tests.support.fakes import STARTED, traced_service


class Collector:
    def __init__(self) -> None:
        self.sent: list[tuple[str, Any]] = []

    async def send(self, topic: str, payload: Any = None, headers: Any = None) -> Result[Any]:
        self.sent.append((topic, payload))
        return Result.ok({"accepted": 1})


def test_reporter_ships_the_drained_events_and_the_flushed_issues() -> None:
    queue = QueueExporter(cap=100)
    traced = traced_service(exporter=queue)
    collector = Collector()
    reporter = Reporter(
        FeedSender(collector), traced.service.descriptor, service="orders",
        traces=queue.drain_wire, issues=traced.issues.flush, batch_size=2, clock=lambda: STARTED.timestamp(),
    )

    async def run() -> None:
        await traced.service.invoke(Invocation("orders:get", body='{"orderId": "o-1"}'))
        await traced.service.invoke(Invocation("orders:nope"))
        await traced.service.invoke(Invocation("orders:explode", body='{"orderId": "o-1"}'))
        await reporter.flush_traces()
        await reporter.beat()
        await reporter.beat()

    asyncio.run(run())
    traces = [payload["events"] for topic, payload in collector.sent if topic == "svc:mesh:traces"]
    issues = [payload for topic, payload in collector.sent if topic == "svc:mesh:issues"]
    assert [[e["status"] for e in batch] for batch in traces] == [["ok", "not-found"], ["service-unavailable"]]
    assert [[i["classification"] for i in batch["issues"]] for batch in issues] == [["config-wiring", "exception"], []]
    assert len({payload["batchId"] for _, payload in collector.sent if "batchId" in payload}) == 4
    assert len(queue) == 0
