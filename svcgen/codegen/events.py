"""Generated events: `events.py` (one typed publish method per event), the subscriptions service.py binds, and the
subscriber's handler stubs `handlers/on_<topic slug>[_<version>].py` (docs/events.md).

Payload types are spelled like topic types (`bindings.type_text`), so mypy holds each handler and publish call to
the manifest's payload, and the runtime checks the handler's annotations again at start.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..manifest.model import DeliveryDef, Manifest
from ..manifest.typeexpr import TypeExpr
from ..runtime._asyncapi import build_asyncapi
from ..runtime._collisions import handler_slugs
from ..runtime._context import Context
from ..runtime._eventnames import event_handler_module
from ..runtime._events import EventSpec, Subscriptions
from ..runtime._jsontext import document_bytes
from ..runtime._registry import TopicKey
from ..runtime._result import Result
from .bindings import MODELS_MODULE, ServiceBindings, type_text
from .imports import Imports
from .typehints import annotation

STUB_WRAP_AT = 100


@dataclass(frozen=True)
class EventBinding:
    topic: str
    version: str
    payload: TypeExpr
    key: str | None
    summary: str | None
    method: str
    """The publish method in events.py."""

    @property
    def label(self) -> str:
        return f"{self.topic} (version {self.version})" if self.version else self.topic


@dataclass(frozen=True)
class SubscriptionBinding:
    topic: str
    version: str
    publisher: str
    payload: TypeExpr
    delivery: DeliveryDef
    summary: str | None
    module: str
    """The handler module under handlers/."""

    @property
    def label(self) -> str:
        return f"{self.topic} (version {self.version})" if self.version else self.topic


def event_bindings(manifest: Manifest) -> tuple[EventBinding, ...]:
    methods = handler_slugs(TopicKey(event.id, event.version) for event in manifest.events)
    return tuple(
        EventBinding(event.id, event.version, event.payload, event.key, event.summary,
                     methods[TopicKey(event.id, event.version)])
        for event in manifest.events
    )


def subscription_bindings(manifest: Manifest) -> tuple[SubscriptionBinding, ...]:
    return tuple(
        SubscriptionBinding(entry.id, entry.version, entry.publisher, entry.payload, entry.delivery, entry.summary,
                            event_handler_module(entry.id, entry.version))
        for entry in manifest.subscribes
    )


@dataclass(frozen=True)
class PublishRow:
    topic: str
    version: str
    payload: str
    key: str | None
    method: str
    label: str
    summary: str | None


@dataclass(frozen=True)
class SubscribeRow:
    topic: str
    version: str
    publisher: str
    payload: str
    module: str
    max_deliver: int
    backoff: tuple[float, ...]
    ack_wait: float

    @property
    def backoff_text(self) -> str:
        """The backoff as a Python tuple literal."""
        steps = ", ".join(repr(step) for step in self.backoff)
        return f"({steps},)" if len(self.backoff) == 1 else f"({steps})"


@dataclass(frozen=True)
class ServiceEvents:
    """service.py's part: the EVENTS it publishes and the subscriptions it binds."""

    published: tuple[PublishRow, ...]
    subscribed: tuple[SubscribeRow, ...]


def service_events(published: tuple[EventBinding, ...], subscribed: tuple[SubscriptionBinding, ...],
                   imports: Imports) -> ServiceEvents | None:  # fmt: skip
    """The rows service.py writes, adding what they need to its `imports`; None for a service without events."""
    if not published and not subscribed:
        return None
    if published:
        imports.name("svcgen.runtime", "EventSpec")
        imports.name(".events", "Events")
    if subscribed:
        imports.name("svcgen.runtime", "Subscriptions")
        imports.name("svcgen.runtime", "Delivery")
        imports.name("svcgen.runtime", "EventHandler")
    for entry in subscribed:
        imports.name(".handlers", entry.module)
    payloads = [event.payload for event in published] + [entry.payload for entry in subscribed]
    if any(payload.records() for payload in payloads):
        imports.name(".", MODELS_MODULE)
    return ServiceEvents(
        tuple(_publish_row(event, imports) for event in published),
        tuple(
            SubscribeRow(entry.topic, entry.version, entry.publisher, type_text(entry.payload, imports),
                         entry.module, entry.delivery.max_deliver, entry.delivery.backoff,
                         entry.delivery.ack_wait)
            for entry in subscribed
        ),
    )


def _publish_row(event: EventBinding, imports: Imports) -> PublishRow:
    return PublishRow(event.topic, event.version, type_text(event.payload, imports), event.key, event.method,
                      event.label, event.summary)  # fmt: skip


@dataclass(frozen=True)
class EventsView:
    imports: list[str]
    methods: tuple[PublishRow, ...]


def events_view(published: tuple[EventBinding, ...]) -> EventsView:
    imports = Imports()
    imports.name("__future__", "annotations")
    imports.name("collections.abc", "Mapping")
    imports.name("svcgen.runtime", "EventBus")
    imports.name("svcgen.runtime", "Result")
    if any(event.payload.records() for event in published):
        imports.name(".", MODELS_MODULE)
    methods = tuple(_publish_row(event, imports) for event in published)
    return EventsView(imports.lines(), methods)


@dataclass(frozen=True)
class EventStubView:
    topic: str
    label: str
    publisher: str
    summary: str | None
    imports: list[str]
    payload: str
    wrap: bool


def event_stub_view(entry: SubscriptionBinding) -> EventStubView:
    imports = Imports()
    imports.name("__future__", "annotations")
    imports.name("svcgen.runtime", "Context")
    imports.name("svcgen.runtime", "Result")
    records = entry.payload.records()
    prefix = MODELS_MODULE + "." if records & {"Context", "Result"} else ""
    if prefix:
        imports.name("..", MODELS_MODULE)
    else:
        for name in records:
            imports.name("..models", name)
    payload = annotation(entry.payload, imports, records=prefix)
    one_line = f"async def handle(event: {payload}, context: Context) -> Result[None]:"
    return EventStubView(entry.topic, entry.label, entry.publisher, entry.summary, imports.lines(), payload,
                         len(one_line) > STUB_WRAP_AT)  # fmt: skip


def asyncapi_bytes(bindings: ServiceBindings, resolve: Callable[[TypeExpr], Any]) -> bytes:
    """contracts/asyncapi.json: the runtime's own document over the same payload types service.py binds."""
    published = [EventSpec(event.topic, resolve(event.payload), event.version, event.key) for event in bindings.events]
    subscriptions = Subscriptions()
    for entry in bindings.subscriptions:
        subscriptions.add(entry.topic, _placeholder, publisher=entry.publisher, payload=resolve(entry.payload),
                          version=entry.version)  # fmt: skip
    document = build_asyncapi(bindings.service, published, subscriptions, title=bindings.title,
                              version=bindings.api_version)  # fmt: skip
    return document_bytes(document)


async def _placeholder(event: Any, context: Context) -> Result[None]:
    return Result.ok()
