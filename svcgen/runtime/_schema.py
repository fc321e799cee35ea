"""JSON Schema (2020-12 subset) derivation from a type: computed once per type, reused verbatim everywhere."""

from __future__ import annotations

from functools import cache
from typing import Any

from ._shapes import (
    AnyShape,
    ArrayShape,
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
        case RecordShape(_, fields):
            schema: JsonSchema = {
                "type": "object",
                "properties": {f.wire: schema_of_shape(f.shape) for f in fields},
            }
            required = [f.wire for f in fields if f.required]
            if required:
                schema["required"] = required
            return schema
        case AnyShape() | UnionShape() | RecursiveShape():
            return {}
    raise TypeError(f"unknown shape {shape!r}")


def _with_null(schema: JsonSchema) -> JsonSchema:
    kind = schema.get("type")
    if kind is None:
        return schema
    types = list(kind) if isinstance(kind, list) else [kind]
    if "null" not in types:
        types.append("null")
    return {**schema, "type": types}
