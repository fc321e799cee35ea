"""The feeds reporter: register at startup, then on every beat a heartbeat and the flushed issues; trace batches
go on their own cadence, as soon as a batch is full or about a second after the last flush, so the heartbeat
period never limits how many trace events reach the collector.

It runs in its own tasks, so nothing it does (a slow, refusing or broken collector) can block or fail a request;
every send is bounded by its sender's timeout.

Every batch carries a `batchId`, the same on every resend, so the collector can deduplicate a batch that arrived
although its answer did not: any failed send (unreachable, timed out, the collector unable to persist) is kept whole
and resent. A batch the collector answers `bad-request` is dropped, counted and logged instead: it would be refused
on every resend and hold back everything after it. What cannot be kept is counted, never silent: events the trace
queue dropped when full, batches pushed out of a full issue retry buffer, and whatever is still queued or unsent
when shutdown's deadline passes. While one trace batch waits to be resent nothing more is drained, so the trace
queue (bounded, counting its drops) is the only place events wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from .._descriptor import Descriptor
from .._health import HealthReport
from .._result import Result
from .._status import BAD_REQUEST
from .clock import WallClock, wall_clock
from .feeds import REREGISTER_KEY, FeedSender, heartbeat_document

logger = logging.getLogger("svcgen.mesh.reporter")

DEFAULT_INTERVAL: Final = 30.0
"""Seconds between heartbeats (and issue batches)."""
DEFAULT_FLUSH_SECONDS: Final = 1.0
"""At most this long between trace flushes while events wait, whatever the heartbeat."""
FLUSH_TICK_SECONDS: Final = 0.1
"""How often the trace task looks whether a full batch is waiting."""
DEFAULT_BATCH_SIZE: Final = 500
DEFAULT_SHUTDOWN_TIMEOUT: Final = 2.0
DEFAULT_ISSUE_RETRY_CAP: Final = 100
"""Issue batches kept for resending; past it the oldest are dropped, counted."""

HealthSource = Callable[[], Awaitable[HealthReport]]
TraceSource = Callable[[int], Sequence[Mapping[str, Any]]]
"""Drains at most n trace events, as the traces feed's entries in wire form."""
IssueSource = Callable[[str], Mapping[str, Any]]
"""Flushes the issue window into a batch carrying the given batch id (wire form)."""
BatchIds = Callable[[], str]


def new_batch_id() -> str:
    return uuid.uuid4().hex


def why_not(result: Result[Any]) -> str:
    """A failed send for a log line: its status and detail (the senders' details carry no credentials)."""
    detail = (result.detail or "")[:300]
    return f"{result.status}: {detail}" if detail and detail != result.status else result.status


@dataclass(frozen=True, slots=True)
class _TraceBatch:
    batch_id: str
    events: Sequence[Mapping[str, Any]]


class Reporter:
    """`backlog` (optional) tells how many events wait in the trace source, so a full batch goes at once; without
    it traces are flushed every `flush_interval`. `dropped` tells how many events the source itself dropped
    (a full queue); both are counted in `undelivered_trace_events`."""

    def __init__(
        self,
        feeds: FeedSender,
        descriptor: Descriptor,
        *,
        service: str,
        instance_id: str | None = None,
        health: HealthSource | None = None,
        traces: TraceSource | None = None,
        issues: IssueSource | None = None,
        interval: float = DEFAULT_INTERVAL,
        flush_interval: float = DEFAULT_FLUSH_SECONDS,
        batch_size: int = DEFAULT_BATCH_SIZE,
        shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT,
        issue_retry_cap: int = DEFAULT_ISSUE_RETRY_CAP,
        backlog: Callable[[], int] | None = None,
        dropped: Callable[[], int] | None = None,
        batch_ids: BatchIds = new_batch_id,
        clock: WallClock = wall_clock,
    ) -> None:
        if interval <= 0 or flush_interval <= 0:
            raise ValueError("reporter interval and flush interval must be positive")
        if batch_size < 1:
            raise ValueError("reporter batch size must be at least 1")
        self.feeds = feeds
        self.descriptor = descriptor
        self.service = service
        self.instance_id = instance_id
        self.health = health
        self.traces = traces
        self.issues = issues
        self.interval = interval
        self.flush_interval = flush_interval
        self.batch_size = batch_size
        self.shutdown_timeout = shutdown_timeout
        self.issue_retry_cap = issue_retry_cap
        self.backlog = backlog
        self.dropped = dropped
        self.batch_ids = batch_ids
        self.clock = clock
        self.needs_register = True
        self.beats = 0
        self.trace_batches_sent = 0
        self.lost_trace_events = 0
        """Events this reporter gave up: cut off, unsent or still queued when shutdown's deadline passed. The
        source's own drops (a full queue) are in `dropped`."""
        self.lost_issue_batches = 0
        """Non-empty issue batches pushed out of the full issue retry buffer or unsent at shutdown."""
        self.refused_trace_events = 0
        """Events of trace batches the collector answered `bad-request`: dropped, never resent."""
        self.refused_issue_batches = 0
        """Issue batches the collector answered `bad-request`: dropped, never resent."""
        self._trace_failures = 0
        self._register_failures = 0
        self._unsent: _TraceBatch | None = None
        """The batch whose send failed, kept whole with its id and resent before anything newer."""
        self._issue_retry: deque[Mapping[str, Any]] = deque()
        self._reported_undelivered = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = asyncio.Event()
        """Set by `stop`: the loops end at their next pause instead of being cancelled mid-send."""

    @property
    def pending_trace_events(self) -> int:
        """Events of the batch waiting to be resent."""
        return len(self._unsent.events) if self._unsent is not None else 0

    @property
    def undelivered_trace_events(self) -> int:
        """Every trace event that never reached the collector so far: the source's drops plus `lost_trace_events`."""
        return (self.dropped() if self.dropped is not None else 0) + self.lost_trace_events

    async def start(self) -> None:
        """Start beating and flushing in the background; returns at once (the first beat registers)."""
        if self._tasks:
            return
        self._stopping = asyncio.Event()
        self._tasks = [asyncio.create_task(self._run_beats(self._stopping), name=f"svcgen-reporter-{self.service}")]
        if self.traces is not None:
            self._tasks.append(
                asyncio.create_task(self._run_traces(self._stopping), name=f"svcgen-traces-{self.service}")
            )

    async def stop(self) -> None:
        """Let a send in progress finish, then flush every queued trace event and the issues once more; all within
        one shutdown timeout. What the deadline leaves behind is counted and logged with the true total."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.shutdown_timeout
        tasks, self._tasks = self._tasks, []
        if tasks:
            self._stopping.set()
            await asyncio.wait(tasks, timeout=self.shutdown_timeout)
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        try:
            await asyncio.wait_for(self._final_flush(), timeout=max(0.0, deadline - loop.time()))
        except TimeoutError:
            logger.warning("final feed flush did not finish within %.1fs", self.shutdown_timeout)
        except Exception:
            logger.warning("final feed flush failed", exc_info=True)
        self._give_up_leftovers()

    async def beat(self) -> None:
        """One cycle: register when needed, heartbeat, issues, and a log line for any new drops. Never raises."""
        self.beats += 1
        try:
            if self.needs_register:
                registered = await self.feeds.register(self.descriptor.document)
                self.needs_register = not registered.is_successful
                if self.needs_register:
                    self._register_failures += 1
                    if self._register_failures == 1:  # once per outage, not once a beat
                        logger.info("register not accepted (%s); retrying on every beat until it is",
                                    why_not(registered))
                else:
                    self._register_failures = 0
            await self._heartbeat()
            await self.flush_issues()
        except Exception:
            logger.warning("reporter beat failed", exc_info=True)
        self._report_undelivered()

    async def flush_traces(self, *, until_empty: bool = False) -> None:
        """Resend the unsent batch, then drain the source batch by batch while full batches keep coming
        (`until_empty`: until the source is empty). Ends at the first failed send; that batch is kept whole."""
        if self.traces is None:
            return
        if self._unsent is not None:
            if not await self._send_traces(self._unsent):
                return
            self._unsent = None
        while until_empty or not self._stopping.is_set():
            events = self.traces(self.batch_size)
            if not events:
                return
            batch = _TraceBatch(self.batch_ids(), list(events))
            if not await self._send_traces(batch):
                self._unsent = batch
                return
            if len(events) < self.batch_size:
                return

    async def flush_issues(self) -> None:
        """Resend kept issue batches, then flush the window into a new batch and send it. An empty batch is sent
        too (the issues feed's liveness beat) but never kept: it carries nothing to lose."""
        if self.issues is None:
            return
        delivering = True
        while self._issue_retry and delivering:
            delivering = self._taken(await self.feeds.issues(self._issue_retry[0]), self._issue_retry[0])
            if delivering:
                self._issue_retry.popleft()
        batch = dict(self.issues(self.batch_ids()))
        if delivering and self._taken(await self.feeds.issues(batch), batch):
            return
        if batch.get("issues"):
            self._issue_retry.append(batch)
            if len(self._issue_retry) > self.issue_retry_cap:
                self._issue_retry.popleft()
                self.lost_issue_batches += 1
                logger.warning("issue retry buffer full (%d batches): the oldest batch was dropped (%d in all)",
                               self.issue_retry_cap, self.lost_issue_batches)

    def _taken(self, sent: Result[Any], batch: Mapping[str, Any]) -> bool:
        """Whether an issue batch is done with: accepted, or refused as `bad-request` (dropped, counted, logged)."""
        if sent.status == BAD_REQUEST:
            self.refused_issue_batches += 1
            logger.warning("issue batch %s refused by the collector (%s); dropped, not resent (%d so far)",
                           batch.get("batchId"), (sent.detail or "")[:200], self.refused_issue_batches)  # fmt: skip
            return True
        return sent.is_successful

    async def _send_traces(self, batch: _TraceBatch) -> bool:
        try:
            sent = await self.feeds.traces(batch.events, batch.batch_id)
        except asyncio.CancelledError:
            # Cut off by stop's deadline: maybe not delivered, and no later send will follow.
            self.lost_trace_events += len(batch.events)
            if self._unsent is batch:
                self._unsent = None
            raise
        if sent.is_successful:
            self.trace_batches_sent += 1
            self._trace_failures = 0
            return True
        if sent.status == BAD_REQUEST:
            self.refused_trace_events += len(batch.events)
            logger.warning("trace batch %s of %d refused by the collector (%s); dropped, not resent (%d event(s) "
                           "refused so far)", batch.batch_id, len(batch.events), (sent.detail or "")[:200],
                           self.refused_trace_events)  # fmt: skip
            return True  # the next batch goes on: resending this one would be refused again, forever
        self._trace_failures += 1
        if self._trace_failures == 1:  # once per outage, not once a second
            logger.info("trace batch %s of %d not delivered (%s); resending it until it is", batch.batch_id,
                        len(batch.events), why_not(sent))
        return False

    async def _final_flush(self) -> None:
        await self.flush_traces(until_empty=True)
        await self.flush_issues()

    def _give_up_leftovers(self) -> None:
        """After the final flush: what is still unsent, queued or in the issue retry buffer is lost; count it."""
        self.lost_trace_events += self.pending_trace_events
        self._unsent = None
        if self.traces is not None:
            while left := len(self.traces(self.batch_size)):
                self.lost_trace_events += left
        self.lost_issue_batches += len(self._issue_retry)
        self._issue_retry.clear()
        total = self.undelivered_trace_events
        if total:
            queue = self.dropped() if self.dropped is not None else 0
            logger.warning("%d trace event(s) never reached the collector (%d dropped by the full trace queue, %d "
                           "lost by the reporter)", total, queue, self.lost_trace_events)
        if self.lost_issue_batches:
            logger.warning("%d issue batch(es) never reached the collector", self.lost_issue_batches)

    def _report_undelivered(self) -> None:
        total = self.undelivered_trace_events
        if total > self._reported_undelivered:
            logger.warning("%d trace event(s) never reached the collector since the last beat (%d in all)",
                           total - self._reported_undelivered, total)
            self._reported_undelivered = total

    async def _heartbeat(self) -> None:
        report = await self.health() if self.health is not None else None
        document = heartbeat_document(
            self.service,
            self.clock(),
            report,
            instance_id=self.instance_id,
            descriptor_hash=self.descriptor.hash,
        )
        answer = await self.feeds.heartbeat(document)
        if not answer.is_successful:
            # Unreachable or refusing: the collector may have lost us; register again on the next beat.
            self.needs_register = True
        elif isinstance(answer.payload, dict) and answer.payload.get(REREGISTER_KEY) is True:
            self.needs_register = True

    async def _run_beats(self, stopping: asyncio.Event) -> None:
        while not stopping.is_set():
            await self.beat()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), timeout=self.interval)

    async def _run_traces(self, stopping: asyncio.Event) -> None:
        backlog = self.backlog
        full = (lambda: backlog() >= self.batch_size) if backlog is not None else (lambda: False)
        await run_flushes(stopping, self.flush_traces, full, self.flush_interval, logger)


async def run_flushes(
    stopping: asyncio.Event, flush: Callable[[], Awaitable[None]], full: Callable[[], bool], interval: float,
    log: logging.Logger,
) -> None:
    """Until `stopping` is set: `flush` as soon as `full()` (looked at every tick) or `interval` seconds after the
    last flush. A failing flush is logged on `log`, and the cadence goes on."""
    loop = asyncio.get_running_loop()
    flushed_at = loop.time()
    tick = min(FLUSH_TICK_SECONDS, interval)
    while not stopping.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), timeout=tick)
        if stopping.is_set():
            return
        if full() or loop.time() - flushed_at >= interval:
            try:
                await flush()
            except Exception:
                log.warning("trace flush failed", exc_info=True)
            flushed_at = loop.time()
