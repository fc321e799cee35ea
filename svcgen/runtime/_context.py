"""`Context`: what one invocation knows besides its request; handed to middleware and the handler."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ._dependencies import Scope
from ._jsonlimits import DEFAULT_JSON_LIMITS, JsonLimits

if TYPE_CHECKING:
    from ._registry import Registration


def freeze_headers(headers: Mapping[str, str] | None, *, lowered: bool = False) -> Mapping[str, str]:
    """Lower-cased, read-only view of headers; `lowered` says the names already are."""
    if not headers:
        return MappingProxyType({})
    if lowered:
        return MappingProxyType(dict(headers))
    return MappingProxyType({name.lower(): value for name, value in headers.items()})


@dataclass(slots=True)
class Context:
    topic: str
    version: str
    headers: Mapping[str, str]
    scope: Scope
    body: str | bytes | None = None
    """Raw JSON text of the request payload; empty or None means `{}`."""
    fields: Mapping[str, str] | None = None
    """Text fields laid over the body (HTTP path and query), converted to their field types."""
    transport: str = "envelope"
    json_limits: JsonLimits = DEFAULT_JSON_LIMITS
    """What the body's JSON may be (depth, duplicate keys); the transport sets it."""
    registration: Registration | None = None
    exception_type: str | None = None
    handler_answered: bool = False
    """The result is the handler's own answer (it returned one); False when the binding answered (unknown topic,
    undecodable request) or the handler raised."""
    items: dict[str, Any] = field(default_factory=dict)
    """Free room for middleware to pass values along one invocation."""
