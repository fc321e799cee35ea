"""How the notifications service is wired where it runs: settings, dependencies, startup and shutdown, and
where the topics it produces are sent.

Yours to edit: svcgen created this file once and never overwrites it. create_app() in service.py calls
`wire` once per process, with or without the mesh, before the app serves.

Settings read from the environment (variable: default):
    SVCGEN_NATS: NATS_URL below
        a NATS server (nats://host:port), required for its events; the topics are served on it as well
    SVCGEN_COLLECTOR: http://127.0.0.1:8700
        the collector the mesh feeds go to (manifest mesh.collector)
    SVCGEN_HEARTBEAT_SECONDS: 30
        seconds between heartbeats (manifest mesh.heartbeatSeconds)
A topic added to `produces` later is sent where SVCGEN_TARGET_<TOPIC> says (`payments:capture` →
SVCGEN_TARGET_PAYMENTS_CAPTURE) or TARGETS names it; without either the app refuses to start, naming the
variable.
"""

from __future__ import annotations

from svcgen.runtime import Wiring

TARGETS: dict[str, str] = {}
"""Produced topic → invoke URL of the service that handles it (or nats://host:port/<service> to send it over
NATS), unless its environment variable says otherwise."""

NATS_URL = ""
"""A NATS server (nats://host:port) unless SVCGEN_NATS says otherwise: required for this service's events (it does
not start without one), and its topics are served on it as well."""


async def startup() -> None:
    """Runs once before the first request: open pools, warm caches."""


async def shutdown() -> None:
    """Runs once after the last request: close what startup opened."""


def wire(wiring: Wiring) -> None:
    """Settings, dependencies and hooks of this process. Handlers reach a dependency as
    `context.scope.get(Type)`. For example:

        pool = Pool(wiring.environ.get("DATABASE_URL", "postgresql://127.0.0.1/notifications"))
        wiring.dependencies.value(Pool, pool)
        wiring.on_startup(pool.open)
        wiring.on_shutdown(pool.close)

    The edge (docs/security.md): `wiring.api_keys["<apiKey scheme>"] = {key: subject}` (from a secret store, never
    committed; SVCGEN_API_KEYS_<SCHEME>="subject=key,..." adds keys from the environment);
    `wiring.credentials["<produced topic>"] = BearerToken(fetch)` or `ApiKey(...)`; `wiring.middleware` (pipeline)
    and `wiring.asgi_middleware` (ASGI), outermost first; `wiring.cors = Cors(...)`.

    Resilience (docs/runtime.md):
    Idempotency-Key answers are kept in this process unless replicas share a store
    (`wiring.idempotency = PostgresIdempotencyStore(url)`).
    """
    wiring.targets.update(TARGETS)
    wiring.nats_url = NATS_URL
    wiring.on_startup(startup)
    wiring.on_shutdown(shutdown)
