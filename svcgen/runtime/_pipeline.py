"""The handler pipeline: middleware `(context, next)` around a terminal router.

The first middleware registered is outermost; one that does not call `next` ends the chain. The chain
is composed once, when the pipeline is built.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import _status as st
from ._codec import Codec, DecodeError, codec_for
from ._context import Context
from ._jsonlimits import JsonLimits, JsonRefused, parse_json
from ._registry import Registration, Registry, TopicKey
from ._result import Result
from ._shapes import MapShape, RecordShape, shape_of

logger = logging.getLogger("svcgen.pipeline")

Next = Callable[[Context], Awaitable[Result[Any]]]
Middleware = Callable[[Context, Next], Awaitable[Result[Any]]]


@dataclass(frozen=True, slots=True)
class _Target:
    """A registration with what calling it needs, prepared once per topic."""

    registration: Registration
    request_codec: Codec[Any]
    expects_object: bool


class Pipeline:
    def __init__(self, registry: Registry, middleware: Sequence[Middleware] = ()) -> None:
        self._registry = registry
        self._targets: dict[TopicKey, _Target] = {}
        self._entry: Next = _compose(middleware, self._route)

    async def __call__(self, context: Context) -> Result[Any]:
        return await self._entry(context)

    def target(self, topic: str, version: str) -> Registration | None:
        """The registration a (topic, requested version) resolves to, or None."""
        resolved = self._resolve(topic, version)
        return resolved.registration if isinstance(resolved, _Target) else None

    async def _route(self, context: Context) -> Result[Any]:
        if not context.topic:
            return Result.validation_error("topic is required")
        resolved = self._resolve(context.topic, context.version)
        if isinstance(resolved, Result):
            return resolved
        registration = resolved.registration
        context.registration = registration
        context.version = registration.version
        request = _decode(resolved, context.body, context.fields, context.json_limits)
        if isinstance(request, Result):
            return request
        try:
            if registration.is_async:
                returned = await registration.handler(request, context)  # type: ignore[misc]
            else:
                returned = await asyncio.to_thread(registration.handler, request, context)
        except BaseException as exc:
            # Any exception, CancelledError, SystemExit and KeyboardInterrupt included, is the handler's failure:
            # its type is kept for tracing and issues; its text never goes on the wire. Only a cancellation of
            # this invocation from outside (the client left, the server stops) goes on, so it is honoured.
            context.exception_type = type(exc).__qualname__
            if isinstance(exc, asyncio.CancelledError) and cancelled_from_outside():
                raise
            logger.error("handler for %s raised %s", registration.key, context.exception_type, exc_info=exc)
            return Result.service_unavailable(f"{registration.key} failed while handling the request")
        if not isinstance(returned, Result):
            logger.error("handler for %s returned %s, not a Result", registration.key, type(returned).__name__)
            return Result.unexpected_error(f"{registration.key} returned an invalid result")
        context.handler_answered = True
        if returned.is_successful:
            registration.note_success(returned.status)
        return returned

    def _resolve(self, topic: str, version: str) -> _Target | Result[Any]:
        key = TopicKey(topic, version)
        target = self._targets.get(key)
        if target is not None:
            return target
        registration = self._registry.get(topic, version)
        if registration is None:
            versions = self._registry.versions(topic)
            if not versions:
                return Result.not_found(f"no handler for topic {topic}")
            if version or len(versions) > 1:
                listed = ", ".join(v or '""' for v in versions)
                asked = f"version {version}" if version else "no version"
                return Result.not_found(
                    f"topic {topic} has no handler for {asked}; versions: {listed} (select one with svc-version)"
                )
            registration = self._registry.get(topic, versions[0])
            assert registration is not None
        target = _Target(
            registration,
            codec_for(registration.request_type),
            isinstance(shape_of(registration.request_type), RecordShape | MapShape),
        )
        self._targets[key] = target
        return target


def cancelled_from_outside() -> bool:
    """Whether the running task was asked to cancel (the client left, the server stops), as opposed to code
    inside it raising `CancelledError` on its own."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _compose(middleware: Sequence[Middleware], terminal: Next) -> Next:
    chain = terminal
    for step in reversed(middleware):
        chain = _link(step, chain)
    return chain


def _link(step: Middleware, following: Next) -> Next:
    # A plain function handing back the middleware's coroutine: one coroutine frame per middleware, not two.
    def run(context: Context) -> Awaitable[Result[Any]]:
        return step(context, following)

    return run


def _decode(target: _Target, body: str | bytes | None, fields: Mapping[str, str] | None, limits: JsonLimits) -> Any:
    """The typed request, or a failure Result (`bad-request` for refused JSON, `validation-error` for bad values)."""
    if body:
        try:
            value = parse_json(body, limits)
        except JsonRefused as exc:
            return Result.bad_request(str(exc))
    else:
        value = {} if target.expects_object or fields else None
    codec = target.request_codec
    try:
        if fields:
            if not isinstance(value, dict):
                return Result.bad_request("body must be a JSON object")
            value = {**value, **codec.decode_text_fields(fields)}
        elif target.expects_object and not isinstance(value, dict):
            return Result.bad_request("body must be a JSON object")
        return codec.decode(value)
    except DecodeError as exc:
        return Result.of(st.VALIDATION_ERROR, detail=str(exc))
    except RecursionError:
        return Result.bad_request("body is nested too deeply")
    except (TypeError, ValueError):
        # A record constructor that refuses the values (e.g. an InitVar the wire cannot carry).
        logger.warning("request for %s could not be built", target.registration.key, exc_info=True)
        return Result.validation_error(f"request does not fit {target.registration.key}")
