"""Events: one-way messages a service publishes once and every subscribing service handles at least once.

The delivery rules live here, once, whatever carries the messages (JetStream in `_nats/events.py`, the in-memory
broker of `svcgen.testing`): a delivery runs the subscriber's handler through the service's own pipeline (so it is
traced, scoped and decoded like a topic), a success acknowledges, a failure or an exception asks for redelivery
after the next backoff step, and after `max_deliver` attempts, or at once for a message that cannot be decoded, the
message is a dead letter: kept in the dead-letter stream with why, and counted as an issue. A broker only carries
out the `Verdict`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeAlias, TypeVar
from urllib.parse import quote

import orjson

from . import _status as st
from ._codec import codec_for
from ._context import TRACEPARENT, Context
from ._eventnames import dead_letter_subject, durable_name, event_subject, stream_name
from ._jsonlimits import DEFAULT_JSON_LIMITS, JsonLimits
from ._pipeline import BindingFailure
from ._registry import Registration, Registry, TopicKey
from ._result import Result

if TYPE_CHECKING:
    from ._mesh.tracecontext import TraceContext
    from ._service import Service

logger = logging.getLogger("svcgen.events")

T = TypeVar("T")
EventHandler: TypeAlias = Callable[[T, Context], Awaitable[Result[None]] | Result[None]]
"""`EventHandler[T]`: what handles an event whose payload is `T`; a variable annotated with it makes a type checker
hold the handler to the manifest's payload type."""

TRANSPORT: Final = "event"
MSG_ID: Final = "Nats-Msg-Id"
DEFAULT_PUBLISH_TIMEOUT: Final = 5.0
DEFAULT_MAX_AGE: Final = 7 * 24 * 3600.0
DEFAULT_MAX_BYTES: Final = 1 << 30
DEFAULT_DUPLICATE_WINDOW: Final = 120.0
"""Seconds the stream remembers a message id: a republish of the same key within it is stored once."""
MAX_EVENT_BYTES: Final = 1 << 20
"""A delivered payload past this is a dead letter at once (the default of the HTTP body limit)."""
MAX_HEADERS: Final = 64
MAX_HEADER_BYTES: Final = 8192

# Dead-letter headers: what a person (and `svcgen events dead-letters`) needs to know about each one.
DL_SUBJECT: Final = "Svc-Original-Subject"
DL_STREAM: Final = "Svc-Original-Stream"
DL_ATTEMPTS: Final = "Svc-Attempts"
DL_STATUS: Final = "Svc-Last-Status"
DL_REASON: Final = "Svc-Reason"
DL_SUBSCRIBER: Final = "Svc-Subscriber"
DL_EVENT: Final = "Svc-Event"
DL_VERSION: Final = "Svc-Event-Version"
DEAD_LETTER_HEADERS: Final = (DL_SUBJECT, DL_STREAM, DL_ATTEMPTS, DL_STATUS, DL_REASON, DL_SUBSCRIBER, DL_EVENT,
                              DL_VERSION)  # fmt: skip
DEAD_LETTER: Final = "dead-letter"
"""The issue classification of a dead letter."""


class EventsError(Exception):
    """A broker that cannot be used (unreachable, refused the stream); the message is one line."""


@dataclass(frozen=True)
class Retention:
    """How long and how much an event stream keeps (wiring.py: `wiring.event_retention`); past either the
    oldest messages go first."""

    max_age: float = DEFAULT_MAX_AGE
    max_bytes: int = DEFAULT_MAX_BYTES
    duplicate_window: float = DEFAULT_DUPLICATE_WINDOW
    """The default is cut to `max_age` when that is shorter: JetStream refuses a window longer than the age."""

    def __post_init__(self) -> None:
        if self.duplicate_window == DEFAULT_DUPLICATE_WINDOW and 0 < self.max_age < self.duplicate_window:
            object.__setattr__(self, "duplicate_window", self.max_age)


@dataclass(frozen=True)
class Delivery:
    """A subscription's delivery rules (manifest `delivery`)."""

    max_deliver: int = 5
    backoff: tuple[float, ...] = (1.0, 10.0, 60.0)
    """Seconds before the redelivery after attempt 1, 2, ...; the last step repeats."""
    ack_wait: float = 30.0
    """Seconds a delivery may stay unacknowledged before the broker gives it to another replica."""

    def __post_init__(self) -> None:
        if self.max_deliver < 1 or not self.backoff or min(self.backoff) <= 0 or self.ack_wait <= 0:
            raise ValueError("max_deliver >= 1, a non-empty positive backoff and a positive ack_wait are required")

    def delay(self, attempt: int) -> float:
        return self.backoff[min(attempt, len(self.backoff)) - 1]


@dataclass(frozen=True, slots=True)
class DeliveryInfo:
    """`context.delivery` of a subscriber's handler: which attempt this is, and when the first one was."""

    attempt: int
    first_delivered: datetime


@dataclass(frozen=True)
class EventSpec:
    """An event a service publishes."""

    id: str
    payload_type: Any
    version: str = ""
    key: str | None = None
    """The wire name of the payload field whose value is the message id (deduplication)."""


@dataclass(frozen=True)
class Subscription:
    id: str
    version: str
    publisher: str
    registration: Registration
    delivery: Delivery

    @property
    def subject(self) -> str:
        return event_subject(self.publisher, self.id, self.version)

    @property
    def stream(self) -> str:
        return stream_name(self.publisher)

    @property
    def key(self) -> TopicKey:
        return self.registration.key


class Subscriptions:
    """The events a service handles, each bound to its handler; checked at registration like topic handlers
    (`HandlerBindingError` names the handler file and the expected types)."""

    def __init__(self) -> None:
        self._registry = Registry()
        self.entries: list[Subscription] = []

    def add(
        self,
        event: str,
        handler: EventHandler[Any],
        *,
        publisher: str,
        payload: Any = None,
        version: str = "",
        delivery: Delivery | None = None,
        source: str | None = None,
    ) -> Subscription:
        registration = self._registry.add(event, handler, version=version, request=payload, response=type(None),
                                          source=source)  # fmt: skip
        entry = Subscription(event, version, publisher, registration, delivery or Delivery())
        self.entries.append(entry)
        return entry

    def __iter__(self) -> Any:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a broker does with a delivery: `ack`, `retry` after `delay` seconds, or `dead` (dead-letter, then ack)."""

    action: str
    delay: float = 0.0
    status: str = st.OK
    reason: str = ""
    exception_type: str | None = None


ACK: Final = "ack"
RETRY: Final = "retry"
DEAD: Final = "dead"


@dataclass(frozen=True)
class Delivered:
    """One delivery as a broker hands it over."""

    data: bytes
    headers: Mapping[str, str]
    attempt: int
    first_delivered: datetime
    subject: str
    stream: str = ""
    sequence: int = 0


DeadLetterObserver: TypeAlias = Callable[[Subscription, Delivered, Verdict], None]


class Deliverer:
    """Runs deliveries of one service's subscriptions through its pipeline and judges them (the delivery rules)."""

    def __init__(
        self,
        service: Service,
        *,
        json_limits: JsonLimits = DEFAULT_JSON_LIMITS,
        max_bytes: int = MAX_EVENT_BYTES,
        on_dead_letter: Sequence[DeadLetterObserver] = (),
    ) -> None:
        self.service = service
        self.json_limits = json_limits
        self.max_bytes = max_bytes
        self.on_dead_letter = list(on_dead_letter)

    async def deliver(self, subscription: Subscription, delivered: Delivered) -> Verdict:
        """Never raises (but for a cancellation from outside): a fault of its own is a retry."""
        try:
            verdict = await self._judge(subscription, delivered)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # our own fault: never lose the message for it
            logger.error("delivering %s failed", subscription.key, exc_info=exc)
            verdict = self._after_failure(subscription, delivered, st.UNEXPECTED_ERROR, type(exc).__qualname__)
        if verdict.action == DEAD:
            for observer in self.on_dead_letter:
                try:
                    observer(subscription, delivered, verdict)
                except Exception:
                    logger.warning("a dead-letter observer failed", exc_info=True)
        return verdict

    async def _judge(self, subscription: Subscription, delivered: Delivered) -> Verdict:
        if len(delivered.data) > self.max_bytes:
            return Verdict(DEAD, status=st.BAD_REQUEST, reason=f"payload exceeds {self.max_bytes} bytes")
        if delivered.attempt > subscription.delivery.max_deliver:
            # Its last attempt ended without an answer (the process died): it has had every attempt it gets.
            return Verdict(DEAD, status=st.SERVICE_UNAVAILABLE, reason="attempts exhausted")
        context = Context(
            subscription.id,
            subscription.version,
            safe_headers(delivered.headers),
            self.service.dependencies.open_scope(),
            delivered.data,
            None,
            TRANSPORT,
            self.json_limits,
            subscription.registration,
        )
        context.delivery = DeliveryInfo(delivered.attempt, delivered.first_delivered)
        try:
            result = await self.service.pipeline.run(context)
        finally:
            if context.scope.holds_instances:
                await _close(context)
        if result.is_successful:
            return Verdict(ACK, status=result.status)
        exception_type = result.exception_type if isinstance(result, BindingFailure) else None
        if isinstance(result, BindingFailure) and result.status in (st.BAD_REQUEST, st.VALIDATION_ERROR):
            return Verdict(DEAD, status=result.status, reason=f"undecodable: {result.detail}"[:512])
        return self._after_failure(subscription, delivered, result.status, exception_type)

    def _after_failure(
        self, subscription: Subscription, delivered: Delivered, status: str, exception_type: str | None
    ) -> Verdict:
        delivery = subscription.delivery
        if delivered.attempt >= delivery.max_deliver:
            reason = f"failed {delivered.attempt} of {delivery.max_deliver} attempts"
            return Verdict(DEAD, status=status, reason=reason, exception_type=exception_type)
        return Verdict(RETRY, delivery.delay(delivered.attempt), status, exception_type=exception_type)


async def _close(context: Context) -> None:
    try:
        await context.scope.close()
    except Exception:
        logger.warning("closing the dependency scope of %s failed", context.topic, exc_info=True)


def safe_headers(headers: Mapping[str, str] | None) -> dict[str, str]:
    """A message's headers as a handler sees them: lower-cased text, bounded in count and size; anything else is
    left out, never a failure (a hostile header must not wedge a subscriber)."""
    kept: dict[str, str] = {}
    if not headers:
        return kept
    size = 0
    try:
        items = list(headers.items())
    except Exception:
        return kept
    for name, value in items[:MAX_HEADERS]:
        if not isinstance(name, str) or not isinstance(value, str):
            continue
        size += len(name) + len(value)
        if size > MAX_HEADER_BYTES:
            break
        kept[name.lower()] = value
    return kept


def dead_letter_headers(
    subscriber: str, subscription: Subscription, delivered: Delivered, verdict: Verdict
) -> dict[str, str]:
    """The dead letter's headers: the message's own (its traceparent ...), then why and from where."""
    headers = {name: value for name, value in safe_headers(delivered.headers).items() if name != MSG_ID.lower()}
    headers.update({
        DL_SUBJECT: delivered.subject,
        DL_STREAM: delivered.stream,
        DL_ATTEMPTS: str(min(delivered.attempt, subscription.delivery.max_deliver)),
        DL_STATUS: verdict.status,
        DL_REASON: verdict.reason or verdict.status,
        DL_SUBSCRIBER: subscriber,
        DL_EVENT: subscription.id,
        DL_VERSION: subscription.version,
    })  # fmt: skip
    # One dead letter per (message, subscriber), even when dead-lettering is retried after a crash.
    headers[MSG_ID] = f"dead:{subscriber}:{delivered.stream}:{delivered.sequence}" if delivered.sequence else ""
    if not headers[MSG_ID]:
        del headers[MSG_ID]
    return headers


def dead_subject(subscriber: str, subscription: Subscription) -> str:
    return dead_letter_subject(subscriber, subscription.id, subscription.version)


def consumer_name(subscriber: str, subscription: Subscription) -> str:
    return durable_name(subscriber, subscription.id, subscription.version)


class EventBroker(Protocol):
    """What carries events (JetStream, or the in-memory broker of svcgen.testing). `publish` returns once the
    message is stored (raising EventsError or TimeoutError otherwise); `subscribe` starts handing deliveries of a
    durable consumer to `deliver` and carries out each verdict; `close` stops it all."""

    async def ensure_stream(self, publisher: str, retention: Retention) -> None: ...

    async def publish(
        self, publisher: str, subject: str, data: bytes, headers: Mapping[str, str], timeout: float
    ) -> bool:
        """True when the stream took it as a duplicate of a message id it holds."""
        ...

    async def subscribe(
        self,
        subscriber: str,
        subscription: Subscription,
        retention: Retention,
        deliver: Callable[[Delivered], Awaitable[Verdict]],
    ) -> None: ...

    async def close(self) -> None: ...


class PublishTracer(Protocol):
    """What traces a publish as a span of its own (the mesh's `TraceMiddleware`)."""

    def open_span(self) -> tuple[TraceContext, int, float] | None: ...

    def close_span(
        self, span: tuple[TraceContext, int, float] | None, topic: str, version: str, transport: str,
        result: Result[Any],
    ) -> None: ...


@dataclass
class EventBus:
    """A service's events: it publishes `published` and handles `subscriptions`, over `broker`.

    `start` (in the app's lifespan) ensures the publisher's stream and the subscriptions' durable consumers;
    `publish` encodes a payload with its codec and answers `accepted` once the stream has it.
    """

    service_name: str
    published: Sequence[EventSpec]
    subscriptions: Subscriptions
    broker: EventBroker
    retention: Retention = field(default_factory=Retention)
    extra_headers: Callable[[], Mapping[str, str]] | None = None
    """Headers each publish carries (the generated code passes the current trace's `traceparent`)."""
    publish_timeout: float = DEFAULT_PUBLISH_TIMEOUT
    on_dead_letter: list[DeadLetterObserver] = field(default_factory=list)
    tracer: PublishTracer | None = None
    """With one, each publish is a span (a trace event, transport `event`, child of the current invocation) and
    its `traceparent` is what the message carries, so each delivery attempt is a child of the publish."""
    max_event_bytes: int = MAX_EVENT_BYTES
    """A delivered payload past this is a dead letter at once."""

    def __post_init__(self) -> None:
        self._specs = {(spec.id, spec.version): spec for spec in self.published}
        self._codecs = {key: codec_for(spec.payload_type) for key, spec in self._specs.items()}
        self.started = False

    async def start(self, service: Service, *, json_limits: JsonLimits = DEFAULT_JSON_LIMITS) -> None:
        if self.published:
            await self.broker.ensure_stream(self.service_name, self.retention)
        deliverer = Deliverer(service, json_limits=json_limits, max_bytes=self.max_event_bytes,
                              on_dead_letter=self.on_dead_letter)  # fmt: skip
        for subscription in self.subscriptions:

            def deliver(delivered: Delivered, subscription: Subscription = subscription) -> Awaitable[Verdict]:
                return deliverer.deliver(subscription, delivered)

            await self.broker.subscribe(self.service_name, subscription, self.retention, deliver)
        self.started = True
        logger.info("events of %s: %d published, %d subscribed", self.service_name, len(self.published),
                    len(self.subscriptions))  # fmt: skip

    async def stop(self) -> None:
        await self.broker.close()

    def asyncapi(self, *, title: str, version: str) -> dict[str, Any]:
        """The AsyncAPI 3.0.0 document of these events (contracts/asyncapi.json)."""
        from ._asyncapi import build_asyncapi

        return build_asyncapi(self.service_name, self.published, self.subscriptions, title=title, version=version)

    async def publish(
        self, event: str, payload: Any, *, version: str = "", headers: Mapping[str, str] | None = None
    ) -> Result[None]:
        """`accepted` once the stream stored it (or holds it already under the same key); `service-unavailable` or
        `timeout` otherwise, never a silent drop. A payload that does not fit its type is `validation-error`."""
        spec = self._specs.get((event, version))
        if spec is None:
            return Result.not_found(f"this service publishes no event {TopicKey(event, version)}")
        if self.tracer is None:
            return await self._publish(spec, event, version, payload, headers, None)
        span = self.tracer.open_span()
        result = await self._publish(spec, event, version, payload, headers, span)
        self.tracer.close_span(span, event, version, TRANSPORT, result)
        return result

    async def _publish(
        self, spec: EventSpec, event: str, version: str, payload: Any, headers: Mapping[str, str] | None,
        span: tuple[TraceContext, int, float] | None,
    ) -> Result[None]:
        try:
            value = self._codecs[(event, version)].encode(payload)
            data = orjson.dumps(value)
        except (TypeError, ValueError) as exc:
            return Result.validation_error(f"{TopicKey(event, version)}: the payload does not fit its type: {exc}")
        sent: dict[str, str] = {}
        if self.extra_headers is not None:
            sent.update(self.extra_headers())
        if span is not None:
            sent[TRACEPARENT] = span[0].traceparent  # the publish, not the handler, is the deliveries' parent
        sent.update(headers or {})
        if spec.key is not None and isinstance(value, dict) and value.get(spec.key) is not None:
            sent[MSG_ID] = message_id(event, version, value[spec.key])
        subject = event_subject(self.service_name, event, version)
        try:
            duplicate = await self.broker.publish(self.service_name, subject, data, sent, self.publish_timeout)
        except TimeoutError:
            return Result.timeout(f"the event stream did not acknowledge {TopicKey(event, version)} in time")
        except Exception as exc:
            reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            return Result.service_unavailable(f"the event stream did not take {TopicKey(event, version)} ({reason})")
        return Result.accepted(None, headers={"svc-duplicate": "true"} if duplicate else None)


def message_id(event: str, version: str, key: Any) -> str:
    """The `Nats-Msg-Id` of a keyed event: `<event>:<version>:<key>`, the key percent-encoded outside printable
    ASCII (and `%` itself). A header value is trimmed and its line breaks made spaces on the way, so keys that
    differ only there ("o-1" and "o-1 ") would share an id and the second be stored as a duplicate of the first."""
    text = key if isinstance(key, str) else orjson.dumps(key).decode()
    return f"{event}:{version}:{quote(text, safe=_KEY_AS_IS)}"


_KEY_AS_IS: Final = "".join(chr(code) for code in range(0x21, 0x7F) if chr(code) != "%")


def events_descriptor(published: Iterable[EventSpec], subscriptions: Iterable[Subscription]) -> dict[str, Any] | None:
    """The descriptor's `events`: what the service publishes and what it subscribes to (and from whom), each with
    its payload schema, in sorted order; None (the key omitted) for a service with no events."""
    from ._schema import schema_of

    publishes = sorted(
        ({"id": spec.id, "version": spec.version, "payloadSchema": schema_of(spec.payload_type)} for spec in published),
        key=lambda entry: (entry["id"], entry["version"]),
    )
    subscribes = sorted(
        (
            {"id": entry.id, "version": entry.version, "publisher": entry.publisher,
             "payloadSchema": entry.registration.request_schema}
            for entry in subscriptions
        ),
        key=lambda entry: (entry["publisher"], entry["id"], entry["version"]),
    )
    if not publishes and not subscribes:
        return None
    return {"publishes": publishes, "subscribes": subscribes}


def events_need_broker(service: str, published: Iterable[EventSpec], subscriptions: Subscriptions) -> str:
    """The one line a service with events and no broker refuses to start with."""
    what = []
    published = list(published)
    if published:
        what.append(f"publishes {len(published)} event(s)")
    if len(subscriptions):
        what.append(f"subscribes to {len(subscriptions)} event(s)")
    return (f"{service} {' and '.join(what)} but has no NATS server for them: set SVCGEN_NATS (or NATS_URL in "
            "wiring.py) to nats://host:port; tests use svcgen.testing's in-memory broker")  # fmt: skip
