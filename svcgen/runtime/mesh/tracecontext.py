"""W3C Trace Context: the `traceparent` header, trace and span ids, and the trace current in this invocation.

Which inbound values are joined (DESIGN §7 "Trace ids"): exactly `2hex-32hex-16hex-2hex`, lowercase hex, a
version other than `ff`, a non-zero trace id and a non-zero parent id. Anything else starts a new trace and the
call goes on. A version above `00` is accepted only in exactly that shape: W3C lets a future version append
fields, but DESIGN asks for the exact shape, so a longer value is refused rather than half-read. Whatever version
came in, what goes out is version `00`, the only one this code speaks.

Flags: only the `sampled` bit (0x01) is defined for version `00`; it is carried over from the inbound header and
the other bits are cleared rather than forwarded with a meaning this code cannot vouch for. A new trace is
sampled (every routed invocation is traced). Surrounding spaces/tabs are not part of an HTTP field value and are
ignored.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Callable, Mapping
from contextvars import ContextVar, Token
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, NotRequired, Protocol, TypeAlias, TypedDict

logger = logging.getLogger("svcgen.mesh.traces")

TRACEPARENT: Final = "traceparent"
VERSION: Final = "00"
SAMPLED: Final = 0x01
LOG_EVERY: Final = 1000
"""A tracing failure that keeps happening is logged on its 1st, 1001st, ... occurrence, not per request."""

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
    def trace_id(self) -> str:
        """32 lowercase hex characters, not all zero."""
        ...

    def span_id(self) -> str:
        """16 lowercase hex characters, not all zero."""
        ...


class RandomIds:
    """Ids from the OS random source, as W3C recommends: unguessable and uniformly random.

    One `os.urandom` call per id: stateless, safe from any thread. New roots on the request path come from
    `random_root_trace`'s pool instead.
    """

    def trace_id(self) -> str:
        return _nonzero_hex(16, _ZERO_TRACE)

    def span_id(self) -> str:
        return _nonzero_hex(8, _ZERO_SPAN)


def _nonzero_hex(size: int, zero: str) -> str:
    # An all-zero id is invalid: vanishingly rare, but never emitted. Comparing the text is cheaper than any(raw).
    value = os.urandom(size).hex()
    while value == zero:
        value = os.urandom(size).hex()
    return value


def start_trace(ids: IdGenerator) -> TraceContext:
    return TraceContext(ids.trace_id(), ids.span_id(), None, SAMPLED)


_ROOTS_PER_READ: Final = 256
_roots: list[str] = []
"""Pre-read root ids, 48 hex characters each (trace id + span id). `list.pop` and `list.extend` are atomic, so
threads may share it; a refill race only reads more than needed."""


def random_root_trace() -> TraceContext:
    """`start_trace(RandomIds())` from a pool filled by one OS read per 256 roots: the hot path of every
    invocation without a `traceparent`, where a read per request costs a system call each time."""
    try:
        raw = _roots.pop()
    except IndexError:
        text = os.urandom(24 * _ROOTS_PER_READ).hex()
        _roots.extend(text[i : i + 48] for i in range(0, len(text), 48))
        raw = _roots.pop()
    trace_id, span_id = raw[:32], raw[32:]
    if trace_id == _ZERO_TRACE or span_id == _ZERO_SPAN:
        return start_trace(RandomIds())
    return TraceContext(trace_id, span_id, None, SAMPLED)


def continue_trace(traceparent: object, ids: IdGenerator) -> TraceContext:
    """A child span of the inbound `traceparent` when it is joinable, else the root span of a new trace."""
    parsed = parse_traceparent(traceparent)
    if parsed is None:
        return start_trace(ids)
    trace_id, parent_id, flags = parsed
    return TraceContext(trace_id, ids.span_id(), parent_id, flags)


class PendingTrace(TypedDict):
    """An invocation's place in a trace, decided the first time anything reads it (`resolve`): from its inbound
    `traceparent` (joined when valid) and fresh ids.

    Parsing the header and minting ids cost about a microsecond, and most invocations are never asked for their
    ids until their event is encoded off the request path. The first `resolve` decides once, under a lock (a
    worker thread and the reporter may ask at once); every later read sees the same ids. An id source that fails
    is logged and replaced by OS randomness for that trace: reading a trace never raises.

    A plain dict, built on every invocation as `{"inbound": value}`: it costs a fraction of a class instance, and
    until decided it holds only text, so the garbage collector does not track it.
    """

    inbound: str | None
    """The inbound `traceparent` value, None when absent."""
    ids: NotRequired[IdGenerator]
    """Where new ids come from when not the OS random source (through the pool of new roots)."""
    decided: NotRequired[TraceContext]


Trace: TypeAlias = TraceContext | PendingTrace
"""What an invocation carries as its trace: decided already, or on first read."""


def resolve(trace: Trace) -> TraceContext:
    """The decided place of a trace, deciding it now if nothing has read it yet."""
    if isinstance(trace, TraceContext):
        return trace
    decided = trace.get("decided")
    if decided is not None:
        return decided
    with _resolving:
        decided = trace.get("decided")
        if decided is None:
            decided = trace["decided"] = _decide(trace["inbound"], trace.get("ids"))
        return decided


def _decide(inbound: str | None, ids: IdGenerator | None) -> TraceContext:
    global id_source_failures
    if ids is None:
        return random_root_trace() if inbound is None else continue_trace(inbound, RandomIds())
    try:
        return continue_trace(inbound, ids)
    except Exception:
        id_source_failures += 1
        if (id_source_failures - 1) % LOG_EVERY == 0:
            logger.exception(
                "trace id source %s failed; its traces take OS-random ids (%d failure(s), logged once per %d)",
                type(ids).__name__, id_source_failures, LOG_EVERY,
            )
        return continue_trace(inbound, RandomIds())


_resolving: Final = threading.Lock()
id_source_failures = 0
"""Injected id sources that raised, process-wide (counted under `_resolving`)."""

# contextvars, not a global: concurrent invocations on one loop each see their own trace, and
# `asyncio.to_thread` copies the context, so sync handlers see it too.
_current: ContextVar[Trace | None] = ContextVar("svcgen_trace", default=None)


def current_trace() -> TraceContext | None:
    """The trace of the invocation running now, or None outside one."""
    current = _current.get()
    return None if current is None else resolve(current)


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
