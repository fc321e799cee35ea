"""Template inputs for service.py, clients.py and the handler stubs, derived from the bindings.

Request and response types are spelled by `bindings.type_text` (records as `models.X`), the same text the
contract derivation evaluates.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..manifest.model import SecurityDef
from ..manifest.typeexpr import TypeExpr
from ..runtime._deprecation import Deprecation
from ..runtime._mesh.host import COLLECTOR_ENV, HEARTBEAT_ENV
from ..runtime._mesh.jetstream import MESH_NATS_ENV
from ..runtime._mesh.otlp import ENDPOINT_ENV as OTLP_ENDPOINT_ENV
from ..runtime._status import OK, http_code
from ..runtime._topics import DEFAULT_PREFIX
from ..runtime._wiring import NATS_ENV, target_variable
from .bindings import (
    MODELS_MODULE,
    ServiceBindings,
    TopicBinding,
    registration_options,
    requirement_literals,
    type_text,
)
from .events import ServiceEvents, service_events
from .imports import Imports
from .literals import py_str, py_value
from .typehints import annotation

STUB_WRAP_AT = 100
BINDING_WRAP_AT = 116
"""A typed handler binding longer than this (with its indent) is written over several lines."""
_STUB_RUNTIME_NAMES = frozenset({"Context", "Result"})


@dataclass(frozen=True)
class RegistrationRow:
    topic: str
    version: str
    module: str
    request: str
    response: str
    options: tuple[tuple[str, str], ...] = ()
    """`Registry.add` keywords after the types (`bindings.registration_options`), each value as Python text."""

    @property
    def wrap(self) -> bool:
        binding = f"    _{self.module}: Handler[{self.request}, {self.response}] = {self.module}.handle"
        return len(binding) > BINDING_WRAP_AT


def _option_text(value: Any, imports: Imports) -> str:
    """A registration option as service.py writes it: a literal, or the `Deprecation(...)` call."""
    if isinstance(value, Deprecation):
        given = {key: item for key, item in asdict(value).items() if item is not None}
        arguments = ", ".join(f"{key}={py_str(item)}" for key, item in given.items())
        return f"{imports.name('svcgen.runtime', 'Deprecation')}({arguments})"
    return py_value(value)


@dataclass(frozen=True)
class RouteRow:
    spec: str
    topic: str
    version: str


@dataclass(frozen=True)
class ProducedRow:
    topic: str
    version: str
    request: str
    response: str
    idempotent: bool = False


@dataclass(frozen=True)
class SchemeRow:
    kind: str
    """The runtime class: JwtScheme or ApiKeyScheme."""
    name: str
    options: tuple[tuple[str, Any], ...]
    """Keyword arguments, in the order written."""


@dataclass(frozen=True)
class SecurityView:
    schemes: tuple[SchemeRow, ...]
    default: list[dict[str, list[str]]]
    well_known: list[dict[str, list[str]]]


@dataclass(frozen=True)
class ServiceView:
    imports: list[str]
    topics: tuple[RegistrationRow, ...]
    routes: tuple[RouteRow, ...]
    produces: tuple[ProducedRow, ...]
    security: SecurityView | None = None
    events: ServiceEvents | None = None


@dataclass(frozen=True)
class ClientMethod:
    name: str
    topic: str
    version: str
    label: str
    summary: str | None
    request: str
    response: str
    idempotent: bool = False


@dataclass(frozen=True)
class ClientsView:
    imports: list[str]
    methods: tuple[ClientMethod, ...]


@dataclass(frozen=True)
class StubView:
    topic: str
    label: str
    summary: str | None
    imports: list[str]
    request: str
    response: str
    wrap: bool


@dataclass(frozen=True)
class TargetRow:
    topic: str
    variable: str
    default: str


@dataclass(frozen=True)
class SettingRow:
    variable: str
    default: str
    meaning: str


@dataclass(frozen=True)
class WiringStubView:
    targets: tuple[TargetRow, ...]
    settings: tuple[SettingRow, ...]
    events: bool = False
    """The service publishes or subscribes to events, so it does not start without NATS."""


DEFAULT_TARGET = f"http://127.0.0.1:8000{DEFAULT_PREFIX}/invoke"
"""Where a produced topic goes until its target is set: `svcgen serve`'s default address."""


def wiring_stub_view(bindings: ServiceBindings) -> WiringStubView:
    topics = dict.fromkeys(produced.topic for produced in bindings.produces)
    targets = tuple(TargetRow(topic, target_variable(topic), DEFAULT_TARGET) for topic in topics)
    events = bool(bindings.events or bindings.subscriptions)
    # With events the app does not start without NATS; without, NATS is one more way to reach the topics.
    nats = ("a NATS server (nats://host:port), required for its events; the topics are served on it as well" if events
            else "a NATS server (nats://host:port) to serve the topics on as well")
    settings: tuple[SettingRow, ...] = (SettingRow(NATS_ENV, "NATS_URL below", nats),)
    if bindings.mesh is not None:
        mesh = bindings.mesh
        settings += (
            SettingRow(COLLECTOR_ENV, mesh.collector or "(none)",
                       "the collector the mesh feeds go to (manifest mesh.collector)"),
            SettingRow(
                HEARTBEAT_ENV,
                f"{mesh.heartbeat_seconds:g}",
                "seconds between heartbeats (manifest mesh.heartbeatSeconds)",
            ),
        )
        if mesh.transport == "nats":
            why = "the NATS server whose JetStream takes the mesh feeds (manifest mesh.nats)"
            settings += (SettingRow(MESH_NATS_ENV, mesh.nats or "", why),)
        if mesh.otlp:
            settings += (SettingRow(OTLP_ENDPOINT_ENV, mesh.otlp,
                                    "where trace spans go by OTLP/HTTP, /v1/traces appended (manifest mesh.otlp)"),)
    return WiringStubView(targets, settings, events)


def service_view(bindings: ServiceBindings) -> ServiceView:
    imports = Imports()
    imports.name("__future__", "annotations")
    imports.name("typing", "Final")
    imports.name("typing", "Unpack")
    for name in ("AppOptions", "Handler", "HttpApp", "Identity", "ProducedTopic", "Registry", "Route", "Service",
                 "ServiceDefinition", "ServiceOptions", "Wiring"):
        imports.name("svcgen.runtime", name)
    imports.name(".", "wiring")
    if bindings.produces:
        imports.name(".clients", "Clients")
    if bindings.mesh:
        imports.name("svcgen.runtime", "MeshHost")
        imports.name("svcgen.runtime", "MeshSettings")
    if bindings.health:
        imports.name("svcgen.runtime", "HealthCheck")
        imports.name("svcgen.runtime", "HealthChecks")
        imports.name(".", "health")
    for topic in bindings.topics:
        imports.name(".handlers", topic.module)
    security = security_view(bindings.security)
    if security is not None:
        imports.name("svcgen.runtime", "Security")
        for kind in sorted({scheme.kind for scheme in security.schemes}):
            imports.name("svcgen.runtime", kind)
    exprs = [expr for t in bindings.topics for expr in (t.request, t.response)]
    exprs += [expr for p in bindings.produces for expr in (p.request, p.response)]
    _import_models(exprs, imports)
    topics = tuple(
        RegistrationRow(
            t.topic,
            t.version,
            t.module,
            type_text(t.request, imports),
            type_text(t.response, imports),
            tuple((name, _option_text(value, imports)) for name, value in registration_options(t).items()),
        )
        for t in bindings.topics
    )
    produces = tuple(
        ProducedRow(p.topic, p.version, type_text(p.request, imports), type_text(p.response, imports), p.idempotent)
        for p in bindings.produces
    )
    routes = tuple(RouteRow(spec, t.topic, t.version) for t in bindings.topics for spec in t.routes)
    events = service_events(bindings.events, bindings.subscriptions, imports)
    return ServiceView(imports.lines(), topics, routes, produces, security, events)


def security_view(security: SecurityDef | None) -> SecurityView | None:
    if security is None:
        return None
    rows = []
    for scheme in security.schemes:
        if scheme.type == "apiKey":
            options: tuple[tuple[str, Any], ...] = (("header", scheme.header),)
            kind = "ApiKeyScheme"
        else:
            options = (("issuer", scheme.issuer), ("audience", scheme.audience), ("algorithms", scheme.algorithms))
            options += (("jwks", scheme.jwks),) if scheme.jwks else (("key", scheme.key),)
            kind = "JwtScheme"
        if scheme.description:
            options += (("description", scheme.description),)
        rows.append(SchemeRow(kind, scheme.name, options))
    return SecurityView(
        tuple(rows), requirement_literals(security.default), requirement_literals(security.well_known)
    )


def clients_view(bindings: ServiceBindings) -> ClientsView:
    imports = Imports()
    imports.name("__future__", "annotations")
    imports.name("collections.abc", "Mapping")
    imports.name("typing", "Final")
    for name in ("ClientCall", "ClientsBase", "Result", "codec_for"):
        imports.name("svcgen.runtime", name)
    _import_models([expr for p in bindings.produces for expr in (p.request, p.response)], imports)
    methods = tuple(
        ClientMethod(
            name=p.method,
            topic=p.topic,
            version=p.version,
            label=f"{p.topic} (version {p.version})" if p.version else p.topic,
            summary=p.summary,
            request=type_text(p.request, imports),
            response=type_text(p.response, imports),
            idempotent=p.idempotent,
        )
        for p in bindings.produces
    )
    return ClientsView(imports.lines(), methods)


def stub_view(topic: TopicBinding) -> StubView:
    imports = Imports()
    imports.name("__future__", "annotations")
    imports.name("svcgen.runtime", "Context")
    imports.name("svcgen.runtime", "Result")
    records = topic.request.records() | topic.response.records()
    # A record named like a runtime name the stub uses is reached through the module instead.
    prefix = MODELS_MODULE + "." if records & _STUB_RUNTIME_NAMES else ""
    if prefix:
        imports.name("..", MODELS_MODULE)
    else:
        for name in records:
            imports.name("..models", name)
    request = annotation(topic.request, imports, records=prefix)
    response = annotation(topic.response, imports, records=prefix)
    one_line = f"async def handle(request: {request}, context: Context) -> Result[{response}]:"
    return StubView(
        topic=topic.topic,
        label=topic.label,
        summary=topic.summary,
        imports=imports.lines(),
        request=request,
        response=response,
        wrap=len(one_line) > STUB_WRAP_AT,
    )


def _import_models(exprs: list[TypeExpr], imports: Imports) -> None:
    if any(expr.records() for expr in exprs):
        imports.name(".", MODELS_MODULE)


@dataclass(frozen=True)
class ExampleTestView:
    """What the generated example test names: the first topic, the first produced topic, every produced one."""

    module: str
    topic: str
    version: str
    produced: str
    produces: list[str]
    status_code: int
    """The HTTP code of the topic's first success status: what a successful call answers."""


def example_view(bindings: ServiceBindings) -> ExampleTestView:
    first = bindings.topics[0] if bindings.topics else None
    produces = sorted({produced.topic for produced in bindings.produces})
    return ExampleTestView(
        first.module if first is not None else "service",
        first.topic if first is not None else "topic:id",
        first.version if first is not None else "",
        produces[0] if produces else "",
        produces,
        http_code(first.success[0] if first is not None else OK, True),
    )
