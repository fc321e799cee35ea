"""The validated manifest: the one internal model every generated file is rendered from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..runtime._naming import camel_to_snake
from .typeexpr import TypeExpr

NO_DEFAULT: Any = object()


@dataclass(frozen=True)
class Position:
    file: str
    line: int
    """1-based."""
    column: int
    """1-based."""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


@dataclass(frozen=True)
class Deprecation:
    """`deprecated: {since, sunset, successor}`: ISO dates (YYYY-MM-DD) and the `topic@version` to move to."""

    since: str | None = None
    sunset: str | None = None
    successor: str | None = None


@dataclass(frozen=True)
class FieldDef:
    wire: str
    type: TypeExpr
    default: Any = NO_DEFAULT
    """A JSON value; `T?` without an explicit default defaults to None."""
    description: str | None = None
    contract: dict[str, Any] = field(default_factory=dict)
    """JSON Schema constraint keywords (`minLength`, ...), `examples` and `deprecated`, as the manifest writes them."""
    added: str | None = None
    """The version (of the manifest's `versions`) the field first appears in; None: from the first."""
    removed: str | None = None
    """The version the field is gone from; None: never removed."""
    deprecation: Deprecation | None = None
    """`deprecated: {since, sunset, successor}` when the field gives dates (its contract says `deprecated: true`)."""

    @property
    def attr(self) -> str:
        return camel_to_snake(self.wire)

    @property
    def has_default(self) -> bool:
        return self.default is not NO_DEFAULT


@dataclass(frozen=True)
class RecordDef:
    name: str
    fields: tuple[FieldDef, ...] = ()
    description: str | None = None
    json_schema: str | None = None
    """Path of the external JSON Schema file (relative to the manifest) the record was translated from."""
    deprecated: bool = False
    closed: bool = False
    """Refuses properties it does not declare (a JSON Schema's `additionalProperties: false`)."""


@dataclass(frozen=True)
class EnumDef:
    name: str
    values: tuple[str, ...]
    """Wire values, in order."""
    description: str | None = None


@dataclass(frozen=True)
class RouteDef:
    method: str
    path: str

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


@dataclass(frozen=True)
class TopicDef:
    id: str
    version: str
    request: TypeExpr
    response: TypeExpr
    summary: str | None = None
    routes: tuple[RouteDef, ...] = ()
    success: tuple[str, ...] = ("ok",)
    """Statuses the handler answers on success."""
    failures: tuple[str, ...] = ()
    """Failure statuses the handler may answer beyond the binding's own."""
    idempotent: bool = False
    """Running it twice does what running it once does (`idempotent:`; default: every route is GET); clients
    retry it as it is, and send an Idempotency-Key when it is not."""
    timeout: float | None = None
    """Seconds the handler may run (`timeout:`) before it is cancelled and the caller gets `timeout`."""
    deprecated: Deprecation | None = None
    security: Requirements | None = None
    """Who may call it; None takes the service's `security.default`, () is public."""


Requirement = tuple[tuple[str, tuple[str, ...]], ...]
"""One way to be let in: (scheme name, scopes it needs) for every scheme it names, all of them."""
Requirements = tuple[Requirement, ...]
"""Any one requirement suffices; empty is public."""


@dataclass(frozen=True)
class SchemeDef:
    name: str
    type: str
    """`jwt` or `apiKey`."""
    description: str | None = None
    issuer: str = ""
    audience: tuple[str, ...] = ()
    jwks: str = ""
    key: str = ""
    algorithms: tuple[str, ...] = ()
    header: str = ""


@dataclass(frozen=True)
class SecurityDef:
    schemes: tuple[SchemeDef, ...] = ()
    default: Requirements = ()
    well_known: Requirements = ()


@dataclass(frozen=True)
class EventDef:
    """An event this service publishes."""

    id: str
    version: str
    payload: TypeExpr
    key: str | None = None
    """The wire name of the payload field that identifies the event (its `Nats-Msg-Id`)."""
    summary: str | None = None


@dataclass(frozen=True)
class DeliveryDef:
    max_deliver: int = 5
    backoff: tuple[float, ...] = (1.0, 10.0, 60.0)
    """Seconds before each redelivery; the last step repeats."""
    ack_wait: float = 30.0


@dataclass(frozen=True)
class SubscriptionDef:
    """An event this service handles."""

    id: str
    version: str
    publisher: str
    """The publishing service (its stream and subjects are named after it)."""
    payload: TypeExpr
    delivery: DeliveryDef = DeliveryDef()
    summary: str | None = None
    source: str | None = None
    """The publisher's manifest as `from:` names it; None when the payload is declared here."""


@dataclass(frozen=True)
class MeshDef:
    collector: str | None
    heartbeat_seconds: float = 30.0
    issues: bool = True
    transport: str = "http"
    nats: str | None = None
    otlp: str | None = None
    """OTLP/HTTP base URL; spans go to `{otlp}/v1/traces`."""


@dataclass(frozen=True)
class Manifest:
    path: str
    """The manifest path as given on the command line (never made absolute: it appears in headers)."""
    service: str
    package: str
    title: str = "Svc service"
    api_version: str = "1.0.0"
    prefix: str = "/svc"
    service_version: str | None = None
    placement: dict[str, str] | None = None
    health: tuple[str, ...] = ()
    mesh: MeshDef | None = None
    security: SecurityDef | None = None
    invoke: bool = True
    """Serves `{prefix}/invoke` and the per-topic invoke faces."""
    types: tuple[RecordDef, ...] = ()
    enums: tuple[EnumDef, ...] = ()
    topics: tuple[TopicDef, ...] = ()
    produces: tuple[TopicDef, ...] = ()
    events: tuple[EventDef, ...] = ()
    subscribes: tuple[SubscriptionDef, ...] = ()
    versions: tuple[str, ...] = ()
    """The service's ordered versions (per-field versions); the records above are already projected."""
    namespaces: tuple[tuple[str, str], ...] = ()
    """(namespace, the owner's manifest file, resolved) of every owner whose types the records above reach: a
    manifest importing this one names those types under its own namespace for the same owner."""
    extras: dict[str, Any] = field(default_factory=dict)
