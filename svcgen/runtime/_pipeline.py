"""The handler pipeline: middleware `(context, next)` around a terminal router.

The first middleware registered is outermost; one that does not call `next` ends the chain. The chain
is composed once, when the pipeline is built.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import orjson

from . import _status as st
from ._codec import Codec, DecodeError, RepeatedField, codec_for, float_subclass
from ._context import Context
from ._deadline import Clock
from ._deadline import enter as enter_deadline
from ._deadline import leave as leave_deadline
from ._jsonlimits import JsonRefused, parse_json
from ._registry import Registration
from ._result import Result
from ._shapes import MapShape, RecordShape, shape_of
from ._versioning import VersionSelector

logger = logging.getLogger("svcgen.pipeline")

Next = Callable[[Context], Awaitable[Result[Any]]]
Middleware = Callable[[Context, Next], Awaitable[Result[Any]]]


@dataclass(frozen=True, slots=True)
class BindingFailure(Result[Any]):
    """A failure the pipeline answered itself, not the handler: an undecodable request, a handler that raised
    (`exception_type` names what) or returned something else than a Result."""

    exception_type: str | None = None
    errors: tuple[tuple[str, str], ...] = ()
    """(path in wire names, message) of each field the request got wrong, at most `DecodeError.MAX_LISTED`."""

    def failure_body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"status": self.status, "detail": self.detail or self.status}
        if self.errors:
            body["errors"] = [{"path": path, "message": message} for path, message in self.errors]
        return body


@dataclass(frozen=True, slots=True)
class _Target:
    """A registration with what calling it needs, prepared once per registration."""

    registration: Registration
    request_codec: Codec[Any]
    expects_object: bool
    encode_response: Callable[[Any], Any]


class Pipeline:
    """Runs one invocation whose registration the service selected before (`Context.registration`); one without
    a registration gets the answer the version selection gives instead."""

    def __init__(
        self, versions: VersionSelector, middleware: Sequence[Middleware] = (), *, clock: Clock = time.monotonic
    ) -> None:
        self._versions = versions
        self._clock = clock
        self._middleware = tuple(middleware)
        self._targets: dict[int, _Target] = {}
        """By `id(registration)`: a registration lives as long as its registry, and an int hashes fastest."""
        self._chains: dict[int, Next] = {}
        self.run: Next = _compose(self._middleware, self._route)
        """The middleware chain around the router, composed once: `await pipeline.run(context)`."""

    def chain(self, registration: Registration) -> Next:
        """`run` for the calls of one registration: the middleware chain around its own target, so nothing is
        looked up per call (`Service.runner` runs this)."""
        chained = self._chains.get(id(registration))
        if chained is None:
            chained = self._chains[id(registration)] = _compose(
                self._middleware, partial(self._call_target, self._target(registration))
            )
        return chained

    def _route(self, context: Context) -> Awaitable[Result[Any]]:
        registration = context.registration
        if registration is None:
            return self._miss(context)
        return self._call_target(self._target(registration), context)

    async def _miss(self, context: Context) -> Result[Any]:
        refused = self._versions.select(context.topic, context.version)
        return refused if isinstance(refused, Result) else Result.not_found(f"no handler for {context.topic}")

    async def _call_target(self, target: _Target, context: Context) -> Result[Any]:
        """Decode the request (`bad-request` for refused JSON, `validation-error` for bad values), call the handler
        within the deadline, check what it returned and encode a success's payload. One frame: every call runs it."""
        registration = target.registration
        body = context.body
        fields = context.fields
        if body:
            try:
                value = parse_json(body, context.json_limits)
            except JsonRefused as exc:
                return _failure(st.BAD_REQUEST, str(exc))
        else:
            value = {} if target.expects_object or fields else None
        codec = target.request_codec
        try:
            if fields:
                if not isinstance(value, dict):
                    return _failure(st.BAD_REQUEST, "body must be a JSON object")
                value.update(codec.decode_text_fields(fields))  # a dict of our own: parsed just now, or new
            elif target.expects_object and not isinstance(value, dict):
                return _failure(st.BAD_REQUEST, "body must be a JSON object")
            request = codec.decode(value)
        except RepeatedField as exc:
            return _failure(st.BAD_REQUEST, str(exc))
        except DecodeError as exc:
            errors = tuple((path, message) for path, message in exc.violations[: DecodeError.MAX_LISTED])
            return BindingFailure(st.VALIDATION_ERROR, None, str(exc), errors=errors)
        except RecursionError:
            return _failure(st.BAD_REQUEST, "body is nested too deeply")
        except (TypeError, ValueError):
            # A record constructor that refuses the values (e.g. an InitVar the wire cannot carry).
            logger.warning("request for %s could not be built", registration.key, exc_info=True)
            return _failure(st.VALIDATION_ERROR, f"request does not fit {registration.key}")
        deadline = context.deadline
        try:
            if deadline is not None:
                returned = await self._call_within(deadline, registration, request, context)
            elif registration.is_async:  # inline, not through _call: one coroutine frame less per invocation
                returned = await registration.handler(request, context)  # type: ignore[misc]
            else:
                returned = await asyncio.to_thread(registration.handler, request, context)
        except BaseException as exc:
            # Any exception, CancelledError, SystemExit and KeyboardInterrupt included, is the handler's failure:
            # its type is kept for tracing and issues; its text never goes on the wire. Only a cancellation of
            # this invocation from outside (the client left, the server stops) goes on, so it is honoured.
            if isinstance(exc, asyncio.CancelledError) and cancelled_from_outside():
                raise
            exception_type = type(exc).__qualname__
            logger.error("handler for %s raised %s", registration.key, exception_type, exc_info=exc)
            detail = f"{registration.key} failed while handling the request"
            return BindingFailure(st.SERVICE_UNAVAILABLE, None, detail, exception_type=exception_type)
        if not isinstance(returned, Result):
            logger.error("handler for %s returned %s, not a Result", registration.key, type(returned).__name__)
            return _failure(st.UNEXPECTED_ERROR, f"{registration.key} returned an invalid result")
        if not returned.is_successful:
            return returned
        if returned.status not in registration.success:
            registration.note_success(returned.status)
        # Encoded here, inside the traced pipeline, so a response that does not fit its type is traced and counted
        # as the `unexpected-error` it is answered with; the bytes are kept for the transport (`Context.encoded`).
        payload = returned.payload
        if payload is None and returned.status in st.PAYLOAD_OPTIONAL:
            return returned
        try:
            context.encoded = (returned, orjson.dumps(target.encode_response(payload), default=float_subclass))
        except Exception as exc:
            logger.error("response of %s does not encode: %s", registration.key, type(exc).__name__)
            detail = f"{context.topic} produced a response that does not fit its type ({_why(exc)})"
            return BindingFailure(st.UNEXPECTED_ERROR, None, detail)
        return returned

    async def _call_within(self, deadline: float, registration: Registration, request: Any, context: Context) -> Any:
        """The handler's answer, cancelled at `deadline` (a `timeout` failure then); outbound calls it makes carry
        what is left. Anything else it raises goes on."""
        left = deadline - self._clock()
        if left <= 0:
            return _failure(st.TIMEOUT, f"the deadline passed before {registration.key} started")
        bound = asyncio.timeout(left)
        token = enter_deadline(deadline)
        try:
            async with bound:
                return await _call(registration, request, context)
        except BaseException:
            if bound.expired():
                logger.warning("handler for %s cancelled at its deadline", registration.key)
                return _failure(st.TIMEOUT, f"{registration.key} did not finish before its deadline")
            raise
        finally:
            leave_deadline(token)

    def _target(self, registration: Registration) -> _Target:
        target = self._targets.get(id(registration))
        if target is None:
            target = self._targets[id(registration)] = _Target(
                registration,
                codec_for(registration.request_type),
                isinstance(shape_of(registration.request_type), RecordShape | MapShape),
                codec_for(registration.response_type).encode,
            )
        return target


async def _call(registration: Registration, request: Any, context: Context) -> Any:
    if registration.is_async:
        return await registration.handler(request, context)  # type: ignore[misc]
    # A sync handler's thread cannot be stopped at a deadline; the caller gets its `timeout` all the same.
    return await asyncio.to_thread(registration.handler, request, context)
def _why(exc: Exception) -> str:
    """The codec's own words (the field path and what it expected) or the exception type: never a message a
    handler's object may have made up."""
    if isinstance(exc, DecodeError):
        return str(exc)
    return type(exc).__name__


def _failure(status: str, detail: str) -> BindingFailure:
    return BindingFailure(status, None, detail)


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
