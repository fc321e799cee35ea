import asyncio
import logging
from collections import deque
from datetime import UTC, datetime
from typing import Any

import pytest

from svcgen.runtime._descriptor import build_descriptor
from svcgen.runtime._health import HealthCheckResult, HealthReport
from svcgen.runtime._identity import Identity
from svcgen.runtime._mesh.feeds import FeedSender
from svcgen.runtime._mesh.reporter import Reporter
from svcgen.runtime._registry import Registry
from svcgen.runtime._result import Result

DESCRIPTOR = build_descriptor(Identity("orders", instance_id="i-1"), Registry(), [])
MOMENT = datetime(2026, 11, 22, 10, 0, tzinfo=UTC).timestamp()


class RecordingPublisher:
    """An in-process collector stand-in: records what it was sent and answers from a script."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, Any]] = []
        self.answers: dict[str, deque[Result[Any]]] = {}
        self.hang = False

    def script(self, topic: str, *answers: Result[Any]) -> None:
        self.answers.setdefault(topic, deque()).extend(answers)

    async def send(self, topic: str, payload: Any = None, headers: Any = None) -> Result[Any]:
        if self.hang:
            await asyncio.sleep(3600)
        self.sent.append((topic, payload))
        queue = self.answers.get(topic)
        if queue:
            return queue.popleft()
        return Result.ok({"accepted": 1})

    def topics(self) -> list[str]:
        return [topic.removeprefix("svc:mesh:") for topic, _ in self.sent]


def make(publisher: RecordingPublisher, events: list[dict[str, Any]] | None = None, **options: Any) -> Reporter:
    queue = deque(events or [])

    def drain(n: int) -> list[dict[str, Any]]:
        return [queue.popleft() for _ in range(min(n, len(queue)))]

    async def health() -> HealthReport:
        return HealthReport({"db": HealthCheckResult.ok()})

    return Reporter(
        FeedSender(publisher), DESCRIPTOR, service="orders", instance_id="i-1", health=health,
        traces=drain, issues=lambda: {"service": "orders", "issues": []}, clock=lambda: MOMENT, **options,
    )


def test_first_beat_registers_then_beats_without_registering() -> None:
    publisher = RecordingPublisher()
    reporter = make(publisher, [{"traceId": str(i)} for i in range(5)], batch_size=2)

    async def run() -> None:
        await reporter.beat()
        await reporter.beat()

    asyncio.run(run())
    assert publisher.topics() == [
        "register", "heartbeat", "traces", "traces", "traces", "issues",
        "heartbeat", "issues",
    ]
    register, heartbeat = publisher.sent[0][1], publisher.sent[1][1]
    assert register == DESCRIPTOR.document
    assert heartbeat == {
        "service": "orders", "sentAt": "2026-11-22T10:00:00.000Z", "instanceId": "i-1",
        "descriptorHash": DESCRIPTOR.hash, "health": {"isHealthy": True, "healthChecks": {"db": {"status": "ok"}}},
    }
    assert [len(p["events"]) for t, p in publisher.sent if t == "svc:mesh:traces"] == [2, 2, 1]


def test_hash_mismatch_answer_makes_the_next_beat_register() -> None:
    publisher = RecordingPublisher()
    publisher.script("svc:mesh:heartbeat", Result.ok({"accepted": 1}), Result.ok({"accepted": 1, "reregister": True}))
    reporter = make(publisher)

    async def run() -> None:
        for _ in range(3):
            await reporter.beat()

    asyncio.run(run())
    assert publisher.topics() == [
        "register", "heartbeat", "issues",
        "heartbeat", "issues",
        "register", "heartbeat", "issues",
    ]


def test_unreachable_collector_is_retried_and_losses_are_counted() -> None:
    publisher = RecordingPublisher()
    down = Result.service_unavailable("cannot reach collector")
    publisher.script("svc:mesh:register", down)
    publisher.script("svc:mesh:heartbeat", down)
    publisher.script("svc:mesh:traces", down)
    publisher.script("svc:mesh:issues", down)
    reporter = make(publisher, [{"traceId": "a"}, {"traceId": "b"}])

    async def run() -> None:
        await reporter.beat()
        assert reporter.needs_register
        await reporter.beat()

    asyncio.run(run())
    assert publisher.topics() == [
        "register", "heartbeat", "traces", "issues",
        "register", "heartbeat", "traces", "issues",
    ]  # fmt: skip
    retried = [payload for topic, payload in publisher.sent if topic == "svc:mesh:traces"]
    assert retried[0] == retried[1] == {"events": [{"traceId": "a"}, {"traceId": "b"}]}  # surely not delivered: resent
    assert reporter.lost_trace_events == 0 and reporter.pending_trace_events == 0
    assert reporter.lost_issue_batches == 1
    assert not reporter.needs_register


def test_a_timed_out_batch_is_counted_lost_never_resent() -> None:
    publisher = RecordingPublisher()
    publisher.script("svc:mesh:traces", Result.timeout("collector did not answer"))
    reporter = make(publisher, [{"traceId": "a"}, {"traceId": "b"}])

    async def run() -> None:
        await reporter.beat()
        await reporter.beat()

    asyncio.run(run())
    assert publisher.topics().count("traces") == 1  # it may have arrived: resending could count it twice
    assert reporter.lost_trace_events == 2


def test_the_retry_buffer_is_bounded_and_what_is_left_at_shutdown_is_counted() -> None:
    publisher = RecordingPublisher()
    down = Result.service_unavailable("cannot reach collector")
    publisher.script("svc:mesh:traces", down, down)
    reporter = make(publisher, [{"traceId": str(n)} for n in range(5)], retry_cap=3, batch_size=5)

    async def run() -> None:
        await reporter.beat()
        assert reporter.pending_trace_events == 3 and reporter.lost_trace_events == 2  # the oldest went
        await reporter.stop()  # the final flush meets the collector still down

    asyncio.run(run())
    sent = [payload for topic, payload in publisher.sent if topic == "svc:mesh:traces"]
    assert sent[1] == {"events": [{"traceId": "2"}, {"traceId": "3"}, {"traceId": "4"}]}
    assert reporter.lost_trace_events == 5 and reporter.pending_trace_events == 0


def test_stop_flushes_once_more_and_is_bounded_when_the_collector_hangs() -> None:
    publisher = RecordingPublisher()
    reporter = make(publisher, [{"traceId": "late"}], interval=3600, shutdown_timeout=0.05)

    async def run() -> None:
        await reporter.start()
        await asyncio.sleep(0)  # let the first beat start
        while len(publisher.sent) < 4:
            await asyncio.sleep(0.001)
        publisher.hang = True
        await asyncio.wait_for(reporter.stop(), timeout=5)

    asyncio.run(run())
    assert publisher.topics()[:4] == ["register", "heartbeat", "traces", "issues"]


def test_final_flush_on_stop_sends_what_is_left() -> None:
    publisher = RecordingPublisher()
    events: list[dict[str, Any]] = []
    reporter = make(publisher, events, interval=3600)

    async def run() -> None:
        await reporter.beat()
        publisher.sent.clear()

    asyncio.run(run())
    reporter.traces = lambda n: [{"traceId": "last"}] if not publisher.sent else []
    asyncio.run(reporter.stop())
    assert publisher.topics() == ["traces", "issues"]


def test_trace_events_a_full_queue_dropped_are_logged_once_per_beat(caplog: pytest.LogCaptureFixture) -> None:
    dropped = [0]
    reporter = make(RecordingPublisher(), dropped=lambda: dropped[0])

    async def run() -> None:
        await reporter.beat()
        dropped[0] = 7
        await reporter.beat()
        await reporter.beat()  # nothing new: nothing logged
        dropped[0] = 9
        await reporter.beat()

    with caplog.at_level(logging.WARNING, logger="svcgen.mesh.reporter"):
        asyncio.run(run())
    assert [r.getMessage() for r in caplog.records] == [
        "7 trace event(s) dropped since the last beat: the trace queue was full (7 in all)",
        "2 trace event(s) dropped since the last beat: the trace queue was full (9 in all)",
    ]
