"""Field defaults: the JSON value a manifest gives, as the Python a dataclass field declares.

Immutable values are plain defaults; lists, maps, sets, records and datetimes (read by the runtime codec)
go through `default_factory`; bytes are decoded from base64, a record default is a
constructor call, an enum default its member (`OrderStatus.PLACED`).
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping, Set
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ..manifest.contract import member_name
from ..manifest.fits import ValueTypes
from ..manifest.model import EnumDef, FieldDef, RecordDef
from ..manifest.typeexpr import TypeExpr
from ..runtime._codec import decode_datetime
from ..runtime._naming import attribute
from .imports import Imports
from .literals import py_float, py_str, py_value


@dataclass(frozen=True)
class RecordIndex:
    """What default rendering needs to know about the manifest's records."""

    fields: Mapping[str, tuple[FieldDef, ...]]
    """Fields of each record."""
    enums: Mapping[str, tuple[str, ...]]
    """Values of each enum."""

    @classmethod
    def of(cls, records: tuple[RecordDef, ...], enums: tuple[EnumDef, ...] = ()) -> RecordIndex:
        return cls({record.name: record.fields for record in records}, {e.name: e.values for e in enums})

    @cached_property
    def types(self) -> ValueTypes:
        """The codec's view of the records, which decides the union member a default belongs to."""
        shapes = {name: {f.wire: (f.type, not f.has_default) for f in fields} for name, fields in self.fields.items()}
        return ValueTypes(shapes, self.enums)


@dataclass(frozen=True)
class Assignment:
    """What follows a field's annotation: nothing, `= value`, or `= field(arguments)`."""

    value: str | None = None
    callee: str | None = None
    arguments: tuple[str, ...] = ()

    def text(self, room: int) -> str:
        """The text after the annotation; a `field(...)` call longer than `room` gets one argument per line."""
        if self.value is not None:
            return f" = {self.value}"
        if self.callee is None:
            return ""
        one_line = f" = {self.callee}({', '.join(self.arguments)})"
        if len(one_line) <= room:
            return one_line
        return f" = {self.callee}(\n" + "".join(f"        {argument},\n" for argument in self.arguments) + "    )"


def field_assignment(
    f: FieldDef,
    records: RecordIndex,
    imports: Imports,
    *,
    wire: str | None = None,
    shadowed: Set[str] = frozenset(),
) -> Assignment:
    """The field's default; `wire` adds the wire-name metadata the runtime reads."""
    renderer = _Renderer(records, imports, shadowed)
    arguments: list[str] = []
    if f.has_default:
        text, mutable = renderer.value(f.type, f.default)
        if mutable:
            arguments.append(f"default_factory={renderer.factory(text)}")
        elif wire is None:
            return Assignment(value=text)
        else:
            arguments.append(f"default={text}")
    if wire is not None:
        arguments.append(f'metadata={{"wire": {py_str(wire)}}}')
    if not arguments:
        return Assignment()
    return Assignment(callee=renderer.name("dataclasses", "field"), arguments=tuple(arguments))


class _Renderer:
    def __init__(self, records: RecordIndex, imports: Imports, shadowed: Set[str]) -> None:
        self.records = records
        self.imports = imports
        self.shadowed = shadowed

    def name(self, module: str, name: str) -> str:
        if name in self.shadowed:
            # `dt`: the bare module name `datetime` is taken by the class imported for annotations.
            return f"{self.imports.module(module, 'dt' if module == 'datetime' else None)}.{name}"
        return self.imports.name(module, name)

    def builtin(self, name: str) -> str:
        return f"{self.imports.module('builtins')}.{name}" if name in self.shadowed else name

    def factory(self, text: str) -> str:
        empty = {"[]": "list", "{}": "dict", f"{self.builtin('set')}()": "set"}.get(text)
        return self.builtin(empty) if empty is not None else f"lambda: {text}"

    def value(self, expr: TypeExpr, value: Any) -> tuple[str, bool]:
        """(Python expression, whether the value is mutable and so needs a factory)."""
        match expr.kind:
            case "nullable":
                return ("None", False) if value is None else self.value(expr.args[0], value)
            case "scalar":
                return self.scalar(expr.name, value)
            case "list":
                items = [self.value(expr.args[0], item) for item in value]
                return "[" + ", ".join(text for text, _ in items) + "]", True
            case "set":
                items = [self.value(expr.args[0], item) for item in value]
                if not items:
                    return f"{self.builtin('set')}()", True
                return "{" + ", ".join(text for text, _ in items) + "}", True
            case "tuple":
                items = [self.value(expr.args[0], item) for item in value]
                texts = [text for text, _ in items]
                tuple_text = f"({texts[0]},)" if len(texts) == 1 else "(" + ", ".join(texts) + ")"
                return tuple_text, any(mutable for _, mutable in items)
            case "map":
                pairs = [(key, self.value(expr.args[0], item)) for key, item in value.items()]
                return "{" + ", ".join(f"{py_str(key)}: {text}" for key, (text, _) in pairs) + "}", True
            case "union":
                member = next((arg for arg in expr.args if self.records.types.fits(arg, value)), expr.args[0])
                return self.value(member, value)
            case "record" if expr.name in self.records.enums:
                return f"{expr.name}.{member_name(value)}", False
            case "record":
                return self.record(expr.name, value), True
        raise AssertionError(expr.kind)

    def scalar(self, name: str, value: Any) -> tuple[str, bool]:
        match name:
            case "float":
                number = float(value)
                if math.isfinite(number):
                    return py_float(number), False
                math_module = self.imports.module("math")
                text = f"{math_module}.nan" if math.isnan(number) else f"{math_module}.inf"
                return ("-" + text if number < 0 else text), False
            case "datetime":
                # A factory, though datetimes are immutable: a call as a plain default is what RUF009 flags.
                parsed = decode_datetime(value)
                return f"{self.name('datetime', 'datetime')}.fromisoformat({py_str(parsed.isoformat())})", True
            case "bytes":
                return repr(base64.b64decode(value)), False
            case "any":
                return py_value(value), isinstance(value, list | dict)
        return py_value(value), False

    def record(self, name: str, value: dict[str, Any]) -> str:
        fields = self.records.fields[name]
        arguments = [f"{attribute(f.wire)}={self.value(f.type, value[f.wire])[0]}" for f in fields if f.wire in value]
        return f"{name}({', '.join(arguments)})"
