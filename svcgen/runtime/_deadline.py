"""Deadlines: how long the caller still waits, carried in `svc-deadline` and through the handler's outbound calls.

A deadline is an absolute time on a monotonic clock. A server takes the caller's as `svc-deadline` (milliseconds
still left when the request was sent), tightens it with the topic's own `timeout`, does not start a handler whose
deadline has passed, and cancels one that reaches it. While the handler runs, the deadline is the current one
(a context variable, like the trace), so every sender it calls sends what is left of it and waits no longer.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar, Token
from typing import Final

Clock = Callable[[], float]
"""Seconds on a monotonic clock; `time.monotonic` unless a test injects its own."""

DEADLINE_HEADER: Final = "svc-deadline"
MAX_DEADLINE_MS: Final = 24 * 3600 * 1000
"""A caller's deadline further out than a day is read as a day: no caller waits that long."""

_current: ContextVar[float | None] = ContextVar("svcgen_deadline", default=None)


def current_deadline() -> float | None:
    """The absolute deadline of the work running now (monotonic seconds), or None when nothing bounds it."""
    return _current.get()


def remaining(clock: Clock = time.monotonic) -> float | None:
    """Seconds left before the current deadline (0 once it passed), or None when nothing bounds the work."""
    deadline = _current.get()
    return None if deadline is None else max(0.0, deadline - clock())


@contextmanager
def deadline(seconds: float, *, clock: Clock = time.monotonic) -> Iterator[float]:
    """Bound the calls made inside the block to `seconds` from now (never later than a deadline already
    current): every sender sends what is left as `svc-deadline`, and gives up when it is gone. Yields the
    absolute deadline."""
    token = enter(clock() + seconds)
    try:
        yield _current.get() or 0.0
    finally:
        _current.reset(token)


def enter(at: float) -> Token[float | None]:
    """Make `at` the current deadline (or keep the current one when it is earlier); `_current.reset(token)` ends it."""
    current = _current.get()
    return _current.set(at if current is None or at < current else current)


leave: Final[Callable[[Token[float | None]], None]] = _current.reset


def caller_deadline(headers: Mapping[str, str], now: float) -> float | None:
    """The absolute deadline a request's `svc-deadline` names (milliseconds left when it was sent), or None when
    it has none; a value that is no whole number of milliseconds is ignored, as a bad `traceparent` is."""
    text = headers.get(DEADLINE_HEADER)
    if text is None:
        return None
    text = text.strip()
    # One sign at most: "--5" is no number.
    if not text.isascii() or not text.removeprefix("-").isdigit() or len(text) > 12:
        return None
    milliseconds = min(int(text), MAX_DEADLINE_MS)
    return now + max(0, milliseconds) / 1000


def deadline_header(left: float) -> str:
    """The `svc-deadline` value for `left` seconds: whole milliseconds, rounded down (never promise more)."""
    return str(max(0, math.floor(left * 1000)))
