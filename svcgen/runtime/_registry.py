"""The registry: handlers keyed by (topic id, version), with their request and response types.

A handler registered with declared types is checked against its own annotations at registration, so a
mistyped handler stops the service at startup instead of failing per request.
"""

from __future__ import annotations

import inspect
import logging
import re
import typing
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeAlias, TypeVar

from ._context import Context
from ._deprecation import Deprecation
from ._result import Result
from ._schema import JsonSchema, schema_of
from ._security import Requirements, RequirementsSpec, requirements
from ._status import FAILURE_CODES, OK, SUCCESS_CODES
from ._topics import RESERVED_TOPIC_PREFIX, is_reserved_topic

logger = logging.getLogger("svcgen.registry")

Req = TypeVar("Req")
Resp = TypeVar("Resp")
Handler: TypeAlias = Callable[[Req, Context], Awaitable[Result[Resp]] | Result[Resp]]
"""`Handler[Req, Resp]`: what serves a topic whose request is `Req` and whose success payload is `Resp`;
a variable annotated with it makes a type checker hold a handler to those types."""

_MISSING: Any = object()
_QUALIFIER = re.compile(r"\b(?:[A-Za-z_]\w*\.)+(?=[A-Za-z_])")


class RegistryError(ValueError):
    """A registration that can never work: raised at startup, never per request."""


class HandlerBindingError(RegistryError):
    """A handler annotated with other types than its topic declares; the message is one line naming the
    handler and the expected types."""


@dataclass(frozen=True, slots=True, order=True)
class TopicKey:
    id: str
    version: str = ""

    def __str__(self) -> str:
        return f"{self.id} (version {self.version})" if self.version else self.id


@dataclass(frozen=True, eq=False)
class Registration:
    key: TopicKey
    handler: Handler[Any, Any] = field(repr=False)
    request_type: Any
    response_type: Any
    summary: str | None = None
    origin: str = ""
    is_async: bool = field(default=False, repr=False)
    success: tuple[str, ...] = (OK,)
    """The statuses the handler answers on success, in the status table's order."""
    failures: tuple[str, ...] = ()
    """Failure statuses the handler may answer beyond the binding's own, in the status table's order."""
    deprecated: Deprecation | None = None
    answer_headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    """Headers every answer carries (a deprecated version's `deprecation` and `sunset`), derived once."""
    published: tuple[Any, Any] | None = field(default=None, repr=False)
    """(request, response) types the contract publishes for a handler that reads and answers plain JSON itself
    (the collector checks its feeds through these records, skipping a malformed batch entry instead of refusing
    the batch); None publishes the request and response types."""
    idempotent: bool = False
    """Running it twice does what running it once does; when False, an `Idempotency-Key` makes a retry safe."""
    timeout: float | None = None
    """Seconds the handler may run before it is cancelled and the caller gets `timeout`; None: no bound of its
    own (the caller's deadline still holds)."""
    security: Requirements | None = None
    """Who may call it (see `Security`); None takes the service's default, () is public."""
    _undeclared: set[str] = field(default_factory=set, init=False, repr=False)

    def note_success(self, status: str) -> None:
        """A success answer: one warning per status the registration does not declare (it still answers)."""
        if status not in self.success and status not in self._undeclared:
            self._undeclared.add(status)
            logger.warning(
                "%s answered %r, which it does not declare as a success status (%s); add it to the topic's "
                "success statuses so the HTTP API document describes it",
                self.origin or self.key, status, ", ".join(self.success),
            )  # fmt: skip

    @property
    def topic(self) -> str:
        return self.key.id

    @cached_property  # read on every invocation
    def version(self) -> str:
        return self.key.version

    @cached_property
    def request_schema(self) -> JsonSchema:
        return schema_of(self.published[0] if self.published is not None else self.request_type)

    @cached_property
    def response_schema(self) -> JsonSchema:
        return schema_of(self.published[1] if self.published is not None else self.response_type)


class Registry:
    def __init__(self, *, allow_reserved: bool = False) -> None:
        self._entries: dict[TopicKey, Registration] = {}
        self._versions: dict[str, list[str]] = {}
        self._sorted: list[Registration] | None = None
        self._allow_reserved = allow_reserved

    def add(
        self,
        topic: str,
        handler: Handler[Any, Any],
        *,
        version: str = "",
        request: Any = None,
        response: Any = None,
        summary: str | None = None,
        source: str | None = None,
        success: Iterable[str] = (OK,),
        failures: Iterable[str] = (),
        published: tuple[Any, Any] | None = None,
        idempotent: bool = False,
        timeout: float | None = None,
        deprecated: Deprecation | None = None,
        security: RequirementsSpec | None = None,
    ) -> Registration:
        """Register a handler; request and response types default to the handler's annotations.

        Declared types the handler's own annotations contradict raise `HandlerBindingError`; `source` names
        the handler in messages (e.g. `handlers/orders_place_v1.py`), by default its module and name.
        `success` names the statuses the handler answers on success (default `ok`), `failures` the failure
        statuses it may answer beyond the binding's own; both from the status table. `published` (request,
        response) types are what the contract shows when they differ from the plain JSON the handler takes.
        `deprecated` marks the version deprecated: its answers carry `deprecation` and `sunset` headers.
        `idempotent` and `timeout` (seconds) are the topic options of DESIGN §14 (docs/runtime.md, "Resilience").
        `security` names who may call it (`[{"staff": ["patients:read"]}]`, `[]` public); None takes the
        service's default.
        """
        if timeout is not None and not timeout > 0:
            raise RegistryError(f"{topic}: timeout must be more than 0 seconds, got {timeout!r}")
        if not isinstance(topic, str) or not topic:
            raise RegistryError(f"topic id must be a non-empty string, got {topic!r}")
        if is_reserved_topic(topic) and not self._allow_reserved:
            raise RegistryError(
                f"topic {topic!r} is reserved: application topics may not start with {RESERVED_TOPIC_PREFIX!r}"
            )
        key = TopicKey(topic, version)
        declared_success = _statuses(key, "success", success, SUCCESS_CODES, FAILURE_CODES)
        if not declared_success:
            raise RegistryError(f"{key}: success needs at least one status, like {OK!r}")
        declared_failures = _statuses(key, "failures", failures, FAILURE_CODES, SUCCESS_CODES)
        annotated = _annotations(handler)
        origin = source or _origin(handler)
        _check_binding(key, origin, getattr(handler, "__name__", "handle"), (request, response), annotated)
        registration = Registration(
            key=key,
            handler=handler,
            request_type=request if request is not None else _or_any(annotated[0]),
            response_type=response if response is not None else _or_any(annotated[1]),
            summary=summary,
            origin=origin,
            is_async=inspect.iscoroutinefunction(handler),
            success=declared_success,
            failures=declared_failures,
            published=published,
            idempotent=idempotent,
            timeout=timeout,
            deprecated=deprecated,
            answer_headers=deprecated.headers() if deprecated is not None else (),
            security=None if security is None else requirements(security),
        )
        existing = self._entries.get(key)
        if existing is not None:
            raise RegistryError(
                f"duplicate registration of {key}: {existing.origin} and {registration.origin}"
            )
        self._entries[key] = registration
        self._sorted = None
        self._versions.setdefault(topic, []).append(version)
        return registration

    def handler(
        self,
        topic: str,
        *,
        version: str = "",
        request: Any = None,
        response: Any = None,
        summary: str | None = None,
        success: Iterable[str] = (OK,),
        failures: Iterable[str] = (),
        idempotent: bool = False,
        timeout: float | None = None,
    ) -> Callable[[Handler[Any, Any]], Handler[Any, Any]]:
        """Decorator form of `add`."""

        def register(fn: Handler[Any, Any]) -> Handler[Any, Any]:
            self.add(
                topic, fn, version=version, request=request, response=response, summary=summary, success=success,
                failures=failures, idempotent=idempotent, timeout=timeout,
            )  # fmt: skip
            return fn

        return register

    def get(self, topic: str, version: str = "") -> Registration | None:
        return self._entries.get(TopicKey(topic, version))

    def versions(self, topic: str) -> list[str]:
        return sorted(self._versions.get(topic, ()))

    def __contains__(self, key: TopicKey) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[Registration]:
        """Registrations in sorted (id, version) order: the order every derived document walks."""
        if self._sorted is None:
            self._sorted = sorted(self._entries.values(), key=lambda r: (r.key.id, r.key.version))
        return iter(self._sorted)


def _statuses(
    key: TopicKey, role: str, statuses: Iterable[str], allowed: dict[str, int], other: dict[str, int]
) -> tuple[str, ...]:
    """The declared statuses in the table's order; one not in `allowed` raises `RegistryError`."""
    if isinstance(statuses, str):
        statuses = (statuses,)
    declared = set(statuses)
    for status in sorted(declared - allowed.keys()):
        kind = "a failure" if role == "success" else "a success"
        what = f"is {kind} status" if status in other else "is not a status"
        raise RegistryError(f"{key}: {role} status {status!r} {what}; {role} statuses are {', '.join(allowed)}")
    return tuple(status for status in allowed if status in declared)


def _annotations(handler: Handler[Any, Any]) -> tuple[Any, Any, Any]:
    """(request, response payload, whole return) annotations of a handler; `_MISSING` where it has none.

    The response payload is the `T` of a `Result[T]` return annotation (also inside `Awaitable[...]`); a
    return annotation of another shape has no payload, and the whole return lets the binding check name it.
    """
    try:
        hints = typing.get_type_hints(handler)
        parameters = list(inspect.signature(handler).parameters)
    except Exception:
        return _MISSING, _MISSING, _MISSING  # unresolvable annotations make no claim the registry could check
    request = hints.get(parameters[0], _MISSING) if parameters else _MISSING
    returned = hints.get("return", _MISSING)
    if typing.get_origin(returned) in (Awaitable, Coroutine):
        returned = typing.get_args(returned)[-1]
    if returned is Any:
        returned = _MISSING
    if (typing.get_origin(returned) or returned) is Result:
        args = typing.get_args(returned)
        return request, args[0] if args else Any, returned
    return request, _MISSING, returned


def _check_binding(
    key: TopicKey, origin: str, name: str, declared: tuple[Any, Any], annotated: tuple[Any, Any, Any]
) -> None:
    request, response = declared
    have_request, have_response, returned = annotated
    request_fits = request is None or _fits(have_request, request, contravariant=True)
    response_fits = response is None or returned is _MISSING or (
        have_response is not _MISSING and _fits(have_response, response, contravariant=False)
    )
    if request_fits and response_fits:
        return
    have = "..." if have_request is _MISSING else type_text(have_request)
    answers = "..." if returned is _MISSING else type_text(returned)
    wants = "..." if request is None else type_text(request)
    want_answer = "..." if response is None else f"Result[{type_text(response)}]"
    raise HandlerBindingError(
        f"{origin}: {name}(request: {have}, context) -> {answers} cannot serve {key}, which expects "
        f"{name}(request: {wants}, context: Context) -> {want_answer}; change the handler's annotations "
        "(and code) to the manifest's types"
    )


def _fits(annotation: Any, declared: Any, *, contravariant: bool) -> bool:
    if annotation is _MISSING or annotation is Any or annotation == declared:
        return True
    # A request parameter may accept more than the topic sends (a base class, object).
    return contravariant and isinstance(annotation, type) and isinstance(declared, type) and issubclass(
        declared, annotation
    )


def type_text(annotation: Any) -> str:
    """A type as a user writes it: `PlaceOrder`, `list[LineItem]`, `str | None` (module paths left out)."""
    if annotation is None or annotation is type(None):
        return "None"
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__qualname__
    return _QUALIFIER.sub("", repr(annotation))


def _or_any(annotation: Any) -> Any:
    return Any if annotation is _MISSING else annotation


def _origin(handler: Handler[Any, Any]) -> str:
    module = getattr(handler, "__module__", None) or "?"
    name = getattr(handler, "__qualname__", None) or type(handler).__qualname__
    return f"{module}.{name}"
