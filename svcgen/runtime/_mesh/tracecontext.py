"""W3C Trace Context: the `traceparent` header, trace and span ids, and the trace current in this invocation.

Which inbound values are joined (docs/wire.md, Trace headers): exactly `2hex-32hex-16hex-2hex`, lowercase hex, a
version other than `ff`, a non-zero trace id and a non-zero parent id. Anything else starts a new trace and the
call goes on. A version above `00` is accepted only in exactly that shape: W3C lets a future version append
fields, but svcgen asks for the exact shape, so a longer value is refused rather than half-read. Whatever version
came in, what goes out is version `00`, the only one this code speaks.

Flags: only the `sampled` bit (0x01) is defined for version `00`; it is carried over from the inbound header and
the other bits are cleared rather than forwarded with a meaning this code cannot vouch for. A new trace is
sampled (every routed invocation is traced). Surrounding spaces/tabs are not part of an HTTP field value and are
ignored.

Ids: an invocation carries its inbound header and a number (`PendingTrace`); its ids are derived from them when
first read (`resolve`), which for most invocations is when the reporter encodes the event, off the request path.

Trace propagation on outbound calls: an `HttpSender` that forwards the current `traceparent`.

Made inside an invocation, a call carries the caller's span as the callee's parent, so the trace continues in
the next service; outside one it carries nothing. A `traceparent` the caller set on the message is never
overwritten: `HttpSender` adds hook headers only where the caller set none of that name.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar, Token
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, Protocol, TypeAlias

from .._context import TRACEPARENT
from .._http.sender import HeaderHook, HttpSender, Target
from .._logging import read_trace_ids_from

VERSION: Final = "00"
SAMPLED: Final = 0x01

_SHAPE: Final = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
_ZERO_TRACE: Final = "0" * 32
_ZERO_SPAN: Final = "0" * 16
_NO_HEADERS: Final[Mapping[str, str]] = MappingProxyType({})


@dataclass(slots=True)  # not frozen: built on every invocation, and frozen construction costs several times more
class TraceContext:
    """Where one invocation sits in a trace: its own span, and the span that called it when known. Read-only by
    convention."""

    trace_id: str
    span_id: str
    parent_span_id: str | None = None
    flags: int = SAMPLED

    @property
    def traceparent(self) -> str:
        """The header value that makes this span the parent of the next hop."""
        return format_traceparent(self)


def parse_traceparent(value: object) -> tuple[str, str, int] | None:
    """`(trace_id, parent_span_id, flags)` of a joinable `traceparent`, else None (start a new trace)."""
    if not value or not isinstance(value, str):
        return None
    match = _SHAPE.fullmatch(value.strip(" \t"))
    if match is None:
        return None
    version, trace_id, parent_id, flags = match.groups()
    if version == "ff" or trace_id == _ZERO_TRACE or parent_id == _ZERO_SPAN:
        return None
    return trace_id, parent_id, int(flags, 16) & SAMPLED


def format_traceparent(context: TraceContext) -> str:
    """`00-<trace id>-<span id>-<flags>`: the span id goes out as the callee's parent id."""
    return f"{VERSION}-{context.trace_id}-{context.span_id}-{context.flags & SAMPLED:02x}"


class IdGenerator(Protocol):
    """An id source to inject (deterministic ids in tests); without one, ids are derived on read (`resolve`)."""

    def trace_id(self) -> str:
        """32 lowercase hex characters, not all zero."""
        ...

    def span_id(self) -> str:
        """16 lowercase hex characters, not all zero."""
        ...


def start_trace(ids: IdGenerator) -> TraceContext:
    return TraceContext(ids.trace_id(), ids.span_id(), None, SAMPLED)


def continue_trace(traceparent: object, ids: IdGenerator) -> TraceContext:
    """A child span of the inbound `traceparent` when it is joinable, else the root span of a new trace."""
    parsed = parse_traceparent(traceparent)
    if parsed is None:
        return start_trace(ids)
    trace_id, parent_id, flags = parsed
    return TraceContext(trace_id, ids.span_id(), parent_id, flags)


PendingTrace: TypeAlias = tuple["str | None", int]
"""An invocation's place in a trace before anything reads it: (inbound `traceparent` or None, invocation number).

`resolve` derives the ids from these two alone, so every reader (a handler's outbound call, the encoder, any
thread) sees the same ids with no shared state to decide or lock. Built on every invocation, it holds only text and
an int, which the garbage collector stops tracking after one pass.
"""

Trace: TypeAlias = TraceContext | PendingTrace
"""What an invocation carries as its trace: decided already (an injected id source), or derived on read."""

next_invocation: Final[Callable[[], int]] = itertools.count(1).__next__
"""Numbers invocations process-wide (one C call, atomic under the GIL): two tracers in one process never share a
number, so never share ids."""


def pending_trace(inbound: str | None) -> PendingTrace:
    return (inbound, next_invocation())


def resolve(trace: Trace) -> TraceContext:
    """The ids of a trace: the inbound trace joined when valid, with ids derived from the invocation number."""
    if isinstance(trace, TraceContext):
        return trace
    inbound, number = trace
    trace_id, span_id = _key.ids(number)
    parsed = None if inbound is None else parse_traceparent(inbound)
    if parsed is None:
        return TraceContext(trace_id, span_id, None, SAMPLED)
    joined_trace_id, parent_id, flags = parsed
    return TraceContext(joined_trace_id, span_id, parent_id, flags)


def new_trace_ids_of(numbers: Iterable[int]) -> list[tuple[str, str]]:
    """(trace id, span id) of each invocation number starting a new trace, what `resolve` gives it without an
    inbound `traceparent`; many at once, in one call (the reporter's batch)."""
    return _key.ids_of(numbers)


class _IdKey:
    """Ids are a keyed SHAKE-256 stream read at the invocation number (counter mode): uniformly random and
    unguessable to anyone without this process's key, as W3C asks of ids. One hash yields the ids of `BLOCK`
    consecutive numbers, so a read costs a slice, not a hash or an OS read. A forked child draws a new key, or it
    would repeat its parent's ids."""

    BLOCK: Final = 1024
    KEPT_BLOCKS: Final = 8
    """Blocks kept at once: the request path reads the newest, the reporter one a little older."""

    def __init__(self) -> None:
        self.hasher = hashlib.shake_256(os.urandom(32))
        self.blocks: dict[int, str] = {}

    def ids(self, number: int) -> tuple[str, str]:
        return self.ids_of((number,))[0]

    def ids_of(self, numbers: Iterable[int]) -> list[tuple[str, str]]:
        found: list[tuple[str, str]] = []
        append = found.append
        size = self.BLOCK
        current, text = -1, ""
        for number in numbers:
            block, index = divmod(number, size)
            if block != current:
                current, text = block, self.blocks.get(block) or self._derive(block)
            at = index * 48
            trace_id, span_id = text[at : at + 32], text[at + 32 : at + 48]
            append((trace_id, span_id) if trace_id != _ZERO_TRACE and span_id != _ZERO_SPAN else self._retry(number))
        return found

    def _derive(self, block: int) -> str:
        hasher = self.hasher.copy()
        hasher.update(b"block" + block.to_bytes(16, "little"))
        text = hasher.hexdigest(48 * self.BLOCK)
        blocks = self.blocks
        if len(blocks) >= self.KEPT_BLOCKS:
            # Any other thread doing the same leaves a dict just as good: a lost entry is derived again.
            with contextlib.suppress(RuntimeError, KeyError, StopIteration):
                del blocks[next(iter(blocks))]
        blocks[block] = text
        return text

    def _retry(self, number: int) -> tuple[str, str]:
        attempt = 0
        while True:
            attempt += 1
            hasher = self.hasher.copy()
            hasher.update(b"retry" + (number | attempt << 64).to_bytes(24, "little"))
            text = hasher.hexdigest(24)
            if text[:32] != _ZERO_TRACE and text[32:] != _ZERO_SPAN:
                return text[:32], text[32:]


_key = _IdKey()


def _rekey() -> None:
    global _key
    _key = _IdKey()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_rekey)


# contextvars, not a global: concurrent invocations on one loop each see their own trace, and
# `asyncio.to_thread` copies the context, so sync handlers see it too.
_current: ContextVar[Trace | None] = ContextVar("svcgen_trace", default=None)


def current_trace() -> TraceContext | None:
    """The trace of the invocation running now, or None outside one."""
    current = _current.get()
    return None if current is None else resolve(current)


def current_ids() -> tuple[str, str] | None:
    """(trace id, span id) of the invocation running now, or None: what its log lines carry."""
    current = _current.get()
    if current is None:
        return None
    context = resolve(current)
    return context.trace_id, context.span_id


read_trace_ids_from(current_ids)

activate: Final[Callable[[Trace | None], Token[Trace | None]]] = _current.set
"""Make a trace current; give the token back to `deactivate` when the invocation ends. The context variable's
own methods, not wrappers: they run twice on every invocation."""
deactivate: Final[Callable[[Token[Trace | None]], None]] = _current.reset


def propagation_headers() -> Mapping[str, str]:
    """`{"traceparent": ...}` naming the current span as parent, or `{}` outside a trace.

    The current span itself is forwarded (no separate client span is minted per outbound call): that is the
    standard behaviour without client spans, and it makes the callee's parentSpanId the caller's spanId.
    """
    context = _current.get()
    if context is None:
        return _NO_HEADERS
    return {TRACEPARENT: format_traceparent(resolve(context))}


logger = logging.getLogger("svcgen.mesh.propagation")


def trace_propagating_sender(target: Target, *, extra_headers: HeaderHook | None = None, **options: Any) -> HttpSender:
    """`HttpSender(target, **options)` whose outbound calls carry the current trace.

    An `extra_headers` hook of your own still runs; its headers win over the trace's, and if it raises the trace
    header still goes out.
    """
    hook = propagation_headers if extra_headers is None else _with_trace(extra_headers)
    return HttpSender(target, extra_headers=hook, **options)


def _with_trace(own: HeaderHook) -> HeaderHook:
    def headers() -> Mapping[str, str]:
        merged = dict(propagation_headers())
        try:
            merged.update(own())
        except Exception as exc:
            logger.warning("extra_headers hook failed (%s); sending the trace header only", type(exc).__name__)
        return merged

    return headers
