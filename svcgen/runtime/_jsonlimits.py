"""Parsing request JSON under limits: nesting depth, container count, duplicate object keys, UTF-8.

Every request payload and every envelope goes through `parse_json`, whatever the transport, so a limit
holds on each face alike. The cost of a refused or accepted text is linear in its size and small: the
structure is checked BEFORE orjson builds anything, with C-level byte operations only (no Python loop per
byte or per value):

- containers: a text with at most `max_depth` (and `max_containers`) opening brackets, strings included, can
  break neither rule.
  Otherwise its structure is taken out: escapes (`\\\\`, `\\"`) removed, everything but brackets and quotes
  deleted, and the strings (between quote pairs) dropped. Its opening brackets are the arrays and objects;
  more than `max_containers` is refused, which bounds what orjson allocates (and the garbage collector
  then traverses).
- depth: on that structure (at most `2 * max_containers` bytes), with `{}` counted as `[]`, each pass of
  `replace(b"[]", b"")` removes exactly the innermost level; text left after `max_depth` passes is nested
  deeper.
- duplicate keys: orjson keeps the last value of a repeated key, which drops that pair's `:`. Every `:` of
  the text survives re-serialisation unless a pair was dropped, plus one per `\\u003a` escape, so fewer `:`
  afterwards means a repeated key. The common flat object (one object, as many `:` as keys) needs no check.
  The key is named when the text is small enough to parse again with the standard parser
  (`NAME_DUPLICATE_MAX_BYTES`); a larger one is refused without the name, so a refusal stays cheap too.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

DEFAULT_MAX_JSON_DEPTH: Final = 64
"""Arrays and objects nested in one another; orjson itself parses up to 1024, this is lower on purpose."""
MAX_JSON_DEPTH_CEILING: Final = 200
"""orjson serialises at most 254 levels, and the duplicate-key check re-serialises; a ceiling below that keeps
it exact."""
DEFAULT_MAX_JSON_CONTAINERS: Final = 10_000
"""Arrays and objects in one text. A 1 MiB text of empty arrays holds 350,000; parsing them costs ~100 ms of CPU
and makes every later garbage collection slower. 10,000 records in one request is still a large batch."""
NAME_DUPLICATE_MAX_BYTES: Final = 64 * 1024
"""Texts up to this size have their repeated key named in the refusal (the standard parser finds it)."""
COUNT_DIRECTLY_BELOW: Final = 512
"""Below this many bytes, counting `{`, `[` (and later `:`) in the text beats taking its marks out first."""


class JsonRefused(ValueError):
    """A JSON text the limits refuse; the message is a client-facing detail."""


@dataclass(frozen=True, slots=True)
class JsonLimits:
    max_depth: int = DEFAULT_MAX_JSON_DEPTH
    reject_duplicate_keys: bool = True
    """False: the last value of a repeated key wins, as orjson parses it."""
    max_containers: int = DEFAULT_MAX_JSON_CONTAINERS
    structure_checked_past: int = field(init=False, repr=False, compare=False)
    """Opening brackets (strings included) at most this many can break neither rule."""

    def __post_init__(self) -> None:
        if not 1 <= self.max_depth <= MAX_JSON_DEPTH_CEILING:
            raise ValueError(f"max_depth must be between 1 and {MAX_JSON_DEPTH_CEILING}")
        if self.max_containers < 1:
            raise ValueError("max_containers must be at least 1")
        object.__setattr__(self, "structure_checked_past", min(self.max_depth, self.max_containers))


DEFAULT_JSON_LIMITS: Final = JsonLimits()

_NOT_MARKS: Final = bytes(c for c in range(256) if c not in b"{[:")
"""`bytes.translate` deletes these, leaving the `{`, `[` and `:` to count in one C-level pass."""
_NOT_STRUCTURE: Final = bytes(c for c in range(256) if c not in b'[]{}"')
_SQUARE: Final = bytes.maketrans(b"{}", b"[]")
_ESCAPED_COLON: Final = re.compile(rb"\\u003[aA]")


def parse_json(raw: bytes | str, limits: JsonLimits = DEFAULT_JSON_LIMITS, what: str = "body") -> Any:
    """The parsed value; raises `JsonRefused` with a detail naming `what` when the text is refused."""
    data = raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogatepass")
    colons = -1  # counted when first needed
    if len(data) < COUNT_DIRECTLY_BELOW:
        objects, arrays = data.count(b"{"), data.count(b"[")
    else:
        marks = data.translate(None, _NOT_MARKS)
        objects, arrays = marks.count(b"{"), marks.count(b"[")
        colons = len(marks) - objects - arrays
    if objects + arrays > limits.structure_checked_past:
        _check_structure(data, limits, what)
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise JsonRefused(_why_not_json(raw, exc, limits, what)) from None
    if objects and limits.reject_duplicate_keys and (type(value) is dict or type(value) is list):
        if colons < 0:
            colons = data.count(b":")
        # The common flat object (one object, as many `:` as keys) needs no check.
        if not (objects == 1 and type(value) is dict and colons == len(value)):
            _check_duplicates(data, value, objects, colons, what)
    return value


def _check_structure(data: bytes, limits: JsonLimits, what: str) -> None:
    structure = _structure(data)
    containers = structure.count(b"[") + structure.count(b"{")
    if containers > limits.max_containers:
        raise JsonRefused(f"{what} has more than {limits.max_containers} arrays and objects")
    if containers > limits.max_depth and _deeper_than(structure, limits.max_depth):
        raise JsonRefused(f"{what} is nested deeper than {limits.max_depth} levels")


def _structure(data: bytes) -> bytes:
    """The text's brackets outside strings, in order. For a valid text; any other is refused by the parser."""
    if b"\\" in data:
        # Left to right, as JSON reads escapes: an escaped backslash first, then an escaped quote.
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    kept = data.translate(None, _NOT_STRUCTURE)
    if b'"' in kept:
        kept = b"".join(kept.split(b'"')[::2])  # quotes pair up: every odd piece is a string's content
    return kept


def _deeper_than(structure: bytes, max_depth: int) -> bool:
    nesting = structure.translate(_SQUARE)
    for _ in range(max_depth):
        nesting = nesting.replace(b"[]", b"")
        if not nesting:
            return False
    return bool(nesting)


def _check_duplicates(data: bytes, value: Any, objects: int, colons: int, what: str) -> None:
    if b"\\" in data:
        colons += len(_ESCAPED_COLON.findall(data.replace(b"\\\\", b"")))
    try:
        text = orjson.dumps(value)
    except orjson.JSONEncodeError:
        # Only orjson's own 254-level serialising ceiling refuses what it parsed: deeper than any allowed depth.
        raise JsonRefused(f"{what} is nested too deeply") from None
    if text.count(b":") >= colons:
        return
    key = _first_duplicate(data) if len(data) <= NAME_DUPLICATE_MAX_BYTES else None
    raise JsonRefused(f"{what} has duplicate key {orjson.dumps(key).decode()}" if key is not None
                      else f"{what} has a duplicate key")


def _first_duplicate(raw: bytes) -> str | None:
    """The first repeated key; only on the refusal path of a small text, so the standard parser is fine here."""
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
