"""Parsing request JSON under limits: nesting depth, duplicate object keys, UTF-8.

Every request payload and every envelope goes through `parse_json`, whatever the transport, so a limit
holds on each face alike. orjson does the parse; the checks are C-level counts over the raw text and,
only when those cannot decide, one orjson re-serialisation of the parsed value (no Python-level walk):

- depth: a text with at most `max_depth` opening brackets cannot nest deeper. Otherwise the value is
  re-serialised indented by 2: a container nested `max_depth + 1` deep starts a line indented by
  `2 * max_depth` (strings cannot hold a raw newline, so indentation is structure).
- duplicate keys: orjson keeps the last value of a repeated key, which drops that pair's `:`. Every
  `:` of the text (separators and inside strings) survives re-serialisation unless a pair was dropped,
  so fewer `:` afterwards means a repeated key. The one way a `:` can appear only after parsing is a
  `\\u003a` escape; a text holding one is checked by the standard parser instead.
- the common flat object (one object, as many `:` as keys) needs neither.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

import orjson

DEFAULT_MAX_JSON_DEPTH: Final = 64
"""Arrays and objects nested in one another; orjson itself parses up to 1024, this is lower on purpose."""
MAX_JSON_DEPTH_CEILING: Final = 200
"""orjson serialises at most 254 levels, and the depth check re-serialises; a ceiling below that keeps it exact."""


class JsonRefused(ValueError):
    """A JSON text the limits refuse; the message is a client-facing detail."""


@dataclass(frozen=True, slots=True)
class JsonLimits:
    max_depth: int = DEFAULT_MAX_JSON_DEPTH
    reject_duplicate_keys: bool = True
    """False: the last value of a repeated key wins, as orjson parses it."""

    def __post_init__(self) -> None:
        if not 1 <= self.max_depth <= MAX_JSON_DEPTH_CEILING:
            raise ValueError(f"max_depth must be between 1 and {MAX_JSON_DEPTH_CEILING}")


DEFAULT_JSON_LIMITS: Final = JsonLimits()

_INDENT: Final = orjson.OPT_INDENT_2
_NOT_MARKS: Final = bytes(c for c in range(256) if c not in b"{[:")
"""`bytes.translate` deletes these, leaving the `{`, `[` and `:` to count in one C-level pass."""


def parse_json(raw: bytes | str, limits: JsonLimits = DEFAULT_JSON_LIMITS, what: str = "body") -> Any:
    """The parsed value; raises `JsonRefused` with a detail naming `what` when the text is refused."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise JsonRefused(_why_not_json(raw, exc, limits, what)) from None
    if type(value) is dict or type(value) is list:
        _check(raw, value, limits, what)
    return value


def _check(raw: bytes | str, value: Any, limits: JsonLimits, what: str) -> None:
    data = raw if isinstance(raw, bytes) else raw.encode()
    marks = data.translate(None, _NOT_MARKS)
    objects, arrays = marks.count(b"{"), marks.count(b"[")
    colons = len(marks) - objects - arrays
    maybe_deep = objects + arrays > limits.max_depth
    duplicates = limits.reject_duplicate_keys and objects > 0
    if not maybe_deep and (not duplicates or (objects == 1 and type(value) is dict and colons == len(value))):
        return
    try:
        text = orjson.dumps(value, option=_INDENT if maybe_deep else None)
    except orjson.JSONEncodeError:
        # Only orjson's own 254-level serialising ceiling refuses what it parsed: deeper than any allowed depth.
        raise JsonRefused(f"{what} is nested deeper than {limits.max_depth} levels") from None
    if maybe_deep and _deeper_than(text, limits.max_depth):
        raise JsonRefused(f"{what} is nested deeper than {limits.max_depth} levels")
    if duplicates:
        dropped = text.count(b":") < colons
        if dropped or (b"\\" in data and _escaped_colon(data)):
            key = _first_duplicate(data)
            if key is not None or dropped:
                named = orjson.dumps(key).decode() if key is not None else "(name not found)"
                raise JsonRefused(f"{what} has duplicate key {named}")


def _deeper_than(indented: bytes, max_depth: int) -> bool:
    """Whether a container opens or closes on a line indented `2 * max_depth` in orjson's 2-space form.

    Scalar lines end in `"`, a digit or a letter (before a `,`); only a container's own lines end in a bracket.
    """
    margin = b"\n" + b" " * (2 * max_depth)
    at = indented.find(margin)
    while at >= 0:
        start = at + len(margin)
        end = indented.find(b"\n", start)
        line = indented[start : end if end >= 0 else len(indented)].rstrip(b",")
        if line[:1] != b" " and line[-1:] in (b"[", b"]", b"{", b"}"):
            return True
        at = indented.find(margin, start)
    return False


def _escaped_colon(data: bytes) -> bool:
    return b"\\u003a" in data or b"\\u003A" in data


def _first_duplicate(raw: bytes) -> str | None:
    """The first repeated key; only on the refusal path, so the slower standard parser is fine here."""
    found: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        if not found:
            seen: set[str] = set()
            for key, _ in items:
                if key in seen:
                    found.append(key)
                    break
                seen.add(key)
        return {}

    try:
        json.loads(raw, object_pairs_hook=pairs)
    except ValueError:
        return None
    return found[0] if found else None


def _why_not_json(raw: bytes | str, exc: orjson.JSONDecodeError, limits: JsonLimits, what: str) -> str:
    try:
        if isinstance(raw, bytes):
            raw.decode("utf-8")
        else:
            raw.encode("utf-8")
    except UnicodeError:
        return f"{what} is not valid UTF-8"
    if str(exc).startswith("depth limit exceeded"):
        return f"{what} is nested deeper than {limits.max_depth} levels"
    return f"{what} is not valid JSON"
