"""`ServiceDefinition`: what a generated service.py declares, and the one order an app is assembled in from it.

The generated `build_service()` and `create_app()` are one line each over a `ServiceDefinition`; codegen's
contracts step builds the same `build_app` over placeholder handlers, so the documents it commits are the ones
the running app serves. The order, in one place:

1. the user's `wire(setup)` (dependencies, hooks, targets); then the produced-topic `Clients` on one sender,
   unless `wire` provided its own; then the event bus (published events and subscriptions) and its `Events`;
2. the `Service`: the mesh's trace middleware first (it times the whole invocation), the mesh's identity (it
   names this instance), the registry, health checks and produced topics;
3. the `HttpApp` over it and the routes, and the profile self-check into the descriptor (before the mesh
   attaches, so register carries it);
4. the mesh's lifespan (reporter, OTLP), then the wiring's hooks around everything.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack

from ._clients import ClientsBase
from ._dependencies import Dependencies
from ._descriptor import Identity, ProducedTopic
from ._events import EventBus, EventSpec, Subscriptions, events_descriptor
from ._health import HealthChecks
from ._http.app import AppOptions, HttpApp
from ._http.routing import Route
from ._jsonlimits import DEFAULT_JSON_LIMITS, JsonLimits
from ._mesh.host import MeshHost, MeshSettings, warn_without_mesh
from ._mesh.profile import declare_profile
from ._mesh.tracecontext import propagation_headers
from ._pipeline import Middleware
from ._registry import Registry
from ._security import Guard, Security
from ._service import DEFAULT_API_VERSION, DEFAULT_TITLE, Service
from ._topics import DEFAULT_PREFIX
from ._wiring import Wiring


class ServiceOptions(TypedDict, total=False):
    """What a caller of `build_service()` adds to the service the manifest declares."""

    middleware: Sequence[Middleware]
    """After the mesh's trace middleware, when there is a mesh."""
    dependencies: Dependencies | None
    json_limits: JsonLimits
    security: Guard | Security | None
    """Enforces who may call each topic; default: the definition's `security` (without API keys)."""


@dataclass(frozen=True)
class ServiceDefinition:
    """A service as its manifest declares it: identity, handlers, routes, produced topics and settings."""

    identity: Identity
    registry: Callable[[], Registry]
    """Builds the registry, every topic bound to its handler: a fresh one per service."""
    routes: Sequence[Route] = ()
    produces: Sequence[ProducedTopic] = ()
    title: str = DEFAULT_TITLE
    api_version: str = DEFAULT_API_VERSION
    prefix: str = DEFAULT_PREFIX
    health: Callable[[], HealthChecks] | None = None
    mesh: MeshSettings | None = None
    """The manifest's mesh settings; `create_app` makes a `MeshHost` of them unless given one."""
    clients: type[ClientsBase] | None = None
    """The generated `Clients`: `create_app` provides one over the wiring's sender for the produced topics."""
    events: Sequence[EventSpec] = ()
    """The events the service publishes."""
    subscriptions: Callable[[], Subscriptions] | None = None
    """Builds the events the service handles, each bound to its handler."""
    publisher: Callable[[EventBus], Any] | None = None
    """The generated `Events` (typed publish methods): `create_app` provides one over the service's event bus."""
    security: Security | None = None
    """Who may call each topic; `create_app` enforces it with the wiring's API keys (`Wiring.guard`)."""
    invoke: bool = True
    """Serve `{prefix}/invoke` and the per-topic invoke faces (the manifest's `invoke:`)."""

    def build_service(self, *, mesh: MeshHost | None = None, **options: Unpack[ServiceOptions]) -> Service:
        """The service; with `mesh`, its trace middleware goes first and its identity names this instance."""
        middleware: Sequence[Middleware] = options.get("middleware", ())
        identity = self.identity
        if mesh is not None:
            middleware = [*mesh.middleware, *middleware]
            identity = mesh.identity
        return Service(
            identity,
            self.registry(),
            middleware=middleware,
            dependencies=options.get("dependencies"),
            health=self.health() if self.health is not None else None,
            produces=self.produces,
            events=self._events_descriptor(),
            title=self.title,
            api_version=self.api_version,
            prefix=self.prefix,
            json_limits=options.get("json_limits", DEFAULT_JSON_LIMITS),
            security=options.get("security", self.security),
        )

    def _events_descriptor(self) -> dict[str, Any] | None:
        subscriptions = self.subscriptions() if self.subscriptions is not None else Subscriptions()
        return events_descriptor(self.events, subscriptions)

    def build_app(
        self,
        *,
        mesh: MeshHost | None = None,
        service: ServiceOptions | None = None,
        dependencies: Dependencies | None = None,
        **options: Unpack[AppOptions],
    ) -> HttpApp:
        """The HTTP app over `build_service` (`service` adds its options), its profile self-check in the
        descriptor; no lifespan yet."""
        settings: ServiceOptions = {**(service or {}), "dependencies": dependencies}
        built = self.build_service(mesh=mesh, **settings)
        options.setdefault("invoke", self.invoke)
        app = HttpApp(built, self.routes, **options)
        declare_profile(app, mesh)
        return app

    def create_app(
        self,
        wire: Callable[[Wiring], None] | None = None,
        *,
        mesh: MeshHost | None = None,
        setup: Wiring | None = None,
        **options: Unpack[AppOptions],
    ) -> HttpApp:
        """The app as a process serves it: wired by `wire(setup)` (default `Wiring()`, over os.environ), with
        its clients, its mesh (`mesh`, or one made from the manifest's settings), and their lifespans."""
        setup = setup if setup is not None else Wiring()
        if wire is not None:
            wire(setup)
        # Also where no sender is made (nothing produced, wire()'s own Clients, a test client's fake owners).
        setup.check_per_topic(produced.topic for produced in self.produces)
        if self.clients is not None and self.clients not in setup.dependencies:  # wire() may provide its own
            # One pooled sender per process, closed at shutdown; handlers get it as context.scope.get(Clients).
            sender = setup.sender(self.produces, extra_headers=propagation_headers)
            setup.dependencies.value(self.clients, self.clients(sender))
        bus = None
        if self.events or self.subscriptions is not None:
            # Over JetStream on the wiring's NATS server (or its event_broker); without either: WiringError.
            subscriptions = self.subscriptions() if self.subscriptions is not None else Subscriptions()
            bus = setup.events(self.identity.service, self.events, subscriptions, extra_headers=propagation_headers)
            if self.publisher is not None and self.publisher not in setup.dependencies:
                setup.dependencies.value(self.publisher, self.publisher(bus))
        if mesh is None and self.mesh is not None:
            mesh = MeshHost(self.identity, self.mesh, environ=setup.environ)
        elif mesh is None:
            warn_without_mesh(setup.environ)
        if bus is not None and mesh is not None:
            bus.on_dead_letter.append(mesh.observe_dead_letter)  # each dead letter is an issue
            bus.tracer = mesh.tracer  # each publish is a span, the deliveries' parent
        service: ServiceOptions = {"middleware": setup.middleware}
        if self.security is not None:
            service["security"] = setup.guard(self.security)
        app = self.build_app(mesh=mesh, service=service, dependencies=setup.dependencies, **options)
        return setup.attach(mesh.attach(app) if mesh is not None else app)
