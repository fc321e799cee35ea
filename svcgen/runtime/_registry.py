"""The registry: handlers keyed by (topic id, version), with their request and response types."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ._context import Context
from ._reserved import RESERVED_TOPIC_PREFIX, is_reserved_topic
from ._result import Result
from ._schema import JsonSchema, schema_of

Handler = Callable[[Any, Context], "Awaitable[Result[Any]] | Result[Any]"]


class RegistryError(ValueError):
    """A registration that can never work: raised at startup, never per request."""


@dataclass(frozen=True, slots=True, order=True)
class TopicKey:
    id: str
    version: str = ""

    def __str__(self) -> str:
        return f"{self.id} (version {self.version})" if self.version else self.id


@dataclass(frozen=True, eq=False)
class Registration:
    key: TopicKey
    handler: Handler = field(repr=False)
    request_type: Any
    response_type: Any
    summary: str | None = None
    origin: str = ""
    is_async: bool = field(default=False, repr=False)

    @property
    def topic(self) -> str:
        return self.key.id

    @property
    def version(self) -> str:
        return self.key.version

    @cached_property
    def request_schema(self) -> JsonSchema:
        return schema_of(self.request_type)

    @cached_property
    def response_schema(self) -> JsonSchema:
        return schema_of(self.response_type)


class Registry:
    def __init__(self, *, allow_reserved: bool = False) -> None:
        self._entries: dict[TopicKey, Registration] = {}
        self._versions: dict[str, list[str]] = {}
        self._sorted: list[Registration] | None = None
        self._allow_reserved = allow_reserved

    def add(
        self,
        topic: str,
        handler: Handler,
        *,
        version: str = "",
        request: Any = None,
        response: Any = None,
        summary: str | None = None,
    ) -> Registration:
        """Register a handler; request and response types default to the handler's annotations."""
        if not isinstance(topic, str) or not topic:
            raise RegistryError(f"topic id must be a non-empty string, got {topic!r}")
        if is_reserved_topic(topic) and not self._allow_reserved:
            raise RegistryError(
                f"topic {topic!r} is reserved: application topics may not start with {RESERVED_TOPIC_PREFIX!r}"
            )
        key = TopicKey(topic, version)
        inferred_request, inferred_response = _annotated_types(handler)
        registration = Registration(
            key=key,
            handler=handler,
            request_type=request if request is not None else inferred_request,
            response_type=response if response is not None else inferred_response,
            summary=summary,
            origin=_origin(handler),
            is_async=inspect.iscoroutinefunction(handler),
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
    ) -> Callable[[Handler], Handler]:
        """Decorator form of `add`."""

        def register(fn: Handler) -> Handler:
            self.add(topic, fn, version=version, request=request, response=response, summary=summary)
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


def _annotated_types(handler: Handler) -> tuple[Any, Any]:
    try:
        hints = typing.get_type_hints(handler)
    except Exception:
        return Any, Any
    params = [p for p in inspect.signature(handler).parameters if p in hints]
    request = hints[params[0]] if params else Any
    response: Any = Any
    returned = hints.get("return")
    if typing.get_origin(returned) is typing.Union or returned is None:
        returned = None
    if returned is not None:
        origin = typing.get_origin(returned) or returned
        if origin is Result:
            args = typing.get_args(returned)
            response = args[0] if args else Any
    return request, response


def _origin(handler: Handler) -> str:
    module = getattr(handler, "__module__", None) or "?"
    name = getattr(handler, "__qualname__", None) or type(handler).__qualname__
    return f"{module}.{name}"
