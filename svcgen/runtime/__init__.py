"""The svcgen runtime: what generated services import.

Handlers need only `Context` and `Result`; the host wiring (registry, service, health, dependencies)
is exported here too. The HTTP binding lives in `svcgen.runtime.http`.
"""

from .context import Context
from .dependencies import Dependencies, Scope
from .health import HealthCheck, HealthCheckResult, HealthChecks
from .identity import Identity
from .registry import Registry, RegistryError, TopicKey
from .result import Result
from .service import Service

__all__ = [
    "Context",
    "Dependencies",
    "HealthCheck",
    "HealthCheckResult",
    "HealthChecks",
    "Identity",
    "Registry",
    "RegistryError",
    "Result",
    "Scope",
    "Service",
    "TopicKey",
]
