"""The feeds reporter: register at startup, then on every beat a heartbeat, the drained traces and the
flushed issues. It runs in its own task, so nothing it does (a slow, refusing or broken collector)
can block or fail a request; every send is bounded by its publisher's timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from .. import _status as st
from .._descriptor import Descriptor
from .._health import HealthReport
from .clock import WallClock, wall_clock
from .feeds import REREGISTER_KEY, FeedSender, heartbeat_document

logger = logging.getLogger("svcgen.mesh.reporter")

DEFAULT_INTERVAL = 30.0
DEFAULT_BATCH_SIZE = 500
MAX_BATCHES_PER_BEAT = 20
DEFAULT_SHUTDOWN_TIMEOUT = 2.0
DEFAULT_RETRY_CAP = 10_000
"""Trace events kept for the next beat after a send that surely did not arrive; past it the oldest are lost."""

HealthSource = Callable[[], Awaitable[HealthReport]]
TraceSource = Callable[[int], Sequence[Mapping[str, Any]]]
"""Drains at most n trace events (wire form)."""
IssueSource = Callable[[], Mapping[str, Any]]
"""Flushes the issue window into a batch (wire form)."""


class Reporter:
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
        batch_size: int = DEFAULT_BATCH_SIZE,
        shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT,
        retry_cap: int = DEFAULT_RETRY_CAP,
        dropped: Callable[[], int] | None = None,
        clock: WallClock = wall_clock,
    ) -> None:
        if interval <= 0:
            raise ValueError("reporter interval must be positive")
        self.feeds = feeds
        self.descriptor = descriptor
        self.service = service
        self.instance_id = instance_id
        self.health = health
        self.traces = traces
        self.issues = issues
        self.interval = interval
        self.batch_size = batch_size
        self.shutdown_timeout = shutdown_timeout
        self.clock = clock
        self.needs_register = True
        self.beats = 0
        self.lost_trace_events = 0
        """Events the collector may not have: a send that timed out (it may have arrived: never resent, so
        never counted twice), cut off at shutdown, or pushed out of the retry buffer. Counted, never silent."""
        self.retry_cap = retry_cap
        self.dropped = dropped
        """How many events the trace source has dropped so far (a full queue); each beat logs any growth."""
        self._dropped_seen = 0
        self._retry: deque[Mapping[str, Any]] = deque()
        """Events of sends that surely did not arrive (refused, unreachable, not accepted), oldest first."""
        self.lost_issue_batches = 0
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        """Set by `stop`: the loop ends at its next pause instead of being cancelled mid-send."""

    async def start(self) -> None:
        """Start beating in the background; returns at once (the first beat registers)."""
        if self._task is None:
            self._stopping = asyncio.Event()
            self._task = asyncio.create_task(self._run(self._stopping), name=f"svcgen-reporter-{self.service}")

    async def stop(self) -> None:
        """Let a beat in progress finish (its drained batch is not cut off mid-send), then flush traces and
        issues once more; both within one shutdown timeout. A batch the deadline cuts off is counted in
        `lost_trace_events`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.shutdown_timeout
        task, self._task = self._task, None
        if task is not None:
            self._stopping.set()
            await asyncio.wait({task}, timeout=self.shutdown_timeout)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        try:
            await asyncio.wait_for(self._flush(), timeout=max(0.0, deadline - loop.time()))
        except TimeoutError:
            logger.warning("final feed flush did not finish within %.1fs", self.shutdown_timeout)
        except Exception:
            logger.warning("final feed flush failed", exc_info=True)
        if self._retry:
            self.lost_trace_events += len(self._retry)
            logger.warning("%d trace event(s) never reached the collector before shutdown", len(self._retry))
            self._retry.clear()

    async def beat(self) -> None:
        """One cycle: register when needed, heartbeat, traces, issues. Never raises."""
        self.beats += 1
        try:
            if self.needs_register:
                registered = await self.feeds.register(self.descriptor.document)
                self.needs_register = not registered.is_successful
                if self.needs_register:
                    logger.info("register not accepted (%s); retrying on the next beat", registered.status)
            await self._heartbeat()
            await self._flush()
            self._report_drops()
        except Exception:
            logger.warning("reporter beat failed", exc_info=True)

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

    async def _flush(self) -> None:
        if self.traces is not None:
            for _ in range(MAX_BATCHES_PER_BEAT):
                events = self._next_trace_batch()
                if not events:
                    break
                try:
                    sent = await self.feeds.traces(events)
                except asyncio.CancelledError:
                    # Cut off by stop's deadline: the batch is out of the queue and maybe not delivered.
                    self.lost_trace_events += len(events)
                    raise
                if not sent.is_successful:
                    self._keep_for_retry(events, sent.status)
                    break
        if self.issues is not None:
            # An empty batch is sent too: it is the issues feed's liveness beat.
            sent = await self.feeds.issues(self.issues())
            if not sent.is_successful:
                self.lost_issue_batches += 1

    def _report_drops(self) -> None:
        if self.dropped is None:
            return
        total = self.dropped()
        if total > self._dropped_seen:
            logger.warning("%d trace event(s) dropped since the last beat: the trace queue was full (%d in all)",
                           total - self._dropped_seen, total)
            self._dropped_seen = total

    def _next_trace_batch(self) -> Sequence[Mapping[str, Any]]:
        assert self.traces is not None
        if not self._retry:
            return self.traces(self.batch_size)
        count = min(self.batch_size, len(self._retry))
        return [self._retry.popleft() for _ in range(count)]

    def _keep_for_retry(self, events: Sequence[Mapping[str, Any]], status: str) -> None:
        if status == st.TIMEOUT:
            self.lost_trace_events += len(events)
            logger.info("trace batch of %d timed out; it may have arrived, so it is not resent", len(events))
            return
        self._retry.extendleft(reversed(events))
        overflow = len(self._retry) - self.retry_cap
        for _ in range(max(0, overflow)):
            self._retry.popleft()  # the oldest go, as in the trace queue
        if overflow > 0:
            self.lost_trace_events += overflow
        logger.info("trace batch of %d not delivered (%s); %d event(s) kept for the next beat", len(events), status,
                    len(self._retry))

    @property
    def pending_trace_events(self) -> int:
        """Events waiting in the retry buffer."""
        return len(self._retry)

    async def _run(self, stopping: asyncio.Event) -> None:
        while not stopping.is_set():
            await self.beat()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), timeout=self.interval)
