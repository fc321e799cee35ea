"""The schema stage's fast path: manifest.schema.json compiled once into plain Python checks that say whether a
document satisfies it, an order of magnitude faster than jsonschema walking a large manifest.

Only the answer is computed here, never an error: when a document does not satisfy the schema, jsonschema
runs and validate.py words every error. So the compiled checks must decide exactly as jsonschema does: each
keyword below follows jsonschema's own rule (a keyword applies only to values of its JSON type; booleans are not
numbers; `pattern` is `re.search`). A keyword the compiler does not know makes `compile_check` return None (the
schema has outgrown it: jsonschema always runs), and a value it cannot decide for certain (`uniqueItems` over
values other than strings, a type YAML does not produce) makes the check answer "not certain", so the fast path
can make a manifest slower, never hide an error.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

Check = Callable[[Any], bool]
"""True when the value satisfies the (sub)schema, False when it does not; raises _Undecided when not certain."""

_ANNOTATIONS = frozenset(
    {"$schema", "$id", "$defs", "title", "description", "default", "examples", "x-expected", "x-duration"}
)


class _Unsupported(Exception):
    """The schema uses a keyword or form the compiler does not know."""


class _Undecided(Exception):
    """This value is outside what the compiled checks decide for certain."""


def compile_check(schema: Mapping[str, Any]) -> Callable[[Any], bool] | None:
    """A function telling whether a document (the loader's JSON-like values) certainly satisfies `schema`;
    None when the schema uses something the compiler does not know."""
    compiled: dict[str, Check] = {}
    definitions = schema.get("$defs", {})
    try:
        for name, definition in definitions.items():
            compiled[name] = _compile(definition, compiled, definitions)
        root = _compile(schema, compiled, definitions)
    except _Unsupported:
        return None

    def certainly_valid(document: Any) -> bool:
        try:
            return root(document)
        except _Undecided:
            return False

    return certainly_valid


def _compile(schema: Any, compiled: dict[str, Check], definitions: Mapping[str, Any]) -> Check:
    if schema is True:
        return _always
    if schema is False:
        return _never
    if not isinstance(schema, Mapping) or not set(schema) <= _KEYWORDS.keys() | _ANNOTATIONS:
        raise _Unsupported
    by_family: dict[str, list[Check]] = {family: [] for family in ("any", "string", "object", "array", "number")}

    def sub(node: Any) -> Check:
        return _compile(node, compiled, definitions)

    for keyword, value in schema.items():
        if keyword in _KEYWORDS:
            family, keyword_check = _KEYWORDS[keyword](value, schema, sub, compiled, definitions)
            if keyword_check is not None:
                by_family[family].append(keyword_check)
    accepts = _type_test(schema.get("type"))
    checks = {kind: (*by_family["any"], *by_family.get(family, ())) for kind, family in _FAMILIES.items()}

    def check(instance: Any) -> bool:  # runs once per node of the manifest
        keyword_checks = checks.get(type(instance))
        if keyword_checks is None:
            raise _Undecided
        if accepts is not None and not accepts(instance):
            return False
        for each in keyword_checks:  # noqa: SIM110 (a generator here costs a third of the check)
            if not each(instance):
                return False
        return True

    return check


# The keywords that apply to a value of each Python type the loader produces (jsonschema: `minLength` only to
# strings, `minimum` only to numbers, which booleans are not, ...).
_FAMILIES: dict[type, str] = {
    str: "string",
    dict: "object",
    list: "array",
    int: "number",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


def _type_test(value: Any) -> Check | None:
    """jsonschema's `type`: an int is a number, and a float with an integral value is an integer too."""
    if value is None:
        return None
    names = {value} if isinstance(value, str) else set(value) if isinstance(value, list) else None
    if names is None or not names <= {"string", "object", "array", "integer", "number", "boolean", "null"}:
        raise _Unsupported
    exact = {kind for kind, family in _FAMILIES.items() if family in names}
    if names & {"integer", "number"}:
        exact.add(int)
    if "number" in names:
        exact.add(float)
    integral_floats = "integer" in names and "number" not in names
    return lambda instance: (
        type(instance) in exact or (integral_floats and type(instance) is float and instance.is_integer())
    )


Compiler = Callable[
    [Any, Mapping[str, Any], Callable[[Any], Check], dict[str, Check], Mapping[str, Any]], tuple[str, Check | None]
]


def _type(value: Any, *_: Any) -> tuple[str, Check | None]:
    return "any", None  # tested before the other keywords, see _compile


def _ref(
    value: Any, _schema: Mapping[str, Any], _sub: Any, compiled: dict[str, Check], definitions: Mapping[str, Any]
) -> tuple[str, Check | None]:
    prefix = "#/$defs/"
    if not isinstance(value, str) or not value.startswith(prefix) or value[len(prefix) :] not in definitions:
        raise _Unsupported
    name = value[len(prefix) :]
    return "any", lambda instance: compiled[name](instance)  # looked up late: definitions may refer to each other


def _const(value: Any, *_: Any) -> tuple[str, Check | None]:
    if isinstance(value, dict | list):
        raise _Unsupported
    # jsonschema's equality: a boolean equals only itself; 1 and 1.0 are equal.
    return (
        "any",
        lambda instance: (
            not isinstance(instance, dict | list)
            and isinstance(instance, bool) == isinstance(value, bool)
            and instance == value
        ),
    )


def _pattern(value: Any, *_: Any) -> tuple[str, Check | None]:
    search = re.compile(value).search
    return "string", lambda instance: search(instance) is not None


def _min_length(value: Any, *_: Any) -> tuple[str, Check | None]:
    return "string", lambda instance: len(instance) >= value


def _minimum(value: Any, *_: Any) -> tuple[str, Check | None]:
    return "number", lambda instance: instance >= value


def _exclusive_minimum(value: Any, *_: Any) -> tuple[str, Check | None]:
    return "number", lambda instance: instance > value


def _min_items(value: Any, *_: Any) -> tuple[str, Check | None]:
    return "array", lambda instance: len(instance) >= value


def _min_properties(value: Any, *_: Any) -> tuple[str, Check | None]:
    return "object", lambda instance: len(instance) >= value


def _enum(value: Any, *_: Any) -> tuple[str, Check | None]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise _Unsupported
    allowed = frozenset(value)
    return "any", lambda instance: type(instance) is str and instance in allowed


def _property_names(
    value: Any, _schema: Mapping[str, Any], sub: Callable[[Any], Check], *_: Any
) -> tuple[str, Check | None]:
    name = sub(value)

    def check(instance: dict[Any, Any]) -> bool:
        if not all(type(key) is str for key in instance):
            raise _Undecided
        return all(map(name, instance))

    return "object", check


def _unique_items(value: Any, *_: Any) -> tuple[str, Check | None]:
    if value is not True:
        return "array", None

    def unique(instance: list[Any]) -> bool:
        if not all(type(item) is str for item in instance):
            raise _Undecided
        return len(set(instance)) == len(instance)

    return "array", unique


def _items(value: Any, _schema: Mapping[str, Any], sub: Callable[[Any], Check], *_: Any) -> tuple[str, Check | None]:
    item = sub(value)

    return "array", lambda instance: all(map(item, instance))


def _required(value: Any, *_: Any) -> tuple[str, Check | None]:
    names = tuple(value)
    return "object", lambda instance: all(name in instance for name in names)


def _properties(
    value: Any, schema: Mapping[str, Any], sub: Callable[[Any], Check], *_: Any
) -> tuple[str, Check | None]:
    # One pass over the mapping for `properties` and `additionalProperties` together.
    properties = {name: sub(node) for name, node in value.items()}
    extra = schema.get("additionalProperties")
    other = None if extra is None else sub(extra)

    def check(instance: dict[str, Any]) -> bool:
        for key, item in instance.items():
            each = properties.get(key, other)
            if each is not None and not each(item):
                return False
        return True

    return "object", check


def _additional_properties(
    value: Any, schema: Mapping[str, Any], sub: Callable[[Any], Check], *_: Any
) -> tuple[str, Check | None]:
    if "properties" in schema:
        return "object", None  # checked with them
    other = sub(value)

    return "object", lambda instance: all(map(other, instance.values()))


def _one_of(value: Any, _schema: Mapping[str, Any], sub: Callable[[Any], Check], *_: Any) -> tuple[str, Check | None]:
    branches = [sub(node) for node in value]
    return "any", lambda instance: sum(1 for branch in branches if branch(instance)) == 1


def _any_of(value: Any, _schema: Mapping[str, Any], sub: Callable[[Any], Check], *_: Any) -> tuple[str, Check | None]:
    branches = [sub(node) for node in value]
    return "any", lambda instance: any(branch(instance) for branch in branches)


def _if(value: Any, schema: Mapping[str, Any], sub: Callable[[Any], Check], *_: Any) -> tuple[str, Check | None]:
    condition = sub(value)
    then = sub(schema.get("then", True))
    otherwise = sub(schema.get("else", True))
    return "any", lambda instance: then(instance) if condition(instance) else otherwise(instance)


def _with_if(*_: Any) -> tuple[str, Check | None]:
    return "any", None  # `then` and `else` are checked by `if`; without it they do nothing


_KEYWORDS: dict[str, Compiler] = {
    "type": _type,
    "$ref": _ref,
    "const": _const,
    "pattern": _pattern,
    "minLength": _min_length,
    "minimum": _minimum,
    "exclusiveMinimum": _exclusive_minimum,
    "minItems": _min_items,
    "uniqueItems": _unique_items,
    "minProperties": _min_properties,
    "enum": _enum,
    "propertyNames": _property_names,
    "items": _items,
    "required": _required,
    "properties": _properties,
    "additionalProperties": _additional_properties,
    "oneOf": _one_of,
    "anyOf": _any_of,
    "if": _if,
    "then": _with_if,
    "else": _with_if,
}


def _always(instance: Any) -> bool:
    return True


def _never(instance: Any) -> bool:
    return False
