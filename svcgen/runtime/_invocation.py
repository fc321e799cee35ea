"""`Invocation`: what a transport knows about one call, built by its binding and handed to `Service.invoke`.

Each binding (HTTP routes, the `/svc/invoke` envelope, a message broker) builds one per call; the service
decides the version from its sources and answers with an `Outcome`. Nothing is written back into it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from ._codec import TextFields
from ._jsonlimits import JsonLimits

NO_HEADERS: Final[Mapping[str, str]] = MappingProxyType({})


# Not frozen: a frozen dataclass sets each field through object.__setattr__, several times the cost, and every
# call builds one. Treat it as read-only.
@dataclass(slots=True)
class Invocation:
    topic: str
    headers: Mapping[str, str] = field(default_factory=lambda: NO_HEADERS)
    """Lower-cased names (`lowered` makes them so); handlers see them read-only."""
    body: str | bytes | None = None
    """Raw JSON text of the request payload; empty or None means `{}`."""
    fields: TextFields | None = None
    """Text fields laid over the body (HTTP path and query), converted to their field types; a query name given
    more than once holds every value (a tuple)."""
    path_version: str | None = None
    """A `{version}` path segment: beats the caller's version header."""
    static_version: str = ""
    """The version a route names: a version header beats it."""
    transport: str = "envelope"
    json_limits: JsonLimits | None = None
    """What the body's JSON may be; None takes the service's default."""
    credentials: Mapping[str, str] = field(default_factory=lambda: NO_HEADERS)
    """The transport's own headers (lower-cased), where credentials are read: an HTTP request's, a NATS
    message's; never an envelope's inner `headers`. Empty: the call carries no credential."""


def lowered(headers: Mapping[str, str] | None) -> Mapping[str, str]:
    """Headers as an `Invocation` carries them: lower-cased names, read-only."""
    if not headers:
        return NO_HEADERS
    return MappingProxyType({name.lower(): value for name, value in headers.items()})
