"""JSON Schema (2020-12 subset) derivation from a type: computed once per type, reused verbatim everywhere."""

from __future__ import annotations

import dataclasses
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
)

JsonSchema = dict[str, Any]

_SCALAR_SCHEMAS: dict[str, JsonSchema] = {
    "string": {"type": "string"},
    "boolean": {"type": "boolean"},
    "integer": {"type": "integer"},
    "number": {"type": "number"},
    "datetime": {"type": "string", "format": "date-time"},
    "bytes": {"type": "string"},
}


@cache
def schema_of(tp: Any) -> JsonSchema:
    """The JSON Schema of a type. The returned dict is shared: callers must not mutate it."""
    return schema_of_shape(shape_of(tp))


def schema_of_shape(shape: Shape) -> JsonSchema:
    match shape:
        case ScalarShape(kind):
            return dict(_SCALAR_SCHEMAS[kind])
        case NullableShape(inner):
            return _with_null(schema_of_shape(inner))
        case ArrayShape(items, _):
            return {"type": "array", "items": schema_of_shape(items)}
        case MapShape(values):
            return {"type": "object", "additionalProperties": schema_of_shape(values)}
        case RecordShape(_, fields, description, meta):
            schema: JsonSchema = {
                "type": "object",
                "properties": {f.wire: _field_schema(f) for f in fields},
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
            return {**schema_of_shape(inner), **meta.keywords()}
        case AnyShape() | UnionShape() | RecursiveShape():
            return {}
    raise TypeError(f"unknown shape {shape!r}")


def _field_schema(f: FieldShape) -> JsonSchema:
    schema = schema_of_shape(f.shape)
    if not isinstance(f.shape, ConstrainedShape) or f.required:
        return schema  # a field without contract details derives exactly the spec's row
    # A field that declares contract details publishes its default too, as the wire writes it.
    default = f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
    return {**schema, "default": _encode(f.shape, default)}


def _encode(shape: Shape, value: Any) -> Any:
    return shape_encoder(shape)(value)


def _with_null(schema: JsonSchema) -> JsonSchema:
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
