"""Names of events on the wire (docs/events.md): streams, subjects, durable consumers.

One place for them, so the publisher, its subscribers, the dead-letter tools and the manifest agree.
"""

from __future__ import annotations

import re
from typing import Final

from ._naming import slug, topic_slug

EVENT_SUBJECT_ROOT: Final = "svc.event"
DEAD_SUBJECT_ROOT: Final = "svc.dead"
DEAD_LETTER_STREAM: Final = "SVC_DEAD_LETTERS"
STREAM_PREFIX: Final = "SVC_EVENTS_"

_NOT_NAME = re.compile(r"[^A-Za-z0-9]+")


def stream_name(publisher: str) -> str:
    """`order-desk` → `SVC_EVENTS_ORDER_DESK`: the stream every event of `publisher` is stored in."""
    return STREAM_PREFIX + _NOT_NAME.sub("_", publisher).upper()


def event_subject(publisher: str, topic: str, version: str = "") -> str:
    """`svc.event.<publisher>.<topic slug>[.<version slug>]`."""
    subject = f"{EVENT_SUBJECT_ROOT}.{publisher}.{slug(topic)}"
    return f"{subject}.{slug(version)}" if version else subject


def publisher_subjects(publisher: str) -> str:
    """The wildcard of every event subject of `publisher` (its stream's subjects)."""
    return f"{EVENT_SUBJECT_ROOT}.{publisher}.>"


def dead_letter_subject(subscriber: str, topic: str, version: str = "") -> str:
    """`svc.dead.<subscriber>.<topic slug>[.<version slug>]`."""
    subject = f"{DEAD_SUBJECT_ROOT}.{subscriber}.{slug(topic)}"
    return f"{subject}.{slug(version)}" if version else subject


def durable_name(subscriber: str, topic: str, version: str = "") -> str:
    """The durable consumer of (subscriber, event): one per pair, shared by the subscriber's replicas."""
    return f"{subscriber}__{topic_slug(topic, version)}"


def event_handler_module(topic: str, version: str = "") -> str:
    """`orders:placed` v1 → `on_orders_placed_v1`: the subscriber's handler module under handlers/."""
    return "on_" + topic_slug(topic, version)
