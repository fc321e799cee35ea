"""`MemoryBroker`: an in-memory event broker for tests, with the delivery rules of JetStream as svcgen uses it.

Set it on the wiring (`setup.event_broker = MemoryBroker()`) and a generated service publishes and handles its
events in the process: each publisher has a stream (a message id seen before is stored once), each (subscriber
service, event) one durable consumer shared by every bus on the broker that subscribes (replicas), a success
acknowledges, a failure is delivered again after the subscription's backoff step (times `backoff_scale`), and
after `maxDeliver` attempts, or at once when undecodable, the message goes to `dead_letters` with the same
headers JetStream's dead letters carry. The verdicts come from the runtime's own rules (`Deliverer`), so a test
here sees what production does.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final

from ..runtime._eventnames import publisher_subjects, stream_name
from ..runtime._events import (
    ACK,
    DEAD,
    MSG_ID,
    Delivered,
    EventsError,
    Retention,
    Subscription,
    Verdict,
    consumer_name,
    dead_letter_headers,
    dead_subject,
)

SETTLE_DEADLINE: Final = 30.0


@dataclass(frozen=True)
class StoredEvent:
    sequence: int
    subject: str
    data: bytes
    headers: Mapping[str, str]
    stored_at: datetime


@dataclass(frozen=True)
class MemoryDeadLetter:
    subject: str
    data: bytes
    headers: Mapping[str, str]


@dataclass
class _Stream:
    name: str
    subjects: str
    messages: list[StoredEvent] = field(default_factory=list)
    ids: set[str] = field(default_factory=set)


@dataclass
class _Pending:
    event: StoredEvent
    attempt: int
    first_delivered: datetime | None = None


@dataclass
class _Consumer:
    """A durable consumer: its messages are shared by every replica that subscribes under its name, whichever event
    loop each runs on (a sync TestClient runs its app on a loop of its own)."""

    name: str
    stream: str
    subject: str
    queue: collections.deque[_Pending] = field(default_factory=collections.deque)
    idle_workers: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = field(default_factory=list)
    """Workers waiting for a message, each woken on its own loop."""
    waiting: int = 0
    """Messages scheduled for redelivery, not yet back in the queue."""
    in_flight: int = 0


class MemoryBroker:
    """An `EventBroker` in this process. `backoff_scale` multiplies every redelivery delay (0: at once); `clock`
    gives the wall time messages are stored and first delivered at."""

    def __init__(
        self, *, backoff_scale: float = 1.0, clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    ) -> None:
        self.backoff_scale = backoff_scale
        self._clock = clock
        self.streams: dict[str, _Stream] = {}
        self.consumers: dict[str, _Consumer] = {}
        self.dead_letters: list[MemoryDeadLetter] = []
        self._sequence = itertools.count(1)
        self._lock = threading.Lock()
        """Guards the consumers' queues and counts: publishers and replicas may run on other threads' loops."""
        self._workers: list[tuple[asyncio.AbstractEventLoop, asyncio.Task[None]]] = []
        self._timers: set[tuple[asyncio.AbstractEventLoop, asyncio.TimerHandle]] = set()

    async def ensure_stream(self, publisher: str, retention: Retention) -> None:
        name = stream_name(publisher)
        self.streams.setdefault(name, _Stream(name, publisher_subjects(publisher)))

    async def publish(self, publisher: str, subject: str, data: bytes, headers: Mapping[str, str],
                      timeout: float) -> bool:  # fmt: skip
        stream = self.streams.get(stream_name(publisher))
        if stream is None or not _matches(stream.subjects, subject):
            raise EventsError(f"no stream takes {subject}")
        message_id = headers.get(MSG_ID)
        if message_id is not None and message_id in stream.ids:
            return True
        if message_id is not None:
            stream.ids.add(message_id)
        event = StoredEvent(next(self._sequence), subject, bytes(data), dict(headers), self._clock())
        stream.messages.append(event)
        for consumer in list(self.consumers.values()):
            if consumer.stream == stream.name and _matches(consumer.subject, subject):
                self._enqueue(consumer, _Pending(event, 1))
        return False

    async def subscribe(
        self,
        subscriber: str,
        subscription: Subscription,
        retention: Retention,
        deliver: Callable[[Delivered], Awaitable[Verdict]],
    ) -> None:
        await self.ensure_stream(subscription.publisher, retention)
        name = consumer_name(subscriber, subscription)
        consumer = self.consumers.get(name)
        if consumer is None:
            consumer = self.consumers[name] = _Consumer(name, subscription.stream, subscription.subject)
            for event in self.streams[subscription.stream].messages:  # a new durable consumer starts at the first
                if _matches(consumer.subject, event.subject):
                    self._enqueue(consumer, _Pending(event, 1))
        worker = asyncio.create_task(self._work(consumer, subscriber, subscription, deliver))
        self._workers.append((asyncio.get_running_loop(), worker))

    def _enqueue(self, consumer: _Consumer, pending: _Pending) -> None:
        """Queues a delivery and wakes the consumer's idle workers, each on its own loop."""
        with self._lock:
            consumer.queue.append(pending)
            idle, consumer.idle_workers = consumer.idle_workers, []
        for loop, wakeup in idle:
            _call_on(loop, wakeup.set)

    async def _next(self, consumer: _Consumer) -> _Pending:
        """The consumer's next delivery, counted in flight as it is taken; waits on this loop while there is none."""
        loop = asyncio.get_running_loop()
        wakeup = asyncio.Event()
        while True:
            with self._lock:
                if consumer.queue:
                    consumer.in_flight += 1
                    return consumer.queue.popleft()
                wakeup.clear()
                consumer.idle_workers.append((loop, wakeup))
            try:
                await wakeup.wait()
            finally:
                with self._lock, contextlib.suppress(ValueError):
                    consumer.idle_workers.remove((loop, wakeup))

    async def _work(self, consumer: _Consumer, subscriber: str, subscription: Subscription,
                    deliver: Callable[[Delivered], Awaitable[Verdict]]) -> None:  # fmt: skip
        while True:
            pending = await self._next(consumer)
            try:
                first = pending.first_delivered = pending.first_delivered or self._clock()
                event = pending.event
                delivered = Delivered(event.data, event.headers, pending.attempt, first, event.subject,
                                      consumer.stream, event.sequence)  # fmt: skip
                verdict = await deliver(delivered)
                if verdict.action == DEAD:
                    headers = dead_letter_headers(subscriber, subscription, delivered, verdict)
                    self.dead_letters.append(MemoryDeadLetter(dead_subject(subscriber, subscription), event.data,
                                                              headers))  # fmt: skip
                elif verdict.action != ACK:
                    self._redeliver(consumer, _Pending(event, pending.attempt + 1, first), verdict.delay)
            finally:
                with self._lock:
                    consumer.in_flight -= 1

    def _redeliver(self, consumer: _Consumer, pending: _Pending, delay: float) -> None:
        with self._lock:
            consumer.waiting += 1
        loop = asyncio.get_running_loop()

        def back() -> None:
            self._timers.discard((loop, handle))
            with self._lock:
                consumer.waiting -= 1
            self._enqueue(consumer, pending)

        handle = loop.call_later(delay * self.backoff_scale, back)
        self._timers.add((loop, handle))

    def idle(self) -> bool:
        """Nothing queued, waiting for redelivery or being handled."""
        with self._lock:
            return all(not c.queue and not c.waiting and not c.in_flight for c in self.consumers.values())

    async def settled(self, deadline: float = SETTLE_DEADLINE) -> None:
        """Returns once every delivery has been acknowledged or dead-lettered (raises TimeoutError past
        `deadline` seconds: a subscriber that never settles)."""
        async with asyncio.timeout(deadline):
            while not self.idle():
                await asyncio.sleep(0.005)

    def stored(self, publisher: str) -> list[StoredEvent]:
        """What the publisher's stream holds, oldest first."""
        stream = self.streams.get(stream_name(publisher))
        return list(stream.messages) if stream is not None else []

    async def close(self) -> None:
        """Stops the workers and redelivery timers of this loop (the app stopping); those of apps on other loops
        sharing the broker go on."""
        loop = asyncio.get_running_loop()
        for timer in [timer for timer in self._timers if timer[0] is loop]:
            timer[1].cancel()
            self._timers.discard(timer)
        workers = [worker for owner, worker in self._workers if owner is loop]
        self._workers = [(owner, worker) for owner, worker in self._workers if owner is not loop]
        for worker in workers:
            worker.cancel()
        for worker in workers:
            with contextlib.suppress(asyncio.CancelledError):
                await worker


def _call_on(loop: asyncio.AbstractEventLoop, callback: Callable[[], object]) -> None:
    """Runs `callback` on `loop`: at once when it is the running one, else handed to its thread."""
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        callback()
    else:
        with contextlib.suppress(RuntimeError):  # that loop is closed: its app stopped
            loop.call_soon_threadsafe(callback)


def _matches(pattern: str, subject: str) -> bool:
    """NATS wildcards as svcgen's subjects use them: a trailing `>` matches one or more tokens."""
    if pattern.endswith(".>"):
        return subject.startswith(pattern[:-1]) and len(subject) > len(pattern) - 1
    return subject == pattern
