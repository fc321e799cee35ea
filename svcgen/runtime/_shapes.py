"""One analysis of a Python type into a `Shape` tree, shared by schema derivation and the codec.

Both read the same tree, so the schema a topic advertises and the values its codec accepts agree.
A record that refers back to itself yields a `RecursiveShape` at the point of recursion.
"""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import datetime
import enum
import inspect
import types
import typing
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from ._meta import RECORD_META_ATTRIBUTE, Meta
from ._naming import snake_to_camel

ScalarKind = Literal["string", "boolean", "integer", "number", "datetime", "bytes"]
ArrayKind = Literal["list", "set", "tuple", "frozenset"]

WIRE_NAME_KEY = "wire"
"""dataclass field metadata key overriding the derived camelCase wire name."""


@dataclass(frozen=True, slots=True)
class ScalarShape:
    kind: ScalarKind


@dataclass(frozen=True, slots=True)
class AnyShape:
    pass


@dataclass(frozen=True, slots=True)
class NullableShape:
    inner: Shape


@dataclass(frozen=True, slots=True)
class ArrayShape:
    items: Shape
    container: ArrayKind


@dataclass(frozen=True, slots=True)
class MapShape:
    values: Shape


@dataclass(frozen=True, slots=True)
class UnionShape:
    members: tuple[Shape, ...]


@dataclass(frozen=True, slots=True)
class FieldShape:
    attr: str
    wire: str
    shape: Shape
    required: bool
    default: Any = dataclasses.MISSING
    default_factory: Any = dataclasses.MISSING


@dataclass(frozen=True, slots=True)
class RecordShape:
    cls: type
    fields: tuple[FieldShape, ...]
    description: str | None = None
    """The class's own docstring (not the one dataclasses writes)."""
    meta: Meta | None = None
    """The class's `__svcgen_meta__` (closed, deprecated)."""


@dataclass(frozen=True, slots=True)
class RecursiveShape:
    cls: type


@dataclass(frozen=True, slots=True)
class EnumShape:
    """A `StrEnum` (or any Enum of strings): its wire values are the members' values, in order."""

    cls: type[enum.Enum]
    values: tuple[str, ...]
    description: str | None = None


@dataclass(frozen=True, slots=True)
class ConstrainedShape:
    """`Annotated[T, Meta(...)]`: T's shape under the declared constraints and annotations."""

    inner: Shape
    meta: Meta


Shape = (
    ScalarShape
    | AnyShape
    | NullableShape
    | ArrayShape
    | MapShape
    | UnionShape
    | RecordShape
    | RecursiveShape
    | EnumShape
    | ConstrainedShape
)

ANY = AnyShape()

# bool before int: bool is a subclass of int.
_SCALARS: dict[Any, ScalarKind] = {
    str: "string",
    bool: "boolean",
    int: "integer",
    float: "number",
    datetime.datetime: "datetime",
    bytes: "bytes",
}
_ARRAY_ORIGINS: dict[Any, ArrayKind] = {
    list: "list",
    cabc.Sequence: "list",
    cabc.MutableSequence: "list",
    cabc.Iterable: "list",
    set: "set",
    cabc.Set: "set",
    cabc.MutableSet: "set",
    frozenset: "frozenset",
    tuple: "tuple",
}
_MAP_ORIGINS = {dict, cabc.Mapping, cabc.MutableMapping}


class ShapeError(TypeError):
    """A type annotation that cannot be resolved (for example a forward reference to a missing name)."""


def type_key(tp: Any) -> tuple[Any, str]:
    """A cache key that tells `int | str` from `str | int`: unions compare equal whatever their order, but members
    are tried in order, so each spelling gets its own shape, codec and schema."""
    return tp, repr(tp)


def shape_of(tp: Any) -> Shape:
    """The shape of a type, computed once per type (per spelling of its unions)."""
    return _shape_of(type_key(tp))


@cache
def _shape_of(key: tuple[Any, str]) -> Shape:
    return _walk(key[0], ())


def _walk(tp: Any, stack: tuple[type, ...]) -> Shape:
    if tp in _SCALARS:
        return ScalarShape(_SCALARS[tp])
    if tp is Any or tp is object or tp is None or tp is type(None):
        return ANY
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if tp in stack:
            return RecursiveShape(tp)
        return _record(tp, stack)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        inner = _walk(args[0], stack)
        meta = next((item for item in tp.__metadata__ if isinstance(item, Meta)), None)
        return inner if meta is None else ConstrainedShape(inner, meta)
    if origin is typing.Union or origin is types.UnionType:
        return _union(args, stack)
    if origin in _ARRAY_ORIGINS:
        return ArrayShape(_items(origin, args, stack), _ARRAY_ORIGINS[origin])
    if origin in _MAP_ORIGINS:
        if args and args[0] is not str:
            return ANY
        return MapShape(_walk(args[1], stack) if args else ANY)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum(tp)
    if tp in _ARRAY_ORIGINS:
        return ArrayShape(ANY, _ARRAY_ORIGINS[tp])
    if tp in _MAP_ORIGINS:
        return MapShape(ANY)
    if isinstance(tp, typing.NewType):
        return _walk(tp.__supertype__, stack)
    return ANY


def _items(origin: Any, args: tuple[Any, ...], stack: tuple[type, ...]) -> Shape:
    if origin is tuple:
        members = [arg for arg in args if arg is not Ellipsis]
        if not members:
            return ANY
        shapes = {_walk(arg, stack) for arg in members}
        return shapes.pop() if len(shapes) == 1 else ANY
    return _walk(args[0], stack) if args else ANY


def _union(args: tuple[Any, ...], stack: tuple[type, ...]) -> Shape:
    nullable = type(None) in args
    members = tuple(_walk(arg, stack) for arg in args if arg is not type(None))
    inner: Shape = members[0] if len(members) == 1 else UnionShape(members)
    return NullableShape(inner) if nullable else inner


def _record(cls: type, stack: tuple[type, ...]) -> RecordShape:
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except NameError as exc:
        raise ShapeError(f"{cls.__qualname__}: cannot resolve annotation: {exc}") from exc
    inner_stack = (*stack, cls)
    fields = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        fields.append(
            FieldShape(
                attr=f.name,
                wire=f.metadata.get(WIRE_NAME_KEY) or snake_to_camel(f.name),
                shape=_walk(hints[f.name], inner_stack),
                required=not has_default,
                default=f.default,
                default_factory=f.default_factory,
            )
        )
    meta = getattr(cls, RECORD_META_ATTRIBUTE, None)
    return RecordShape(cls, tuple(fields), _own_docstring(cls), meta if isinstance(meta, Meta) else None)


def _enum(cls: type[enum.Enum]) -> Shape:
    values = tuple(member.value for member in cls)
    if not all(isinstance(value, str) for value in values):
        return ANY  # only string enums have a wire form here
    return EnumShape(cls, values, inspect.cleandoc(cls.__doc__) if cls.__doc__ else None)


def _own_docstring(cls: type) -> str | None:
    doc = cls.__doc__
    if not doc:
        return None
    # dataclasses writes `Name(signature)` on one line when the class has no docstring of its own; rendering the
    # signature to compare would cost more than the rest of the analysis, and no description looks like that.
    if doc.startswith(cls.__name__ + "(") and doc.endswith(")") and "\n" not in doc:
        return None
    return inspect.cleandoc(doc)
