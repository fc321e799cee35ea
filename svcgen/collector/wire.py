"""Reading untrusted feed JSON: batch entries through their records' codecs, times in the mesh's one form, values
the store can hold, and the bounded tables everything lives in."""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime
from typing import Any, Final, TypeVar

import orjson

from ..runtime._codec import DecodeError
from ..runtime._mesh.clock import rfc3339

MAX_COUNT: Final = 2**63 - 1
"""Largest count the collector stores (a signed 64-bit integer); sums saturate here."""
MIN_INTEGER: Final = -(2**63)

T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")


def decode_entry(decode: Callable[[Any], T], raw: Any) -> T | None:
    """A batch entry read through its record's codec; None when it does not fit or the store could not hold it (a
    NUL, an integer outside 64 bits, a time outside years 0001–9999): skipped and counted by the caller, never the
    whole batch refused, so one poisoned entry cannot keep the rest out."""
    try:
        return decode(raw)
    except DecodeError:
        return None


def mesh_time(moment: datetime) -> str:
    """A time in the mesh's one form (`...T10:00:00.123Z`), so stored times compare correctly as strings."""
    return rfc3339(moment.timestamp())


def saturated(total: int) -> int:
    """A sum of counts, held at MAX_COUNT instead of growing past what the store can hold."""
    return min(total, MAX_COUNT)


class Unstorable(ValueError):
    """A feed value the store could not write or read back; the message names its field path and says why."""


def stored_size(document: Any, path: str, *, max_depth: int, max_bytes: int) -> int:
    """The bytes `document` takes as JSON once checked storable: finite numbers, integers within 64 bits,
    nesting at most `max_depth` levels, at most `max_bytes` bytes. Raises Unstorable naming the field path."""
    try:
        size: int | None = len(orjson.dumps(document))
    except orjson.JSONEncodeError:
        size = None  # the walk below names the field
    if size is not None and size > max_bytes:
        # Before the walk: an oversized document (a 4 MB spec polled every second) costs one C-speed encode.
        raise Unstorable(f"{path} is {size} bytes, more than the limit of {max_bytes}")
    try:
        _check(document, max_depth)
    except _Bad as bad:
        why = bad.why or f"is nested deeper than {max_depth} levels"
        raise Unstorable(path + "".join(reversed(bad.path)) + " " + why) from None
    if size is None:
        raise Unstorable(f"{path} cannot be written as JSON")
    return size


def _check(value: Any, levels: int) -> None:
    # Recursion is bounded by `levels`; the path is built only on the way out of a failure.
    if isinstance(value, dict):
        if levels < 1:
            raise _Bad()
        for key, item in value.items():
            try:
                _check(item, levels - 1)
            except _Bad as bad:
                bad.path.append(f".{key}")
                raise
    elif isinstance(value, list):
        if levels < 1:
            raise _Bad()
        for index, item in enumerate(value):
            try:
                _check(item, levels - 1)
            except _Bad as bad:
                bad.path.append(f"[{index}]")
                raise
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise _Bad("is not a finite number")
    elif isinstance(value, int) and not isinstance(value, bool) and not MIN_INTEGER <= value <= MAX_COUNT:
        raise _Bad("is an integer outside 64 bits")


class _Bad(Exception):
    def __init__(self, why: str = "") -> None:
        super().__init__(why)
        self.why = why
        """Empty for a value nested too deeply (the caller knows the limit)."""
        self.path: list[str] = []


def require(entry: Any, fields: dict[str, type | tuple[type, ...]]) -> None:
    """Raise ValueError unless `entry` is an object whose `fields` have the given types (restoring a snapshot)."""
    if not isinstance(entry, dict):
        raise ValueError(f"expected an object, got {type(entry).__name__}")
    for key, kind in fields.items():
        if not isinstance(entry.get(key), kind):
            raise ValueError(f"{key} is missing or has the wrong type")


def put_bounded(table: OrderedDict[K, V], key: K, value: V, cap: int) -> int:
    """Insert or refresh `key` as the newest entry; evict the oldest past `cap`. Returns how many were evicted."""
    table[key] = value
    table.move_to_end(key)
    evicted = 0
    while len(table) > cap:
        table.popitem(last=False)
        evicted += 1
    return evicted
