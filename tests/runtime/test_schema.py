"""Each row of the spec's schema-derivation table and rules 1–4."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Optional, Union

import pytest
from jsonschema import Draft202012Validator

from svcgen.runtime._schema import schema_of


@dataclass
class Inner:
    sku_code: str


@dataclass
class Record:
    order_id: str
    quantity: int = 1
    tags: list[str] = field(default_factory=list)
    note: str | None = None
    inner: Inner | None = None


@dataclass
class Node:
    name: str
    children: list[Node]
    parent: Node | None = None


@dataclass
class Ping:
    pong: Pong | None


@dataclass
class Pong:
    ping: Ping


@pytest.mark.parametrize(
    ("tp", "expected"),
    [
        (str, {"type": "string"}),
        (bool, {"type": "boolean"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (datetime, {"type": "string", "format": "date-time"}),
        (bytes, {"type": "string", "contentEncoding": "base64"}),
        (int | None, {"type": ["integer", "null"]}),
        (Optional[str], {"type": ["string", "null"]}),  # noqa: UP045
        (datetime | None, {"type": ["string", "null"], "format": "date-time"}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (tuple[str, ...], {"type": "array", "items": {"type": "string"}}),
        (set[float], {"type": "array", "items": {"type": "number"}}),
        (frozenset[bool], {"type": "array", "items": {"type": "boolean"}}),
        (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
        (list[int] | None, {"type": ["array", "null"], "items": {"type": "integer"}}),
        (int | str, {}),
        (Union[int, str, None], {}),  # noqa: UP007
        (Any, {}),
        (None, {}),
        (object, {}),
        (dict[int, str], {}),
        (list[Any], {"type": "array", "items": {}}),
    ],
)
def test_table_rows(tp: Any, expected: dict[str, Any]) -> None:
    assert schema_of(tp) == expected


def test_record_uses_wire_names_and_required_excludes_defaults() -> None:
    assert schema_of(Record) == {
        "type": "object",
        "properties": {
            "orderId": {"type": "string"},
            "quantity": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "note": {"type": ["string", "null"]},
            "inner": {
                "type": ["object", "null"],
                "properties": {"skuCode": {"type": "string"}},
                "required": ["skuCode"],
            },
        },
        "required": ["orderId"],
    }


def test_recursive_reference_is_open_and_no_ref_is_emitted() -> None:
    assert schema_of(Node) == {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "children": {"type": "array", "items": {}},
            "parent": {},
        },
        "required": ["name", "children"],
    }
    assert "$ref" not in repr(schema_of(Ping))
    assert schema_of(Ping)["properties"]["pong"]["properties"]["ping"] == {}


def test_computed_once_and_shared() -> None:
    assert schema_of(Record) is schema_of(Record)


@pytest.mark.parametrize("tp", [Record, Node, Ping, list[Record], dict[str, Record | None]])
def test_derived_schemas_are_valid_2020_12(tp: Any) -> None:
    Draft202012Validator.check_schema(schema_of(tp))
