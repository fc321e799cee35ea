"""Does a JSON value fit a type expression? Decided by the runtime codec, never by rules of our own.

A type expression becomes the Python type a generated model declares (records as dataclasses made on the fly,
closed like a default's record must be; enums as string enums), and the value is decoded through its codec: a
default, an example and a request are held to one rule (64-bit integers, RFC 3339 date-times, base64 bytes).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from datetime import datetime
from functools import cached_property
from typing import Annotated, Any, Optional, Union

from ..runtime._codec import DecodeError, codec_for
from ..runtime._meta import META_ARGUMENTS, RECORD_META_ATTRIBUTE, Meta
from ..runtime._shapes import WIRE_NAME_KEY
from .typeexpr import TypeExpr

RecordFields = Mapping[str, Mapping[str, tuple[TypeExpr, bool]]]
"""Record name → wire name → (type, required). Records missing here are only checked to be objects."""

_SCALARS: dict[str, Any] = {
    "string": str,
    "integer": int,
    "float": float,
    "boolean": bool,
    "datetime": datetime,
    "bytes": bytes,
    "any": Any,
}
_CLOSED = Meta(closed=True)


def meta_of(contract: Mapping[str, Any], description: str | None = None) -> Meta:
    """The runtime `Meta` of a field's contract keywords (as the manifest writes them)."""
    arguments = {META_ARGUMENTS[key]: value for key, value in contract.items() if key in META_ARGUMENTS}
    if description is not None:
        arguments["description"] = description
    return Meta(**arguments)


class ValueTypes:
    """The Python types of a manifest's type expressions, over its records and enums (made once, then shared)."""

    def __init__(self, records: RecordFields, enums: Mapping[str, tuple[str, ...]]) -> None:
        self.records = records
        self.enums = enums

    def problem(self, expr: TypeExpr, value: Any, contract: Mapping[str, Any] | None = None) -> DecodeError | None:
        """Why the JSON `value` is not a value of `expr` (with the field's `contract`), by its codec; None if it is."""
        tp = self.python_type(expr)
        if contract:
            tp = Annotated[tp, meta_of(contract)]
        try:
            codec_for(tp).decode(value)
        except DecodeError as error:
            return error
        return None

    def fits(self, expr: TypeExpr, value: Any) -> bool:
        return self.problem(expr, value) is None

    def python_type(self, expr: TypeExpr) -> Any:
        match expr.kind:
            case "scalar":
                return _SCALARS[expr.name]
            case "record" if expr.name in self.enums:
                return self._enum_classes[expr.name]
            case "record":
                return self._record_classes.get(expr.name, dict[str, Any])
            case "list":
                return list[self.python_type(expr.args[0])]  # type: ignore[misc]
            case "set":
                return set[self.python_type(expr.args[0])]  # type: ignore[misc]
            case "tuple":
                return tuple[self.python_type(expr.args[0]), ...]  # type: ignore[misc]
            case "map":
                return dict[str, self.python_type(expr.args[0])]  # type: ignore[misc]
            case "nullable":
                return Optional[self.python_type(expr.args[0])]  # noqa: UP045 (the argument may be Any)
            case "union":
                return Union[tuple(self.python_type(member) for member in expr.args)]  # noqa: UP007
        raise AssertionError(expr.kind)

    @cached_property
    def _enum_classes(self) -> dict[str, type[enum.StrEnum]]:
        return {
            # Member names do not matter to decoding; numbered ones never collide (their clashes are reported apart).
            name: enum.StrEnum(name, [(f"V{index}", value) for index, value in enumerate(values)])  # type: ignore[misc]
            for name, values in self.enums.items()
        }

    @cached_property
    def _record_classes(self) -> dict[str, type]:
        # Classes first, fields after: records may refer to each other (and to themselves).
        classes: dict[str, type] = {name: type(name, (), {}) for name in self.records}
        self.__dict__["_record_classes"] = classes
        for name, cls in classes.items():
            annotations: dict[str, Any] = {}
            for index, (wire, (expr, required)) in enumerate(self.records[name].items()):
                attr = f"f{index}"
                annotations[attr] = self.python_type(expr)
                metadata = {WIRE_NAME_KEY: wire}
                setattr(cls, attr, dataclasses.field(metadata=metadata) if required else
                        dataclasses.field(default=None, metadata=metadata))  # fmt: skip
            cls.__annotations__ = annotations
            setattr(cls, RECORD_META_ATTRIBUTE, _CLOSED)
            dataclasses.dataclass(kw_only=True)(cls)
        return classes


def fits(
    expr: TypeExpr,
    value: Any,
    records: RecordFields | None = None,
    enums: Mapping[str, tuple[str, ...]] | None = None,
) -> bool:
    """True when the JSON value `value` is a valid value of `expr` (`enums`: enum name → its values)."""
    return ValueTypes(records or {}, enums or {}).fits(expr, value)
