"""Type expressions as Python annotations in generated code, with the imports they need.

One function renders every annotation, so models.py, service.py, stubs and clients spell a type alike.
"""

from __future__ import annotations

from collections.abc import Set

from ..manifest.typeexpr import SCALARS, TypeExpr
from .imports import Imports

BUILTIN_TYPE_NAMES = frozenset({"str", "int", "float", "bool", "bytes", "list", "set", "tuple", "dict"})


def annotation(
    expr: TypeExpr,
    imports: Imports,
    *,
    records: str = "",
    shadowed: Set[str] = frozenset(),
) -> str:
    """The annotation text of `expr`.

    `records` prefixes record names (`models.` where the models module is imported whole). `shadowed`
    names a class body's attributes: a type name among them is written qualified, since inside that
    body the bare name would mean the attribute.
    """
    match expr.kind:
        case "scalar":
            return _scalar(SCALARS[expr.name], imports, shadowed)
        case "record":
            return records + expr.name
        case "list" | "set":
            inner = annotation(expr.args[0], imports, records=records, shadowed=shadowed)
            return f"{_builtin(expr.kind, shadowed, imports)}[{inner}]"
        case "tuple":
            inner = annotation(expr.args[0], imports, records=records, shadowed=shadowed)
            return f"{_builtin('tuple', shadowed, imports)}[{inner}, ...]"
        case "map":
            key = _builtin("str", shadowed, imports)
            inner = annotation(expr.args[0], imports, records=records, shadowed=shadowed)
            return f"{_builtin('dict', shadowed, imports)}[{key}, {inner}]"
        case "nullable":
            return annotation(expr.args[0], imports, records=records, shadowed=shadowed) + " | None"
        case "union":
            return " | ".join(annotation(arg, imports, records=records, shadowed=shadowed) for arg in expr.args)
    raise AssertionError(expr.kind)


def _scalar(python_name: str, imports: Imports, shadowed: Set[str]) -> str:
    if python_name == "Any":
        return imports.name("typing", "Any")
    if python_name == "datetime":
        if "datetime" in shadowed:
            return imports.module("datetime", "dt") + ".datetime"
        return imports.name("datetime", "datetime")
    return _builtin(python_name, shadowed, imports)


def _builtin(name: str, shadowed: Set[str], imports: Imports) -> str:
    if name in shadowed:
        return imports.module("builtins") + "." + name
    return name
