"""`Context`: what one invocation knows besides its request; handed to middleware and the handler."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from ._codec import TextFields
from ._dependencies import Scope
from ._jsonlimits import DEFAULT_JSON_LIMITS, JsonLimits

TRACEPARENT: Final = "traceparent"
"""W3C Trace Context: the call's place in a trace, on every transport."""
CORRELATION_HEADER: Final = "x-correlation-id"
"""The caller's correlation id, carried into the call's trace event."""

if TYPE_CHECKING:
    from ._events import DeliveryInfo
    from ._registry import Registration
    from ._security import Principal


@dataclass(slots=True)
class Context:
    topic: str
    version: str
    """The version selected for this call; for an unknown topic or version, the one the caller asked for."""
    headers: Mapping[str, str]
    scope: Scope
    body: str | bytes | None = None
    """Raw JSON text of the request payload; empty or None means `{}`."""
    fields: TextFields | None = None
    """Text fields laid over the body (HTTP path and query), converted to their field types; a query name given
    more than once holds every value (a tuple)."""
    transport: str = "envelope"
    json_limits: JsonLimits = DEFAULT_JSON_LIMITS
    """What the body's JSON may be (depth, duplicate keys); the transport sets it."""
    registration: Registration | None = None
    """What the service selected for (topic, version) before the pipeline runs; None for an unknown topic or
    version, which the pipeline answers with `not-found`."""
    principal: Principal | None = None
    """The verified caller (scheme, subject, scopes, claims); None on a public topic."""
    deadline: float | None = None
    """When the handler must be done (monotonic seconds): the caller's `svc-deadline` or the topic's `timeout`,
    whichever comes first; None when neither bounds it. Outbound calls made meanwhile carry what is left."""
    items: dict[str, Any] = field(default_factory=dict)
    """Free room for middleware to pass values along one invocation."""
    delivery: DeliveryInfo | None = None
    """An event delivery's attempt number and first-delivery time; None outside an event handler."""
    encoded: tuple[Any, bytes] | None = None
    """(the Result, its payload's JSON): the pipeline encodes a success where the trace sees a failure to; the
    service frames these bytes when the middleware handed back that very Result."""
