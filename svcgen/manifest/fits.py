"""Does a JSON value fit a type expression? Used to check field defaults."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from .typeexpr import TypeExpr

_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")

RecordFields = Mapping[str, Mapping[str, tuple[TypeExpr, bool]]]
"""Record name → wire name → (type, required). Records missing here are only checked to be objects."""


def fits(
    expr: TypeExpr,
    value: Any,
    records: RecordFields | None = None,
    enums: Mapping[str, tuple[str, ...]] | None = None,
) -> bool:
    """True when the JSON value `value` is a valid value of `expr` (`enums`: enum name → its values)."""
    match expr.kind:
        case "scalar":
            return _fits_scalar(expr.name, value)
        case "nullable":
            return value is None or fits(expr.args[0], value, records, enums)
        case "union":
            return any(fits(member, value, records, enums) for member in expr.args)
        case "list" | "set" | "tuple":
            return isinstance(value, list) and all(fits(expr.args[0], item, records, enums) for item in value)
        case "map":
            return isinstance(value, dict) and all(fits(expr.args[0], item, records, enums) for item in value.values())
        case "record":
            if enums and expr.name in enums:
                return isinstance(value, str) and value in enums[expr.name]
            return isinstance(value, dict) and _fits_record(expr.name, value, records or {}, enums)
    return False


def _fits_scalar(name: str, value: Any) -> bool:
    match name:
        case "any":
            return True
        case "string":
            return isinstance(value, str)
        case "integer":
            return isinstance(value, int) and not isinstance(value, bool)
        case "float":
            return isinstance(value, int | float) and not isinstance(value, bool)
        case "boolean":
            return isinstance(value, bool)
        case "datetime":
            return isinstance(value, str) and is_rfc3339(value)
        case "bytes":
            return isinstance(value, str) and _is_base64(value)
    return False


def is_rfc3339(text: str) -> bool:
    """An RFC 3339 date-time with an offset (`2024-05-01T12:00:00Z`), with valid field ranges."""
    if not _RFC3339.match(text):
        return False
    try:
        datetime.fromisoformat(text.upper().replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def _is_base64(text: str) -> bool:
    try:
        base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _fits_record(
    name: str, value: dict[str, Any], records: RecordFields, enums: Mapping[str, tuple[str, ...]] | None
) -> bool:
    fields = records.get(name)
    if fields is None:
        return True
    if any(key not in fields for key in value):
        return False
    if any(required and wire not in value for wire, (_, required) in fields.items()):
        return False
    return all(fits(fields[key][0], item, records, enums) for key, item in value.items())
