"""The runtime's API level, and the check a generated package makes against it at import."""

from __future__ import annotations

from typing import Final

API_LEVEL: Final = 9
"""Raised when generated code starts to need something the public runtime did not offer before.

2: typed handler binding (`Handler`, `HandlerBindingError`) and the user's wiring module (`Wiring`).
3: the contract language on models (`Meta` constraints and annotations, `StrEnum` enums).
4: clients over any `Sender` (`open_sender`: HTTP or NATS targets).
5: thin generated code: `ServiceDefinition` assembles the app, `ClientsBase.call` makes every client call, typed
   options (`AppOptions`, `ServiceOptions`).
6: security (`Security`, `JwtScheme`, `ApiKeyScheme`, `Registry.add(security=)`) and the wiring's edge settings.
7: events (`EventSpec`, `Subscriptions`, `EventHandler`, `Delivery`; `ServiceDefinition` events, subscriptions,
   publisher).
8: deprecated topic versions (`Deprecation`, `Registry.add(deprecated=...)`).
9: topic options `idempotent` and `timeout` (`Registry.add`, `ProducedTopic`), retried senders (`Wiring.sender`
   takes `ProducedTopic`s)."""


class RuntimeMismatch(ImportError):
    """The installed runtime is not the one a generated package was built for."""


def require_api_level(level: int, package: str) -> None:
    """Fail with one line naming both levels and the fix unless the installed runtime serves `level`."""
    if level == API_LEVEL:
        return
    if level > API_LEVEL:
        fix = "upgrade svcgen (pip install --upgrade svcgen) to the release that built it"
    else:
        fix = "rebuild it with this svcgen (svcgen build MANIFEST -o OUT)"
    raise RuntimeMismatch(
        f"{package} was generated for svcgen runtime API level {level}, but the installed runtime is at "
        f"level {API_LEVEL}: {fix}"
    )
