"""The collector's side of mesh feeds over JetStream: a durable pull consumer (`svc-collector`, shared by replicas)
that hands each message to the collector's invocation path and acknowledges it only once the store has committed."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Final

from ..runtime import _status as st
from ..runtime._envelope import EnvelopeError, parse_envelope
from ..runtime._invocation import Invocation, lowered
from ..runtime._logging import shown
from ..runtime._mesh.jetstream import (
    CONNECT_TIMEOUT,
    DEFAULT_DURABLE,
    FEED_SUBJECTS,
    Connect,
    MeshConnection,
    MeshStream,
    connect_nats,
    failure_reason,
    require_nats,
)
from ..runtime._service import Service

if TYPE_CHECKING:
    from nats.aio.msg import Msg
    from nats.js.client import JetStreamContext

logger = logging.getLogger("svcgen.collector.jetstream")

DEFAULT_MAX_DELIVERIES: Final = 100
"""Deliveries of one message the store could not take before it is given up (see FeedConsumer)."""


class FeedConsumer:
    """Pulls the mesh stream through the durable consumer `durable` and ingests each message as `service` (the
    collector service) ingests a posted envelope: acked after the service answered success (its store committed),
    naked for redelivery when it answered `service-unavailable` (the store cannot persist now), after `retry_delay`
    doubled on each delivery up to `max_retry_delay`, and terminated, counted in `malformed` and logged once, when
    it can never be taken (not an envelope, not a feed topic, a body the collector refuses). The delivery cap: a
    message delivered `max_deliveries` times and still not taken is given up, terminated, counted in `given_up` and
    logged with what it was, so no message is redelivered forever (with the defaults, after about 1.5 hours of a
    store that cannot persist)."""

    def __init__(
        self,
        url: str,
        service: Service,
        stream: MeshStream | None = None,
        *,
        durable: str = DEFAULT_DURABLE,
        batch: int = 100,
        fetch_timeout: float = 1.0,
        retry_delay: float = 1.0,
        max_retry_delay: float = 60.0,
        max_deliveries: int = DEFAULT_MAX_DELIVERIES,
        ack_wait: float = 30.0,
        consumer_check: float = 10.0,
        connect: Connect = connect_nats,
        connect_timeout: float = CONNECT_TIMEOUT,
    ) -> None:
        require_nats()
        self.url = url
        self.service = service
        self.stream = stream or MeshStream()
        self.durable = durable
        self.batch = batch
        self.fetch_timeout = fetch_timeout
        self.retry_delay = retry_delay
        self.max_retry_delay = max_retry_delay
        self.max_deliveries = max_deliveries
        self.ack_wait = ack_wait
        self.consumer_check = consumer_check
        """Seconds between checks, while the stream is idle, that the durable consumer still exists."""
        self._checked_at = 0.0
        self.ingested = 0
        """Messages taken and acknowledged, a redelivery again: JetStream delivers at least once (an ack the server
        lost at a restart), and the collector counts a feed once by its batch id (`duplicateBatches`)."""
        self.malformed = 0
        self.retried = 0
        """Messages given back for redelivery because the store could not take them."""
        self.given_up = 0
        """Messages terminated after `max_deliveries` deliveries the store could not take."""
        self._connection = MeshConnection(url, self.stream, connect, connect_timeout)
        self._subscription: JetStreamContext.PullSubscription | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._failing = False

    def start(self) -> None:
        if self._task is None:
            self._stopping = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._run(), name="svcgen-jetstream-feeds")

    async def stop(self) -> None:
        """Finish the message in hand (a fetch waits at most `fetch_timeout`), then close the connection."""
        task, self._task = self._task, None
        if task is not None:
            self._stopping.set()
            await asyncio.wait([task], timeout=self.fetch_timeout + 5)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._subscription = None
        await self._connection.close()

    async def pull(self) -> int:
        """Fetch and handle one batch (at most `batch` messages, waiting up to `fetch_timeout`); how many came."""
        from nats.errors import TimeoutError as NatsTimeout

        if self._subscription is None:
            self._subscription = await self._subscribe()
        try:
            messages = await self._subscription.fetch(self.batch, timeout=self.fetch_timeout)
        except (NatsTimeout, TimeoutError):  # nats-py raises either when nothing came within the timeout
            if not self._connection.connected:
                # ... and also while it reconnects a connection lost mid-run: a failure `_run` says once.
                self._subscription = None
                raise ConnectionError("the connection to the NATS server was lost") from None
            await self._check_consumer()
            return 0
        except Exception:
            self._subscription = None
            raise
        for message in messages:
            await self.handle(message)
        return len(messages)

    async def _check_consumer(self) -> None:
        """Every `consumer_check` seconds of empty fetches: the durable consumer still exists. A fetch from one that
        was deleted (with its stream, which a reporter then makes again) only times out, as an idle one does; a
        failure here makes `_run` say so once and subscribe again, which makes the consumer again."""
        from nats.js.errors import NotFoundError

        now = asyncio.get_running_loop().time()
        if now - self._checked_at < self.consumer_check:
            return
        self._checked_at = now
        js = await self._connection.jetstream()
        try:
            await js.consumer_info(self.stream.name, self.durable)
        except NotFoundError:
            self._subscription = None
            raise ConnectionError(f"the durable consumer {self.durable} of {self.stream.name} is gone") from None

    async def handle(self, message: Msg) -> None:
        try:
            envelope = parse_envelope(message.data, self.service.json_limits)
        except EnvelopeError as exc:
            await self._reject(message, str(exc))
            return
        if envelope.topic not in FEED_SUBJECTS:
            await self._reject(message, f"{envelope.topic!r} is not a mesh feed")
            return
        invocation = Invocation(envelope.topic, lowered(envelope.headers), envelope.body,
                                json_limits=self.service.json_limits)  # fmt: skip
        outcome = await self.service.invoke(invocation)
        if outcome.result.is_successful:
            await message.ack()
            self.ingested += 1
        elif outcome.result.status == st.SERVICE_UNAVAILABLE:
            delivered = _deliveries(message)
            if delivered >= self.max_deliveries:
                await self._give_up(message, delivered, f"{envelope.topic}: {outcome.result.detail}")
                return
            self.retried += 1
            await message.nak(delay=min(self.retry_delay * 2 ** min(delivered - 1, 32), self.max_retry_delay))
        else:
            await self._reject(message, f"{envelope.topic}: {outcome.result.status} ({outcome.result.detail})")

    async def _reject(self, message: Msg, why: str) -> None:
        # Terminated, never redelivered: a message nothing can take must not hold the stream up.
        self.malformed += 1
        logger.warning("mesh feed message %s on %s cannot be taken and is dropped (%d so far): %s",
                       _sequence(message), message.subject, self.malformed, why[:300])  # fmt: skip
        await message.term()

    async def _give_up(self, message: Msg, delivered: int, why: str) -> None:
        self.given_up += 1
        batch = (message.headers or {}).get("Nats-Msg-Id", "none")  # a feed's batchId (JetStreamSender)
        logger.warning("mesh feed message %s on %s (batchId %s, %d bytes) given up after %d deliveries the store "
                       "could not take (%d so far); terminated: %s", _sequence(message), message.subject, batch[:100],
                       len(message.data), delivered, self.given_up, why[:300])  # fmt: skip
        await message.term()

    async def _subscribe(self) -> JetStreamContext.PullSubscription:
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

        js = await self._connection.jetstream()
        config = ConsumerConfig(durable_name=self.durable, ack_policy=AckPolicy.EXPLICIT,
                                deliver_policy=DeliverPolicy.ALL, ack_wait=self.ack_wait, max_deliver=-1)  # fmt: skip
        return await js.pull_subscribe(self.stream.subjects, durable=self.durable, stream=self.stream.name,
                                       config=config)  # fmt: skip

    async def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                await self.pull()
                if self._failing:
                    logger.warning("mesh feeds: pulling %s from %s again", self.stream.name, shown(self.url))
                    self._failing = False
            except Exception as exc:
                self._subscription = None
                await self._connection.close()
                if not self._failing:  # once per outage
                    logger.warning("mesh feeds: cannot pull %s from %s (%s); retrying every %g s", self.stream.name,
                                   shown(self.url), failure_reason(exc), self.retry_delay)  # fmt: skip
                    self._failing = True
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), self.retry_delay)


def _deliveries(message: Msg) -> int:
    try:
        return int(message.metadata.num_delivered)
    except Exception:
        return 1


def _sequence(message: Msg) -> str:
    try:
        return str(message.metadata.sequence.stream)
    except Exception:
        return "?"
