"""Schema stage: the manifest against manifest.schema.json, every error in plain words at its node.

Messages are built from the failing keyword and the node's place in the manifest, never from
jsonschema's own text. A schema node may carry `x-expected` (an annotation jsonschema ignores) to
say in words what a valid value looks like. A manifest the compiled check (schemacheck.py) finds valid
skips jsonschema, which is only imported when there is an error to find.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from ..runtime._durations import parse_duration
from .diagnostics import Diagnostic
from .loader import JsonPath, YamlDocument
from .schemacheck import compile_check
from .spelling import did_you_mean

if TYPE_CHECKING:
    from collections.abc import Callable

    from jsonschema import Draft202012Validator  # type: ignore[import-untyped,unused-ignore]
    from jsonschema.exceptions import ValidationError  # type: ignore[import-untyped,unused-ignore]

_TYPE_WORDS = {
    "object": "a mapping",
    "array": "a list",
    "string": "a string",
    "number": "a number",
    "integer": "an integer",
    "boolean": "true or false",
    "null": "empty",
}


@cache
def manifest_schema() -> dict[str, Any]:
    """The manifest v1 JSON Schema (package data)."""
    text = resources.files(__package__).joinpath("manifest.schema.json").read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


@cache
def _validator() -> Draft202012Validator:
    from jsonschema import Draft202012Validator  # imported only here: the import alone costs ~50 ms

    return Draft202012Validator(manifest_schema())


@cache
def _certainly_valid() -> Callable[[Any], bool] | None:
    return compile_check(manifest_schema())


@dataclass(frozen=True)
class SchemaFindings:
    """What the schema stage found, and what the semantic stage must not read as if it were right."""

    diagnostics: list[Diagnostic]
    misspelt: frozenset[tuple[JsonPath, str]]
    """(mapping path, key) of each key an unknown key most likely meant, like ((), 'types') for `tpyes:`."""
    rejected: frozenset[JsonPath]
    """Paths of the values the schema rejected (a wrong type, pattern, length, ...)."""


# Keywords about some keys or items of a mapping or list; the others (oneOf included: a type with both
# or neither of 'fields' and 'jsonSchema' says nothing certain) reject the value as a whole.
_CONTAINER_KEYWORDS = frozenset({"additionalProperties", "required", "uniqueItems"})


def validate_schema(document: YamlDocument) -> SchemaFindings:
    """Every schema violation in the document, as diagnostics (unsorted), with what they leave unreadable.

    What the loader already refused is not judged again: a refused value, or the keys of a mapping that
    lost entries.
    """
    certainly_valid = _certainly_valid()
    if certainly_valid is not None and certainly_valid(document.data):
        return SchemaFindings([], frozenset(), frozenset(document.refused))
    errors = [
        error
        for error in _validator().iter_errors(document.data)
        if not _loader_refused(document, tuple(error.absolute_path), error.validator)
    ]
    # A misspelt key that suggests a missing required one reports once, as the misspelling.
    suggested: set[tuple[JsonPath, str]] = set()
    for error in errors:
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            path = tuple(error.absolute_path)
            for key in _unknown_keys(error):
                match = did_you_mean(key, _allowed_keys(error.schema))
                if match is not None:
                    suggested.add((path, match))
    diagnostics: list[Diagnostic] = []
    for error in errors:
        diagnostics.extend(_translate(document, error, suggested))
    rejected = {tuple(error.absolute_path) for error in errors if error.validator not in _CONTAINER_KEYWORDS}
    return SchemaFindings(diagnostics, frozenset(suggested), frozenset(rejected | document.refused))


def _loader_refused(document: YamlDocument, path: JsonPath, keyword: str) -> bool:
    return path in document.refused or (path in document.partial and keyword in ("required", "oneOf"))


def _allowed_keys(schema: object) -> list[str]:
    properties = schema.get("properties", {}) if isinstance(schema, Mapping) else {}
    return list(properties) if isinstance(properties, dict) else []


def _listed(value: object) -> list[Any]:
    """A keyword's value where the manifest schema always holds a list (`required`, `oneOf`)."""
    return list(value) if isinstance(value, list) else []


def _unknown_keys(error: ValidationError) -> list[str]:
    allowed = set(_allowed_keys(error.schema))
    instance = error.instance if isinstance(error.instance, dict) else {}
    return [key for key in instance if key not in allowed]


def _translate(
    document: YamlDocument, error: ValidationError, suggested: set[tuple[JsonPath, str]]
) -> list[Diagnostic]:
    path: JsonPath = tuple(error.absolute_path)
    keyword = error.validator
    schema = error.schema if isinstance(error.schema, dict) else {}
    if keyword == "additionalProperties":
        allowed = _allowed_keys(schema)
        found: list[Diagnostic] = []
        for key in _unknown_keys(error):
            match = did_you_mean(key, allowed)
            hint = f"did you mean {match!r}?" if match is not None else "allowed keys: " + ", ".join(allowed)
            message = f"unknown key {key!r} in {_container(path)}; {hint}"
            found.append(Diagnostic(document.key_at((*path, key)), message))
        return found
    if keyword == "required":
        instance = error.instance if isinstance(error.instance, dict) else {}
        return [
            Diagnostic(document.key_at(path), f"missing required key {key!r} in {_container(path)}{_add(schema, key)}")
            for key in _listed(error.validator_value)
            if key not in instance and (path, key) not in suggested
        ]
    if keyword in ("oneOf", "anyOf"):
        return _one_of(document, error, path, suggested)
    if keyword == "uniqueItems":
        return _duplicates(document, error, path)
    message = _value_message(document, error, path, schema)
    return [Diagnostic(document.at(path), message)]


def _add(schema: dict[str, Any], key: str) -> str:
    """`; add it: <what a valid value looks like>` for a missing key, when the schema says."""
    node = schema.get("properties", {}).get(key, {})
    reference = node.get("$ref", "")
    if reference.startswith("#/$defs/"):
        node = manifest_schema()["$defs"][reference.removeprefix("#/$defs/")]
    expected = node.get("x-expected")
    return f"; add it: {expected}" if expected else ""


def _one_of(
    document: YamlDocument, error: ValidationError, path: JsonPath, suggested: set[tuple[JsonPath, str]]
) -> list[Diagnostic]:
    # The schema only uses oneOf as "exactly one of these keys" ({fields} or {jsonSchema}) and anyOf as "at least
    # one of them" (a mesh's {collector} or {otlp}), so an anyOf error always means none is present.
    branches = [
        inner for branch in _listed(error.validator_value) for inner in [branch, *_listed(branch.get("anyOf", []))]
    ]
    keys = [key for branch in branches for key in branch.get("required", [])]
    instance = error.instance if isinstance(error.instance, dict) else {}
    present = [key for key in keys if key in instance]
    options = " or ".join(repr(key) for key in keys)
    if len(keys) > 2:
        options = ", ".join(repr(key) for key in keys[:-1]) + f" or {keys[-1]!r}"
    if present:
        both = " and ".join(repr(key) for key in present)
        return [Diagnostic(document.key_at(path), f"{_container(path)} has both {both}; keep only one")]
    if any((path, key) in suggested for key in keys):
        return []
    return [Diagnostic(document.key_at(path), f"{_container(path)} needs {options}")]


def _duplicates(document: YamlDocument, error: ValidationError, path: JsonPath) -> list[Diagnostic]:
    seen: list[Any] = []
    found: list[Diagnostic] = []
    items = error.instance if isinstance(error.instance, list) else []
    for index, item in enumerate(items):
        if item in seen:
            rendered = _render(document, (*path, index), item)
            message = f"{_subject(path)} lists {rendered} twice; each name must be unique"
            found.append(Diagnostic(document.at((*path, index)), message))
        else:
            seen.append(item)
    return found


def _value_message(document: YamlDocument, error: ValidationError, path: JsonPath, schema: dict[str, Any]) -> str:
    keyword = error.validator
    instance = error.instance
    got = _render(document, path, instance)
    expected = schema.get("x-expected")
    if keyword == "type":
        value = error.validator_value
        types: list[str] = [str(name) for name in value] if isinstance(value, list) else [str(value)]
        requirement = expected or " or ".join(_TYPE_WORDS.get(name, name) for name in types)
        message = f"{_subject(path)} must be {requirement}, got {got}"
        if schema.get("x-duration"):
            return message + _unit_hint(document, path, instance)
        # `version: 2` means the text "2"; a list item (a route, a health name) never meant a number.
        quotable = path in document.sources and instance is not None and not (path and isinstance(path[-1], int))
        if types == ["string"] and quotable:
            message += f'; quote it: "{document.sources[path]}"'
        return message
    if keyword == "pattern":
        if expected:
            return f"{_subject(path)} must be {expected}, got {got}"
        return f"{_subject(path)} must match {_plain_pattern(str(error.validator_value))}, got {got}"
    if keyword == "enum":
        choices = ", ".join(str(value) for value in _listed(error.validator_value))
        return f"{_subject(path)} must be {expected or 'one of ' + choices}, got {got}"
    if keyword in ("minItems", "minProperties"):
        return f"{_subject(path)} must not be empty" + (f"; expected {expected}" if expected else "")
    if keyword == "const":
        return f"{_subject(path)} must be {expected or json.dumps(error.validator_value)}, got {got}"
    if keyword == "minLength":
        return f"{_subject(path)} must not be empty" + (f"; expected {expected}" if expected else "")
    if keyword == "exclusiveMinimum":
        return f"{_subject(path)} must be greater than {error.validator_value}, got {got}"
    if keyword == "minimum":
        return f"{_subject(path)} must be at least {error.validator_value}, got {got}"
    # A keyword this translator does not know yet still yields a positioned, readable line.
    return f"{_subject(path)} is invalid: {error.message}"


def _unit_hint(document: YamlDocument, path: JsonPath, instance: Any) -> str:
    """`; write it with a unit: 30s` for `ackWait: 30` (quoted, "30" is no duration either); nothing when seconds
    would not make it one (zero, `true`)."""
    if not isinstance(instance, (int, float)) or isinstance(instance, bool):
        return ""
    written = f"{document.sources.get(path) or instance}s"
    try:
        parse_duration(written)
    except ValueError:
        return ""
    return f"; write it with a unit: {written}"


def _plain_pattern(pattern: str) -> str:
    return re.sub(r"^\^|\$$", "", pattern)


def _render(document: YamlDocument, path: JsonPath, value: Any) -> str:
    if value is None:
        return "an empty value"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return repr(value if len(value) <= 60 else value[:57] + "...")
    source = document.sources.get(path)
    return source if source else json.dumps(value)


def _subject(path: JsonPath) -> str:
    """How a message names the node at `path`: `service`, `'routes'`, `field 'sku'`, ..."""
    if not path:
        return "the manifest"
    head, last = path[0], path[-1]
    if len(path) == 1:
        return str(last)
    if head == "types" and len(path) == 2:
        return f"type {last!r}"
    if head == "types" and len(path) == 4 and path[2] == "fields":
        return f"field {last!r}"
    if head == "placement" and len(path) == 2:
        return f"placement {last!r}"
    if head in ("topics", "produces") and len(path) == 2:
        return "each topic" if head == "topics" else "each produces entry"
    if isinstance(last, int):
        return f"each item of {_subject(path[:-1])}"
    return repr(last)


def _container(path: JsonPath) -> str:
    """How a message names the mapping at `path` in `unknown key ... in <container>`."""
    if not path:
        return "manifest"
    if path[0] in ("topics", "produces") and len(path) == 2:
        return "topic" if path[0] == "topics" else "produces entry"
    subject = _subject(path)
    return subject.strip("'") if len(path) == 1 else subject
