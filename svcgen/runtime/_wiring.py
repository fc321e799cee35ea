"""`Wiring`: what a service's own wiring module sets up for one process, applied to its HTTP app.

A generated `create_app()` makes one `Wiring`, hands it to the package's `wiring.wire()` (the user's file),
builds the produced-topic clients on one pooled sender, and attaches the result to the app: startup hooks
run before the first request (before the mesh starts reporting), shutdown hooks after the last one (after
the mesh's final flush), and the sender is closed last. With a NATS server set (`nats_url`, SVCGEN_NATS) the
app's service is served over NATS too, on the process's one connection per server, which is closed after
everything else.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar
from urllib.parse import urlsplit

import httpx

from ._credentials import Credential, SenderWithCredentials
from ._dependencies import Dependencies
from ._descriptor import ProducedTopic
from ._events import EventBroker, EventBus, EventSpec, Retention, Subscriptions, events_need_broker
from ._http.app import AsgiApp, HttpApp
from ._http.cors import Cors, cors_middleware
from ._http.sender import HeaderHook, HttpSender, _join, _split_base
from ._idempotency import IdempotencyStore
from ._jsontext import document_bytes
from ._logging import shown
from ._naming import slug
from ._nats.connections import (
    NATS_MISSING,
    ConnectFactory,
    NatsConnections,
    NatsError,
    nats_installed,
    server_of,
)
from ._nats.events import JetStreamBroker
from ._nats.requester import NatsSender, nats_target
from ._nats.responder import NatsBinding
from ._pipeline import Middleware
from ._result import Result
from ._retry import Retry, RetryingSender
from ._security import Guard, Security, SecurityError

if TYPE_CHECKING:
    from nats.aio.client import Client

TARGET_ENV_PREFIX = "SVCGEN_TARGET_"
API_KEYS_ENV_PREFIX = "SVCGEN_API_KEYS_"
"""`SVCGEN_API_KEYS_<SCHEME>="subject=key,subject=key"`: API keys of an apiKey scheme, beside `wiring.api_keys`."""
NATS_ENV = "SVCGEN_NATS"
"""The NATS server to serve the topics on as well (`svcgen serve --nats URL` sets it); overrides `nats_url`."""
NATS_SCHEMES = ("nats://", "tls://")
ASYNCAPI_DOCUMENT = "asyncapi.json"
"""Served at `{prefix}/asyncapi.json` by a service with events, as committed to contracts/asyncapi.json."""
Hook = TypeVar("Hook", bound=Callable[[], Awaitable[None]])


class WiringError(ValueError):
    """A service that cannot start as wired (a produced topic without a target, a malformed URL); the message
    is one line naming what to set."""


def checked_http_url(url: str, where: str, example: str) -> str:
    """`url` when it is an http(s) URL with a host; else a `WiringError` naming `where` it was set."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise WiringError(f"{where}={url!r}: expected an http:// or https:// URL like {example}")
    return url


def checked_nats_url(url: str, where: str, parse: Callable[[str], object] = server_of) -> str:
    """`url` when `parse` reads it (a server's `nats://host:port` by default); else a `WiringError` naming `where` it
    was set."""
    try:
        parse(url)
    except NatsError as error:
        raise WiringError(f"{where} = {error}") from None
    return url


class Sender(Protocol):
    """Anything that sends a message and reports the outcome: what generated clients send through (`HttpSender`,
    `NatsSender`, or one routing each topic to either) and what the mesh feeds go out by. Whoever opens a sender
    closes it."""

    async def send(self, topic: str, payload: Any = None, headers: Mapping[str, str] | None = None) -> Result[Any]:
        """Never raises: every failure on the way is a failed `Result`."""
        ...


def open_sender(url: str, *, extra_headers: HeaderHook | None = None) -> HttpSender | NatsSender:
    """A sender for one target URL: an invoke base URL (http, https) or `nats://host:port/<service>`."""
    if url.startswith(NATS_SCHEMES):
        if not nats_installed():
            raise WiringError(f"{url}: {NATS_MISSING}")
        return NatsSender(url, extra_headers=extra_headers)
    return HttpSender(url, extra_headers=extra_headers)


class TopicSenders:
    """Sends each topic through the sender of its target's kind (HTTP or NATS); closes them all."""

    def __init__(self, senders: Mapping[str, HttpSender | NatsSender]) -> None:
        self._senders = dict(senders)

    async def send(self, topic: str, payload: Any = None, headers: Mapping[str, str] | None = None) -> Result[Any]:
        sender = self._senders.get(topic)
        if sender is None:
            return Result.not_found(f"no target for topic {topic!r}")
        return await sender.send(topic, payload, headers)

    async def aclose(self) -> None:
        for sender in {id(sender): sender for sender in self._senders.values()}.values():
            await sender.aclose()


def _api_keys(variable: str, text: str) -> dict[str, str]:
    """`subject=key,subject=key` → {key: subject}; a malformed entry is named by position, never shown."""
    keys: dict[str, str] = {}
    for number, entry in enumerate(text.split(","), 1):
        subject, equals, key = entry.strip().partition("=")
        if not equals or not subject.strip() or not key.strip():
            raise WiringError(f"{variable}: entry {number} is not subject=key (entries are separated by commas)")
        keys[key.strip()] = subject.strip()
    return keys


def target_variable(topic: str) -> str:
    """The environment variable that says where `topic` is sent: `payments:capture` → SVCGEN_TARGET_PAYMENTS_CAPTURE."""
    return TARGET_ENV_PREFIX + slug(topic).upper()


class Wiring:
    """Dependencies, lifecycle hooks and produced-topic targets of one app process.

    - `environ`: where settings are read (default `os.environ`); the mesh reads its overrides here too.
    - `dependencies`: providers handlers reach as `context.scope.get(Type)`.
    - `targets`: produced topic id → invoke base URL of the service that handles it (the topic is appended),
      or `nats://host:port/<service>` to send it over NATS; the variable `target_variable(topic)` in `environ`
      overrides it.
    - `nats_url`: a NATS server (`nats://host:port`) to serve the app's topics on as well; SVCGEN_NATS in
      `environ` overrides it.
    - `transport`: the HTTP transport of the produced-topic sender (default: a real pooled connection).
    - `nats_connect`: opens a NATS connection (server URL → connection; default nats-py's); `nats` holds the
      process's connections, one per server, shared by the binding and the NATS senders.
    - `api_keys`: apiKey scheme name → {key: subject}, the keys callers may present (read them from the
      environment or a secret store, never commit them); `SVCGEN_API_KEYS_<SCHEME>` in `environ`
      (`subject=key,subject=key`) adds to them. JWKS are fetched through `transport` too.
    - `credentials`: produced topic id → a `BearerToken` or `ApiKey` its calls carry.
    - `middleware`: pipeline middleware `(context, next)`, outermost first, after the mesh's own.
    - `asgi_middleware`: ASGI middleware around the whole app, outermost first: each is called with the app it
      wraps and returns the wrapping app (a Starlette middleware class, or `functools.partial` of one).
    - `cors`: `Cors(...)` settings for browser callers on other origins (the `cors` extra), outermost of all.
    """

    NATS_VARIABLE: ClassVar[str] = NATS_ENV
    """The variable naming the NATS server the app's topics are served on as well."""

    def __init__(
        self,
        *,
        environ: Mapping[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        nats_connect: ConnectFactory | None = None,
    ) -> None:
        self.environ: Mapping[str, str] = os.environ if environ is None else environ
        self.dependencies = Dependencies()
        self.targets: dict[str, str] = {}
        self.nats_url = ""
        self.transport = transport
        self.nats = NatsConnections(nats_connect)
        self._nats_connect = nats_connect
        self._uses_nats = False
        self.event_broker: EventBroker | None = None
        """What carries the service's events; default JetStream on the NATS server (`nats_url`, SVCGEN_NATS)."""
        self.event_retention = Retention()
        """How long and how much the stream of the events this service publishes keeps; applied to an existing
        stream at start."""
        self._events: EventBus | None = None
        self.startup: list[Callable[[], Awaitable[None]]] = []
        self.shutdown: list[Callable[[], Awaitable[None]]] = []
        self.retry = Retry()
        """How produced topics are tried again (default: 2 retries, 0.5 s doubling to 8 s); `Retry(retries=0)`
        never retries."""
        self.retries: dict[str, Retry] = {}
        """Per produced topic: overrides `retry` for that topic's target."""
        self.idempotency: IdempotencyStore | None = None
        """Where answers to `Idempotency-Key` calls are kept: None keeps them in this process's memory; a
        `PostgresIdempotencyStore` shares them between replicas (opened at startup, closed at shutdown)."""
        self.api_keys: dict[str, dict[str, str]] = {}
        self.credentials: dict[str, Credential] = {}
        self.middleware: list[Middleware] = []
        self.asgi_middleware: list[Callable[[AsgiApp], AsgiApp]] = []
        self.cors: Cors | None = None

    def guard(self, security: Security) -> Guard:
        """The enforcement of the manifest's `security` with this wiring's API keys; key files are read now, so
        a missing one stops the start with a WiringError naming it."""
        keys = {name: dict(entries) for name, entries in self.api_keys.items()}
        for scheme in security.schemes:
            variable = API_KEYS_ENV_PREFIX + slug(scheme.name).upper()
            if scheme.type == "apiKey" and self.environ.get(variable, "").strip():
                keys.setdefault(scheme.name, {}).update(_api_keys(variable, self.environ[variable]))
        try:
            return Guard(security, api_keys=keys, transport=self.transport).load()
        except SecurityError as error:
            raise WiringError(str(error)) from None

    def on_startup(self, hook: Hook) -> Hook:
        """Run `hook` once before the app serves (usable as a decorator)."""
        self.startup.append(hook)
        return hook

    def on_shutdown(self, hook: Hook) -> Hook:
        """Run `hook` once after the app served its last request (usable as a decorator)."""
        self.shutdown.append(hook)
        return hook

    def target(self, topic: str) -> str:
        """The invoke base URL (or NATS target) `topic` is sent to: its environment variable, else `targets`;
        WiringError when neither names an http(s) URL or a `nats://host:port/<service>` target."""
        variable = target_variable(topic)
        from_environ = self.environ.get(variable, "").strip()
        url = from_environ or self.targets.get(topic, "").strip()
        where = variable if from_environ else f"TARGETS[{topic!r}] in wiring.py"
        if not url:
            raise WiringError(
                f"the produced topic {topic} has no target: set {variable} to the invoke URL of the service "
                f"that handles it (e.g. http://127.0.0.1:8001/svc/invoke), or add it to TARGETS in wiring.py"
            )
        if url.startswith(NATS_SCHEMES):
            self._check_nats(where, url, nats_target)
            return url
        try:
            _split_base(url)
        except ValueError:
            raise WiringError(
                f"{where} = {url!r} is not an absolute http(s) URL or nats://host:port/<service>"
            ) from None
        return url

    def check_per_topic(self, produced: Iterable[str]) -> None:
        """A `WiringError` when `credentials` or `retries` name a topic not in `produced`: a typo that would
        silently do nothing. `create_app` checks at start, whether or not it makes a sender."""
        topics = set(produced)
        for setting, per_topic in (("credentials", self.credentials), ("retries", self.retries)):
            unknown = sorted(per_topic.keys() - topics)
            if unknown:
                raise WiringError(f"{setting} in wiring.py name {', '.join(unknown)}, which this service does not "
                                  f"produce; {setting} are set per produced topic")  # fmt: skip

    def sender(
        self, topics: Iterable[str | ProducedTopic], *, extra_headers: HeaderHook | None = None, **options: Any
    ) -> Sender:
        """One sender for `topics`, closed at shutdown: an `HttpSender` (one pooled HTTP client) POSTing each to
        `<its target>/<topic>`, with a `NatsSender` on the process's NATS connection beside it for the topics
        whose target is `nats://...`; calls are retried as `retry` and `retries` say, and those of a topic that
        is not idempotent (a plain topic id counts as not) carry an `Idempotency-Key`. `options` go to
        `HttpSender`."""
        produced = [item if isinstance(item, ProducedTopic) else ProducedTopic(item) for item in topics]
        targets = {item.topic: self.target(item.topic) for item in produced}
        over_nats = {topic: url for topic, url in targets.items() if url.startswith(NATS_SCHEMES)}
        urls = {topic: _join(_split_base(url), topic) for topic, url in targets.items() if topic not in over_nats}
        http = HttpSender(urls, extra_headers=extra_headers, transport=self.transport, **options)
        sender: HttpSender | TopicSenders | SenderWithCredentials = http
        if over_nats:
            nats = NatsSender(over_nats, connections=self.nats, extra_headers=extra_headers)
            sender = TopicSenders({topic: nats if topic in over_nats else http for topic in targets})
            self._uses_nats = True
        self.check_per_topic(targets)
        if self.credentials:
            sender = SenderWithCredentials(sender, self.credentials)
        retrying = RetryingSender(
            sender,
            idempotent={item.topic for item in produced if item.idempotent},
            policy=self.retry,
            policies=self.retries,
        )
        self.shutdown.append(retrying.aclose)
        return retrying

    def events(
        self,
        service: str,
        published: Iterable[EventSpec],
        subscriptions: Subscriptions,
        *,
        extra_headers: Callable[[], Mapping[str, str]] | None = None,
    ) -> EventBus:
        """The service's events over `event_broker`, else JetStream on its NATS server; WiringError (one line) when
        there is neither: no silent in-process fallback. Started and stopped with the app (`attach`)."""
        published = tuple(published)
        broker = self.event_broker
        if broker is None:
            url = self.serve_nats_on()
            if url is None:
                raise WiringError(events_need_broker(service, published, subscriptions))
            broker = JetStreamBroker(lambda: self._nats_connection(url))
            self._uses_nats = True
        self._events = EventBus(service, published, subscriptions, broker, self.event_retention, extra_headers)
        return self._events

    def serve_nats_on(self) -> str | None:
        """The NATS server the app's topics are served on as well (SVCGEN_NATS, else `nats_url`), or None."""
        url = self.environ.get(NATS_ENV, "").strip() or self.nats_url.strip()
        if not url:
            return None
        self._check_nats(self._nats_setting(), url, server_of)
        return url

    def _nats_setting(self) -> str:
        return NATS_ENV if self.environ.get(NATS_ENV, "").strip() else "nats_url in wiring.py"

    async def _nats_connection(self, url: str) -> Client:
        """The connection to the server of `url`; NatsError naming the setting it came from (one line, no
        credentials) when it cannot be opened: the app's startup reports that line."""
        try:
            return await self.nats.get(url)
        except NatsError as error:
            raise NatsError(f"{self._nats_setting()} {shown(url)}: {error}") from None

    def _check_nats(self, setting: str, url: str, parse: Callable[[str], object]) -> None:
        """WiringError naming `setting` when `url` does not parse, or when nats-py is missing to use it."""
        checked_nats_url(url, setting, parse)
        if self._nats_connect is None and not nats_installed():
            raise WiringError(f"{setting}: {NATS_MISSING}")

    def attach(self, app: HttpApp) -> HttpApp:
        """Startup hooks go before the app's own, shutdown hooks after them: what the wiring opened outlives
        everything else the app runs. The NATS binding, when set, starts after the app's own hooks and stops
        before them (the mesh's last flush carries its traces); the NATS connections close last of all."""
        app.on_startup[:0] = self.startup
        app.on_shutdown.extend(self.shutdown)
        store = self.idempotency
        if store is not None:
            app.service.idempotency = store
            opens, closes = getattr(store, "open", None), getattr(store, "aclose", None)
            if opens is not None:
                app.on_startup.insert(0, opens)  # before any hook of the user's may call a topic
            if closes is not None:
                app.on_shutdown.append(closes)
        app.wrap(*self.asgi_middleware)
        cors = self.cors
        if cors is not None:
            security = app.service.guard.security if app.service.guard is not None else None
            try:
                app.wrap(lambda inner: cors_middleware(inner, cors, security))
            except ImportError as error:
                raise WiringError(str(error)) from None
        url = self.serve_nats_on()
        if url is not None:
            binding = NatsBinding(app.service, lambda: self._nats_connection(url), limits=app.limits)
            app.on_startup.append(binding.start)
            app.on_shutdown.insert(0, binding.stop)
        events = self._events
        if events is not None:
            document = events.asyncapi(title=app.service.title, version=app.service.api_version)
            app.serve_document(ASYNCAPI_DOCUMENT, document_bytes(document))

            async def start_events() -> None:
                await events.start(app.service, json_limits=app.limits.json)

            app.on_startup.append(start_events)
            app.on_shutdown.insert(0, events.stop)
        if url is not None or self._uses_nats:
            app.on_shutdown.append(self.nats.aclose)
        return app
