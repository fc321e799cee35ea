"""Property tests: random valid manifests load cleanly; one random mutation is always reported, positioned."""

from __future__ import annotations

import keyword
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from svcgen.manifest import ManifestError, load_manifest_text
from svcgen.manifest.typeexpr import SCALARS
from svcgen.manifest.validate import manifest_schema
from svcgen.runtime._naming import is_canonical_camel
from tests.support.manifests import manifest_yaml

RECORD_NAMES = st.from_regex(r"[A-Z][a-z]{1,7}", fullmatch=True).filter(lambda name: name != "Any")
FIELD_NAMES = st.from_regex(r"[a-z][a-z0-9]{0,5}(?:[A-Z][a-z0-9]{1,4}){0,2}", fullmatch=True).filter(is_canonical_camel)
HEALTH_NAMES = st.from_regex(r"[a-z][a-z0-9]{0,6}", fullmatch=True).filter(lambda name: not keyword.iskeyword(name))
SERVICE_NAMES = st.from_regex(r"[a-z][a-z0-9-]{0,10}", fullmatch=True)
TEXT = st.text(st.characters(categories=["L", "N", "P", "Zs"]), max_size=12)
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def type_exprs(records: list[str]) -> st.SearchStrategy[str]:
    base = st.sampled_from([*SCALARS, *records])

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(st.sampled_from(["list", "set", "tuple", "map"]), inner).map(lambda t: f"{t[0]}[{t[1]}]"),
            st.lists(inner, min_size=2, max_size=3).map(" | ".join),
            inner.map(lambda text: text if text.endswith("?") else f"{text}?"),
        )

    return st.recursive(base, extend, max_leaves=4)


def with_default(draw: st.DrawFn, type_: str) -> str | dict[str, Any]:
    """Sometimes the mapping form, with a default that fits when the type is a simple scalar."""
    values: dict[str, st.SearchStrategy[Any]] = {
        "integer": st.integers(-(2**40), 2**40),
        "float": st.floats(allow_nan=False, allow_infinity=False, width=32),
        "string": TEXT,
        "boolean": st.booleans(),
    }
    if not draw(st.booleans()):
        return type_
    spec: dict[str, Any] = {"type": type_, "description": draw(TEXT)}
    if type_ in values:
        spec["default"] = draw(values[type_])
    elif type_.endswith("?"):
        spec["default"] = None
    return spec


@st.composite
def manifests(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(RECORD_NAMES, min_size=1, max_size=4, unique=True))
    types: dict[str, Any] = {}
    for name in names:
        fields = draw(st.dictionaries(FIELD_NAMES, type_exprs(names), max_size=4))
        types[name] = {"fields": {wire: with_default(draw, type_) for wire, type_ in fields.items()}}
        if draw(st.booleans()):
            types[name]["description"] = draw(TEXT)
    topics: list[dict[str, Any]] = []
    for index, name in enumerate(names):  # one topic per record, so every type is used
        topic: dict[str, Any] = {"id": f"t{index}:op", "request": name, "response": draw(type_exprs(names))}
        if draw(st.booleans()):
            topic["version"] = draw(st.sampled_from(["v1", "v2", "2024-01"]))
        if draw(st.booleans()):
            topic["summary"] = draw(TEXT)
        routes = [f"POST /t{index}"]
        wires = [wire for wire in types[name]["fields"] if wire != "version"]
        if wires:
            routes.append(f"GET /t{index}/{{{draw(st.sampled_from(wires))}}}")
        topic["routes"] = routes
        topics.append(topic)
    data: dict[str, Any] = {"svcgen": 1, "service": draw(SERVICE_NAMES)}
    if draw(st.booleans()):
        data["title"] = "T" + draw(TEXT)
    if draw(st.booleans()):
        data["health"] = draw(st.lists(HEALTH_NAMES, max_size=3, unique=True))
    if draw(st.booleans()):
        data["mesh"] = {"collector": "http://127.0.0.1:8700", "heartbeatSeconds": draw(st.integers(1, 120))}
    data["types"] = types
    data["topics"] = topics
    produces = [
        {"id": f"p{index}:call", "request": draw(type_exprs(names)), "response": draw(type_exprs(names))}
        for index in range(draw(st.integers(0, 2)))
    ]
    if produces:
        data["produces"] = produces
    return data


def dump(data: dict[str, Any]) -> str:
    return manifest_yaml(data, sort_keys=False, allow_unicode=True, width=1000)


def assert_positioned(error: ManifestError, text: str) -> None:
    lines = text.splitlines()
    assert error.diagnostics
    for diagnostic in error.diagnostics:
        position = diagnostic.position
        assert position.file == "m.yaml"
        assert 1 <= position.line <= len(lines)
        assert 1 <= position.column <= len(lines[position.line - 1]) + 1


@SETTINGS
@given(manifests())
def test_random_valid_manifests_load(data: dict[str, Any]) -> None:
    manifest = load_manifest_text(dump(data), "m.yaml")
    assert [record.name for record in manifest.types] == list(data["types"])
    for record in manifest.types:
        assert [field.wire for field in record.fields] == list(data["types"][record.name]["fields"])
    assert [topic.id for topic in manifest.topics] == [topic["id"] for topic in data["topics"]]


def _misspell(draw: st.DrawFn, key: str, taken: set[str]) -> str:
    index = draw(st.integers(0, len(key) - 1))
    edits = [key[:index] + key[index + 1 :], key[:index] + key[index] + key[index:], key + "x"]
    if index + 1 < len(key):
        edits.append(key[:index] + key[index + 1] + key[index] + key[index + 2 :])
    options = [edit for edit in edits if edit and edit not in taken]
    return draw(st.sampled_from(options))


@st.composite
def misspelt(draw: st.DrawFn) -> tuple[dict[str, Any], str]:
    data = draw(manifests())
    containers: list[tuple[dict[str, Any], set[str]]] = [(data, set(manifest_schema()["properties"]))]
    topic_keys = set(manifest_schema()["$defs"]["topic"]["properties"])
    containers += [(topic, topic_keys) for topic in data["topics"]]
    container, allowed = draw(st.sampled_from(containers))
    key = draw(st.sampled_from(list(container)))
    wrong = _misspell(draw, key, allowed | set(container))
    renamed = {(wrong if name == key else name): value for name, value in container.items()}
    container.clear()
    container.update(renamed)
    return data, wrong


@SETTINGS
@given(misspelt())
def test_a_misspelt_key_is_reported_at_the_key(case: tuple[dict[str, Any], str]) -> None:
    data, wrong = case
    text = dump(data)
    with pytest.raises(ManifestError) as info:
        load_manifest_text(text, "m.yaml")
    assert_positioned(info.value, text)
    lines = text.splitlines()
    assert any(
        lines[d.position.line - 1][d.position.column - 1 :].startswith(wrong) and f"unknown key {wrong!r}" in d.message
        for d in info.value.diagnostics
    )


@st.composite
def unknown_type(draw: st.DrawFn) -> tuple[dict[str, Any], str]:
    data = draw(manifests())
    missing = draw(RECORD_NAMES.filter(lambda name: name not in data["types"]))
    where = draw(st.sampled_from(["field", "request", "response"]))
    records = [spec for spec in data["types"].values() if spec["fields"]]
    if where == "field" and records:
        fields = draw(st.sampled_from(records))["fields"]
        fields[draw(st.sampled_from(list(fields)))] = f"list[{missing}]"
    else:
        topic = draw(st.sampled_from(data["topics"]))
        topic["response" if where == "field" else where] = missing
    return data, missing


@SETTINGS
@given(unknown_type())
def test_an_unknown_type_is_reported(case: tuple[dict[str, Any], str]) -> None:
    data, missing = case
    text = dump(data)
    with pytest.raises(ManifestError) as info:
        load_manifest_text(text, "m.yaml")
    assert_positioned(info.value, text)
    assert any(f"unknown type {missing!r}" in d.message for d in info.value.diagnostics)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=6,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


@st.composite
def replaced(draw: st.DrawFn) -> dict[str, Any]:
    data = draw(manifests())
    path = draw(st.sampled_from(_paths(data)))
    parent: Any = data
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = draw(JSON_VALUES)
    return data


@SETTINGS
@given(replaced())
def test_any_value_anywhere_is_loaded_or_reported_never_a_crash(data: dict[str, Any]) -> None:
    text = dump(data)
    try:
        load_manifest_text(text, "m.yaml")
    except ManifestError as error:
        assert_positioned(error, text)


@SETTINGS
@given(st.text(max_size=200))
def test_any_text_is_loaded_or_reported_never_a_crash(text: str) -> None:
    try:
        load_manifest_text(text, "m.yaml")
    except ManifestError as error:
        assert error.diagnostics
        assert all(d.position.line >= 1 and d.position.column >= 1 for d in error.diagnostics)


@SETTINGS
@given(misspelt())
def test_a_misspelt_key_hides_no_unrelated_error(case: tuple[dict[str, Any], str]) -> None:
    data, wrong = case
    assume("topics" in data and "routes" in data["topics"][0])  # neither 'topics' nor these routes misspelt
    data["topics"][0]["routes"].append("POST /svc/invoke")
    data["package"] = "class"
    text = dump(data)
    with pytest.raises(ManifestError) as info:
        load_manifest_text(text, "m.yaml")
    messages = [diagnostic.message for diagnostic in info.value.diagnostics]
    assert any(message.startswith(f"unknown key {wrong!r}") for message in messages)
    assert any(message.startswith("route 'POST /svc/invoke' collides with the well-known") for message in messages)
    assert any(message.startswith("package 'class' is a Python keyword") for message in messages)
