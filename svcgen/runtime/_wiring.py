"""`Wiring`: what a service's own wiring module sets up for one process, applied to its HTTP app.

A generated `create_app()` makes one `Wiring`, hands it to the package's `wiring.wire()` (the user's file),
builds the produced-topic clients on one pooled sender, and attaches the result to the app: startup hooks
run before the first request (before the mesh starts reporting), shutdown hooks after the last one (after
the mesh's final flush), and the sender is closed last.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

import httpx

from ._dependencies import Dependencies
from ._http.app import HttpApp
from ._http.sender import HeaderHook, HttpSender, _join, _split_base
from ._naming import slug

TARGET_ENV_PREFIX = "SVCGEN_TARGET_"
Hook = TypeVar("Hook", bound=Callable[[], Awaitable[None]])


class WiringError(ValueError):
    """A service that cannot start as wired (a produced topic without a target, a malformed URL); the message
    is one line naming what to set."""


def target_variable(topic: str) -> str:
    """The environment variable that says where `topic` is sent: `payments:capture` → SVCGEN_TARGET_PAYMENTS_CAPTURE."""
    return TARGET_ENV_PREFIX + slug(topic).upper()


class Wiring:
    """Dependencies, lifecycle hooks and produced-topic targets of one app process.

    - `environ`: where settings are read (default `os.environ`); the mesh reads its overrides here too.
    - `dependencies`: providers handlers reach as `context.scope.get(Type)`.
    - `targets`: produced topic id → invoke base URL of the service that handles it (the topic is appended);
      the variable `target_variable(topic)` in `environ` overrides it.
    - `transport`: the HTTP transport of the produced-topic sender (default: a real pooled connection).
    """

    def __init__(
        self, *, environ: Mapping[str, str] | None = None, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.environ: Mapping[str, str] = os.environ if environ is None else environ
        self.dependencies = Dependencies()
        self.targets: dict[str, str] = {}
        self.transport = transport
        self.startup: list[Callable[[], Awaitable[None]]] = []
        self.shutdown: list[Callable[[], Awaitable[None]]] = []

    def on_startup(self, hook: Hook) -> Hook:
        """Run `hook` once before the app serves (usable as a decorator)."""
        self.startup.append(hook)
        return hook

    def on_shutdown(self, hook: Hook) -> Hook:
        """Run `hook` once after the app served its last request (usable as a decorator)."""
        self.shutdown.append(hook)
        return hook

    def target(self, topic: str) -> str:
        """The invoke base URL `topic` is sent to: its environment variable, else `targets`; WiringError when
        neither names an http(s) URL."""
        variable = target_variable(topic)
        from_environ = self.environ.get(variable, "").strip()
        url = from_environ or self.targets.get(topic, "").strip()
        where = variable if from_environ else f"TARGETS[{topic!r}] in wiring.py"
        if not url:
            raise WiringError(
                f"the produced topic {topic} has no target: set {variable} to the invoke URL of the service "
                f"that handles it (e.g. http://127.0.0.1:8001/svc/invoke), or add it to TARGETS in wiring.py"
            )
        try:
            _split_base(url)
        except ValueError:
            raise WiringError(f"{where} = {url!r} is not an absolute http(s) URL") from None
        return url

    def sender(self, topics: Iterable[str], *, extra_headers: HeaderHook | None = None, **options: Any) -> HttpSender:
        """One `HttpSender` (one pooled HTTP client) for `topics`, each POSTed to `<its target>/<topic>`;
        closed at shutdown. `options` go to `HttpSender`."""
        urls = {topic: _join(_split_base(self.target(topic)), topic) for topic in topics}
        sender = HttpSender(urls, extra_headers=extra_headers, transport=self.transport, **options)
        self.shutdown.append(sender.aclose)
        return sender

    def attach(self, app: HttpApp) -> HttpApp:
        """Startup hooks go before the app's own, shutdown hooks after them: what the wiring opened outlives
        everything else the app runs."""
        app.on_startup[:0] = self.startup
        app.on_shutdown.extend(self.shutdown)
        return app
