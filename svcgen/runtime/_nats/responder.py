"""`NatsBinding`: a `Service` served over NATS request/reply, beside its HTTP app, in the same process and loop.

Subjects (see `subjects`), both subscribed in the queue group `<service>` so replicas share the requests:

- `svc.invoke.<service>`: the message envelope in, the response envelope out, as `POST {prefix}/invoke`
  (reserved topics included). NATS headers of the message are laid under the envelope's own headers.
- `svc.topic.<service>.<topic>[.<version>]`: the payload in, NATS headers as the request headers (`traceparent`,
  `svc-version`, ...), the response envelope out; the trace event's transport is `nats`.

Every message with a reply subject gets a response envelope. What HTTP answers with a transport-level error (a
malformed envelope, a message over the size or header limit, a binding fault) is an envelope whose statusCode is
the same failure status, with the same detail. A message without a reply subject is dropped and counted: nobody
could read its answer. Invocations run concurrently up to `max_in_flight`; past that the subscription's own bounded
queue holds the rest. One topic runs at most `topic_slots` of them: past that its messages are answered
`too-many-requests` at once, so a slow topic cannot take every slot and stall the others. A message whose
requester's deadline (the `svc-deadline` header, which `NatsSender` sets) has passed when it is taken is dropped,
counted, and never run: nobody waits for its answer. `stop` stops taking messages: those still queued are answered
`service-unavailable` without running, the running ones get what is left of `stop_timeout`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Final, TypeAlias

import orjson

from .. import _status as st
from .._deadline import DEADLINE_HEADER, Clock, caller_deadline, deadline_header
from .._envelope import EnvelopeError, parse_envelope, response_envelope_bytes
from .._http.limits import LimitExceeded, Limits, check_headers
from .._invocation import NO_HEADERS, Invocation, lowered
from .._pipeline import cancelled_from_outside
from .._result import Outcome, Result
from .._service import Service
from .subjects import invoke_subject, topic_of, topic_prefix

if TYPE_CHECKING:
    from nats.aio.client import Client
    from nats.aio.msg import Msg
    from nats.aio.subscription import Subscription

logger = logging.getLogger("svcgen.nats")

TRANSPORT: Final = "nats"
DEFAULT_MAX_IN_FLIGHT: Final = 256
"""Invocations one binding runs at once."""
DEFAULT_TOPIC_SLOTS: Final = 64
"""Invocations of one topic one binding runs at once."""
PENDING_MESSAGES: Final = 10_000
PENDING_BYTES: Final = 64 * 1024 * 1024
"""The subscription's queue of messages not yet taken, in messages and bytes; past either the NATS client drops
messages (their requesters time out) and logs a slow-consumer error."""
STOP_TIMEOUT: Final = 10.0
"""Seconds `stop` waits for the invocations still running."""
LOG_EVERY: Final = 1000

ConnectionSource: TypeAlias = Callable[[], Awaitable["Client"]]


async def invoke_topic(
    service: Service, topic: str, version: str | None, headers: Mapping[str, str], body: bytes, limits: Limits
) -> Outcome:
    """The binding's one call of `Service.invoke`."""
    carried = lowered(headers)
    invocation = Invocation(topic, carried, body, path_version=version, transport=TRANSPORT,
                            json_limits=limits.json, credentials=carried)  # fmt: skip
    return await service.invoke(invocation)


def _envelope_topic(data: bytes) -> str:
    """The topic an envelope names, for its slots; "" when it names none (the invocation then fails at once)."""
    try:
        topic = orjson.loads(data).get("topic")
    except (orjson.JSONDecodeError, AttributeError):
        return ""
    return topic[:256] if isinstance(topic, str) else ""


def failure_envelope(status: str, detail: str) -> bytes:
    failure = Result.of(status, detail=detail)
    return response_envelope_bytes(Outcome(failure, orjson.dumps(failure.failure_body())))


class NatsBinding:
    """Serves `service` on NATS. `connection`: an open nats-py connection, or an async function returning one
    (the process's shared connection); never closed here. `limits`: the HTTP app's, so both faces refuse the same
    input (the body limit holds for payload and headers together)."""

    def __init__(
        self,
        service: Service,
        connection: Client | ConnectionSource,
        *,
        limits: Limits | None = None,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        topic_slots: int = DEFAULT_TOPIC_SLOTS,
        stop_timeout: float = STOP_TIMEOUT,
        clock: Clock = time.monotonic,
    ) -> None:
        self.service = service
        self.limits = limits or Limits()
        self.invoke_subject = invoke_subject(service.identity.service)
        self.topic_prefix = topic_prefix(service.identity.service)
        self.queue = service.identity.service
        self.stop_timeout = stop_timeout
        self.unanswerable = 0
        """Messages dropped because they had no reply subject."""
        self.expired = 0
        """Messages dropped unrun because their requester's deadline had passed."""
        self.refused = 0
        """Messages answered `too-many-requests` (their topic's slots full) or, while stopping, unrun."""
        self.topic_slots = topic_slots
        self.clock = clock
        self.reply_errors = 0
        self._source = connection
        self._connection: Client | None = None
        self._slots = asyncio.Semaphore(max_in_flight)
        self._running: set[asyncio.Task[None]] = set()
        self._per_topic: dict[str, int] = {}
        self._stopping = False
        self._subscriptions: list[Subscription] = []

    async def start(self) -> None:
        source = self._source
        connection = self._connection = await source() if callable(source) else source
        self._subscriptions = [
            await connection.subscribe(
                subject, queue=self.queue, cb=callback, pending_msgs_limit=PENDING_MESSAGES,
                pending_bytes_limit=PENDING_BYTES,
            )
            for subject, callback in (
                (self.invoke_subject, self._on_envelope),
                (f"{self.topic_prefix}.>", self._on_topic),
            )
        ]
        await connection.flush()
        logger.info("serving %s over NATS on %s and %s.>", self.queue, self.invoke_subject, self.topic_prefix)

    async def stop(self) -> None:
        """Stop taking messages (the queued ones are answered `service-unavailable`, unrun), give the running ones
        what is left of `stop_timeout`, cancel the rest, then return; the connection stays open."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.stop_timeout
        self._stopping = True
        subscriptions, self._subscriptions = self._subscriptions, []
        for subscription in subscriptions:
            try:
                drained = subscription.drain()  # type: ignore[no-untyped-call]  # nats-py leaves it unannotated
                await asyncio.wait_for(drained, timeout=max(0.0, deadline - loop.time()))
            except Exception as error:
                logger.warning("NATS: unsubscribing failed (%s)", type(error).__name__)
        if self._running:
            _, late = await asyncio.wait(set(self._running), timeout=max(0.0, deadline - loop.time()))
            for task in late:
                task.cancel()

    async def _on_envelope(self, msg: Msg) -> None:
        await self._take(msg, self._answer_envelope, _envelope_topic(msg.data))

    async def _on_topic(self, msg: Msg) -> None:
        called = topic_of(msg.subject, self.topic_prefix)
        await self._take(msg, self._answer_topic, called[0] if called is not None else "")

    async def _take(self, msg: Msg, answer: Callable[[Msg], Awaitable[bytes]], topic: str) -> None:
        """The subscription's callback: runs the answer as its own task, so one slow handler holds up no other;
        never waits on a topic's slots, so one slow topic holds up no other topic."""
        if not msg.reply:
            self.unanswerable += 1
            if (self.unanswerable - 1) % LOG_EVERY == 0:
                logger.warning("NATS: %d message(s) without a reply subject dropped", self.unanswerable)
            return
        if msg.headers:
            # NATS header names keep their case on the wire; everything here after reads them lower-cased
            # (`Svc-Deadline` is `svc-deadline`), as HTTP does: one rule, in one place.
            msg.headers = {name.lower(): value for name, value in msg.headers.items()}
        # `svc-deadline` is what the requester still waits, from now: fixed here, so waiting for a slot counts.
        deadline = caller_deadline(msg.headers or NO_HEADERS, self.clock())
        if self._expired(deadline):
            return
        if self._stopping:
            await self._refuse_stopping(msg)
            return
        running = self._per_topic.get(topic, 0)
        if running >= self.topic_slots:
            self.refused += 1
            detail = f"{running} invocations of this topic are running here already; try again later"
            await self._publish(msg.reply, failure_envelope(st.TOO_MANY_REQUESTS, detail))
            return
        await self._slots.acquire()
        if self._stopping:  # it waited for a slot while `stop` began
            self._slots.release()
            await self._refuse_stopping(msg)
            return
        self._per_topic[topic] = self._per_topic.get(topic, 0) + 1
        task = asyncio.create_task(self._reply(msg, answer, deadline))
        self._running.add(task)
        task.add_done_callback(lambda done: self._finished(done, topic))

    async def _refuse_stopping(self, msg: Msg) -> None:
        self.refused += 1
        detail = "the service is stopping; send it again (another replica may take it)"
        await self._publish(msg.reply, failure_envelope(st.SERVICE_UNAVAILABLE, detail))

    def _expired(self, deadline: float | None) -> bool:
        """Whether the requester's deadline has passed (then the message is dropped: nobody reads its answer)."""
        passed = deadline is not None and deadline <= self.clock()
        if passed:
            self.expired += 1
            if (self.expired - 1) % LOG_EVERY == 0:
                logger.warning("NATS: %d message(s) past their requester's deadline dropped unrun", self.expired)
        return passed

    def _finished(self, task: asyncio.Task[None], topic: str) -> None:
        self._running.discard(task)
        self._slots.release()
        left = self._per_topic.pop(topic, 1) - 1
        if left:
            self._per_topic[topic] = left

    async def _reply(self, msg: Msg, answer: Callable[[Msg], Awaitable[bytes]], deadline: float | None) -> None:
        if self._expired(deadline):  # it may have waited for a slot past its deadline
            return
        if deadline is not None and msg.headers:
            # What is left now: the handler's deadline does not restart after the wait for a slot.
            msg.headers[DEADLINE_HEADER] = deadline_header(deadline - self.clock())
        try:
            reply = await answer(msg)
        except LimitExceeded as exc:
            reply = failure_envelope(st.BAD_REQUEST, exc.detail)
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError) and cancelled_from_outside():
                raise
            # A binding or middleware bug must never take the host down; the request gets a clean failure.
            logger.error("unexpected error serving NATS subject %s", msg.subject, exc_info=exc)
            reply = failure_envelope(st.UNEXPECTED_ERROR, "the server failed to handle the request")
        await self._publish(msg.reply, reply)

    async def _publish(self, subject: str, reply: bytes) -> None:
        connection = self._connection
        if connection is None:  # stopped before it started: nothing to answer on
            return
        try:
            limit = connection.max_payload
            if len(reply) > limit:
                detail = f"the response exceeds the NATS server's limit of {limit} bytes"
                reply = failure_envelope(st.UNEXPECTED_ERROR, detail)
            await connection.publish(subject, reply)
        except Exception as error:
            self.reply_errors += 1
            if (self.reply_errors - 1) % LOG_EVERY == 0:
                failed = type(error).__name__
                logger.warning("NATS: a reply could not be sent (%s); %d so far", failed, self.reply_errors)

    def _headers(self, msg: Msg) -> dict[str, str]:
        """The message's headers (lower-cased by `_take`), after the size and header-count limits."""
        headers = msg.headers or {}
        size = len(msg.data) + sum(len(name) + len(value) for name, value in headers.items())
        if size > self.limits.max_body_bytes:
            raise self.limits.body_too_large()
        check_headers({"headers": headers}, self.limits)
        return dict(headers)

    async def _answer_topic(self, msg: Msg) -> bytes:
        headers = self._headers(msg)
        called = topic_of(msg.subject, self.topic_prefix)
        if called is None:
            return failure_envelope(st.NOT_FOUND, f"no topic for subject {msg.subject[:256]}")
        topic, version = called
        outcome = await invoke_topic(self.service, topic, version, headers, msg.data, self.limits)
        return response_envelope_bytes(outcome)

    async def _answer_envelope(self, msg: Msg) -> bytes:
        headers = self._headers(msg)
        try:
            if not headers:
                return await self.service.invoke_envelope(msg.data, json_limits=self.limits.json)
            envelope = parse_envelope(msg.data, self.limits.json)
            merged = {**headers, **{name.lower(): value for name, value in envelope.headers.items()}}
            value = {"topic": envelope.topic, "headers": merged, "body": envelope.body}
            # Credentials are the message's own NATS headers; the envelope's inner headers never authenticate.
            return await self.service.invoke_envelope(value, json_limits=self.limits.json, credentials=headers)
        except EnvelopeError as exc:
            return failure_envelope(st.BAD_REQUEST, str(exc))
