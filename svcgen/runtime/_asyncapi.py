"""asyncapi.json of a service: its events as AsyncAPI 3.0.0 (contracts/asyncapi.json, `GET {prefix}/asyncapi.json`).

One channel per event (topic, version), addressed by its subject `svc.event.<publisher>.<topic slug>[.<version>]`,
with one message whose payload schema is the event's, derived exactly as every other document derives it; a `send`
operation for each event the service publishes and a `receive` operation for each it subscribes to. A keyed event's
message names its key as `correlationId`. Names follow the operations document: channel keys the camelCase topic
(with `_<version slug>`), messages `<PascalTopic>[_<version slug>]Event`, operations `publish<Pascal>` and
`receive<Pascal>`; names that collide take `_2`, `_3` after the whole name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from ._collisions import collision_suffixes
from ._eventnames import event_subject
from ._events import EventSpec, Subscriptions
from ._naming import camel_name, pascal_name, slug
from ._schema import schema_of

ASYNCAPI_VERSION: Final = "3.0.0"
JSON_CONTENT_TYPE: Final = "application/json"


def build_asyncapi(
    service: str,
    published: Sequence[EventSpec],
    subscriptions: Subscriptions,
    *,
    title: str,
    version: str,
) -> dict[str, Any]:
    # Each channel once: a service may subscribe to an event it publishes itself.
    entries: dict[tuple[str, str, str], dict[str, Any]] = {}
    for spec in published:
        entry = entries.setdefault((service, spec.id, spec.version), {"payload": spec.payload_type, "key": spec.key})
        entry["send"] = True
    for subscription in subscriptions:
        key = (subscription.publisher, subscription.id, subscription.version)
        entry = entries.setdefault(key, {"payload": subscription.registration.request_type, "key": None})
        entry["receive"] = True
    ordered = sorted(entries.items(), key=lambda item: (item[0][1], item[0][2], item[0][0]))
    bases = [_base_names(topic, event_version) for (_, topic, event_version), _ in ordered]
    channels: dict[str, Any] = {}
    operations: dict[str, Any] = {}
    messages: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    for ((publisher, topic, event_version), entry), names, suffix in zip(
        ordered, bases, collision_suffixes(bases), strict=True
    ):
        channel, message, pascal = (name + suffix for name in names)
        label = f"{topic} (version {event_version})" if event_version else topic
        channels[channel] = {
            "address": event_subject(publisher, topic, event_version),
            "title": label,
            "description": f"Published by {publisher}.",
            "messages": {message: _ref("components", "messages", message)},
        }
        for action, verb, wanted in (("send", "publish", "send"), ("receive", "receive", "receive")):
            if entry.get(wanted):
                operations[f"{verb}{pascal}"] = {
                    "action": action,
                    "channel": _ref("channels", channel),
                    "summary": f"{'Publish' if action == 'send' else 'Handle'} event {label}",
                    "messages": [_ref("channels", channel, "messages", message)],
                }
        messages[message] = {"name": message, "contentType": JSON_CONTENT_TYPE,
                             "payload": _ref("components", "schemas", message)}  # fmt: skip
        if entry["key"]:
            messages[message]["correlationId"] = {"location": f"$message.payload#/{entry['key']}"}
        schemas[message] = schema_of(entry["payload"])
    return {
        "asyncapi": ASYNCAPI_VERSION,
        "info": {"title": title, "version": version},
        "defaultContentType": JSON_CONTENT_TYPE,
        "channels": channels,
        "operations": operations,
        "components": {"schemas": schemas, "messages": messages},
    }


def _base_names(topic: str, version: str) -> tuple[str, str, str]:
    """(channel key, message and schema component, Pascal name for operations); only `[A-Za-z0-9_]`."""
    camel = camel_name(topic) or "event"
    pascal = pascal_name(topic) or "Event"
    if version:
        tail = slug(version) or "version"
        camel, pascal = f"{camel}_{tail}", f"{pascal}_{tail}"
    return camel, f"{pascal}Event", pascal


def _ref(*parts: str) -> dict[str, Any]:
    return {"$ref": "#/" + "/".join(part.replace("~", "~0").replace("/", "~1") for part in parts)}
