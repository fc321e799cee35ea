"""The schema stage's compiled fast check decides exactly as jsonschema does, or says it is not certain."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator  # type: ignore[import-untyped,unused-ignore]

from svcgen.manifest.schemacheck import compile_check
from svcgen.manifest.validate import manifest_schema
from tests.manifest.test_properties import manifests, replaced


def jsonschema_valid(schema: dict[str, Any], instance: Any) -> bool:
    return bool(Draft202012Validator(schema).is_valid(instance))


def compiled(schema: dict[str, Any]) -> Any:
    check = compile_check(schema)
    assert check is not None, "the schema uses only keywords the compiler knows"
    return check


MANIFEST_CHECK = compiled(manifest_schema())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(manifests(), replaced()))
def test_it_agrees_with_jsonschema_on_manifests_valid_and_broken_anywhere(data: dict[str, Any]) -> None:
    assert MANIFEST_CHECK(data) == jsonschema_valid(manifest_schema(), data)


@pytest.mark.parametrize(
    ("schema", "instances"),
    [
        # An integral float is an integer; a boolean is neither an integer nor a number.
        ({"type": "integer", "minimum": 0}, [1, 1.0, 1.5, -1, True, "1", None]),
        ({"type": "number", "exclusiveMinimum": 0}, [0, 0.5, 2, True, False, -0.0]),
        # Numeric keywords ignore what is not a number, string keywords what is not a string.
        ({"exclusiveMinimum": 0, "minLength": 2}, [True, "a", "ab", 0, [], {}]),
        ({"type": ["string", "object"], "minLength": 1, "required": ["type"]}, ["", "x", {}, {"type": 1}, 3, []]),
        # `const` equality as jsonschema has it: 1 and 1.0 are equal, true is not 1.
        ({"const": 1}, [1, 1.0, True, "1", [1], {"1": 1}, None]),
        ({"const": True}, [True, 1, False]),
        # `pattern` is re.search: `$` also matches before a final newline.
        ({"pattern": "^[a-z]+$"}, ["abc", "abc\n", "ab c", "", 5]),
        ({"pattern": r"^\S+$"}, ["a:b", "a\x1fb", "a b", "a\u00a0b"]),
        ({"type": "array", "items": {"type": "string"}, "minItems": 1}, [[], ["a"], ["a", 1], "ab", {}]),
        ({"uniqueItems": True}, [["a", "b"], ["a", "a"], [], "aa"]),
        (
            {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False},
            [{}, {"a": "x"}, {"a": 1}, {"b": 1}, []],
        ),
        ({"additionalProperties": {"type": "boolean"}}, [{}, {"x": True}, {"x": 0}, 3]),
        ({"properties": {"a": True, "b": False}}, [{"a": [1]}, {"b": None}, {"c": 1}]),
        ({"oneOf": [{"required": ["a"]}, {"required": ["b"]}]}, [{"a": 1}, {"b": 1}, {"a": 1, "b": 2}, {}, "x"]),
        ({"anyOf": [{"required": ["a"]}, {"required": ["b"]}]}, [{"a": 1}, {"b": 1}, {"a": 1, "b": 2}, {}, "x"]),
        # The mesh block's form: `then` applies when `if` holds, `else` otherwise; neither does anything alone.
        (
            {"if": {"required": ["t"], "properties": {"t": {"const": "n"}}}, "then": {"required": ["n"]},
             "else": {"anyOf": [{"required": ["c"]}, {"required": ["o"]}]}},
            [{"t": "n", "n": 1}, {"t": "n"}, {"t": "h", "c": 1}, {"o": 1}, {}, {"t": "n", "c": 1}, 3],
        ),
        ({"then": {"required": ["a"]}, "else": False}, [{}, {"a": 1}, "x"]),
        (
            {"$defs": {"name": {"type": "string", "minLength": 1}}, "items": {"$ref": "#/$defs/name"}},
            [["x"], [""], [1], []],
        ),
    ],
)
def test_each_keyword_decides_as_jsonschema_does(schema: dict[str, Any], instances: list[Any]) -> None:
    check = compiled(schema)
    assert [check(instance) for instance in instances] == [jsonschema_valid(schema, i) for i in instances]


def test_values_it_cannot_decide_are_left_to_jsonschema() -> None:
    check = compiled({"uniqueItems": True})
    assert jsonschema_valid({"uniqueItems": True}, [1, "1"])
    assert not check([1, "1"])  # not certain: validate.py then runs jsonschema
    assert not compiled({"type": "string"})(("a tuple", "YAML never produces"))


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "patternProperties": {"^x": {"type": "string"}}},
        {"items": {"$ref": "other.json#/x"}},
        {"const": [1]},
        {"type": "decimal"},
    ],
)
def test_a_schema_beyond_the_compiler_turns_the_fast_path_off(schema: dict[str, Any]) -> None:
    assert compile_check(schema) is None
