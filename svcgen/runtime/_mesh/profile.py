"""The Cloud Service Profile: its eight requirements and the self-check of a hosted service's wiring.

A self-check is a verdict on how the service is put together, not a runtime probe (see probe.py for
the outside-in audit). R1: a hosted pipeline behind a transport; R2: at least one application topic
served through the registry; R3–R8 as the spec names them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from .._http.app import HttpApp
from .._service import Service
from .._topics import DEFAULT_PREFIX, is_reserved_topic
from .host import MeshHost
from .traces import TraceMiddleware

PROFILE_NAME: Final = "cloud-service"
REQUIREMENTS: Final = ("R1", "R2", "R3", "R4", "R5", "R6", "R7", "R8")
MEANINGS: Final = {
    "R1": "hosted pipeline behind a transport",
    "R2": "at least one application topic",
    "R3": "health endpoint",
    "R4": "invoke endpoint",
    "R5": "spec endpoint",
    "R6": "register and heartbeat to a collector",
    "R7": "configurable prefix",
    "R8": "trace propagation",
}


@dataclass(frozen=True)
class Check:
    id: str
    satisfied: bool
    reason: str

    def document(self) -> dict[str, Any]:
        return {"id": self.id, "satisfied": self.satisfied, "reason": self.reason}


@dataclass(frozen=True)
class SelfCheck:
    checks: tuple[Check, ...]

    @property
    def is_conformant(self) -> bool:
        return all(check.satisfied for check in self.checks)

    @property
    def missing(self) -> list[str]:
        return [check.id for check in self.checks if not check.satisfied]

    def reason(self, requirement: str) -> str:
        for check in self.checks:
            if check.id == requirement:
                return check.reason
        raise KeyError(f"no requirement {requirement!r}; the profile has {', '.join(REQUIREMENTS)}")

    @property
    def profile(self) -> dict[str, Any]:
        """The descriptor's `profile` object."""
        missing = self.missing
        return {"name": PROFILE_NAME, "missing": missing} if missing else {"name": PROFILE_NAME}


def self_check(service: Service, app: HttpApp | None = None, mesh: MeshHost | None = None) -> SelfCheck:
    """Check `service` as hosted by `app` (None: not behind a transport) and reporting through `mesh`."""
    prefix = service.prefix or "/"
    surfaces = app.surfaces if app is not None else {}

    def served(method: str, surface: str) -> bool:
        return (method, f"{service.prefix}/{surface}") in surfaces

    app_topics = {registration.topic for registration in service.registry if not is_reserved_topic(registration.topic)}
    tracer = service.middleware[0] if service.middleware else None
    return SelfCheck(
        (
            _check(
                "R1",
                app is not None and app.service is service,
                "the pipeline is hosted by the HTTP binding",
                "the service is not hosted behind a transport",
            ),
            _check(
                "R2",
                bool(app_topics),
                f"{len(app_topics)} application topic(s) in the registry",
                "the registry has no application topic",
            ),
            _check(
                "R3",
                served("GET", "health"),
                f"GET {service.prefix}/health serves the health aggregate",
                "no health checks are configured, so there is no health endpoint",
            ),
            _check(
                "R4",
                served("POST", "invoke"),
                f"POST {service.prefix}/invoke applies envelopes",
                "the invoke endpoint is turned off",
            ),
            _check(
                "R5",
                served("GET", "spec"),
                f"GET {service.prefix}/spec serves the spec",
                "the spec endpoint is turned off",
            ),
            _reporting(mesh, app),
            _check(
                "R7",
                app is not None,
                f"surfaces mounted under the prefix {prefix!r} (default {DEFAULT_PREFIX!r}), "
                "set by the `prefix` option",
                "no transport, so no surfaces to mount",
            ),
            _check(
                "R8",
                isinstance(tracer, TraceMiddleware),
                "trace middleware installed outermost; outbound clients forward traceparent",
                "no trace middleware installed outermost",
            ),
        )
    )


def _check(requirement: str, satisfied: bool, when_met: str, when_unmet: str) -> Check:
    return Check(requirement, satisfied, when_met if satisfied else when_unmet)


def _reporting(mesh: MeshHost | None, app: HttpApp | None) -> Check:
    if mesh is None or not mesh.settings.feeds:
        return Check("R6", False, "no collector is configured (manifest `mesh.collector` or `mesh.nats`)")
    if app is None:
        return Check("R6", False, "a collector is configured but there is no host lifespan to run the reporter")
    return Check(
        "R6",
        True,
        f"reporter registers and heartbeats every {mesh.settings.heartbeat_seconds:g} s to {_feeds_target(mesh)}",
    )


def _feeds_target(mesh: MeshHost) -> str:
    settings = mesh.settings
    return f"JetStream at {settings.nats}" if settings.transport == "nats" else str(settings.collector)


def declare_profile(app: HttpApp, mesh: MeshHost | None = None) -> SelfCheck:
    """Self-check `app` and put the verdict in its descriptor. Call before `mesh.attach(app)`, so the
    register feed carries it."""
    check = self_check(app.service, app, mesh)
    app.service.declare_profile(check.profile)
    return check
