"""Contract details from manifest to wire: enums, constraints and JSON Schema types build into models.py, the codec
enforces them (one 422 naming every violation), and the documents publish them."""

from __future__ import annotations

import json
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from svcgen.codegen.render import render_package
from svcgen.manifest import ManifestError, load_manifest_text
from svcgen.runtime import Context, DecodeError, Identity, Registry, Result, Service, codec_for, create_app
from tests.support.client import call

OUT = Path("out")

REPRO_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "Address",
    "description": "A postal address.",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "postal_code": {"type": "string", "pattern": "^[0-9]{4,5}$", "description": "As the carrier prints it"},
        "country": {"type": "string", "enum": ["DE", "FR", "NL"]},
        "email": {"type": "string", "format": "email"},
        "floor": {"type": "integer", "minimum": 0},
        "lines": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3},
        "note": {"anyOf": [{"type": "string", "maxLength": 4}, {"type": "null"}]},
        "ratio": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1, "multipleOf": 0.25},
        "code": {"type": "string", "minLength": 2, "maxLength": 3, "examples": ["ab"], "deprecated": True},
        "tag": {"type": ["string", "null"], "default": "x"},
        "geo": {"$ref": "#/$defs/geo"},
    },
    "required": ["postal_code", "country", "email"],
    "$defs": {
        "geo": {
            "type": "object",
            "properties": {"lat": {"type": "number", "minimum": -90, "maximum": 90}},
            "required": ["lat"],
        }
    },
}

MANIFEST = """svcgen: 1
service: shop
enums:
  Size:
    description: How big.
    values: [small, x-large, 2xl]
types:
  Address:
    jsonSchema: address.json
  Parcel:
    description: What ships.
    deprecated: true
    fields:
      size: {type: Size, default: x-large}
      sizes: {type: "list[Size]", default: [small], minItems: 1}
      weight: {type: float, minimum: 0, exclusiveMaximum: 30, description: Kilograms}
      label: {type: string?, pattern: "^[A-Z]", examples: [A1]}
      to: Address
topics:
  - id: shop:ship
    request: Parcel
    response: Parcel
    routes: ["POST /parcels"]
  - id: shop:address
    request: Address
    response: Address
    routes: ["POST /addresses"]
"""


@pytest.fixture
def models(tmp_path: Path) -> Iterator[types.ModuleType]:
    (tmp_path / "address.json").write_text(json.dumps(REPRO_SCHEMA))
    manifest = load_manifest_text(MANIFEST, str(tmp_path / "shop.yaml"))
    files = {f.relpath: f.text for f in render_package(manifest, OUT)}
    name = "_contract_models_under_test"
    module = types.ModuleType(name)
    sys.modules[name] = module  # annotations resolve through the module
    module.__dict__["_documents"] = {path: json.loads(text) for path, text in files.items() if path.endswith(".json")}
    module.__dict__["_source"] = files["models.py"]
    exec(compile(files["models.py"], name, "exec"), module.__dict__)
    yield module
    sys.modules.pop(name, None)


def echo_app(models: types.ModuleType) -> Any:
    registry = Registry()

    async def echo(request: Any, context: Context) -> Result[Any]:
        return Result.ok(request)

    registry.add("shop:address", echo, request=models.Address, response=models.Address)
    registry.add("shop:ship", echo, request=models.Parcel, response=models.Parcel)
    service = Service(Identity("shop", binding="http"), registry)
    routes = ["POST /addresses -> shop:address", "GET /addresses/{postal_code} -> shop:address"]
    routes.append("POST /parcels -> shop:ship")
    return create_app(service, routes)


def test_the_json_schema_repro_is_one_422_naming_all_five(models: types.ModuleType) -> None:
    body = {"postal_code": "abc", "country": "US", "email": "nope", "floor": -3, "extra": 1}
    response = call(echo_app(models), "POST", "/addresses", json=body)
    assert (response.status_code, response.json()) == (
        422,
        {
            "status": "validation-error",
            "detail": "postal_code: expected text matching ^[0-9]{4,5}$; country: expected one of DE, FR, NL; "
            "email: expected an email address; floor: expected at least 0; extra: unexpected property",
            "errors": [
                {"path": "postal_code", "message": "expected text matching ^[0-9]{4,5}$"},
                {"path": "country", "message": "expected one of DE, FR, NL"},
                {"path": "email", "message": "expected an email address"},
                {"path": "floor", "message": "expected at least 0"},
                {"path": "extra", "message": "unexpected property"},
            ],
        },
    )


def test_path_and_query_fields_meet_the_same_constraints(models: types.ModuleType) -> None:
    response = call(echo_app(models), "GET", "/addresses/abc?country=US&email=nope&floor=-3&lines=a,,b")
    assert (response.status_code, response.json()["detail"]) == (
        422,
        "postal_code: expected text matching ^[0-9]{4,5}$; country: expected one of DE, FR, NL; "
        "email: expected an email address; floor: expected at least 0",
    )
    fine = call(echo_app(models), "GET", "/addresses/1011?country=NL&email=a@b.nl&floor=2")
    assert fine.status_code == 200 and fine.json()["floor"] == 2


def test_a_valid_address_round_trips_with_its_wire_names(models: types.ModuleType) -> None:
    body = {"postal_code": "1011", "country": "NL", "email": "a@b.nl", "lines": ["Dam 1"], "geo": {"lat": 52.4}}
    response = call(echo_app(models), "POST", "/addresses", json=body)
    assert response.status_code == 200
    assert response.json() == {
        **body,
        "floor": None,
        "note": None,
        "ratio": None,
        "code": None,
        "tag": "x",
    }


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"lines": []}, "lines: expected at least 1 item"),
        ({"lines": ["a", "b", "c", "d"]}, "lines: expected at most 3 items"),
        ({"lines": [1]}, "lines[0]: expected string"),
        ({"note": "toolong"}, "note: expected at most 4 characters"),
        ({"ratio": 0}, "ratio: expected more than 0"),
        ({"ratio": 1}, "ratio: expected less than 1"),
        ({"ratio": 0.3}, "ratio: expected a multiple of 0.25"),
        ({"code": "a"}, "code: expected at least 2 characters"),
        ({"code": "abcd"}, "code: expected at most 3 characters"),
        ({"geo": {"lat": 91}}, "geo.lat: expected at most 90"),
        ({"geo": {}}, "geo.lat: required"),
        ({"country": None}, "country: expected one of DE, FR, NL"),
    ],
)
def test_each_imported_constraint_is_enforced(models: types.ModuleType, change: dict[str, Any], expected: str) -> None:
    body = {"postal_code": "1011", "country": "NL", "email": "a@b.nl", **change}
    with pytest.raises(DecodeError) as caught:
        codec_for(models.Address).decode(body)
    assert str(caught.value) == expected


def test_manifest_enum_and_constraints_reach_models_py(models: types.ModuleType) -> None:
    source: str = models._source
    enum_class = 'class Size(StrEnum):\n    """How big."""\n\n    SMALL = "small"\n    X_LARGE = "x-large"\n'
    enum_class += '    V_2XL = "2xl"\n'
    assert enum_class in source
    assert "    __svcgen_meta__: ClassVar[Meta] = Meta(deprecated=True)\n" in source
    assert '    label: Annotated[str | None, Meta(pattern="^[A-Z]", examples=["A1"])] = None\n' in source
    assert "    size: Size = Size.X_LARGE\n" in source
    to = {"postal_code": "1011", "country": "DE", "email": "a@b.de"}
    parcel = codec_for(models.Parcel).decode({"weight": 1, "to": to})
    assert parcel.size is models.Size.X_LARGE and parcel.sizes == [models.Size.SMALL]


def test_the_parcel_violations_come_in_one_answer(models: types.ModuleType) -> None:
    body = {"size": "huge", "sizes": [], "weight": 30, "label": "a", "to": {"country": "DE"}}
    response = call(echo_app(models), "POST", "/parcels", json=body)
    assert response.status_code == 422
    assert response.json()["detail"] == (
        "size: expected one of small, x-large, 2xl; sizes: expected at least 1 item; weight: expected less than 30; "
        "label: expected text matching ^[A-Z]; to.postal_code: required; to.email: required"
    )


def test_documents_publish_the_same_keywords(models: types.ModuleType) -> None:
    documents: dict[str, Any] = models._documents
    spec_topics = {topic["id"]: topic for topic in documents["contracts/spec.json"]["topics"]}
    parcel = spec_topics["shop:ship"]["requestSchema"]
    assert parcel["description"] == "What ships." and parcel["deprecated"] is True
    size = {"type": "string", "enum": ["small", "x-large", "2xl"], "description": "How big."}
    assert parcel["properties"]["size"] == size
    assert parcel["properties"]["sizes"]["minItems"] == 1 and parcel["properties"]["sizes"]["default"] == ["small"]
    assert parcel["properties"]["weight"] == {
        "type": "number",
        "minimum": 0,
        "exclusiveMaximum": 30,
        "description": "Kilograms",
    }
    address = spec_topics["shop:address"]["requestSchema"]
    assert address["additionalProperties"] is False
    assert address["properties"]["code"] == {
        "type": ["string", "null"],
        "minLength": 2,
        "maxLength": 3,
        "examples": ["ab"],
        "deprecated": True,
        "default": None,
    }
    descriptor = {t["id"]: t for t in documents["contracts/descriptor.json"]["topics"]}
    assert descriptor["shop:ship"]["requestSchema"] == parcel
    components = documents["contracts/openapi.json"]["components"]["schemas"]
    assert parcel in components.values() and address in components.values()


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "object", "properties": {"a": {"const": 1}}}, "keyword 'const' cannot be enforced"),
        ({"type": "object", "if": {}, "properties": {}}, "keyword 'if' cannot be enforced"),
        ({"type": "object", "properties": {"a": {"type": "integer", "enum": [1, 2]}}}, "enum values must be strings"),
        ({"type": "object", "properties": {"a": {"type": "string", "format": "hostname"}}}, "format 'hostname'"),
        ({"type": "object", "properties": {"a": {"$ref": "other.json#/x"}}}, "$ref 'other.json#/x' cannot be followed"),
        ({"type": "object", "properties": {"a": {"type": ["string", "integer"]}}}, "several types"),
        (
            {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string", "minLength": 1}}}},
            "keyword 'minLength' inside items or additionalProperties cannot be enforced",
        ),
    ],
)
def test_unsupported_schema_keywords_are_build_errors(tmp_path: Path, schema: dict[str, Any], message: str) -> None:
    (tmp_path / "address.json").write_text(json.dumps(schema))
    text = "svcgen: 1\nservice: shop\ntypes:\n  Address: {jsonSchema: address.json}\n"
    text += "topics:\n  - {id: shop:a, request: Address, response: Address}\n"
    with pytest.raises(ManifestError) as caught:
        load_manifest_text(text, str(tmp_path / "shop.yaml"))
    assert len(caught.value.diagnostics) == 1
    line = str(caught.value.diagnostics[0])
    assert line.startswith(f"{tmp_path.as_posix()}/shop.yaml:4:25: address.json: ") and message in line
    assert "(at #/" in line
