"""Events over NATS JetStream (docs/events.md): the `EventBroker` a service with events uses in production.

- A publisher's stream `SVC_EVENTS_<PUBLISHER>` holds `svc.event.<publisher>.>` with bounded age and bytes and a
  duplicate window (a `Nats-Msg-Id` seen within it is stored once); whichever side starts first creates it, and
  the publisher applies its retention to an existing one at start.
- Each (subscriber service, event) has one durable pull consumer, shared by the subscriber's replicas: JetStream
  hands each message to one of them, and again only after a `nak` (with the backoff delay) or when `ack_wait`
  passes without an answer (a replica that died). A handler still running tells JetStream so (`in_progress`) every
  half the consumer's `ack_wait`, so a slow handler is not handled twice. A changed `ackWait` or `max_in_flight`
  (the consumer's max_ack_pending) is applied to an existing consumer at start.
- Dead letters go to the stream `SVC_DEAD_LETTERS` (`svc.dead.>`); the original is acknowledged only once the dead
  letter is stored, so nothing is dropped unrecorded.

nats-py is an extra (`svcgen[nats]`): imported when a broker is used.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from .._eventnames import DEAD_LETTER_STREAM, DEAD_SUBJECT_ROOT, publisher_subjects, stream_name
from .._events import (
    ACK,
    DEAD,
    Delivered,
    EventsError,
    Retention,
    Subscription,
    Verdict,
    consumer_name,
    dead_letter_headers,
    dead_subject,
)
from .responder import ConnectionSource

if TYPE_CHECKING:
    from nats.aio.client import Client
    from nats.aio.msg import Msg
    from nats.js.client import JetStreamContext

logger = logging.getLogger("svcgen.events")

FETCH_BATCH: Final = 64
FETCH_WAIT: Final = 1.0
"""Seconds one pull waits for messages; also how soon a stopping consumer notices."""
MAX_IN_FLIGHT: Final = 64
"""Deliveries one replica handles at once (and the most it holds unacknowledged)."""
ACK_PENDING_PER_IN_FLIGHT: Final = 16
"""A durable consumer's max_ack_pending is this many times max_in_flight: room for that many replicas sharing it,
each with max_in_flight deliveries running."""
STOP_TIMEOUT: Final = 10.0
RECONNECT_POLL: Final = 0.05
"""Seconds between the looks a publish takes, while the connection is down, whether it is back."""
CONSUMER_CHECK: Final = 30.0
"""Seconds between the looks an idle subscription takes that its durable consumer is still on the server."""
DEAD_LETTER_RETENTION: Final = Retention(max_age=30 * 24 * 3600.0)
EVENT_RETENTION_SETTING: Final = "wiring.event_retention"
DEAD_LETTERS_SETTING: Final = "JetStreamBroker(dead_letters=...)"
NO_JETSTREAM: Final = "the NATS server has no JetStream (start nats-server with -js, or enable jetstream in its config)"


class JetStreamBroker:
    """Publishes and consumes events on one NATS connection (`connection`: an open nats-py client, or an async
    function giving the process's shared one; never closed here)."""

    def __init__(
        self,
        connection: Client | ConnectionSource,
        *,
        fetch_batch: int = FETCH_BATCH,
        max_in_flight: int = MAX_IN_FLIGHT,
        dead_letters: Retention = DEAD_LETTER_RETENTION,
    ) -> None:
        self._source = connection
        self._client: Client | None = None
        self._js: JetStreamContext | None = None
        self.fetch_batch = fetch_batch
        self.max_in_flight = max_in_flight
        self.dead_letters = dead_letters
        self.consumer_check = CONSUMER_CHECK
        self._loops: list[asyncio.Task[None]] = []
        self._running: set[asyncio.Task[None]] = set()
        self._subscriptions: list[Any] = []
        self._stopping = asyncio.Event()
        self._ensured: set[str] = set()
        self._applied: dict[str, Retention] = {}
        """The retention this broker applied to each stream: the dead letters' once, however many subscriptions."""

    async def jetstream(self) -> JetStreamContext:
        if self._js is None:
            source = self._source
            client = self._client = await source() if callable(source) else source
            self._js = client.jetstream()
        return self._js

    async def ensure_stream(self, publisher: str, retention: Retention) -> None:
        await self._ensure(stream_name(publisher), publisher_subjects(publisher), retention,
                           setting=EVENT_RETENTION_SETTING)  # fmt: skip

    async def _ensure(self, name: str, subjects: str, retention: Retention, *, setting: str | None = None) -> None:
        """Creates the stream `name` with `retention` when missing. The stream's owner (the publisher, whose wiring
        says how long its events are kept; every subscriber's broker for the dead letters) also applies `retention`,
        its `setting`, to an existing one; anyone else uses it as it is."""
        if name in self._ensured and (setting is None or self._applied.get(name) == retention):
            return
        from nats.js.errors import BadRequestError, NotFoundError

        js = await self.jetstream()
        try:
            try:
                info = await js.stream_info(name)
            except NotFoundError:
                try:
                    info = await js.add_stream(
                        name=name, subjects=[subjects], max_age=retention.max_age, max_bytes=retention.max_bytes,
                        duplicate_window=retention.duplicate_window,
                    )
                    logger.info("created the JetStream stream %s (%s)", name, subjects)
                except BadRequestError as refused:
                    try:
                        info = await js.stream_info(name)  # created meanwhile by another replica
                    except NotFoundError:
                        raise EventsError(f"JetStream stream {name} ({subjects}) cannot be created: "
                                          f"{_why(refused)}") from None  # fmt: skip
        except EventsError:
            raise
        except Exception as exc:
            raise EventsError(f"JetStream stream {name} cannot be used: {refusal(exc)}") from None
        found = list(info.config.subjects or [])
        if subjects not in found:
            # Made by hand or by something else: publishes to it would fail, consumers could not be made on it.
            raise EventsError(f"JetStream stream {name} exists with subjects {found}, not {subjects}; add {subjects} "
                              "to it, or delete it to have it created")  # fmt: skip
        _check_fixed(name, info.config)
        if setting is not None:
            await _retained(js, name, info.config, retention, setting)
            self._applied[name] = retention
        self._ensured.add(name)

    async def publish(self, publisher: str, subject: str, data: bytes, headers: Mapping[str, str],
                      timeout: float) -> bool:  # fmt: skip
        js = await self.jetstream()
        timeout = await self._connected(timeout)
        try:
            ack = await js.publish(subject, data, timeout=timeout, stream=stream_name(publisher),
                                   headers=dict(headers) or None)  # fmt: skip
        except Exception:
            self._ensured.discard(stream_name(publisher))  # a deleted stream is made again by the next start
            raise
        return bool(ack.duplicate)

    async def _connected(self, timeout: float) -> float:
        """What is left of `timeout` once the connection is up, waiting for a reconnect meanwhile (a blip is
        ridden out); EventsError when it is still down then. A message published while it is down would be buffered
        by nats-py and sent once reconnected, after its publisher was told `timeout`: stored, though said failed."""
        client = self._client
        if client is None or client.is_connected:
            return timeout
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not client.is_connected:
            if client.is_closed or loop.time() >= deadline:
                raise EventsError("the NATS connection is down (reconnecting); the event was not sent")
            await asyncio.sleep(RECONNECT_POLL)
        return max(deadline - loop.time(), RECONNECT_POLL)

    async def subscribe(
        self,
        subscriber: str,
        subscription: Subscription,
        retention: Retention,
        deliver: Callable[[Delivered], Awaitable[Verdict]],
    ) -> None:
        from nats.js.errors import NotFoundError

        await self._ensure(subscription.stream, publisher_subjects(subscription.publisher), retention)
        await self._ensure(DEAD_LETTER_STREAM, f"{DEAD_SUBJECT_ROOT}.>", self.dead_letters,
                           setting=DEAD_LETTERS_SETTING)  # fmt: skip
        js = await self.jetstream()
        durable = consumer_name(subscriber, subscription)
        try:
            try:
                info = await js.consumer_info(subscription.stream, durable)
            except NotFoundError:
                info = await self._add_consumer(durable, subscription)
            ack_wait = await _reconciled(js, info, durable, subscription, self.max_in_flight)
            pull = await js.pull_subscribe_bind(durable, stream=subscription.stream)
        except EventsError:
            raise
        except Exception as exc:
            raise EventsError(f"durable consumer {durable} of {subscription.subject} on {subscription.stream} cannot "
                              f"be used: {refusal(exc)}") from None  # fmt: skip
        self._subscriptions.append(pull)
        loop = asyncio.create_task(self._pull(pull, subscriber, subscription, retention, ack_wait, deliver),
                                   name=f"svcgen-events-{durable}")  # fmt: skip
        self._loops.append(loop)
        logger.info("%s handles %s from %s (durable consumer %s)", subscriber, subscription.subject,
                    subscription.stream, durable)  # fmt: skip

    async def _add_consumer(self, durable: str, subscription: Subscription) -> Any:
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

        js = await self.jetstream()
        config = ConsumerConfig(
            durable_name=durable, filter_subject=subscription.subject, ack_policy=AckPolicy.EXPLICIT,
            deliver_policy=DeliverPolicy.ALL, ack_wait=subscription.delivery.ack_wait,
            max_ack_pending=self.max_in_flight * ACK_PENDING_PER_IN_FLIGHT,
            # Unlimited here: the delivery rules dead-letter after max_deliver attempts; a cap here would drop
            # a message unrecorded whenever the dead-letter stream could not take it in time.
            max_deliver=-1,
        )  # fmt: skip
        return await js.add_consumer(subscription.stream, config)

    async def _still_there(self, durable: str, subscription: Subscription, retention: Retention) -> None:
        """Makes the durable consumer again when it is gone from the server (deleted by hand, or with its stream):
        a fetch from a missing consumer just finds nothing, so the subscriber would wait for ever, saying nothing."""
        from nats.js.errors import NotFoundError

        js = await self.jetstream()
        try:
            await js.consumer_info(subscription.stream, durable)
            return
        except NotFoundError:
            pass
        except Exception:
            return  # unreachable now: the fetches say so, and the next look tries again
        try:
            self._ensured.discard(subscription.stream)
            await self._ensure(subscription.stream, publisher_subjects(subscription.publisher), retention)
            await self._add_consumer(durable, subscription)
        except Exception as exc:
            logger.warning("durable consumer %s on %s is gone from the server and cannot be made again (%s); "
                           "nothing is handled until it is", durable, subscription.stream,
                           exc if isinstance(exc, EventsError) else refusal(exc))  # fmt: skip
            return
        logger.warning("durable consumer %s on %s was gone from the server (deleted); made again: every event its "
                       "stream keeps is delivered again", durable, subscription.stream)  # fmt: skip

    async def _pull(self, pull: Any, subscriber: str, subscription: Subscription, retention: Retention,
                    ack_wait: float, deliver: Callable[[Delivered], Awaitable[Verdict]]) -> None:  # fmt: skip
        import nats.errors

        slots = asyncio.Semaphore(self.max_in_flight)
        busy: set[asyncio.Task[None]] = set()
        failures = 0
        clock = asyncio.get_running_loop().time
        looked = clock()
        while not self._stopping.is_set():
            wanted = max(1, min(self.fetch_batch, self.max_in_flight - len(busy)))  # no more than can start now
            try:
                messages = await pull.fetch(wanted, timeout=FETCH_WAIT)
                failures = 0
            except (TimeoutError, nats.errors.TimeoutError):
                # Idle: now and then, make sure there is still a consumer to fetch from.
                if clock() - looked >= self.consumer_check and not self._stopping.is_set():
                    looked = clock()
                    await self._still_there(consumer_name(subscriber, subscription), subscription, retention)
                continue
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                # On a closed connection nats-py turns a cancellation into ConnectionClosedError: retrying would
                # never end (asyncio.run would hang on exit). A reconnecting one is not closed: that is retried.
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise asyncio.CancelledError from None
                if self._client is not None and self._client.is_closed:
                    logger.warning("%s is no longer consumed: its NATS connection is closed",
                                   subscription.subject)  # fmt: skip
                    return
                failures += 1
                if failures == 1 or failures % 100 == 0:
                    logger.warning("fetching %s failed (%s); retrying", subscription.subject,
                                   type(exc).__name__)  # fmt: skip
                await asyncio.sleep(min(0.1 * failures, 2.0))
                continue
            for msg in messages:
                await slots.acquire()
                task = asyncio.create_task(self._handle(msg, subscriber, subscription, ack_wait, deliver))
                self._running.add(task)
                busy.add(task)
                task.add_done_callback(self._running.discard)
                task.add_done_callback(busy.discard)
                task.add_done_callback(lambda _: slots.release())

    async def _handle(self, msg: Msg, subscriber: str, subscription: Subscription, ack_wait: float,
                      deliver: Callable[[Delivered], Awaitable[Verdict]]) -> None:  # fmt: skip
        try:
            meta = msg.metadata
            delivered = Delivered(
                msg.data, msg.headers or {}, meta.num_delivered or 1,
                meta.timestamp or datetime.now(UTC), msg.subject, meta.stream or subscription.stream,
                meta.sequence.stream if meta.sequence is not None else 0,
            )  # fmt: skip
        except Exception:
            delivered = Delivered(bytes(msg.data or b""), {}, 1, datetime.now(UTC), msg.subject, subscription.stream)
        keep_alive = _KeepAlive(msg, ack_wait / 2)  # the consumer's ack_wait: the one the server redelivers after
        try:
            verdict = await deliver(delivered)
        finally:
            keep_alive.cancel()
        try:
            if verdict.action == ACK:
                await msg.ack()
            elif verdict.action == DEAD:
                await self._dead_letter(msg, subscriber, subscription, delivered, verdict)
            else:
                await msg.nak(delay=verdict.delay)
        except Exception as exc:
            # Unanswered, JetStream delivers it again after ack_wait: late, never lost.
            logger.warning("answering a delivery of %s failed (%s)", msg.subject, type(exc).__name__)

    async def _dead_letter(self, msg: Msg, subscriber: str, subscription: Subscription, delivered: Delivered,
                           verdict: Verdict) -> None:  # fmt: skip
        js = await self.jetstream()
        headers = dead_letter_headers(subscriber, subscription, delivered, verdict)
        try:
            await js.publish(dead_subject(subscriber, subscription), delivered.data, timeout=5.0,
                             stream=DEAD_LETTER_STREAM, headers=headers)  # fmt: skip
        except Exception as exc:
            logger.error("the dead letter of %s could not be stored (%s); it is delivered again",
                         msg.subject, type(exc).__name__)  # fmt: skip
            await msg.nak(delay=subscription.delivery.backoff[-1])
            return
        logger.warning("%s dead-lettered for %s after %s attempt(s): %s", msg.subject, subscriber,
                       headers.get("Svc-Attempts"), verdict.reason)  # fmt: skip
        await msg.ack()

    async def close(self) -> None:
        """Stop fetching, let the deliveries running finish (their answers reach JetStream), then return."""
        self._stopping.set()
        loops, self._loops = self._loops, []
        if loops:
            await asyncio.wait(loops, timeout=FETCH_WAIT * 3)
            for loop in loops:
                loop.cancel()
        if self._running:
            _, late = await asyncio.wait(set(self._running), timeout=STOP_TIMEOUT)
            for task in late:
                task.cancel()
        for pull in self._subscriptions:
            with contextlib.suppress(Exception):
                await pull.unsubscribe()  # the durable consumer stays: the next start resumes it
        self._subscriptions = []


async def _reconciled(
    js: JetStreamContext, info: Any, durable: str, subscription: Subscription, max_in_flight: int
) -> float:
    """The ack_wait (seconds) of the durable consumer `info` describes, which the keep-alive must follow, once the
    manifest's `ackWait` and the broker's `max_in_flight` (its max_ack_pending) are applied to it: JetStream
    updates both in place (its position and pending deliveries kept), but for the ack_wait of a consumer with a
    backoff, which is the backoff's first step whatever is asked. EventsError when the consumer filters another
    subject: that cannot be changed in place (it is not this subscription's consumer)."""
    config = info.config
    filters = [config.filter_subject] if config.filter_subject else list(config.filter_subjects or [])
    if filters != [subscription.subject]:
        shown = ", ".join(filters) or "every subject"
        raise EventsError(f"durable consumer {durable} on {subscription.stream} exists for {shown}, not "
                          f"{subscription.subject}; delete it to have it created")  # fmt: skip
    wanted = subscription.delivery.ack_wait
    found = float(config.ack_wait or wanted)
    pending = max_in_flight * ACK_PENDING_PER_IN_FLIGHT
    found_pending = int(config.max_ack_pending or 0)
    changes: dict[str, Any] = {}
    if config.backoff:
        # JetStream gives a consumer with a backoff (made by hand: svcgen's have none) its first step as ack_wait,
        # whatever an update asks: a standing difference, never asked again, and harmless since the keep-alive
        # follows what the consumer has.
        if abs(found - wanted) > 0.001:
            logger.info("durable consumer %s on %s has a backoff, whose first step %gs is its ack_wait (JetStream's "
                        "rule), not the manifest's ackWait %gs; %gs is followed", durable, subscription.stream, found,
                        wanted, found)  # fmt: skip
    elif abs(found - wanted) > 0.001:
        changes["ack_wait"] = wanted
    if found_pending != pending:
        changes["max_ack_pending"] = pending
    if not changes:
        return found
    # The consumer's own config with only these fields changed: the same durable name with editable fields changed
    # is an update, and every other field stays as it is.
    try:
        updated = await js.add_consumer(subscription.stream, config.evolve(**changes))
    except Exception as exc:
        asked = []
        if "ack_wait" in changes:
            asked.append(f"the manifest's ackWait {wanted:g}s (it has {found:g}s)")
        if "max_ack_pending" in changes:
            asked.append(f"max_ack_pending {pending} for max_in_flight {max_in_flight} (it has {found_pending})")
        raise EventsError(f"durable consumer {durable} on {subscription.stream} cannot take {' and '.join(asked)}: "
                          f"{_why(exc)}") from None  # fmt: skip
    ack_wait = float(updated.config.ack_wait or wanted)
    if "ack_wait" in changes:
        if abs(ack_wait - wanted) > 0.001:  # the server took the update but not the ack_wait, for its own reason
            logger.warning("durable consumer %s on %s kept its ack_wait %gs when given the manifest's ackWait %gs; "
                           "%gs is followed", durable, subscription.stream, ack_wait, wanted, ack_wait)  # fmt: skip
        else:
            logger.info("updated the ack_wait of durable consumer %s on %s to the manifest's ackWait: %gs → %gs",
                        durable, subscription.stream, found, ack_wait)  # fmt: skip
    if "max_ack_pending" in changes:
        logger.info("updated the max_ack_pending of durable consumer %s on %s to the broker's max_in_flight %d × %d: "
                    "%d → %d", durable, subscription.stream, max_in_flight, ACK_PENDING_PER_IN_FLIGHT, found_pending,
                    int(updated.config.max_ack_pending or pending))  # fmt: skip
    return ack_wait


def _check_fixed(name: str, config: Any) -> None:
    """EventsError when the stream `name` differs from svcgen's in what JetStream cannot change in place: its
    storage (in memory, events are lost with the server) or its retention policy (a work queue allows one consumer
    per subject, interest drops what no consumer waits for)."""
    wanted = {"storage": "file", "retention policy": "limits"}
    found = {"storage": _text(config.storage) or "file", "retention policy": _text(config.retention) or "limits"}
    differs = [f"{what} {found[what]}, not {value}" for what, value in wanted.items() if found[what] != value]
    if differs:
        raise EventsError(f"JetStream stream {name} has {' and '.join(differs)}, which JetStream cannot change in "
                          f"place: delete it (`nats stream rm {name}`; its messages and consumers go with it) to have "
                          "it created")  # fmt: skip


def _text(setting: Any) -> str:
    """A stream setting as JetStream spells it: nats-py gives an enum or, for some servers' answers, its text."""
    return str(getattr(setting, "value", setting) or "")


async def _retained(js: JetStreamContext, name: str, config: Any, retention: Retention, setting: str) -> None:
    """Applies `retention` (the `setting` named in what is logged or raised) to the existing stream `name` whose
    config is `config`: JetStream updates these limits in place (what the stream holds is kept, past a lowered limit
    the oldest go)."""
    wanted = {"max_age": retention.max_age, "max_bytes": retention.max_bytes,
              "duplicate_window": retention.duplicate_window}  # fmt: skip
    found = {"max_age": float(config.max_age or 0), "max_bytes": int(config.max_bytes or 0),
             "duplicate_window": float(config.duplicate_window or 0)}  # fmt: skip
    changed = {field: value for field, value in wanted.items() if abs(found[field] - value) > 0.001}
    if not changed:
        return
    shown = ", ".join(f"{field} {_limit(field, found[field])} → {_limit(field, value)}"
                      for field, value in changed.items())  # fmt: skip
    try:
        await js.update_stream(config.evolve(**changed))  # the stream's own config, only these fields changed
    except Exception as exc:
        raise EventsError(f"JetStream stream {name} cannot take {setting} ({shown}): {_why(exc)}") from None
    logger.info("updated the JetStream stream %s to %s: %s", name, setting, shown)


def _limit(field: str, value: float) -> str:
    return f"{int(value)}" if field == "max_bytes" else f"{round(value, 3):.12g}s"


def refusal(exc: Exception) -> str:
    """Why a JetStream request failed, for a person. nats-py answers a request nobody serves on the JetStream API (a
    server without JetStream) with a ServiceUnavailableError and no description: that is said in words."""
    from nats.js.errors import ServiceUnavailableError

    if isinstance(exc, ServiceUnavailableError) and not exc.description:
        return NO_JETSTREAM
    return f"{type(exc).__name__}: {_why(exc)}"


def _why(exc: Exception) -> str:
    """The server's own words for a refused JetStream request (its `description`), else the exception's text."""
    return str(getattr(exc, "description", None) or exc or type(exc).__name__)


class _KeepAlive:
    """Tells JetStream every `every` seconds that the delivery is still being handled; a timer, not a task, so a
    handler that ends in time costs nothing more."""

    def __init__(self, msg: Msg, every: float) -> None:
        self._msg = msg
        self._every = every
        self._loop = asyncio.get_running_loop()
        self._timer: asyncio.TimerHandle | None = self._loop.call_later(every, self._fire)
        self._sending: asyncio.Task[None] | None = None

    def _fire(self) -> None:
        self._sending = self._loop.create_task(self._send())
        self._timer = self._loop.call_later(self._every, self._fire)

    async def _send(self) -> None:
        with contextlib.suppress(Exception):
            await self._msg.in_progress()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
