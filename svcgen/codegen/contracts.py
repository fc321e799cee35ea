"""contracts/*.json by the runtime's own derivation: what the running service serves, byte for byte.

The rendered models.py runs as a throwaway module; a `ServiceDefinition` with placeholder handlers gets the
same registrations service.py makes (both read `bindings`, both spell the types with `type_text` and take the
other options from `registration_options`), the same identity, routes and produced topics, and is assembled by
the runtime's `build_app`, as create_app assembles it; the documents are the `Service`'s own, encoded by
`document_bytes` exactly as the HTTP app serves them. No schema is derived here.
"""

from __future__ import annotations

import itertools
import sys
import types
from datetime import datetime
from typing import Any

from ..manifest.typeexpr import TypeExpr
from ..runtime._assembly import ServiceDefinition
from ..runtime._context import Context
from ..runtime._descriptor import ProducedTopic
from ..runtime._events import EventSpec, Subscriptions
from ..runtime._health import HealthCheck, HealthChecks
from ..runtime._http.routing import Route
from ..runtime._jsontext import document_bytes
from ..runtime._mesh.host import MeshHost, MeshSettings
from ..runtime._registry import Registry
from ..runtime._result import Result
from ..runtime._security import ApiKeyScheme, JwtScheme, Security
from .bindings import MODELS_MODULE, ServiceBindings, registration_options, type_text
from .errors import CodegenError
from .events import asyncapi_bytes
from .imports import Imports
from .views import security_view

ASYNCAPI = "contracts/asyncapi.json"
DESCRIPTOR = "contracts/descriptor.json"
HTTP_API = "contracts/http-api.json"
OPENAPI = "contracts/openapi.json"
SPEC = "contracts/spec.json"

_counter = itertools.count()


def contract_documents(bindings: ServiceBindings, models_source: str, package: str) -> dict[str, bytes]:
    """The committed documents, by relative path."""
    name = f"_svcgen_contracts_{package}_{next(_counter)}"
    module = types.ModuleType(name)
    # Registered so dataclasses and typing.get_type_hints resolve the module's annotations.
    sys.modules[name] = module
    try:
        try:
            exec(compile(models_source, f"<{package}/models.py>", "exec"), module.__dict__)
        except Exception as error:
            raise CodegenError(f"{package}/models.py does not run: {type(error).__name__}: {error}") from error
        mesh = _mesh_host(bindings)
        # The same assembly create_app runs (minus wiring and lifespan): same service, routes and profile.
        app = _placeholder_definition(bindings, module).build_app(mesh=mesh)
        service = app.service
        descriptor = dict(service.descriptor.document)
        descriptor.pop("instanceId", None)  # the mesh's instance: per running instance, never committed
        documents = {
            DESCRIPTOR: document_bytes(descriptor),
            HTTP_API: app.http_api_body,
            OPENAPI: app.openapi_body,
            SPEC: document_bytes(service.spec),
        }
        if bindings.events or bindings.subscriptions:
            documents[ASYNCAPI] = asyncapi_bytes(bindings, lambda expr: _resolve(expr, module))
        return documents
    finally:
        del sys.modules[name]


def _placeholder_definition(bindings: ServiceBindings, models: types.ModuleType) -> ServiceDefinition:
    def registry() -> Registry:
        registry = Registry()
        for topic in bindings.topics:
            registry.add(
                topic.topic,
                _placeholder,
                version=topic.version,
                request=_resolve(topic.request, models),
                response=_resolve(topic.response, models),
                **registration_options(topic),  # what service.py writes after the types
            )
        return registry

    produces = [
        ProducedTopic(
            produced.topic,
            produced.version,
            request_type=_resolve(produced.request, models),
            response_type=_resolve(produced.response, models),
        )
        for produced in bindings.produces
    ]
    health = HealthChecks([HealthCheck(check.name, _healthy) for check in bindings.health])
    events = [EventSpec(event.topic, _resolve(event.payload, models), event.version, event.key)
              for event in bindings.events]  # fmt: skip

    def subscriptions() -> Subscriptions:
        built = Subscriptions()
        for entry in bindings.subscriptions:
            built.add(entry.topic, _placeholder_event, publisher=entry.publisher,
                      payload=_resolve(entry.payload, models), version=entry.version)  # fmt: skip
        return built

    return ServiceDefinition(
        bindings.identity(),
        registry,
        _routes(bindings),
        produces,
        title=bindings.title,
        api_version=bindings.api_version,
        prefix=bindings.prefix,
        health=(lambda: health) if bindings.health else None,
        security=_security(bindings),
        invoke=bindings.invoke,
        events=events,
        subscriptions=subscriptions if bindings.subscriptions else None,
    )


def _security(bindings: ServiceBindings) -> Security | None:
    """The same declaration service.py's SECURITY makes (its keys are never read here)."""
    view = security_view(bindings.security)
    if view is None:
        return None
    kinds: dict[str, Any] = {"JwtScheme": JwtScheme, "ApiKeyScheme": ApiKeyScheme}
    schemes = [kinds[row.kind](row.name, **dict(row.options)) for row in view.schemes]
    return Security.declare(schemes, default=view.default, well_known=view.well_known)


def _routes(bindings: ServiceBindings) -> list[Route]:
    """service.py's ROUTES: each topic's routes in manifest order, bound to its (topic, version)."""
    return [Route.parse(spec, topic.topic, topic.version) for topic in bindings.topics for spec in topic.routes]


def _mesh_host(bindings: ServiceBindings) -> MeshHost | None:
    if bindings.mesh is None:
        return None
    # No OTLP exporter: the contracts need the mesh's middleware, not its exports (nor opentelemetry-proto).
    settings = MeshSettings(bindings.mesh.collector, bindings.mesh.heartbeat_seconds, bindings.mesh.issues)
    return MeshHost(bindings.identity(), settings, environ={})


def _healthy() -> bool:
    return True


def _resolve(expr: TypeExpr, models: types.ModuleType) -> Any:
    """The type service.py passes for `expr`: its very text, evaluated where service.py evaluates it."""
    namespace = {MODELS_MODULE: models, "Any": Any, "datetime": datetime}
    return eval(type_text(expr, Imports()), namespace)


async def _placeholder_event(event: Any, context: Context) -> Result[None]:
    return Result.ok()


async def _placeholder(request: Any, context: Context) -> Result[Any]:
    return Result.not_implemented("placeholder")
