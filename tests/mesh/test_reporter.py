import asyncio
import logging
from collections import deque
from datetime import UTC, datetime
from typing import Any

import pytest

from svcgen.runtime import HealthCheckResult, Identity, Registry, Result
from svcgen.runtime._descriptor import build_descriptor
from svcgen.runtime._health import HealthReport
from svcgen.runtime._mesh.feeds import FeedSender
from svcgen.runtime._mesh.reporter import Reporter
from tests.support.feeds import event

DESCRIPTOR = build_descriptor(Identity("orders", instance_id="i-1"), Registry(), [])
MOMENT = datetime(2026, 11, 22, 10, 0, tzinfo=UTC).timestamp()


class RecordingSender:
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


class Source:
    """A trace source like the trace queue: drains in order, knows its backlog and what it dropped. Events are
    given as `{"traceId": ...}` and drained as entries with that trace id (`sent` reads them back so)."""

    def __init__(self, events: list[dict[str, Any]] | None = None) -> None:
        self.queue = deque(events or [])
        self.dropped = 0

    def drain(self, n: int) -> list[dict[str, Any]]:
        return [event(1, trace=self.queue.popleft()["traceId"]) for _ in range(min(n, len(self.queue)))]

    def add(self, *events: dict[str, Any]) -> None:
        self.queue.extend(events)


class Ids:
    def __init__(self) -> None:
        self.issued = 0

    def __call__(self) -> str:
        self.issued += 1
        return f"b-{self.issued}"


def make(sender: RecordingSender, events: list[dict[str, Any]] | Source | None = None,
         issues: list[dict[str, Any]] | None = None, **options: Any) -> Reporter:
    source = events if isinstance(events, Source) else Source(events)
    window = issues if issues is not None else []

    async def health() -> HealthReport:
        return HealthReport({"db": HealthCheckResult.ok()})

    def flush_issues(batch_id: str) -> dict[str, Any]:
        batch = {"service": "orders", "issues": list(window), "batchId": batch_id}
        window.clear()
        return batch

    options.setdefault("batch_ids", Ids())
    return Reporter(
        FeedSender(sender), DESCRIPTOR, service="orders", instance_id="i-1", health=health,
        traces=source.drain, backlog=lambda: len(source.queue), dropped=lambda: source.dropped,
        issues=flush_issues, clock=lambda: MOMENT, **options,
    )


def sent(sender: RecordingSender, feed: str) -> list[Any]:
    """The payloads sent on `feed`; trace batches with each event as `{"traceId": ...}`, as `Source` took it."""
    payloads = [payload for topic, payload in sender.sent if topic == f"svc:mesh:{feed}"]
    if feed != "traces":
        return payloads
    return [{**batch, "events": [{"traceId": event["traceId"]} for event in batch["events"]]} for batch in payloads]


def test_beats_register_once_then_heartbeat_and_issues_with_a_batch_id() -> None:
    sender = RecordingSender()
    reporter = make(sender)

    async def run() -> None:
        await reporter.beat()
        await reporter.beat()

    asyncio.run(run())
    assert sender.topics() == ["register", "heartbeat", "issues", "heartbeat", "issues"]
    register, heartbeat = sender.sent[0][1], sender.sent[1][1]
    assert register == DESCRIPTOR.document
    assert heartbeat == {
        "service": "orders", "sentAt": "2026-11-22T10:00:00.000Z", "instanceId": "i-1",
        "descriptorHash": DESCRIPTOR.hash, "health": {"isHealthy": True, "healthChecks": {"db": {"status": "ok"}}},
    }
    assert sent(sender, "issues") == [{"service": "orders", "issues": [], "batchId": "b-1"},
                                         {"service": "orders", "issues": [], "batchId": "b-2"}]


def test_trace_flush_sends_full_batches_each_with_its_own_id_until_a_partial_one() -> None:
    sender = RecordingSender()
    reporter = make(sender, [{"traceId": str(i)} for i in range(5)], batch_size=2)
    asyncio.run(reporter.flush_traces())
    assert sent(sender, "traces") == [
        {"events": [{"traceId": "0"}, {"traceId": "1"}], "batchId": "b-1"},
        {"events": [{"traceId": "2"}, {"traceId": "3"}], "batchId": "b-2"},
        {"events": [{"traceId": "4"}], "batchId": "b-3"},
    ]


def test_traces_flow_on_their_own_cadence_whatever_the_heartbeat() -> None:
    """A 1-hour heartbeat: events still reach the collector within the flush interval, and a full batch goes at
    the next tick; the heartbeat itself stays on its period (one beat at start)."""
    sender = RecordingSender()
    source = Source()
    reporter = make(sender, source, interval=3600, flush_interval=0.2, batch_size=3)

    async def run() -> None:
        await reporter.start()
        source.add({"traceId": "a"})
        for _ in range(100):
            await asyncio.sleep(0.02)
            if sent(sender, "traces"):
                break
        source.add({"traceId": "b"}, {"traceId": "c"}, {"traceId": "d"})
        for _ in range(100):
            await asyncio.sleep(0.02)
            if len(sent(sender, "traces")) == 2:
                break
        await reporter.stop()

    asyncio.run(run())
    batches = [[e["traceId"] for e in batch["events"]] for batch in sent(sender, "traces")]
    assert batches == [["a"], ["b", "c", "d"]]
    assert sender.topics().count("heartbeat") == 1


def test_hash_mismatch_answer_makes_the_next_beat_register() -> None:
    sender = RecordingSender()
    sender.script("svc:mesh:heartbeat", Result.ok({"accepted": 1}), Result.ok({"accepted": 1, "reregister": True}))
    reporter = make(sender)

    async def run() -> None:
        for _ in range(3):
            await reporter.beat()

    asyncio.run(run())
    assert sender.topics() == [
        "register", "heartbeat", "issues",
        "heartbeat", "issues",
        "register", "heartbeat", "issues",
    ]


def test_failed_batches_are_resent_whole_with_the_same_id_timeouts_included() -> None:
    sender = RecordingSender()
    down = Result.service_unavailable("cannot reach collector")
    sender.script("svc:mesh:register", down)
    sender.script("svc:mesh:heartbeat", down)
    sender.script("svc:mesh:traces", down, Result.timeout("collector did not answer"))
    sender.script("svc:mesh:issues", down)
    issue = {"fingerprint": "f" * 32, "count": 1}
    reporter = make(sender, [{"traceId": "a"}, {"traceId": "b"}], issues=[issue])

    async def run() -> None:
        await reporter.flush_traces()
        await reporter.beat()
        assert reporter.needs_register and reporter.pending_trace_events == 2
        await reporter.flush_traces()  # times out: it may have arrived, the collector deduplicates by id
        await reporter.flush_traces()
        await reporter.beat()

    asyncio.run(run())
    assert sent(sender, "traces") == [{"events": [{"traceId": "a"}, {"traceId": "b"}], "batchId": "b-1"}] * 3
    issues = sent(sender, "issues")
    assert issues == [
        {"service": "orders", "issues": [issue], "batchId": "b-2"},
        {"service": "orders", "issues": [issue], "batchId": "b-2"},  # resent first, same id
        {"service": "orders", "issues": [], "batchId": "b-3"},
    ]
    assert reporter.lost_trace_events == 0 and reporter.pending_trace_events == 0
    assert reporter.lost_issue_batches == 0
    assert not reporter.needs_register


def test_while_a_batch_waits_to_be_resent_nothing_more_is_drained() -> None:
    """The queue stays the one place events wait (bounded, counting its drops); order is kept."""
    sender = RecordingSender()
    down = Result.service_unavailable("cannot reach collector")
    sender.script("svc:mesh:traces", down, down, down)
    source = Source()
    reporter = make(sender, source, batch_size=3)

    async def run() -> None:
        for n in range(3):
            source.add(*({"traceId": f"{n}.{i}"} for i in range(3)))
            await reporter.flush_traces()
        assert reporter.pending_trace_events == 3 and len(source.queue) == 6
        await reporter.flush_traces()  # the collector is back

    asyncio.run(run())
    assert [b["batchId"] for b in sent(sender, "traces")] == ["b-1"] * 4 + ["b-2", "b-3"]
    assert [e["traceId"] for b in sent(sender, "traces")[3:] for e in b["events"]] == [
        f"{n}.{i}" for n in range(3) for i in range(3)
    ]
    assert reporter.lost_trace_events == 0 and reporter.pending_trace_events == 0 and not source.queue


def test_shutdown_counts_the_queue_and_the_retry_buffer_and_logs_the_true_total(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sender = RecordingSender()
    source = Source([{"traceId": str(n)} for n in range(1200)])
    source.dropped = 7
    reporter = make(sender, source, batch_size=500, shutdown_timeout=0.2)
    sender.script("svc:mesh:traces", Result.service_unavailable("down"), Result.service_unavailable("down"))

    with caplog.at_level(logging.WARNING, logger="svcgen.mesh.reporter"):
        asyncio.run(reporter.stop())
    # The final flush met the collector down: 500 unsent, 700 still queued, 7 dropped by the queue.
    assert reporter.lost_trace_events == 1200 and len(source.queue) == 0
    assert reporter.undelivered_trace_events == 1207
    assert "1207 trace event(s) never reached the collector (7 dropped by the full trace queue, 1200 lost by the " \
           "reporter)" in [r.getMessage() for r in caplog.records]


def test_stop_flushes_everything_left_and_is_bounded_when_the_collector_hangs() -> None:
    sender = RecordingSender()
    source = Source([{"traceId": str(n)} for n in range(1100)])
    reporter = make(sender, source, interval=3600, batch_size=500)
    asyncio.run(reporter.stop())
    assert [len(b["events"]) for b in sent(sender, "traces")] == [500, 500, 100]
    assert reporter.lost_trace_events == 0

    sender = RecordingSender()
    reporter = make(sender, [{"traceId": "late"}], interval=3600, shutdown_timeout=0.05)

    async def run() -> None:
        await reporter.start()
        while len(sender.sent) < 3:
            await asyncio.sleep(0.001)
        sender.hang = True
        await asyncio.wait_for(reporter.stop(), timeout=5)

    asyncio.run(run())
    assert sender.topics()[:3] == ["register", "heartbeat", "issues"]
    assert reporter.lost_trace_events == 1  # queued, never sent


def test_undelivered_trace_events_are_logged_once_per_beat(caplog: pytest.LogCaptureFixture) -> None:
    source = Source()
    reporter = make(RecordingSender(), source)

    async def run() -> None:
        await reporter.beat()
        source.dropped = 7
        await reporter.beat()
        await reporter.beat()  # nothing new: nothing logged
        source.dropped = 9
        await reporter.beat()

    with caplog.at_level(logging.WARNING, logger="svcgen.mesh.reporter"):
        asyncio.run(run())
    assert [r.getMessage() for r in caplog.records] == [
        "7 trace event(s) never reached the collector since the last beat (7 in all)",
        "2 trace event(s) never reached the collector since the last beat (9 in all)",
    ]


def test_a_batch_answered_bad_request_is_dropped_counted_and_logged_never_resent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 31: the collector refused a poisoned batch and the reporter resent it forever, holding back every
    batch after it. A `bad-request` answer will not change on a resend: the batch is dropped, counted, logged."""
    sender = RecordingSender()
    refused = Result.bad_request("traces: a value cannot be stored")
    sender.script("svc:mesh:traces", refused)
    sender.script("svc:mesh:issues", Result.bad_request("issues: a value cannot be stored"))
    source = Source([{"traceId": "poison"}])
    issue = {"fingerprint": "f" * 32, "count": 1}
    reporter = make(sender, source, issues=[issue])
    caplog.set_level(logging.WARNING, logger="svcgen.mesh.reporter")

    async def run() -> None:
        await reporter.flush_traces()
        source.add({"traceId": "next"})
        await reporter.flush_traces()
        await reporter.beat()
        await reporter.beat()

    asyncio.run(run())
    assert sent(sender, "traces") == [{"events": [{"traceId": "poison"}], "batchId": "b-1"},
                                      {"events": [{"traceId": "next"}], "batchId": "b-2"}]  # fmt: skip
    assert [batch["batchId"] for batch in sent(sender, "issues")] == ["b-3", "b-4"]  # b-3 not resent
    assert (reporter.refused_trace_events, reporter.refused_issue_batches) == (1, 1)
    assert reporter.pending_trace_events == 0
    logged = [record.getMessage() for record in caplog.records]
    assert any("trace batch b-1 of 1 refused by the collector" in line and "not resent" in line for line in logged)
    assert any("issue batch b-3 refused by the collector" in line for line in logged)


def test_a_refused_register_is_said_once_per_outage_with_its_reason(caplog: pytest.LogCaptureFixture) -> None:
    sender = RecordingSender()
    why = "JetStream at nats://127.0.0.1:4222 did not take svc:mesh:register (TimeoutError)"
    down = Result.service_unavailable(why)
    sender.script("svc:mesh:register", down, down, down, Result.ok({"accepted": 1}), down)
    sender.script("svc:mesh:heartbeat", Result.ok({"accepted": 1}), Result.ok({"accepted": 1}),
                  Result.ok({"accepted": 1}), Result.ok({"accepted": 1, "reregister": True}))  # fmt: skip
    reporter = make(sender)

    async def run() -> None:
        for _ in range(6):  # three refused, accepted, the collector asks again: refused, accepted
            await reporter.beat()

    with caplog.at_level(logging.INFO, logger="svcgen.mesh.reporter"):
        asyncio.run(run())
    said = [r.getMessage() for r in caplog.records if "register" in r.getMessage()]
    line = f"register not accepted (service-unavailable: {why}); retrying on every beat until it is"
    assert said == [line, line]
    assert sender.topics().count("register") == 6


def test_an_undelivered_trace_batch_is_said_once_with_its_reason(caplog: pytest.LogCaptureFixture) -> None:
    sender = RecordingSender()
    down = Result.service_unavailable("cannot reach http://collector (ConnectError)")
    sender.script("svc:mesh:traces", down, down)
    reporter = make(sender, [{"traceId": "t1"}])

    async def run() -> None:
        for _ in range(3):
            await reporter.flush_traces()

    with caplog.at_level(logging.INFO, logger="svcgen.mesh.reporter"):
        asyncio.run(run())
    assert [r.getMessage() for r in caplog.records] == [
        "trace batch b-1 of 1 not delivered (service-unavailable: cannot reach http://collector (ConnectError)); "
        "resending it until it is"
    ]
    assert reporter.trace_batches_sent == 1
