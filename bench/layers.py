"""What each layer of the typed route costs served, against in-process: probe apps, each adding one layer of the
general path to the one before (or taking a shape the general path could take), served side by side under the
same load as bench/http.py (uvicorn 1 worker, httptools + uvloop, pinned cores, wrk, apps taking turns).

The probes answer bench/http.py's `POST /orders/{orderId}` as the typed route does; the ones that skip parts of
the general path hand the app every call it would treat differently (a well-known surface, a query, an escaped
path, another route, a version or idempotency or deadline header, a body in parts or over the limit, one that
does not decode). They are measurements, not product: nothing here is how svcgen serves. Run by hand
(bench/REPORT.md, "Where a request's time goes"), not part of `make bench`:

    PYTHONPATH=. python -m bench.layers [--rounds 4] [--seconds 3] [PROBE ...]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from bench.harness import Recorder, run
from bench.http import (
    ROUTES,
    Order,
    UpdateOrder,
    floor_app,
    in_process,
    ratio,
    served_rounds,
    spread,
    typed_app,
    update,
)
from svcgen.runtime import Context, DecodeError, Identity, Registry, Result, Service, create_app
from svcgen.runtime._codec import codec_for
from svcgen.runtime._deadline import DEADLINE_HEADER
from svcgen.runtime._http.requests import request_headers
from svcgen.runtime._http.responses import outcome_messages
from svcgen.runtime._http.routing import split_raw_path
from svcgen.runtime._idempotency import IDEMPOTENCY_KEY_HEADER
from svcgen.runtime._invocation import Invocation
from svcgen.runtime._jsonlimits import DEFAULT_JSON_LIMITS, JsonRefused, parse_json
from svcgen.runtime._mesh.exporters import QueueExporter
from svcgen.runtime._mesh.tracecontext import activate, deactivate
from svcgen.runtime._mesh.traces import TraceMiddleware
from svcgen.runtime._pipeline import Middleware, Next
from svcgen.runtime._topics import VERSION_HEADERS

Asgi = Callable[[Any, Any, Any], Awaitable[None]]

_REQUEST = codec_for(UpdateOrder)
_ENCODE_ORDER = codec_for(Order).encode
_JSON = [(b"content-type", b"application/json")]
_GENERAL_PATH_HEADERS = frozenset(name.encode() for name in (*VERSION_HEADERS, IDEMPOTENCY_KEY_HEADER, DEADLINE_HEADER))
_MAX_BODY = 1024 * 1024


def _app(*middleware: Middleware) -> Any:
    registry = Registry()
    registry.add("orders:update", update)
    return create_app(Service(Identity("orders"), registry, middleware=list(middleware)), ROUTES)


typed = typed_app()
_service = typed.service
_registration = _service.registry.get("orders:update", "")


async def _answer(send: Any, body: bytes, code: int = 200) -> None:
    await send({"type": "http.response.start", "status": code,
                "headers": [*_JSON, (b"content-length", str(len(body)).encode())]})  # fmt: skip
    await send({"type": "http.response.body", "body": body})


async def decoding(scope: Any, receive: Any, send: Any) -> None:
    """Our decoding and encoding alone: limits, path field, generated decoder, handler, codec encoder."""
    if scope["type"] != "http":
        return
    message = await receive()
    value = parse_json(message.get("body") or b"")
    value.update(_REQUEST.decode_text_fields({"orderId": scope["path"].rsplit("/", 1)[-1]}))
    result = await update(_REQUEST.decode(value), None)  # type: ignore[arg-type]  # the handler reads no context
    await _answer(send, orjson.dumps(_ENCODE_ORDER(result.payload)))


def _through_service(prepare: Callable[[Any], Any] = lambda scope: None) -> Asgi:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        prepare(scope)
        message = await receive()
        headers = request_headers(scope)
        fields = {"orderId": scope["path"].rsplit("/", 1)[-1]}
        invocation = Invocation("orders:update", headers, message.get("body") or b"", fields, None, "", "http", None,
                                headers)  # fmt: skip
        start, answer = outcome_messages(await _service.invoke(invocation))
        await send(start)
        await send(answer)

    return app


service = _through_service()
"""`Service.invoke` on a hand-built `Invocation`: headers, version, context, pipeline, `Outcome`."""
service_routed = _through_service(lambda scope: typed.router.find(scope["method"], split_raw_path(scope["raw_path"])))
"""The same plus the app's routing."""


async def _fallback(scope: Any, receive: Any, send: Any) -> None:
    await typed(scope, receive, send)


def _decided(scope: Any, routed: bool) -> tuple[dict[str, str], dict[str, str]] | None:
    """(headers, path fields) when the general path would do nothing more for this call than the probe does."""
    if (scope["method"], scope["path"]) in typed.surfaces or scope["query_string"] or b"%" in scope["raw_path"]:
        return None
    if routed:
        found = typed.router.find(scope["method"], split_raw_path(scope["raw_path"]))
        if found is None or found[0].topic != "orders:update":
            return None
        fields = found[1]
    else:
        parts = scope["path"].split("/")
        if scope["method"] != "POST" or len(parts) != 3 or parts[1] != "orders" or not parts[2]:
            return None
        fields = {"orderId": parts[2]}
    headers: dict[str, str] = {}
    for name, value in scope["headers"]:
        if name in _GENERAL_PATH_HEADERS:
            return None
        headers[name.decode("latin-1")] = value.decode("latin-1")
    return headers, fields


def _one_function(routed: bool) -> Asgi:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        decided = _decided(scope, routed)
        message = await receive() if decided is not None else None
        if decided is None or message is None or message.get("more_body") or len(message.get("body", b"")) > _MAX_BODY:
            await _fallback(scope, _replaying(message, receive), send)
            return
        headers, fields = decided
        body = message.get("body") or b""
        try:
            value = parse_json(body, DEFAULT_JSON_LIMITS)
            value.update(_REQUEST.decode_text_fields(fields))
            request = _REQUEST.decode(value)
        except (JsonRefused, DecodeError):  # the general path answers what a probe does not
            await _fallback(scope, _replaying(message, receive), send)
            return
        context = Context("orders:update", "", headers, _service.dependencies.open_scope(), body, None, "http",
                          DEFAULT_JSON_LIMITS, _registration)  # fmt: skip
        result = await update(request, context)
        await _answer(send, orjson.dumps(_ENCODE_ORDER(result.payload)))

    return app


one_function = _one_function(routed=False)
"""The route as one function, its shape checked by hand."""
one_function_routed = _one_function(routed=True)
"""The same, routed by the app's trie."""


def _pipeline_kept(app: Any) -> Asgi:
    pipeline, registration = app.service.pipeline, app.service.registry.get("orders:update", "")

    async def probe(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        decided = _decided(scope, routed=False)
        message = await receive() if decided is not None else None
        if decided is None or message is None or message.get("more_body") or len(message.get("body", b"")) > _MAX_BODY:
            await app(scope, _replaying(message, receive), send)
            return
        headers, fields = decided
        context = Context("orders:update", "", headers, app.service.dependencies.open_scope(),
                          message.get("body") or b"", fields, "http", DEFAULT_JSON_LIMITS, registration)  # fmt: skip
        result = await pipeline.run(context)
        encoded = context.encoded
        body = encoded[1] if encoded is not None and encoded[0] is result else orjson.dumps(result.failure_body())
        await _answer(send, body, result.http_code)

    return probe


def _replaying(first: Any, receive: Any) -> Any:
    pending = [] if first is None else [first]

    async def again() -> Any:
        return pending.pop() if pending else await receive()

    return again


async def _awaits_next(context: Context, call_next: Next) -> Result[Any]:
    return await call_next(context)


async def _context_variable(context: Context, call_next: Next) -> Result[Any]:
    token = activate((None, 1))
    try:
        return await call_next(context)
    finally:
        deactivate(token)


trace_path = _app(TraceMiddleware(Identity("orders"), QueueExporter(cap=1000)))
"""The trace middleware's request path, its queue never drained (no reporter)."""
pipeline_kept = _pipeline_kept(typed)
"""The app's plumbing skipped, the pipeline kept; shape checked by hand."""
pipeline_kept_traced = _pipeline_kept(trace_path)
"""The same with the trace middleware in the pipeline."""
awaits_next = _app(_awaits_next)
"""A middleware that only awaits the next one."""
context_variable = _app(_context_variable)
"""A middleware that sets and resets a context variable around the next one."""
floor = floor_app

PROBES: dict[str, str] = {
    "floor": "raw ASGI + msgspec Structs (floor)",
    "decoding": "our decoding, no service",
    "service": "Service.invoke on a hand-built Invocation",
    "service_routed": "the same plus the app's routing",
    "typed": "the typed route (general path)",
    "one_function": "one function, shape checked by hand",
    "one_function_routed": "one function, routed by the trie",
    "pipeline_kept": "plumbing skipped, pipeline kept",
    "pipeline_kept_traced": "the same, traced (queue not drained)",
    "trace_path": "typed route, trace middleware, queue not drained",
    "awaits_next": "typed route, a middleware awaiting the next",
    "context_variable": "typed route, a middleware setting a context variable",
}


def in_process_us(app: Any, calls: int = 20_000) -> float:
    call = in_process(app)

    async def go() -> float:
        for _ in range(2_000):
            await call()
        samples = []
        for _ in range(5):
            started = time.perf_counter()
            for _ in range(calls):
                await call()
            samples.append((time.perf_counter() - started) / calls * 1e6)
        return statistics.median(samples)

    return asyncio.run(go())


def measure(record: Recorder, args: argparse.Namespace) -> None:
    names = args.probes or list(PROBES)
    unknown = [name for name in names if name not in PROBES]
    if unknown:
        raise SystemExit(f"unknown probe(s) {', '.join(unknown)}; known: {', '.join(PROBES)}")
    if "floor" not in names:
        names.insert(0, "floor")
    for name in names:
        record(f"{PROBES[name]} (in-process)", in_process_us(globals()[name]), "µs")
    per_request = served_rounds({name: f"bench.layers:{name}" for name in names}, args.rounds, args.seconds)
    print()
    for name in names:
        record(f"server CPU per request, {PROBES[name]}", statistics.median(per_request[name]), "µs",
               note=f"(spread {spread(per_request[name]):.1f} %)")  # fmt: skip
        if name != "floor":
            record(f"  ratio to the floor, {PROBES[name]}", ratio(per_request[name], per_request["floor"]), "x")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=4, help="rounds; each loads every probe once")
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds of load per probe and round")
    parser.add_argument("probes", nargs="*", help=f"probes to serve (default: all): {', '.join(PROBES)}")
    run("bench/layers.py", measure, argv, parser)


if __name__ == "__main__":
    main()
