"""Random manifests → build → the schema the runtime derives from each generated dataclass is the schema the
manifest declares, computed here independently from the spec's derivation table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from svcgen.codegen.render import render_package
from svcgen.manifest import load_manifest_text
from tests.support.manifests import manifest_yaml

SCALAR_SCHEMAS: dict[str, dict[str, Any]] = {
    "string": {"type": "string"},
    "integer": {"type": "integer"},
    "float": {"type": "number"},
    "boolean": {"type": "boolean"},
    "datetime": {"type": "string", "format": "date-time"},
    "bytes": {"type": "string", "contentEncoding": "base64"},
    "any": {},
}
DEFAULTS = {"string": "x", "integer": 1, "float": 1.5, "boolean": False}
OUT = Path(".")


def declared_schema(expr: str, records: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The spec's table, applied to a manifest type expression (`list[T]`, `T?`, `A | B`, a record)."""
    expr = expr.strip()
    if "|" in _top_level(expr):
        return {}
    if expr.endswith("?"):
        inner = declared_schema(expr[:-1], records)
        if "type" not in inner:
            return inner
        return {**inner, "type": [inner["type"], "null"]}
    for container in ("list", "set", "tuple"):
        if expr.startswith(container + "["):
            return {"type": "array", "items": declared_schema(expr[len(container) + 1 : -1], records)}
    if expr.startswith("map["):
        return {"type": "object", "additionalProperties": declared_schema(expr[4:-1], records)}
    if expr in SCALAR_SCHEMAS:
        return SCALAR_SCHEMAS[expr]
    fields = records[expr]["fields"]
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {name: declared_schema(_type_of(spec), records) for name, spec in fields.items()},
    }
    required = [name for name, spec in fields.items() if not isinstance(spec, dict) and not _defaults_to_null(spec)]
    if required:
        schema["required"] = required
    return schema


def _defaults_to_null(expr: str) -> bool:
    """`T?` as the whole type (not inside a union) is nullable and defaults to null."""
    return expr.endswith("?") and "|" not in _top_level(expr)


def _type_of(spec: str | dict[str, Any]) -> str:
    return spec["type"] if isinstance(spec, dict) else spec


def _top_level(expr: str) -> str:
    """The expression with bracketed parts removed, to see a top-level `|`."""
    depth, kept = 0, []
    for char in expr:
        depth += char == "["
        depth -= char == "]"
        if depth == 0:
            kept.append(char)
    return "".join(kept)


def type_exprs(record_names: list[str]) -> st.SearchStrategy[str]:
    leaves = st.sampled_from([*SCALAR_SCHEMAS, *record_names])

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.builds(lambda t, c: f"{c}[{t}]", inner, st.sampled_from(["list", "set", "tuple", "map"])),
            inner.filter(lambda t: not t.endswith("?") and "|" not in t).map(lambda t: f"{t}?"),
            # Distinct members: Python folds `str | str` into `str`, which is no longer a union.
            st.builds(lambda a, b: f"{a} | {b}", inner, inner).filter(
                lambda t: t.count("|") == 1 and len({m.strip().rstrip("?") for m in t.split("|")}) == 2
            ),
        )

    return st.recursive(leaves, extend, max_leaves=3)


field_names = st.from_regex(r"[a-z][a-z0-9]{0,5}([A-Z][a-z0-9]{1,4}){0,2}", fullmatch=True)


@st.composite
def manifests(draw: st.DrawFn) -> dict[str, Any]:
    count = draw(st.integers(min_value=1, max_value=4))
    types: dict[str, dict[str, Any]] = {}
    for index in range(count):
        name = f"Record{index}"
        names = draw(st.lists(field_names, min_size=1, max_size=5, unique_by=str.lower))
        fields: dict[str, Any] = {}
        for field_name in names:
            expr = draw(type_exprs(list(types)))
            if expr in DEFAULTS and draw(st.booleans()):
                fields[field_name] = {"type": expr, "default": DEFAULTS[expr]}
            else:
                fields[field_name] = expr
        types[name] = {"fields": fields}
    topics = [{"id": f"random:r{index}", "request": name, "response": "any"} for index, name in enumerate(types)]
    return {"svcgen": 1, "service": "random", "types": types, "topics": topics}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document=manifests())
def test_generated_dataclasses_derive_the_declared_schemas(document: dict[str, Any]) -> None:
    manifest = load_manifest_text(manifest_yaml(document, sort_keys=False), "random.yaml")
    files = {generated.relpath: generated.text for generated in render_package(manifest, OUT)}
    spec = json.loads(files["contracts/spec.json"])
    derived = {topic["id"]: topic["requestSchema"] for topic in spec["topics"]}
    for index, name in enumerate(document["types"]):
        assert derived[f"random:r{index}"] == declared_schema(name, document["types"]), name
