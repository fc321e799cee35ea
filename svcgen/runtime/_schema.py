"""JSON Schema (2020-12 subset) derivation from a type: computed once per type, reused verbatim everywhere.

A document that names its types (the HTTP API document's `#/components/schemas/<Name>`) derives through the same
functions with a `refer` callback: where it returns a schema (a `$ref`), that schema stands for the whole shape.
With `every_default`, every field that has a default publishes it (the HTTP API document, DESIGN §12); without, only
a field that declares contract details does, so a plain field derives exactly the service spec's table row.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import cache
from typing import Any

from ._codec import shape_encoder
from ._shapes import (
    AnyShape,
    ArrayShape,
    ConstrainedShape,
    EnumShape,
    FieldShape,
    MapShape,
    NullableShape,
    RecordShape,
    RecursiveShape,
    ScalarShape,
    Shape,
    UnionShape,
    shape_of,
    type_key,
)

JsonSchema = dict[str, Any]
Refer = Callable[[Shape], JsonSchema | None]
"""The reference standing for a shape (a named type), or None to derive the shape in place."""

_SCALAR_SCHEMAS: dict[str, JsonSchema] = {
    "string": {"type": "string"},
    "boolean": {"type": "boolean"},
    "integer": {"type": "integer"},
    "number": {"type": "number"},
    "datetime": {"type": "string", "format": "date-time"},
    "bytes": {"type": "string", "contentEncoding": "base64"},
}


def schema_of(tp: Any) -> JsonSchema:
    """The JSON Schema of a type. The returned dict is shared: callers must not mutate it."""
    return _schema_of(type_key(tp))


@cache
def _schema_of(key: tuple[Any, str]) -> JsonSchema:
    return schema_of_shape(shape_of(key[0]))


def schema_of_shape(shape: Shape, refer: Refer | None = None, *, every_default: bool = False) -> JsonSchema:
    """The schema of a shape; with `refer`, every shape it names (the root too) is its reference instead."""
    if refer is not None:
        reference = refer(shape)
        if reference is not None:
            return reference
    return definition_of(shape, refer, every_default=every_default)


def definition_of(shape: Shape, refer: Refer | None = None, *, every_default: bool = False) -> JsonSchema:
    """The schema of a shape derived in place, its parts through `refer`: a named type's own definition."""
    match shape:
        case ScalarShape(kind):
            return dict(_SCALAR_SCHEMAS[kind])
        case NullableShape(inner):
            return _with_null(schema_of_shape(inner, refer, every_default=every_default))
        case ArrayShape(items, _):
            return {"type": "array", "items": schema_of_shape(items, refer, every_default=every_default)}
        case MapShape(values):
            return {
                "type": "object",
                "additionalProperties": schema_of_shape(values, refer, every_default=every_default),
            }
        case RecordShape(_, fields, description, meta):
            schema: JsonSchema = {
                "type": "object",
                "properties": {f.wire: field_schema(f, refer, every_default=every_default) for f in fields},
            }
            required = [f.wire for f in fields if f.required]
            if required:
                schema["required"] = required
            if meta is not None and meta.closed:
                schema["additionalProperties"] = False
            if description is not None:
                schema["description"] = description
            if meta is not None and meta.deprecated:
                schema["deprecated"] = True
            return schema
        case EnumShape(_, values, description):
            enum_schema: JsonSchema = {"type": "string", "enum": list(values)}
            if description is not None:
                enum_schema["description"] = description
            return enum_schema
        case ConstrainedShape(inner, meta):
            return {**schema_of_shape(inner, refer, every_default=every_default), **meta.keywords()}
        case AnyShape() | UnionShape() | RecursiveShape():
            return {}
    raise TypeError(f"unknown shape {shape!r}")


def field_schema(f: FieldShape, refer: Refer | None = None, *, every_default: bool = False) -> JsonSchema:
    """A record field's schema as its record's `properties` hold it (its published default included), so a query
    or path parameter standing for the field says the same."""
    schema = schema_of_shape(f.shape, refer, every_default=every_default)
    if f.required or not (every_default or isinstance(f.shape, ConstrainedShape)):
        return schema  # without `every_default`, a field without contract details derives exactly the spec's row
    # A field that declares contract details (or any field, with `every_default`) publishes its default too, as the
    # wire writes it.
    default = f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
    return {**schema, "default": _encode(f.shape, default)}


def _encode(shape: Shape, value: Any) -> Any:
    return shape_encoder(shape)(value)


def _with_null(schema: JsonSchema) -> JsonSchema:
    if "$ref" in schema:
        return {"anyOf": [schema, {"type": "null"}]}
    kind = schema.get("type")
    if kind is None:
        return schema
    types = list(kind) if isinstance(kind, list) else [kind]
    if "null" not in types:
        types.append("null")
    nullable = {**schema, "type": types}
    if "enum" in schema and None not in schema["enum"]:
        nullable["enum"] = [*schema["enum"], None]  # `enum` restricts every type, null included
    return nullable
