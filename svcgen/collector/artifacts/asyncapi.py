"""asyncapi.json: an AsyncAPI 3.0.0 export of the domain topics of the topic map (never `svc:*`).

One channel per (topic, version), addressed by the topic id, holding a request and a response message;
one `receive` operation per channel whose reply is the response message, since a topic is request/reply.
Names follow the operations document (docs/wire.md, Derived documents): components `<Name>[_<version
slug>]Request|Response`, channel and operation keys the camelCase topic with the same version slug, and names that
collide get the same `_2`, `_3` suffix after the whole name. Schemas are the topic map's, embedded unchanged (the
derivation's subset is also valid in the AsyncAPI default schema format).
"""

from __future__ import annotations

from typing import Any, Final

from ...runtime._collisions import collision_suffixes
from ...runtime._naming import camel_name, pascal_name, slug
from ..snapshot import Json, Snapshot
from .topics import TopicView, topic_views

ASYNCAPI_VERSION: Final = "3.0.0"
TITLE: Final = "svcgen mesh topics"
DOCUMENT_VERSION: Final = "1.0.0"
JSON_CONTENT_TYPE: Final = "application/json"


def build_asyncapi(snapshot: Snapshot) -> Json:
    views = [view for view in topic_views(snapshot) if not view.reserved]
    bases = [_base_names(view) for view in views]
    channels: Json = {}
    operations: Json = {}
    messages: Json = {}
    schemas: Json = {}
    for view, names, suffix in zip(views, bases, collision_suffixes(bases), strict=True):
        channel, request, response = (name + suffix for name in names)
        channels[channel] = {
            "address": view.topic,
            "title": _title(view),
            "messages": {
                request: _ref("components", "messages", request),
                response: _ref("components", "messages", response),
            },
        }
        operations[channel] = {
            "action": "receive",
            "channel": _ref("channels", channel),
            "summary": f"Invoke topic {_title(view)}",
            "messages": [_ref("channels", channel, "messages", request)],
            "reply": {
                "channel": _ref("channels", channel),
                "messages": [_ref("channels", channel, "messages", response)],
            },
        }
        messages[request] = _message(request)
        messages[response] = _message(response)
        schemas[request] = view.request_schema
        schemas[response] = view.response_schema
    return {
        "asyncapi": ASYNCAPI_VERSION,
        "info": {"title": TITLE, "version": DOCUMENT_VERSION},
        "defaultContentType": JSON_CONTENT_TYPE,
        "channels": channels,
        "operations": operations,
        "components": {"schemas": schemas, "messages": messages},
    }


def _base_names(view: TopicView) -> tuple[str, str, str]:
    """(channel and operation key, request component, response component); only `[A-Za-z0-9_]`, as
    AsyncAPI component keys require."""
    camel = camel_name(view.topic) or "topic"
    pascal = pascal_name(view.topic) or "Topic"
    if view.version:
        version = slug(view.version) or "version"
        camel, pascal = f"{camel}_{version}", f"{pascal}_{version}"
    return camel, f"{pascal}Request", f"{pascal}Response"


def _title(view: TopicView) -> str:
    return f"{view.topic} (version {view.version})" if view.version else view.topic


def _message(name: str) -> Json:
    return {"name": name, "contentType": JSON_CONTENT_TYPE, "payload": _ref("components", "schemas", name)}


def _ref(*parts: str) -> dict[str, Any]:
    # JSON Pointer escaping, so any key stays addressable.
    return {"$ref": "#/" + "/".join(part.replace("~", "~0").replace("/", "~1") for part in parts)}
