"""Clocks the mesh reads, injectable so tests never sleep, and the one RFC 3339 form their readings take
(`rfc3339`: the codec's `utc_millis_text`, the writer of `Meta(utc_millis=True)` records).

A wall clock is epoch seconds (`time.time`); a monotonic clock is seconds from any origin (`time.perf_counter`).
Floats rather than datetimes: a reading happens on every invocation, the formatting only when a feed is built.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final, TypeAlias

from .._codec import DecodeError, decode_datetime, utc_millis_text

WallClock: TypeAlias = Callable[[], float]
"""Seconds since the Unix epoch, UTC."""
MonotonicClock: TypeAlias = Callable[[], float]
"""Seconds from an arbitrary origin; only differences mean anything."""

wall_clock: WallClock = time.time
monotonic_clock: MonotonicClock = time.perf_counter
rfc3339: Final = utc_millis_text


def parse_rfc3339(value: object) -> float | None:
    """Epoch seconds of an RFC 3339 date-time, read by the codec's one reader (`T`, an offset); None otherwise."""
    try:
        return decode_datetime(value).timestamp()
    except DecodeError:
        return None
