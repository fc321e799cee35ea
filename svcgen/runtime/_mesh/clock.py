"""Clocks the mesh reads, injectable so tests never sleep, and the one RFC 3339 form their readings take.

A wall clock is epoch seconds (`time.time`); a monotonic clock is seconds from any origin (`time.perf_counter`).
Floats rather than datetimes: a reading happens on every invocation, the formatting only when a feed is built.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeAlias

from .._codec import DecodeError, decode_datetime

WallClock: TypeAlias = Callable[[], float]
"""Seconds since the Unix epoch, UTC."""
MonotonicClock: TypeAlias = Callable[[], float]
"""Seconds from an arbitrary origin; only differences mean anything."""

wall_clock: WallClock = time.time
monotonic_clock: MonotonicClock = time.perf_counter


def rfc3339(epoch_seconds: float) -> str:
    """`2026-11-22T10:00:00.123Z`: UTC, millisecond precision."""
    global _last_second
    millis = round(epoch_seconds * 1000)
    seconds, fraction = divmod(millis, 1000)
    # A batch of trace events mostly shares its seconds: format each second once (one tuple, swapped atomically).
    cached_seconds, text = _last_second
    if cached_seconds != seconds:
        t = time.gmtime(seconds)
        # Not strftime: its %Y is not zero-padded below year 1000 on every platform ("68-01-01" is no RFC 3339).
        text = f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d}T{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}"
        _last_second = (seconds, text)
    return f"{text}.{fraction:03d}Z"


_last_second: tuple[int, str] = (-1, "")


def parse_rfc3339(value: object) -> float | None:
    """Epoch seconds of an RFC 3339 date-time, read by the codec's one reader (`T`, an offset); None otherwise."""
    try:
        return decode_datetime(value).timestamp()
    except DecodeError:
        return None
