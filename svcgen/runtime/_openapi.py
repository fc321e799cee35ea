"""The operations description: an OpenAPI 3.1.0 document derived from the registry, byte-stable.

One POST operation per registered (topic, version). Derived names (docs/wire.md, Derived documents): `<Name>` is the
PascalCase topic, versioned topics use `<Name>_<version slug>` for components and `<camel>_<version>` (raw version,
as in the spec's `ordersPlace_v2`) for the operation id; collisions follow `collisions.collision_suffixes`.

Path escaping: the topic and version go into the path raw, except characters that are not RFC 3986 path
characters (`/`, `{`, `}`, `%`, `?`, `#`, spaces, non-ASCII, ...), which are percent-encoded so a topic can
never add a segment or read as a path template. Usual ids (`orders:place`, `stock-a:b`) stay raw.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote

from ._collisions import collision_suffixes
from ._naming import camel_name, pascal_name, slug
from ._registry import Registry, TopicKey
from ._schema import JsonSchema
from ._status import FAILURE_CODES, OK
from ._topics import DEFAULT_PREFIX, normalize_prefix

OPENAPI_VERSION: Final = "3.1.0"
DEFAULT_TITLE: Final = "Svc service"
DEFAULT_VERSION: Final = "1.0.0"
ERROR_SCHEMA_NAME: Final = "SvcError"
JSON_MEDIA_TYPE: Final = "application/json"
COMPONENT_REF: Final = "#/components/schemas/"
# RFC 3986 pchar minus percent-encodings: kept raw in a path segment.
PATH_SAFE: Final = "!$&'()*+,;=:@-._~"


def _failure_statuses_by_code() -> tuple[tuple[str, str], ...]:
    by_code: dict[int, str] = {}
    for status, code in FAILURE_CODES.items():
        if code in by_code:
            # Responses are keyed by code: two failure statuses on one code would silently lose one.
            raise RuntimeError(f"failure statuses {by_code[code]!r} and {status!r} share HTTP code {code}")
        by_code[code] = status
    return tuple((str(code), by_code[code]) for code in sorted(by_code))


_FAILURES: Final = _failure_statuses_by_code()
"""(HTTP code as string, status name) of every failure status, in code order."""


@dataclass(frozen=True, slots=True)
class Operation:
    """The derived names of one (topic, version): how a caller correlates a topic with its operation."""

    key: TopicKey
    path: str
    operation_id: str
    request_component: str
    response_component: str


OperationIndex = dict[TopicKey, Operation]
"""Operations by (topic, version), in sorted (id, version) order."""


def error_schema() -> JsonSchema:
    return {
        "type": "object",
        "properties": {"status": {"type": "string"}, "detail": {"type": "string"}},
        "required": ["status", "detail"],
    }


def invoke_path(key: TopicKey, prefix: str = DEFAULT_PREFIX) -> str:
    """`{prefix}/invoke/<topic>` or `{prefix}/invoke/<topic>/<version>`."""
    path = f"{normalize_prefix(prefix)}/invoke/{quote(key.id, safe=PATH_SAFE)}"
    return f"{path}/{quote(key.version, safe=PATH_SAFE)}" if key.version else path


def operation_index(
    keys: Iterable[TopicKey],
    *,
    prefix: str = DEFAULT_PREFIX,
    paths: Mapping[TopicKey, str] | None = None,
) -> OperationIndex:
    """Derived names for each (topic, version); `paths` overrides the path of the topics it names."""
    ordered = sorted(keys, key=_walk_order)
    if len(set(ordered)) != len(ordered):
        raise ValueError("operation index: duplicate (topic, version) keys")
    overrides = dict(paths or {})
    unknown = sorted(set(overrides) - set(ordered))
    if unknown:
        raise ValueError(f"path override for unregistered topic(s): {', '.join(map(str, unknown))}")
    prefix = normalize_prefix(prefix)
    bases = [_base_names(key) for key in ordered]
    suffixes = collision_suffixes(bases)
    index: OperationIndex = {}
    seen_paths: dict[str, TopicKey] = {}
    for key, (operation_id, request, response), suffix in zip(ordered, bases, suffixes, strict=True):
        path = overrides[key] if key in overrides else invoke_path(key, prefix)
        _check_path(key, path, seen_paths)
        index[key] = Operation(key, path, operation_id + suffix, request + suffix, response + suffix)
    return index


def build_openapi(
    registry: Registry,
    *,
    title: str = DEFAULT_TITLE,
    version: str = DEFAULT_VERSION,
    prefix: str = DEFAULT_PREFIX,
    paths: Mapping[TopicKey, str] | None = None,
) -> dict[str, Any]:
    """The OpenAPI 3.1.0 document. Schemas are the registry's cached dicts, embedded verbatim, and the
    failure responses are one dict shared by every operation: treat the document as read-only."""
    registrations = {registration.key: registration for registration in registry}
    index = operation_index(registrations, prefix=prefix, paths=paths)
    failures = _failure_responses()
    path_items: dict[str, Any] = {}
    schemas: dict[str, Any] = {ERROR_SCHEMA_NAME: error_schema()}
    for key, operation in index.items():
        registration = registrations[key]
        post: dict[str, Any] = {"operationId": operation.operation_id, "summary": _summary(key)}
        if registration.summary:
            post["description"] = registration.summary
        if registration.deprecated is not None:
            post["deprecated"] = True
        post["requestBody"] = {"required": True, "content": _json_content(operation.request_component)}
        post["responses"] = {"200": {"description": OK, "content": _json_content(operation.response_component)}}
        post["responses"].update(failures)
        path_items[operation.path] = {"post": post}
        schemas[operation.request_component] = registration.request_schema
        schemas[operation.response_component] = registration.response_schema
    return {
        "openapi": OPENAPI_VERSION,
        "info": {"title": title, "version": version},
        "paths": dict(sorted(path_items.items())),
        "components": {"schemas": dict(sorted(schemas.items()))},
    }


def _walk_order(key: TopicKey) -> tuple[str, str]:
    # Same order as TopicKey's own comparison, without the dataclass __lt__ overhead.
    return key.id, key.version


def _base_names(key: TopicKey) -> tuple[str, str, str]:
    """Clean (operation id, request component, response component); a topic with no letters or digits
    would derive an empty name, so it reads as `topic`."""
    camel = camel_name(key.id) or "topic"
    pascal = pascal_name(key.id) or "Topic"
    if key.version:
        camel = f"{camel}_{key.version}"
        pascal = f"{pascal}_{slug(key.version)}"
    return camel, f"{pascal}Request", f"{pascal}Response"


def _summary(key: TopicKey) -> str:
    return f"Invoke topic {key.id} (version {key.version})" if key.version else f"Invoke topic {key.id}"


def _json_content(component: str) -> dict[str, Any]:
    return {JSON_MEDIA_TYPE: {"schema": {"$ref": COMPONENT_REF + component}}}


def _failure_responses() -> dict[str, Any]:
    return {code: {"description": status, "content": _json_content(ERROR_SCHEMA_NAME)} for code, status in _FAILURES}


def _check_path(key: TopicKey, path: str, seen: dict[str, TopicKey]) -> None:
    if not path.startswith("/"):
        raise ValueError(f"path {path!r} of {key} must start with '/'")
    if "{" in path or "}" in path:
        raise ValueError(f"path {path!r} of {key}: path templates are not supported in the operations document")
    other = seen.setdefault(path, key)
    if other != key:
        raise ValueError(f"{other} and {key} both map to path {path!r}")
