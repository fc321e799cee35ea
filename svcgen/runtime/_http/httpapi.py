"""The HTTP API document: OpenAPI 3.1.0 of the application routes as a REST client sees them (DESIGN §7).

One operation per route and method; a `{version}` route expands to one path per version of its topic. Path
placeholders and, on GET and HEAD, the request type's other fields are typed parameters; other methods take the
request type without its path fields as the body (`<Type>Body` when fields were taken out). Every record (and
every other named type of the shared derivation) is one component, `#/components/schemas/<TypeName>`, referenced
wherever it appears; every field with a default publishes it (DESIGN §12), in its component and in the parameter
standing for it, where the other documents keep a plain field as the spec's table row. Responses: each declared
success status, then the failures the binding can answer (400, 404, 413, 422, 431, 503, 504) plus the topic's
declared ones, each with the failure body component. 404 is on every operation: any caller may name a version by
header (spec, Versioning rule 5), and one the topic lacks is not found, as an empty placeholder segment is. 504 is
too: any caller may send `svc-deadline`, and a topic's `timeout` (which its description names) bounds every call.
A topic that is not idempotent honours an `Idempotency-Key`: its operations take the optional header and add what a
key can get (409 in flight, with `retry-after`; the key's reasons for 400, 422 and 503), and each answer a key can
replay declares `idempotent-replayed`.

Walk order is the route order (the order requests are matched in), so the bytes are stable; component and path
keys are sorted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any, Final
from urllib.parse import quote

from .. import _status as st
from .._codec import is_text_scalar
from .._collisions import collision_suffixes
from .._deadline import DEADLINE_HEADER
from .._idempotency import MAX_KEY_LENGTH, RELEASED_STATUSES, REPLAYED_HEADER, RETRY_AFTER_HEADER
from .._naming import camel_name, slug
from .._openapi import COMPONENT_REF, JSON_MEDIA_TYPE, PATH_SAFE, error_schema
from .._registry import Registration, Registry
from .._schema import JsonSchema, definition_of, field_schema, schema_of_shape
from .._security import ApiKeyScheme, Requirements, Security
from .._shapes import (
    ArrayShape,
    ConstrainedShape,
    FieldShape,
    NullableShape,
    RecordShape,
    RecursiveShape,
    ScalarShape,
    Shape,
    UnionShape,
    shape_of,
)
from .._topics import VERSION_HEADERS, VERSION_PATH_PARAM
from .limits import BODY_TOO_LARGE_CODE, LIMIT_STATUS, TOO_MANY_HEADERS_CODE
from .routing import Route

OPENAPI_VERSION: Final = "3.1.0"
FAILURE_COMPONENT: Final = "Failure"
VALIDATION_FAILURE_COMPONENT: Final = "ValidationFailure"
_QUERY_METHODS: Final = frozenset({"GET", "HEAD"})
_METHOD_ORDER: Final = ("get", "put", "post", "delete", "options", "head", "patch")
"""Operations of one path in the order of OpenAPI's path item fields."""

_WIRE_FORMATS: Final[dict[str, JsonSchema]] = {
    "integer": {"format": "int64"},
    "bytes": {"format": "byte", "contentEncoding": "base64"},
}
"""What the binding's codec holds scalars to beyond their JSON type, in OpenAPI's words: integers are signed
64-bit, bytes are base64 text. Generated clients and fuzzers then stay within what the service accepts."""

_BINDING_FAILURES: Final[dict[int, str]] = {
    st.FAILURE_CODES[st.BAD_REQUEST]: "bad-request: the body is not JSON, not an object or over a parse limit",
    st.FAILURE_CODES[st.NOT_FOUND]: "not-found",  # a version the request names, a path, or the handler's own miss
    BODY_TOO_LARGE_CODE: f"{LIMIT_STATUS}: the body is larger than the service accepts",
    st.FAILURE_CODES[st.VALIDATION_ERROR]: "validation-error: values that do not fit the request type",
    TOO_MANY_HEADERS_CODE: f"{LIMIT_STATUS}: the request has more headers than the service accepts",
    st.FAILURE_CODES[st.SERVICE_UNAVAILABLE]: "service-unavailable: the handler failed",
    st.FAILURE_CODES[st.TIMEOUT]: f"timeout: the call ran past the caller's {DEADLINE_HEADER}",
}
"""HTTP code → response description of every failure the binding itself answers."""

_KEYED_FAILURES: Final[dict[str, str]] = {
    st.BAD_REQUEST: f"an Idempotency-Key that is not 1 to {MAX_KEY_LENGTH} printable ASCII characters",
    st.CONFLICT: "a call with this Idempotency-Key is still running (retry after retry-after seconds)",
    st.VALIDATION_ERROR: "this Idempotency-Key was used with another request",
    st.SERVICE_UNAVAILABLE: "the idempotency store is unavailable",
}
"""Status → why an operation that honours an `Idempotency-Key` answers it (`_idempotency.run_once`)."""
_RETRY_AFTER: Final = {
    RETRY_AFTER_HEADER: {"description": "seconds to wait before retrying", "schema": {"type": "string"}}
}
_KEY_PARAMETER: Final = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": "runs the call once per key: a repeat of the same request gets the first answer again",
    # Printable ASCII; no space at either end, which HTTP strips from a header value.
    "schema": {"type": "string", "minLength": 1, "maxLength": MAX_KEY_LENGTH, "pattern": "^[!-~]([ -~]*[!-~])?$"},
}
_REPLAYED: Final = {REPLAYED_HEADER: {"description": "true: the answer kept for this Idempotency-Key, again",
                                      "schema": {"type": "string", "enum": ["true"]}}}  # fmt: skip
_NOT_REPLAYED: Final = frozenset({BODY_TOO_LARGE_CODE, TOO_MANY_HEADERS_CODE,
                                  *(st.FAILURE_CODES[status] for status in RELEASED_STATUSES)})  # fmt: skip
"""Answers a key never replays: the binding's limits, refused before the call is made, and those released for the
retry (`run_once`). A credential's 401 and 403 (`_secure`) come before the key is looked at too."""


@dataclasses.dataclass(frozen=True, slots=True)
class _Operation:
    method: str
    path: str
    route: Route
    registration: Registration | None
    """None for a route without a static version to a topic of several versions: the caller's header picks."""
    keyed: bool
    """An `Idempotency-Key` is honoured: the topic (a version of it, where the header picks) is not idempotent."""


def build_http_api(
    registry: Registry, routes: Iterable[Route], *, title: str, version: str, security: Security | None = None
) -> dict[str, Any]:
    """The document; treat it as read-only (parts are shared). With `security`, its schemes are
    `components.securitySchemes` and every operation names its requirements (`[]` where public)."""
    operations = _operations(registry, routes)
    names = _Names(operations)
    ids = _operation_ids(operations)
    paths: dict[str, dict[str, Any]] = {}
    for operation, operation_id in zip(operations, ids, strict=True):
        built = _operation(operation, operation_id, names)
        if security is not None:
            _secure(built, security.of(operation.registration), names)
        paths.setdefault(operation.path, {})[operation.method.lower()] = built
    components: dict[str, Any] = {"schemas": names.components()}
    if security is not None and security.schemes:
        components["securitySchemes"] = {scheme.name: _scheme(scheme) for scheme in security.schemes}
    return {
        "openapi": OPENAPI_VERSION,
        "info": {"title": title, "version": version},
        "paths": {path: _in_method_order(paths[path]) for path in sorted(paths)},
        "components": components,
    }


def _scheme(scheme: Any) -> dict[str, Any]:
    if isinstance(scheme, ApiKeyScheme):
        described: dict[str, Any] = {"type": "apiKey", "in": "header", "name": scheme.header}
    else:
        described = {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}
    if scheme.description:
        described["description"] = scheme.description
    return described


def _secure(operation: dict[str, Any], needed: Requirements, names: _Names) -> None:
    """The operation's `security` (any one entry suffices) and, when it needs one, its 401 and 403 answers."""
    operation["security"] = [{name: list(scopes) for name, scopes in requirement} for requirement in needed]
    if not needed:
        return
    responses = operation["responses"]
    content = {JSON_MEDIA_TYPE: {"schema": ref(names.failure)}}
    responses.setdefault("401", {"description": "unauthorized: no valid credential", "content": content})
    if any(scopes for requirement in needed for _, scopes in requirement):
        responses.setdefault("403", {"description": "forbidden: the credential lacks a required scope",
                                     "content": content})  # fmt: skip
    operation["responses"] = dict(sorted(responses.items()))


def _in_method_order(item: dict[str, Any]) -> dict[str, Any]:
    return {method: item[method] for method in _METHOD_ORDER if method in item}


def _operations(registry: Registry, routes: Iterable[Route]) -> list[_Operation]:
    """Each (method, path) a route answers, in route order; a path an earlier route already takes is left out,
    because requests never reach the later one."""
    operations: list[_Operation] = []
    taken: set[tuple[str, str]] = set()
    for route in routes:
        for path, registration in _expansions(registry, route):
            shape = (route.method, _template_shape(path))
            if shape in taken:
                continue
            taken.add(shape)
            if registration is not None:
                keyed = not registration.idempotent
            else:
                candidates = (registry.get(route.topic, version) for version in registry.versions(route.topic))
                keyed = any(candidate is not None and not candidate.idempotent for candidate in candidates)
            operations.append(_Operation(route.method, path, route, registration, keyed))
    return operations


def _expansions(registry: Registry, route: Route) -> list[tuple[str, Registration | None]]:
    versions = registry.versions(route.topic)
    if route.has_version_segment:
        placeholder = "{" + VERSION_PATH_PARAM + "}"
        return [
            (route.path.replace(placeholder, quote(version, safe=PATH_SAFE)), registry.get(route.topic, version))
            for version in versions
            if version
        ]
    registration = registry.get(route.topic, route.version)
    if registration is None and not route.version and len(versions) == 1:
        registration = registry.get(route.topic, versions[0])
    return [(route.path, registration)]


def _template_shape(path: str) -> str:
    """A path with every placeholder blanked: two paths of one shape match the same requests."""
    segments = path.split("/")
    return "/".join("{}" if segment.startswith("{") and segment.endswith("}") else segment for segment in segments)


def _operation_ids(operations: Sequence[_Operation]) -> list[str]:
    """`<camelTopic>[_<version>]` per operation; a topic served by several routes suffixes the later ones."""
    bases = []
    for operation in operations:
        registration = operation.registration
        name = camel_name(operation.route.topic) or "topic"
        if registration is not None and registration.version:
            name = f"{name}_{slug(registration.version)}"
        bases.append((name,))
    return [base + suffix for (base,), suffix in zip(bases, collision_suffixes(bases), strict=True)]


class _Names:
    """Component names: one per named type (its class name; a second class of the same name gets `_2`), the
    body-only variants and the failure body. Definitions are derived once, on first reference."""

    def __init__(self, operations: Sequence[_Operation]) -> None:
        self._by_class: dict[type, str] = {}
        self._definitions: dict[str, JsonSchema] = {}
        self._pending: list[tuple[str, Shape]] = []
        self._bodies: dict[tuple[type, frozenset[str]], str] = {}
        self._taken: set[str] = set()
        for operation in operations:  # name the types first, so variant and failure names avoid theirs
            registration = operation.registration
            if registration is not None:
                self._collect(shape_of(registration.request_type))
                self._collect(shape_of(registration.response_type))
        self.failure = self._fresh(FAILURE_COMPONENT)
        self._definitions[self.failure] = error_schema()
        self.validation_failure = self._fresh(VALIDATION_FAILURE_COMPONENT)
        self._definitions[self.validation_failure] = _validation_failure_schema()

    def refer(self, shape: Shape) -> JsonSchema | None:
        named = _named_class(shape)
        if named is not None:
            return ref(self._by_class[named])
        if isinstance(shape, ScalarShape) and shape.kind in _WIRE_FORMATS:
            return {**definition_of(shape), **_WIRE_FORMATS[shape.kind]}
        return None

    def schema(self, shape: Shape) -> JsonSchema:
        return schema_of_shape(shape, self.refer, every_default=True)

    def field(self, field: FieldShape) -> JsonSchema:
        """A field's schema, its default published even where the field declares nothing else (DESIGN §12)."""
        return field_schema(field, self.refer, every_default=True)

    def definition(self, shape: Shape) -> JsonSchema:
        return definition_of(shape, self.refer, every_default=True)

    def body(self, record: RecordShape, path_fields: frozenset[str]) -> JsonSchema:
        """The request record without its path fields: its own component when none are taken out."""
        if not path_fields & {f.wire for f in record.fields}:
            return self.schema(record)
        key = (record.cls, path_fields)
        name = self._bodies.get(key)
        if name is None:
            name = self._fresh(f"{self._by_class[record.cls]}Body")
            self._bodies[key] = name
            remaining = tuple(f for f in record.fields if f.wire not in path_fields)
            self._definitions[name] = self.definition(dataclasses.replace(record, fields=remaining))
        return ref(name)

    def components(self) -> dict[str, JsonSchema]:
        while self._pending:
            name, shape = self._pending.pop()
            self._definitions[name] = self.definition(shape)
        return dict(sorted(self._definitions.items()))

    def _collect(self, shape: Shape) -> None:
        named = _named_class(shape)
        if named is not None:
            if named in self._by_class:
                return
            shape = shape_of(named) if isinstance(shape, RecursiveShape) else shape
            self._name(named, shape)
        for part in _parts(shape):
            self._collect(part)

    def _name(self, named: type, shape: Shape) -> str:
        name = self._fresh(named.__name__)
        self._by_class[named] = name
        self._pending.append((name, shape))
        return name

    def _fresh(self, name: str) -> str:
        candidate, n = name, 2
        while candidate in self._taken:
            candidate, n = f"{name}_{n}", n + 1
        self._taken.add(candidate)
        return candidate


def ref(name: str) -> JsonSchema:
    return {"$ref": COMPONENT_REF + name}


def _named_class(shape: Shape) -> type | None:
    """The class a shape is named by: records (recursive references too) and any other shape of a class."""
    cls = getattr(shape, "cls", None)
    return cls if isinstance(cls, type) else None


def _parts(shape: Shape) -> list[Shape]:
    """The shapes directly inside a shape, whatever its kind."""
    if isinstance(shape, RecordShape):
        return [f.shape for f in shape.fields]
    parts: list[Shape] = []
    for value in (getattr(shape, slot) for slot in getattr(shape, "__slots__", ())):
        for item in value if isinstance(value, tuple) else (value,):
            if isinstance(item, Shape):
                parts.append(item)
    return parts


def _operation(operation: _Operation, operation_id: str, names: _Names) -> dict[str, Any]:
    route, registration = operation.route, operation.registration
    result: dict[str, Any] = {"operationId": operation_id}
    topic = route.topic
    if registration is None:
        result["summary"] = f"Call topic {topic}"
        result["description"] = f"Topic {topic}; the version is chosen by the {VERSION_HEADERS[0]} header."
        header = {"name": VERSION_HEADERS[0], "in": "header", "required": True, "schema": {"type": "string"}}
        result["parameters"] = [header, _KEY_PARAMETER] if operation.keyed else [header]
        if route.method not in _QUERY_METHODS:  # the body's type depends on the version chosen
            result["requestBody"] = {"required": False, "content": {JSON_MEDIA_TYPE: {"schema": {}}}}
        result["responses"] = _responses(operation, (st.OK,), (), names, {})
        return result
    result["summary"] = registration.summary or f"Call topic {registration.key}"
    result["description"] = f"Topic {registration.key}." + _deprecation_note(registration)
    if registration.deprecated is not None:
        result["deprecated"] = True
    request = shape_of(registration.request_type)
    path_names = [name for _, name in route.params if name != VERSION_PATH_PARAM]
    record = request if isinstance(request, RecordShape) else None
    fields = {f.wire: f for f in record.fields} if record is not None else {}
    parameters = [_path_parameter(name, fields.get(name), names) for name in path_names]
    if route.method in _QUERY_METHODS:
        parameters += [_query_parameter(f, names) for f in fields.values() if f.wire not in path_names]
    elif record is not None:
        body = names.body(record, frozenset(path_names))
        required = any(f.required and f.wire not in path_names for f in record.fields)
        result["requestBody"] = {"required": required, "content": {JSON_MEDIA_TYPE: {"schema": body}}}
    else:
        result["requestBody"] = {"required": True, "content": {JSON_MEDIA_TYPE: {"schema": names.schema(request)}}}
    if operation.keyed:
        parameters.append(_KEY_PARAMETER)
    if parameters:
        result["parameters"] = parameters
    response = names.schema(shape_of(registration.response_type))
    result["responses"] = _responses(operation, registration.success, registration.failures, names, response)
    return result


def _deprecation_note(registration: Registration) -> str:
    """` Deprecated since 2026-01-01; sunset 2026-07-01; use orders:place@v2.` for a deprecated version."""
    lifecycle = registration.deprecated
    if lifecycle is None:
        return ""
    parts = [f"since {lifecycle.since}" if lifecycle.since else "", f"sunset {lifecycle.sunset}" if lifecycle.sunset
             else "", f"use {lifecycle.successor}" if lifecycle.successor else ""]
    return " Deprecated" + (" " + "; ".join(part for part in parts if part) if any(parts) else "") + "."


def _path_parameter(name: str, field: Any, names: _Names) -> dict[str, Any]:
    schema = names.field(field) if field is not None else {"type": "string"}
    return _annotated({"name": name, "in": "path", "required": True, "schema": schema}, schema)


def _query_parameter(field: Any, names: _Names) -> dict[str, Any]:
    schema = names.field(field)
    parameter: dict[str, Any] = {"name": field.wire, "in": "query", "required": field.required}
    if _is_text(field.shape):
        parameter["schema"] = schema
    elif _is_text_list(field.shape):
        # Comma-separated, as the binding reads an array of scalars from one query value.
        parameter.update(style="form", explode=False, schema=schema)
    else:
        parameter["content"] = {JSON_MEDIA_TYPE: {"schema": schema}}  # maps, records, nested arrays: JSON text
    return _annotated(parameter, schema)


def _annotated(parameter: dict[str, Any], schema: JsonSchema) -> dict[str, Any]:
    for keyword in ("description", "deprecated"):
        if keyword in schema:
            parameter[keyword] = schema[keyword]
    return parameter


def _is_text(shape: Shape) -> bool:
    """Whether the binding reads a query value of this shape as plain text (the codec's rule)."""
    shape = _unwrapped(shape)
    return isinstance(shape, UnionShape) or is_text_scalar(shape)


def _is_text_list(shape: Shape) -> bool:
    """Whether the binding reads a query value of this shape as a comma-separated list (the codec's rule)."""
    shape = _unwrapped(shape)
    return isinstance(shape, ArrayShape) and is_text_scalar(shape.items)


def _unwrapped(shape: Shape) -> Shape:
    while isinstance(shape, NullableShape | ConstrainedShape):
        shape = shape.inner
    return shape


def _responses(
    operation: _Operation,
    success: Sequence[str],
    failures: Sequence[str],
    names: _Names,
    response: JsonSchema,
) -> dict[str, Any]:
    described: dict[int, list[str]] = {}
    for status in success:
        described.setdefault(st.SUCCESS_CODES[status], []).append(status)
    failure_codes = dict(_BINDING_FAILURES)
    registration = operation.registration
    if registration is not None and registration.timeout is not None:
        failure_codes[st.FAILURE_CODES[st.TIMEOUT]] = (
            f"timeout: the call ran past the topic's timeout ({registration.timeout:g} s) or the caller's earlier "
            f"{DEADLINE_HEADER}"
        )
    for status in failures:
        code = st.FAILURE_CODES[status]
        failure_codes.setdefault(code, status)
    if operation.keyed:
        for status, reason in _KEYED_FAILURES.items():
            code = st.FAILURE_CODES[status]
            known = failure_codes.get(code)
            failure_codes[code] = f"{status}: {reason}" if known is None else f"{known}; or {reason}"
    responses: dict[str, Any] = {}
    failure_content = {JSON_MEDIA_TYPE: {"schema": ref(names.failure)}}
    validation_content = {JSON_MEDIA_TYPE: {"schema": ref(names.validation_failure)}}
    for code in sorted({*described, *failure_codes}):
        if code in described:
            answer: dict[str, Any] = {"description": ", ".join(described[code])}
            if code not in st.NO_BODY_CODES:
                answer["content"] = {JSON_MEDIA_TYPE: {"schema": response}}
        else:
            content = validation_content if code == st.FAILURE_CODES[st.VALIDATION_ERROR] else failure_content
            answer = {"description": failure_codes[code], "content": content}
            if operation.keyed and code == st.FAILURE_CODES[st.CONFLICT]:
                answer["headers"] = _RETRY_AFTER
        if operation.keyed and code not in _NOT_REPLAYED:
            answer["headers"] = {**answer.get("headers", {}), **_REPLAYED}
        responses[str(code)] = answer
    return responses


def _validation_failure_schema() -> JsonSchema:
    """The 422 body: the failure body plus `errors`, one `{path, message}` per field (wire-name paths, at most
    20), for a form to show each message at its field."""
    base = error_schema()
    item = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "message": {"type": "string"}},
        "required": ["path", "message"],
    }
    return {**base, "properties": {**base["properties"], "errors": {"type": "array", "items": item, "maxItems": 20}}}
