"""Manifest type expressions: `string`, `list[LineItem]`, `map[integer]`, `note?`, `integer | string`, a record name,
an imported one (`patients.Patient`) or a generic record applied to its arguments (`Page[Patient]`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

Kind = Literal["scalar", "list", "set", "tuple", "map", "nullable", "union", "record"]

SCALARS: dict[str, str] = {
    "string": "str",
    "integer": "int",
    "float": "float",
    "boolean": "bool",
    "datetime": "datetime",
    "bytes": "bytes",
    "any": "Any",
}
CONTAINERS: dict[str, Kind] = {"list": "list", "set": "set", "tuple": "tuple", "map": "map"}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?")


class TypeExprError(ValueError):
    def __init__(self, message: str, offset: int = 0) -> None:
        super().__init__(message)
        self.offset = offset


@dataclass(frozen=True, slots=True)
class TypeExpr:
    kind: Kind
    name: str = ""
    """Scalar name (`string`) or record name (`LineItem`, `patients.Patient`); empty for composites."""
    args: tuple[TypeExpr, ...] = ()
    """A container's item type, a union's members, or a generic record's arguments (`Page[Patient]`)."""

    @property
    def is_nullable(self) -> bool:
        return self.kind == "nullable"

    def records(self) -> set[str]:
        """Record names this expression refers to."""
        if self.kind == "record":
            return {self.name}.union(*(arg.records() for arg in self.args))
        return set().union(*(arg.records() for arg in self.args)) if self.args else set()

    def python(self) -> str:
        """The Python annotation text for generated code."""
        match self.kind:
            case "scalar":
                return SCALARS[self.name]
            case "record":
                return self.name if not self.args else f"{self.name}[{', '.join(a.python() for a in self.args)}]"
            case "list" | "set":
                return f"{self.kind}[{self.args[0].python()}]"
            case "tuple":
                return f"tuple[{self.args[0].python()}, ...]"
            case "map":
                return f"dict[str, {self.args[0].python()}]"
            case "nullable":
                return f"{self.args[0].python()} | None"
            case "union":
                return " | ".join(arg.python() for arg in self.args)
        raise AssertionError(self.kind)

    def __str__(self) -> str:
        match self.kind:
            case "scalar":
                return self.name
            case "record":
                return self.name if not self.args else f"{self.name}[{', '.join(str(a) for a in self.args)}]"
            case "nullable":
                return f"{self.args[0]}?"
            case "union":
                return " | ".join(str(arg) for arg in self.args)
        return f"{self.kind}[{self.args[0]}]"


# A manifest repeats the same few expressions (`string`, `Order?`) thousands of times, and both the checks and
# the model read each one; a TypeExpr is immutable, so one parse serves them all.
@lru_cache(maxsize=4096)
def parse_type(text: str) -> TypeExpr:
    """Parse a type expression; raises TypeExprError with the character offset of the problem."""
    parser = _Parser(text)
    expr = parser.union()
    parser.skip_space()
    if parser.pos != len(text):
        raise TypeExprError(f"unexpected {text[parser.pos:]!r} in type {text!r}", parser.pos)
    return expr


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] == " ":
            self.pos += 1

    def union(self) -> TypeExpr:
        members = [self.postfix()]
        self.skip_space()
        while self.pos < len(self.text) and self.text[self.pos] == "|":
            self.pos += 1
            members.append(self.postfix())
            self.skip_space()
        return members[0] if len(members) == 1 else TypeExpr("union", args=tuple(members))

    def postfix(self) -> TypeExpr:
        expr = self.primary()
        if self.pos < len(self.text) and self.text[self.pos] == "?":
            self.pos += 1
            expr = TypeExpr("nullable", args=(expr,))
        return expr

    def primary(self) -> TypeExpr:
        self.skip_space()
        match = _NAME.match(self.text, self.pos)
        if match is None:
            raise TypeExprError(f"expected a type name in {self.text!r}", self.pos)
        name = match.group(0)
        self.pos = match.end()
        if name in CONTAINERS:
            if self.pos >= len(self.text) or self.text[self.pos] != "[":
                raise TypeExprError(f"{name} needs an item type, like {name}[string]", self.pos)
            self.pos += 1
            inner = self.union()
            self.skip_space()
            if self.pos >= len(self.text) or self.text[self.pos] != "]":
                raise TypeExprError(f"missing ']' in type {self.text!r}", self.pos)
            self.pos += 1
            return TypeExpr(CONTAINERS[name], args=(inner,))
        if name in SCALARS:
            return TypeExpr("scalar", name)
        if self.pos < len(self.text) and self.text[self.pos] == "[":  # a generic record's arguments
            self.pos += 1
            args = [self.union()]
            self.skip_space()
            while self.pos < len(self.text) and self.text[self.pos] == ",":
                self.pos += 1
                args.append(self.union())
                self.skip_space()
            if self.pos >= len(self.text) or self.text[self.pos] != "]":
                raise TypeExprError(f"missing ']' in type {self.text!r}", self.pos)
            self.pos += 1
            return TypeExpr("record", name, tuple(args))
        return TypeExpr("record", name)


def rename_records(expr: TypeExpr, rename: Callable[[TypeExpr], TypeExpr]) -> TypeExpr:
    """`expr` with every record reference (a generic application whole) replaced by `rename`'s answer."""
    if expr.kind == "record":
        return rename(expr)
    if not expr.args:
        return expr
    args = tuple(rename_records(arg, rename) for arg in expr.args)
    if all(new is old for new, old in zip(args, expr.args, strict=True)):
        return expr  # unchanged: the same object (a large manifest resolves thousands of plain fields)
    return TypeExpr(expr.kind, expr.name, args)
