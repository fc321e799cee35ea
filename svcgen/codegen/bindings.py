"""The service's bindings as data: every (topic, version) binding, routes, produced topics, identity, health.

One function over the manifest (`service_bindings`) feeds both service.py's template and the contract
derivation, and both spell request and response types with `type_text`, so the committed documents and
the running registry cannot disagree.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from ..manifest.model import Deprecation, Manifest, MeshDef, Requirements, SecurityDef, TopicDef
from ..manifest.typeexpr import TypeExpr
from ..runtime import _deprecation
from ..runtime._collisions import handler_slugs
from ..runtime._descriptor import Identity
from ..runtime._naming import slug
from ..runtime._registry import TopicKey
from ..runtime._status import OK
from .errors import CodegenError
from .imports import Imports
from .pynames import is_module_name
from .typehints import annotation

if TYPE_CHECKING:
    from .events import EventBinding, SubscriptionBinding

BINDING = "http"
MODELS_MODULE = "models"
"""service.py and clients.py import the models module whole (`from . import models`): no name can clash."""


@dataclass(frozen=True)
class TopicBinding:
    topic: str
    version: str
    request: TypeExpr
    response: TypeExpr
    summary: str | None
    module: str
    """The handler module under handlers/."""
    routes: tuple[str, ...]
    """`METHOD /path`, in manifest order; a `{version}` segment selects the version per request."""
    success: tuple[str, ...] = ("ok",)
    failures: tuple[str, ...] = ()
    idempotent: bool = False
    timeout: float | None = None
    security: Requirements | None = None
    """None: the service's default."""
    deprecated: Deprecation | None = None

    @property
    def label(self) -> str:
        return f"{self.topic} (version {self.version})" if self.version else self.topic


@dataclass(frozen=True)
class ProducedBinding:
    topic: str
    version: str
    request: TypeExpr
    response: TypeExpr
    summary: str | None
    method: str
    """The typed client method in clients.py."""
    idempotent: bool = False


@dataclass(frozen=True)
class HealthBinding:
    name: str
    module: str
    """The module under health/ whose `check` runs it."""


@dataclass(frozen=True)
class ServiceBindings:
    service: str
    service_version: str | None
    placement: tuple[tuple[str, str], ...]
    title: str
    api_version: str
    prefix: str
    topics: tuple[TopicBinding, ...]
    produces: tuple[ProducedBinding, ...]
    health: tuple[HealthBinding, ...]
    mesh: MeshDef | None
    binding: str = BINDING
    security: SecurityDef | None = None
    invoke: bool = True
    events: tuple[EventBinding, ...] = ()
    subscriptions: tuple[SubscriptionBinding, ...] = ()

    def identity(self) -> Identity:
        return Identity(
            self.service,
            service_version=self.service_version,
            binding=self.binding,
            placement=dict(self.placement) or None,
        )


def service_bindings(manifest: Manifest) -> ServiceBindings:
    from .events import event_bindings, subscription_bindings  # events.py spells types with type_text here

    modules = handler_slugs(TopicKey(topic.id, topic.version) for topic in manifest.topics)
    methods = handler_slugs(TopicKey(topic.id, topic.version) for topic in manifest.produces)
    _check_identifiers(manifest.topics, modules, "handler module")
    _check_identifiers(manifest.produces, methods, "client method")
    return ServiceBindings(
        service=manifest.service,
        service_version=manifest.service_version,
        placement=tuple(sorted((manifest.placement or {}).items())),
        title=manifest.title,
        api_version=manifest.api_version,
        prefix=manifest.prefix,
        topics=tuple(
            TopicBinding(
                topic.id,
                topic.version,
                topic.request,
                topic.response,
                topic.summary,
                modules[TopicKey(topic.id, topic.version)],
                tuple(str(route) for route in topic.routes),
                topic.success,
                topic.failures,
                topic.idempotent,
                topic.timeout,
                topic.security,
                topic.deprecated,
            )
            for topic in manifest.topics
        ),
        produces=tuple(
            ProducedBinding(
                topic.id,
                topic.version,
                topic.request,
                topic.response,
                topic.summary,
                methods[TopicKey(topic.id, topic.version)],
                topic.idempotent,
            )
            for topic in manifest.produces
        ),
        health=tuple(HealthBinding(name, slug(name)) for name in manifest.health),
        mesh=manifest.mesh,
        security=manifest.security,
        invoke=manifest.invoke,
        events=event_bindings(manifest),
        subscriptions=subscription_bindings(manifest),
    )


def registration_options(topic: TopicBinding) -> dict[str, Any]:
    """How a manifest topic is registered beyond its handler, version and types: the `Registry.add` keywords whose
    values are not its defaults, in the order service.py writes them. service.py's `build_registry` writes these
    (`views.service_view`) and the contract derivation passes them (`contracts`): one registration, so the
    committed documents are the served ones."""
    options: dict[str, Any] = {}
    if topic.summary:
        options["summary"] = topic.summary
    if topic.success != (OK,):
        options["success"] = list(topic.success)
    if topic.failures:
        options["failures"] = list(topic.failures)
    if topic.idempotent:
        options["idempotent"] = True
    if topic.timeout is not None:
        options["timeout"] = topic.timeout
    if topic.security is not None:
        options["security"] = requirement_literals(topic.security)
    if topic.deprecated is not None:
        options["deprecated"] = _deprecation.Deprecation(**asdict(topic.deprecated))
    return options


def requirement_literals(requirements: Requirements) -> list[dict[str, list[str]]]:
    """Requirements as service.py writes them: `[{"staff": ["patients:read"]}]`."""
    return [{name: list(scopes) for name, scopes in requirement} for requirement in requirements]


def type_text(expr: TypeExpr, imports: Imports) -> str:
    """A request or response type as service.py and clients.py write it (records as `models.X`)."""
    return annotation(expr, imports, records=MODELS_MODULE + ".")


def _check_identifiers(topics: tuple[TopicDef, ...], names: dict[TopicKey, str], what: str) -> None:
    problems = []
    for topic in topics:
        name = names[TopicKey(topic.id, topic.version)]
        if not is_module_name(name):
            label = f"{topic.id} (version {topic.version})" if topic.version else topic.id
            problems.append(
                f"topic {label} gives the {what} name {name!r}, which is not a Python identifier; "
                "start the topic id with a letter and avoid Python keywords"
            )
    if problems:
        raise CodegenError(problems)
