"""The ASGI application: well-known surfaces first, then application routes, one pipeline run per request."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from functools import cached_property
from types import MappingProxyType
from typing import Any, TypedDict, Unpack

import orjson

from .. import _status as st
from .._codec import TextFields
from .._envelope import CARRIED_HEADERS, EnvelopeError, parse_envelope, with_carried_headers
from .._events import EventsError
from .._invocation import Invocation
from .._jsontext import document_bytes
from .._nats.connections import NatsError
from .._openapi import build_openapi
from .._pipeline import cancelled_from_outside
from .._registry import Registry
from .._result import Result
from .._service import ADMITTED_PER_CALL, Runner, Service
from .._topics import is_reserved_topic
from .docspage import DOCS_HEADERS, docs_page
from .httpapi import build_http_api
from .limits import LIMIT_STATUS, LimitExceeded, Limits, check_headers
from .requests import (
    AsgiScope,
    BodyTooLarge,
    ClientDisconnected,
    Message,
    QueryNotUtf8,
    Receive,
    Send,
    query_fields,
    read_body,
    request_headers,
    whole_body,
)
from .responses import outcome_messages, send_failure, send_response
from .routing import METHODS, PathNotUtf8, Route, RouteError, Router, split_path, split_raw_path

logger = logging.getLogger("svcgen.http")

LifespanHook = Callable[[], Awaitable[None]]
_Surface = Callable[[AsgiScope, Receive, Send], Awaitable[None]]
AsgiApp = Callable[[AsgiScope, Receive, Send], Awaitable[None]]


class AppOptions(TypedDict, total=False):
    """`HttpApp`'s keyword options, as `create_app` and a generated `create_app()` take them."""

    invoke: bool
    spec: bool
    openapi: bool
    http_api: bool
    limits: Limits | None
    max_body_bytes: int | None
    on_startup: Sequence[LifespanHook]
    on_shutdown: Sequence[LifespanHook]


class HttpApp:
    """Hosts a `Service` behind HTTP. Any ASGI server runs it; uvicorn is the default."""

    def __init__(
        self,
        service: Service,
        routes: Iterable[Route] = (),
        *,
        invoke: bool = True,
        spec: bool = True,
        openapi: bool = True,
        http_api: bool = True,
        limits: Limits | None = None,
        max_body_bytes: int | None = None,
        on_startup: Sequence[LifespanHook] = (),
        on_shutdown: Sequence[LifespanHook] = (),
    ) -> None:
        self.service = service
        limits = limits or Limits()
        if max_body_bytes is not None:  # the older single-limit option, kept as a shortcut
            limits = dataclasses.replace(limits, max_body_bytes=max_body_bytes)
        self.limits = limits
        self.max_body_bytes = limits.max_body_bytes
        self._json_limits = limits.json
        self._max_headers = limits.max_headers
        self.on_startup = list(on_startup)
        self.on_shutdown = list(on_shutdown)
        self.routes = list(routes)
        self.router = Router()
        for route in self.routes:
            self._check_topic(route)
            self.router.add(route)
        self.surfaces = self._surfaces(invoke=invoke, spec=spec, openapi=openapi, http_api=http_api)
        # POST {prefix}/invoke/<topic>[/<version>]: the typed per-topic face the operations document describes.
        self._topic_invoke = split_path(well_known_surfaces(service.prefix)["invoke"][1]) if invoke else None
        self._refuse_shadowing()
        self._runners: dict[int, Runner] = {}
        """By `id(route)`: the runner of each route that decides its calls alone (`Service.route_runner`)."""
        for route in self.routes:
            run = None if route.has_version_segment else service.route_runner(route.topic, route.version)
            if run is not None:
                self._runners[id(route)] = run
        self._entry: AsgiApp = self._serve
        """The app as served: `_serve` inside the ASGI middleware `wrap` put around it."""
        self._bare = True
        """No ASGI middleware around `_serve`."""

    async def __call__(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan (and anything else) through the middleware unchanged
            await self._entry(scope, receive, send)
        elif self._bare:  # no ASGI middleware: one frame less on every request
            await self._http(scope, receive, send)
        else:
            await self._outermost(scope, receive, send)

    async def _outermost(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        """The wrapped app, so that an exception escaping the user's ASGI middleware before the response started
        gets the failure body (not the server's own text 500); `_http` catches what the app itself raises."""
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self._entry(scope, receive, tracked)
        except BaseException as exc:
            if started or (isinstance(exc, asyncio.CancelledError) and cancelled_from_outside()):
                raise  # an answer under way is the server's to end
            logger.error("unexpected %s in ASGI middleware serving %s %s", type(exc).__name__, scope["method"],
                         scope["path"], exc_info=exc)  # fmt: skip
            await send_failure(send, 500, st.UNEXPECTED_ERROR, "the server failed to handle the request")

    def wrap(self, *middleware: Callable[[AsgiApp], AsgiApp]) -> HttpApp:
        """Put ASGI middleware around the app, the first given outermost: each is called with the app it wraps
        (a class like Starlette's middleware, or a function) and returns the wrapping app. Lifespan events pass
        through them too."""
        for step in reversed(middleware):
            self._entry = step(self._entry)
            self._bare = False
        return self

    async def _serve(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            await self._http(scope, receive, send)
        elif kind == "lifespan":
            await self._lifespan(receive, send)

    async def _http(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        method = scope["method"]
        path = scope["path"]
        try:
            if len(scope.get("headers") or ()) > self._max_headers:  # the count only: the call when over it
                check_headers(scope, self.limits)
            surface = self.surfaces.get((method, path.rstrip("/") or "/"))
            if surface is not None and not _slash_in_segment(scope):
                await surface(scope, receive, send)
                return
            raw_path = scope.get("raw_path") or path.encode()
            found = self.router.find_path(method, raw_path)
            fields: TextFields | None
            if found is not None:
                route, fields, path_version = found  # a new dict per match: the query goes under the path's fields
                if scope.get("query_string"):
                    fields = {**query_fields(scope), **fields}
                topic, static_version = route.topic, route.version
                # The runner of a route that decides its calls alone (`Service.route_runner`); none has `{version}`.
                run = self._runners.get(id(route))
            else:
                segments = split_raw_path(raw_path)
                faced = self._topic_face(method, segments)
                if faced is None:
                    await self._unrouted(scope, receive, send, segments)
                    return
                topic, path_version = faced
                fields, static_version, run = None, "", None
            headers = request_headers(scope)
            first = await receive()
            body = whole_body(first, self.max_body_bytes)
            if body is None:
                body = await read_body(receive, self.max_body_bytes, first)
            view = MappingProxyType(headers)
            if run is not None and ADMITTED_PER_CALL.isdisjoint(headers):
                # The route decided the call alone: what `invoke` would look at per call, it would find nothing in.
                outcome = await run(view, body, fields, "http", self._json_limits, None)
            else:
                invocation = Invocation(topic, view, body, fields, path_version, static_version, "http",
                                        self._json_limits, view)  # fmt: skip
                outcome = await self.service.invoke(invocation)
            start, answer = outcome_messages(outcome)  # sent here: one frame less
            await send(start)
            await send(answer)
        except BodyTooLarge:
            exceeded = self.limits.body_too_large()
            await send_failure(send, exceeded.code, LIMIT_STATUS, exceeded.detail)
        except LimitExceeded as exc:
            await send_failure(send, exc.code, LIMIT_STATUS, exc.detail)
        except (PathNotUtf8, QueryNotUtf8) as exc:
            await send_failure(send, 400, st.BAD_REQUEST, str(exc))
        except ClientDisconnected:
            return
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError) and cancelled_from_outside():
                raise
            # A binding or middleware bug must never take the host down; the request gets a clean failure body.
            logger.error("unexpected error serving %s %s", method, path, exc_info=exc)
            await send_failure(send, 500, st.UNEXPECTED_ERROR, "the server failed to handle the request")

    async def _unrouted(self, scope: AsgiScope, receive: Receive, send: Send, segments: list[str]) -> None:
        """No surface or route takes this method here: HEAD as the path's GET without its body, OPTIONS 204 and
        another method 405, both with `Allow`; 404 where no method is served."""
        method = scope["method"]
        path = scope["path"]
        surfaced = not _slash_in_segment(scope)
        if method == "HEAD":
            surface = self.surfaces.get(("GET", path.rstrip("/") or "/")) if surfaced else None
            if surface is not None:
                await surface(scope, receive, _without_body(send))
                return
            if self.router.find_path("GET", scope.get("raw_path") or path.encode()) is not None:
                await self._http({**scope, "method": "GET"}, receive, _without_body(send))
                return
        allowed = self.allowed_methods(path, segments, surfaces=surfaced)
        if not allowed:
            await send_failure(send, 404, st.NOT_FOUND, f"no route for {method} {path}")
            return
        allow = {"allow": ", ".join(allowed)}
        if method == "OPTIONS":
            await send_response(send, 204, b"", allow)
            return
        body = _method_not_allowed(method, path, allow["allow"])
        await send_response(send, 405, body, {**allow, "content-type": "application/json"})

    def allowed_methods(self, path: str, segments: list[str], *, surfaces: bool = True) -> list[str]:
        """The methods something answers at `path` (HEAD with GET, OPTIONS with any), in a stable order; empty
        when nothing does. `surfaces=False`: the well-known surfaces do not count (a segment holds `%2F`)."""
        key = path.rstrip("/") or "/"
        methods = {method for method, surface in self.surfaces if surfaces and surface == key}
        methods.update(method for method in METHODS if self.router.match(method, segments) is not None)
        base = self._topic_invoke
        if base is not None and len(segments) in (len(base) + 1, len(base) + 2) and segments[: len(base)] == base:
            methods.add("POST")
        if not methods:
            return []
        if "GET" in methods:
            methods.add("HEAD")
        methods.add("OPTIONS")
        return [method for method in _METHOD_ORDER if method in methods]

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    for hook in self.on_startup:
                        await hook()
                except (EventsError, NatsError) as exc:
                    # The broker refused (a stream or consumer in the way), or the NATS server is unreachable: one
                    # line saying what, not a traceback.
                    logger.error("startup failed: %s", exc)
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                except Exception as exc:
                    logger.exception("startup failed")
                    await send({"type": "lifespan.startup.failed", "message": type(exc).__name__})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                for hook in self.on_shutdown:
                    try:
                        await hook()
                    except Exception:
                        logger.exception("shutdown hook failed")
                await send({"type": "lifespan.shutdown.complete"})
                return

    def _surfaces(self, *, invoke: bool, spec: bool, openapi: bool, http_api: bool) -> dict[tuple[str, str], _Surface]:
        guarded = self._guarded
        handlers: dict[str, _Surface | None] = {
            "invoke": self._invoke if invoke else None,
            "health": self._health if self.service.health is not None else None,
            "spec": guarded(_constant(document_bytes(self.service.spec))) if spec else None,
            "openapi": guarded(self._openapi) if openapi else None,
            "http-api": guarded(self._http_api) if http_api else None,
            "docs": guarded(self._docs) if http_api else None,
        }
        return {
            surface: handler
            for name, surface in well_known_surfaces(self.service.prefix).items()
            if (handler := handlers[name]) is not None
        }

    def serve_document(self, name: str, body: bytes) -> None:
        """Serve `body` (JSON) at `GET {prefix}/<name>`: a derived document beside the service's own, like the
        events' asyncapi.json."""
        self.surfaces[("GET", f"{self.service.prefix}/{name}")] = self._guarded(_constant(body))

    def _guarded(self, surface: _Surface) -> _Surface:
        """A well-known document surface behind `security.wellKnown`, when the service declares one."""
        guard = self.service.guard
        if guard is None or not guard.security.well_known:
            return surface
        needed = guard.security.well_known

        async def checked(scope: AsgiScope, receive: Receive, send: Send) -> None:
            answer = await guard.check(needed, request_headers(scope))
            if isinstance(answer, Result):
                body = orjson.dumps(answer.failure_body())
                headers = {"content-type": "application/json", **answer.headers}
                await send_response(send, answer.http_code, body, headers)
                return
            await surface(scope, receive, send)

        return checked

    def _check_topic(self, route: Route) -> None:
        if is_reserved_topic(route.topic):
            return
        if not self.service.registry.versions(route.topic):
            raise RouteError(f"route {route} names topic {route.topic!r}, which has no handler")

    def _topic_face(self, method: str, segments: list[str]) -> tuple[str, str | None] | None:
        """(topic, version or None) of a `POST {prefix}/invoke/<topic>[/<version>]`, else None; no route takes these
        paths (`_refuse_shadowing`)."""
        base = self._topic_invoke
        if base is None or method != "POST":
            return None
        depth = len(base)
        if len(segments) not in (depth + 1, depth + 2) or segments[:depth] != base:
            return None
        return segments[depth], segments[depth + 1] if len(segments) == depth + 2 else None

    def _refuse_shadowing(self) -> None:
        prefix = self.service.prefix
        served = {name for name, surface in well_known_surfaces(prefix).items() if surface in self.surfaces}
        for route in self.routes:
            surface = shadowed_surface(route, prefix, served)
            if surface is not None:
                raise RouteError(
                    f"route {route} collides with the well-known surface {surface}; move the route or change the prefix"
                )

    async def _invoke(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        raw = await read_body(receive, self.max_body_bytes)
        try:
            credentials = request_headers(scope)  # the request's own headers, never the envelope's
            carried = {name: credentials[name] for name in CARRIED_HEADERS if name in credentials}
            # A proxy's or tracer's traceparent (and correlation id, deadline) counts where the envelope has none.
            envelope = with_carried_headers(parse_envelope(raw, self._json_limits), carried) if carried else raw
            answer = await self.service.invoke_envelope(envelope, json_limits=self._json_limits,
                                                        credentials=credentials)  # fmt: skip
        except EnvelopeError as exc:
            await send_failure(send, 400, st.BAD_REQUEST, str(exc))
            return
        await send_response(send, 200, answer)

    async def _health(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        report = await self.service.check_health()
        await send_response(send, 200 if report.is_healthy else 503, orjson.dumps(report.document()))

    async def _openapi(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        await send_response(send, 200, self.openapi_body)

    @cached_property
    def openapi(self) -> dict[str, Any]:
        """The operations document of the invoke faces this app serves: the service's, or with `invoke=False`
        one without operations (the faces it describes answer 404 here)."""
        service = self.service
        if self._topic_invoke is not None:
            return service.openapi
        return build_openapi(Registry(), title=service.title, version=service.api_version, prefix=service.prefix)

    @cached_property
    def openapi_body(self) -> bytes:
        """Served exactly as committed to contracts/openapi.json; built on first request."""
        return document_bytes(self.openapi)

    @cached_property
    def http_api(self) -> dict[str, Any]:
        """The HTTP API document of the application routes (contracts/http-api.json); built on first use."""
        service = self.service
        security = service.guard.security if service.guard is not None else None
        return build_http_api(
            service.registry, self.routes, title=service.title, version=service.api_version, security=security
        )

    @cached_property
    def http_api_body(self) -> bytes:
        return document_bytes(self.http_api)

    async def _http_api(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        await send_response(send, 200, self.http_api_body)

    async def _docs(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        await send_response(send, 200, self._docs_page, DOCS_HEADERS)

    @cached_property
    def _docs_page(self) -> bytes:
        return docs_page(self.http_api)


def well_known_surfaces(prefix: str) -> dict[str, tuple[str, str]]:
    """(method, path) of each well-known surface under `prefix`, by name; no application route may shadow one."""
    return {
        "invoke": ("POST", f"{prefix}/invoke"),
        "health": ("GET", f"{prefix}/health"),
        "spec": ("GET", f"{prefix}/spec"),
        "openapi": ("GET", f"{prefix}/openapi.json"),
        "http-api": ("GET", f"{prefix}/http-api.json"),
        "docs": ("GET", f"{prefix}/docs"),
    }


def shadowed_surface(route: Route, prefix: str, served: Collection[str] | None = None) -> str | None:
    """The well-known surface that `route` would take requests from, or None; `served` names the surfaces
    the app serves (default: all of them).

    Serving the envelope surface `POST {prefix}/invoke` also serves its per-topic faces
    `POST {prefix}/invoke/<topic>[/<version>]`.
    """
    router = Router([route])
    surfaces = well_known_surfaces(prefix)
    served = surfaces.keys() if served is None else served
    for name, (method, path) in surfaces.items():
        if name in served and router.match(method, split_raw_path(path.encode())) is not None:
            return f"{method} {path}"
    method, path = surfaces["invoke"]
    if "invoke" in served and route.method == method and route.could_match(split_path(path), extra=(1, 2)):
        return f"{method} {path}/<topic>[/<version>]"
    return None


def _slash_in_segment(scope: AsgiScope) -> bool:
    """Whether a path segment holds an encoded `/`: `%2F` stays inside its segment, so the path is no well-known
    surface's, whose decoded path (`scope["path"]`) it may spell. A routed call asks only when a surface matched."""
    raw: bytes | None = scope.get("raw_path")
    return raw is not None and b"%2f" in raw.lower()


_METHOD_ORDER = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def _without_body(send: Send) -> Send:
    """HEAD: the GET answer's status and headers (its content-length included), no body."""

    async def head(message: Message) -> None:
        if message.get("type") == "http.response.body":
            message = {**message, "body": b""}
        await send(message)

    return head


def _method_not_allowed(method: str, path: str, allowed: str) -> bytes:
    # The vocabulary has no word for 405: the request is at fault, so bad-request, the detail saying what would do.
    detail = f"{method} is not allowed on {path}; allowed: {allowed}"
    return orjson.dumps({"status": st.BAD_REQUEST, "detail": detail})


def _constant(body: bytes) -> _Surface:
    async def answer(scope: AsgiScope, receive: Receive, send: Send) -> None:
        await send_response(send, 200, body)

    return answer


def create_app(service: Service, routes: Iterable[str | Route] = (), **options: Unpack[AppOptions]) -> HttpApp:
    """Build the app from route specs like `"POST /orders -> orders:place"` or Route objects."""
    parsed = [route if isinstance(route, Route) else _parse_binding(route) for route in routes]
    return HttpApp(service, parsed, **options)


def _parse_binding(text: str) -> Route:
    spec, arrow, target = text.partition("->")
    if not arrow:
        raise RouteError(f"route {text!r}: expected 'METHOD /path -> topic[@version]'")
    topic, _, version = target.strip().partition("@")
    return Route.parse(spec, topic.strip(), version.strip())
