"""The runtime and the published contract never disagree: for random constrained types and random JSON values,
the codec accepts a value exactly when jsonschema (Draft 2020-12, with its format checker) accepts it against the
schema derived from the same type: hand-written types, and records a manifest composes (extends, omit, partial),
applies (a generic record) and closes.

Two formats have no usable checker in jsonschema here: `email` only looks for an '@', and `uri` needs a package
svcgen does not install. For those the checker is given svcgen's documented rule (docs/manifest.md, Formats), so
both sides apply one rule. JSON integers are kept to the codec's signed 64-bit range, and an integral float
(`2.0`) is not offered to an integer type: the codec refuses it by design where JSON Schema's `integer` takes it.
"""

from __future__ import annotations

import enum
import math
import sys
import types as pytypes
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator, FormatChecker  # type: ignore[import-untyped,unused-ignore]

from svcgen.codegen.render import render_package
from svcgen.manifest import load_manifest_text
from svcgen.runtime import DecodeError, Meta, codec_for
from svcgen.runtime._codec import is_email, is_uri
from svcgen.runtime._meta import FORMATS
from svcgen.runtime._schema import schema_of
from tests.support.manifests import manifest_yaml


def _format_checker() -> FormatChecker:
    checker = FormatChecker()
    checker.checkers = dict(Draft202012Validator.FORMAT_CHECKER.checkers)
    checker.checks("email")(lambda value: not isinstance(value, str) or is_email(value))
    checker.checks("uri")(lambda value: not isinstance(value, str) or is_uri(value))
    return checker


FORMAT_CHECKER = _format_checker()


class Size(enum.StrEnum):
    SMALL = "small"
    LARGE = "x-large"


SAMPLES = [
    "", "a", "ab", "abc", "c-12", "C-1", "é", "😀😀", " ", "a@b.de", "a@b", "@b.c", "a b@c.de", "x@y@z.io",
    "123e4567-e89b-12d3-a456-426614174000", "123e4567e89b12d3a456426614174000",
    "{123e4567-e89b-12d3-a456-426614174000}",
    "https://example.org/a", "urn:x", "http://a b", "/rel", "a:", "2024-02-29", "2023-02-29", "2024-1-01",
    "192.168.0.1", "01.2.3.4", "256.1.1.1", "::1", "fe80::1%eth0", "2001:db8::1", "small", "x-large", "LARGE",
]  # fmt: skip
PATTERNS = ["^c-[0-9]+$", "[0-9]", "^$", "b", "^[a-z]{2,3}$", "é|😀"]

counts = st.one_of(st.none(), st.integers(0, 4))
numbers = st.one_of(
    st.none(), st.integers(-5, 5), st.sampled_from([0.5, 0.1, 1.5, -2.5, 2.0]), st.floats(-10, 10).map(lambda x: x)
)
steps = st.one_of(st.none(), st.integers(1, 4), st.sampled_from([0.5, 0.1, 0.25, 2.0, 1e-3]))

string_meta = st.builds(
    Meta,
    min_length=counts,
    max_length=counts,
    pattern=st.one_of(st.none(), st.sampled_from(PATTERNS)),
    format=st.one_of(st.none(), st.sampled_from(FORMATS)),
)
number_meta = st.builds(
    Meta,
    minimum=numbers,
    maximum=numbers,
    exclusive_minimum=numbers,
    exclusive_maximum=numbers,
    multiple_of=steps,
)
items_meta = st.builds(Meta, min_items=counts, max_items=counts)

texts = st.one_of(st.sampled_from(SAMPLES), st.text(max_size=6))
integers = st.integers(-(2**63), 2**63 - 1) | st.integers(-12, 12)
fractions = st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: not x.is_integer())
json_scalars = st.one_of(st.none(), st.booleans(), integers, fractions, texts)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.sampled_from(["a", "b"]), inner, max_size=2),
    max_leaves=8,
)


@st.composite
def annotated_types(draw: st.DrawFn) -> Any:
    kinds = ["string", "integer", "number", "enum", "nullable-enum", "list", "nullable-string", "set"]
    kind = draw(st.sampled_from(kinds))
    match kind:
        case "string":
            return Annotated[str, draw(string_meta)]
        case "nullable-string":
            return Annotated[str | None, draw(string_meta)]
        case "integer":
            return Annotated[int, draw(number_meta)]
        case "number":
            return Annotated[float, draw(number_meta)]
        case "enum":
            return Size
        case "nullable-enum":
            return Size | None
        case "list":
            return Annotated[list[Annotated[int, draw(number_meta)]], draw(items_meta)]
    return Annotated[set[Annotated[str, draw(string_meta)]], draw(items_meta)]


def agree(tp: Any, value: Any) -> None:
    try:
        codec_for(tp).decode(value)
        accepted = True
    except DecodeError:
        accepted = False
    schema = schema_of(tp)
    valid = Draft202012Validator(schema, format_checker=FORMAT_CHECKER).is_valid(value)
    assert accepted == valid, (schema, value)


@settings(max_examples=1500, deadline=None)
@given(annotated_types(), json_values)
def test_codec_accepts_exactly_what_the_derived_schema_accepts(tp: Any, value: Any) -> None:
    agree(tp, value)


@settings(max_examples=300, deadline=None)
@given(annotated_types(), st.data())
def test_agreement_on_values_of_the_right_type(tp: Any, data: st.DataObject) -> None:
    """Values of the declared JSON type, so the constraints (not the type check) decide."""
    schema = schema_of(tp)
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    if "string" in kinds:
        value: Any = data.draw(texts)
    elif "integer" in kinds:
        value = data.draw(st.integers(-12, 12))
    elif "number" in kinds:
        value = data.draw(st.integers(-12, 12) | st.floats(-12, 12).filter(math.isfinite))
    else:
        value = data.draw(st.lists(st.integers(-3, 3) | texts, max_size=6))
    agree(tp, value)


@pytest.mark.parametrize("form", FORMATS)
@settings(max_examples=200, deadline=None)
@given(value=texts)
def test_each_format_agrees(form: str, value: str) -> None:
    agree(Annotated[str, Meta(format=form)], value)


@dataclass(kw_only=True)
class Closed:
    __svcgen_meta__: ClassVar[Meta] = Meta(closed=True)

    a: Annotated[int, Meta(minimum=0)]
    b: str | None = None


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["a", "b", "c", "postal_code"]), json_scalars, max_size=4))
def test_closed_records_agree(value: dict[str, Any]) -> None:
    agree(Closed, value)


# -- types for an estate: composed, generic and closed records built from a manifest ---------------------------

ESTATE_SCALARS = ["string", "integer", "boolean", "string?", "float", "list[integer]"]
ESTATE_FIELDS = ["sku", "count", "note", "tags"]


def _estate_module(document: dict[str, Any]) -> Any:
    """The models.py a manifest builds, run: its classes by name."""
    manifest = load_manifest_text(manifest_yaml(document, sort_keys=False), "estate.yaml")
    source = next(file.text for file in render_package(manifest, Path(".")) if file.relpath == "models.py")
    module = pytypes.ModuleType("_estate_models")
    sys.modules[module.__name__] = module  # dataclasses resolve annotations through it
    exec(compile(source, "<estate models.py>", "exec"), module.__dict__)
    return module


@st.composite
def estate_manifests(draw: st.DrawFn) -> dict[str, Any]:
    """A base record, a record composing it (extends, omit, partial, own fields), and a generic page of the base;
    closed per record or by the manifest default."""
    base_fields = {
        name: draw(st.sampled_from(ESTATE_SCALARS))
        for name in draw(st.lists(st.sampled_from(ESTATE_FIELDS), min_size=1, max_size=4, unique=True))
    }
    base: dict[str, Any] = {"fields": base_fields}
    if draw(st.booleans()):
        base["fields"]["count"] = {"type": "integer", "minimum": 0, "default": 1}
    closed = st.sampled_from([None, True, False])
    if (choice := draw(closed)) is not None:
        base["closed"] = choice
    derived: dict[str, Any] = {"extends": ["Base"], "fields": {"extra": draw(st.sampled_from(ESTATE_SCALARS))}}
    omit = draw(st.lists(st.sampled_from(sorted(base["fields"])), max_size=1, unique=True))
    if omit:
        derived["omit"] = omit
    if draw(st.booleans()):
        derived["partial"] = True
    if (choice := draw(closed)) is not None:
        derived["closed"] = choice
    page = {"params": ["T"], "fields": {"items": "list[T]", "next": "string?"}}
    document: dict[str, Any] = {"svcgen": 1, "service": "estate"}
    if draw(st.booleans()):
        document["closed"] = True
    document["types"] = {"Base": base, "Derived": derived, "Page": page}
    document["topics"] = [
        {"id": "estate:derived", "request": "Derived", "response": "any"},
        {"id": "estate:page", "request": "Page[Base]", "response": "any"},
    ]
    return document


estate_values = st.dictionaries(
    st.sampled_from([*ESTATE_FIELDS, "extra", "unknown"]),
    json_scalars | st.lists(integers, max_size=2),
    max_size=5,
)


@settings(max_examples=60, deadline=None)
@given(estate_manifests(), st.lists(estate_values, min_size=1, max_size=4), st.data())
def test_composed_generic_and_closed_records_agree(
    document: dict[str, Any], values: list[dict[str, Any]], data: st.DataObject
) -> None:
    """The codec of a composed, generic or closed record accepts exactly what its derived schema accepts."""
    module = _estate_module(document)
    derived = document["types"]["Derived"]
    closed = derived.get("closed", document.get("closed", False))
    assert (schema_of(module.Derived).get("additionalProperties") is False) == closed
    for value in values:
        agree(module.Derived, value)
        page: dict[str, Any] = {"items": data.draw(st.lists(estate_values, max_size=2))}
        if data.draw(st.booleans()):
            page["unknown"] = 1
        agree(module.Page_Base, page)
