"""Reading untrusted feed JSON: bounded text, normalised timestamps, and the bounded tables everything lives in."""

from __future__ import annotations

import math
import re
from collections import OrderedDict
from typing import Any, Final, TypeVar

from ..clock import parse_rfc3339, rfc3339

MAX_TEXT: Final = 256
"""Longest id, name or status kept from a feed; longer ones make the entry malformed."""

_MESH_FORM: Final = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")

K = TypeVar("K")
V = TypeVar("V")


def text(value: Any, *, empty: bool = False) -> str | None:
    """`value` when it is a string of at most MAX_TEXT characters (non-empty unless `empty`), else None."""
    if isinstance(value, str) and len(value) <= MAX_TEXT and (empty or value):
        return value
    return None


def copy_optional_texts(raw: dict[str, Any], keys: tuple[str, ...], into: dict[str, Any]) -> bool:
    """Copy each of `keys` that `raw` carries into `into`; False when one is there but is not valid text."""
    for key in keys:
        value = raw.get(key)
        if value is None:
            continue
        checked = text(value)
        if checked is None:
            return False
        into[key] = checked
    return True


def number(value: Any) -> float | None:
    """A finite, non-negative JSON number (booleans are not numbers), else None."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0:
        return float(value)
    return None


def timestamp(value: Any) -> str | None:
    """An RFC 3339 time in the mesh's one form (`...T10:00:00.123Z`), else None. The mesh's own form passes
    untouched, so normalised strings compare correctly as strings."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    if _MESH_FORM.fullmatch(value):
        return value
    epoch = parse_rfc3339(value)
    return None if epoch is None else rfc3339(epoch)


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
