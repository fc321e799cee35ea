"""Contract details: enums, field constraints and annotations, checked where the manifest declares them.

Whether a default or example fits its field (type and constraints) is the codec's decision: see `fits`.
"""

from __future__ import annotations

import keyword
import re
import unicodedata
from collections.abc import Callable, Mapping
from typing import Any

from ..runtime._meta import CONSTRAINT_KEYWORDS, FORMATS
from .typeexpr import TypeExpr

CONTRACT_KEYWORDS = CONSTRAINT_KEYWORDS | {"examples", "deprecated"}
"""Field keys that travel into `Meta` besides `description`."""

_STRING_KEYWORDS = ("minLength", "maxLength", "pattern", "format")
_NUMBER_KEYWORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_ITEMS_KEYWORDS = ("minItems", "maxItems")
_RANGES = (("minLength", "maxLength"), ("minimum", "maximum"), ("minItems", "maxItems"))

Report = Callable[[str, str], None]
"""(key the problem is at, message)."""


def member_name(value: str) -> str:
    """The StrEnum member of a wire value: UPPER_SNAKE (`pickup-point` → `PICKUP_POINT`, `2fa` → `V_2FA`,
    `Übersicht` → `ÜBERSICHT`); a value of symbols alone is named by its characters (`-` → `HYPHEN_MINUS`)."""
    words = unicodedata.normalize("NFKC", re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", value)).upper()
    # Python reads identifiers in NFKC, so the name is built from and compared in that form.
    name = unicodedata.normalize("NFKC", "_".join(_identifier_runs(words)))
    if not name:
        name = "_".join(re.sub(r"[^A-Z0-9]+", "_", unicodedata.name(c, f"U+{ord(c):04X}")) for c in value)
    return f"V_{name}" if name[0].isdigit() or keyword.iskeyword(name) else name


def _identifier_runs(text: str) -> list[str]:
    """The runs of characters that may continue a Python identifier, `_` excluded (it joins the runs)."""
    runs, run = [], ""
    for character in text:
        if character != "_" and ("A" + character).isidentifier():
            run += character
        elif run:
            runs.append(run)
            run = ""
    return [*runs, run] if run else runs


def check_enum(values: list[Any], report: Callable[[int, str], None]) -> None:
    """Report (index, message) for a value listed twice and for two values that make the same member."""
    seen: dict[str, str] = {}
    for index, value in enumerate(values):
        if not isinstance(value, str):
            continue  # the schema stage says so
        member = member_name(value)
        if value in seen.values():
            report(index, f"enum value {value!r} is listed twice; list each value once")
        elif member in seen:
            report(index, f"enum values {seen[member]!r} and {value!r} both become the member {member}; rename one")
        else:
            seen[member] = value


def check_field_contract(
    spec: Mapping[str, Any],
    expr: TypeExpr,
    enums: Mapping[str, tuple[str, ...]],
    report: Report,
) -> bool:
    """Report every misuse of the field's contract keywords; True when they are usable (values may be checked)."""
    usable = True
    base = expr.args[0] if expr.kind == "nullable" else expr
    is_enum = base.kind == "record" and base.name in enums
    kind = base.name if base.kind == "scalar" else ("enum" if is_enum else base.kind)
    for keywords, fits, needs in (
        (_STRING_KEYWORDS, kind == "string", "a string field (type string or string?)"),
        (_NUMBER_KEYWORDS, kind in ("integer", "float"), "a number field (integer or float)"),
        (_ITEMS_KEYWORDS, kind in ("list", "set", "tuple"), "a list, set or tuple field"),
    ):
        for key in keywords:
            if key in spec and not fits:
                usable = False
                report(key, f"{key} does not apply to a field of type {expr}; it needs {needs}")
    for low, high in _RANGES:
        if _number(spec.get(low)) and _number(spec.get(high)) and spec[low] > spec[high]:
            usable = False
            report(low, f"{low} {spec[low]} is greater than {high} {spec[high]}; no value could fit")
    pattern = spec.get("pattern")
    if isinstance(pattern, str):
        try:
            re.compile(pattern)
        except re.error as error:
            usable = False
            report("pattern", f"pattern {pattern!r} is not a valid regular expression: {error}")
    form = spec.get("format")
    if isinstance(form, str) and form not in FORMATS:
        usable = False
        report("format", f"unknown format {form!r}; use one of {', '.join(FORMATS)}")
    return usable


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
