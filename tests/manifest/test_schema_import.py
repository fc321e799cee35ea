"""JSON Schema types are translated into the manifest's own model (records, enums, contract keywords), and the
translation agrees with datamodel-code-generator on the fields it makes and which are required."""

from __future__ import annotations

import ast
import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from svcgen.manifest.model import NO_DEFAULT
from svcgen.manifest.schemaimport import ImportedTypes, SchemaImportError, translate_json_schema
from svcgen.runtime._naming import attribute

REPO = Path(__file__).resolve().parents[2]
ADDRESS = json.loads((REPO / "examples" / "manifests" / "schemas" / "address.json").read_text())

NESTED = {
    "type": "object",
    "description": "A shipment.",
    "additionalProperties": False,
    "properties": {
        "id": {"type": "string", "format": "uuid"},
        "at": {"type": "string", "format": "date-time"},
        "to": {"$ref": "#/$defs/place"},
        "from": {"$ref": "#/$defs/place"},
        "stops": {"type": "array", "items": {"$ref": "#/$defs/place"}, "maxItems": 5},
        "mode": {"$ref": "#/$defs/mode"},
        "weights": {"type": "object", "additionalProperties": {"type": "number"}},
        "note": {"anyOf": [{"type": "string", "maxLength": 10}, {"type": "null"}], "description": "Free text"},
        "count": {"type": "integer", "default": 1, "multipleOf": 2},
    },
    "required": ["id", "to"],
    "$defs": {
        "place": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        "mode": {"enum": ["air", "sea"], "description": "How it travels."},
    },
}


def imported(schema: dict[str, Any], name: str = "Shipment") -> ImportedTypes:
    return translate_json_schema(name, "s.json", schema)


def test_records_enums_and_contract_keywords() -> None:
    types = imported(NESTED)
    assert [record.name for record in types.records] == ["Shipment", "ShipmentPlace"]
    assert [(e.name, e.values, e.description) for e in types.enums] == [
        ("ShipmentMode", ("air", "sea"), "How it travels.")
    ]
    shipment = types.records[0]
    assert shipment.closed and shipment.description == "A shipment." and shipment.json_schema == "s.json"
    fields = {f.wire: f for f in shipment.fields}
    assert {wire: str(f.type) for wire, f in fields.items()} == {
        "id": "string",
        "at": "datetime?",
        "to": "ShipmentPlace",
        "from": "ShipmentPlace?",
        "stops": "list[ShipmentPlace]?",
        "mode": "ShipmentMode?",
        "weights": "map[float]?",
        "note": "string?",
        "count": "integer",
    }
    assert fields["id"].contract == {"format": "uuid"} and fields["id"].default is NO_DEFAULT
    assert fields["at"].contract == {} and fields["at"].default is None
    assert fields["stops"].contract == {"maxItems": 5}
    assert fields["note"].contract == {"maxLength": 10} and fields["note"].description == "Free text"
    assert fields["count"].contract == {"multipleOf": 2} and fields["count"].default == 1


def test_every_problem_is_listed_with_its_pointer() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string", "uniqueItems": True}, "b/c": {"not": {}}},
        "patternProperties": {},
    }
    with pytest.raises(SchemaImportError) as caught:
        imported(schema)
    pointers = [problem.rsplit("(at ", 1)[1] for problem in caught.value.problems]
    assert pointers == ["#/patternProperties)", "#/properties/a/uniqueItems)", "#/properties/b~1c/not)"]


def test_two_types_the_naming_rule_gives_one_name_are_both_kept() -> None:
    # A nested `address` object and a `$defs/Address` are both ShipmentAddress by the rule; each stays its own type.
    schema = {
        "type": "object",
        "properties": {
            "address": {"type": "object", "properties": {"line": {"type": "string"}}},
            "home": {"$ref": "#/$defs/Address"},
            "kind": {"enum": ["a"]},
            "other": {"type": "object", "properties": {"kind": {"enum": ["b"]}}},
            "otherKind": {"enum": ["c"]},
        },
        "$defs": {"Address": {"type": "object", "properties": {"geo": {"type": "boolean"}}}},
    }
    types = imported(schema)
    assert [record.name for record in types.records] == ["Shipment", "ShipmentAddress", "ShipmentAddress2",
                                                         "ShipmentOther"]  # fmt: skip
    assert [(e.name, e.values) for e in types.enums] == [
        ("ShipmentKind", ("a",)), ("ShipmentOtherKind", ("b",)), ("ShipmentOtherKind2", ("c",))
    ]  # fmt: skip
    fields = {f.wire: str(f.type) for f in types.records[0].fields}
    assert fields["address"] == "ShipmentAddress?" and fields["home"] == "ShipmentAddress2?"
    assert fields["otherKind"] == "ShipmentOtherKind2?"


def test_names_that_cannot_be_their_own_attribute_or_member_are_problems_at_their_pointer() -> None:
    schema = {
        "type": "object",
        "properties": {
            "x-legacy": {"type": "string"},
            "xLegacy": {"type": "string"},
            "": {"type": "string"},
            "__secret": {"type": "string"},
            "sort": {"enum": ["+", "-", None, "a-b", "a_b"]},
        },
    }
    with pytest.raises(SchemaImportError) as caught:
        imported(schema)
    assert caught.value.problems == [
        "s.json: properties 'x-legacy' and 'xLegacy' would both be the Python attribute x_legacy of Shipment "
        "(svcgen names attributes in snake_case); rename one (at #/properties/xLegacy)",
        "s.json: property name '' cannot name a Python attribute of Shipment: it is empty; rename it "
        "(at #/properties/)",
        "s.json: property name '__secret' cannot name a Python attribute of Shipment: Python mangles a name that "
        "starts with '__'; rename it (at #/properties/__secret)",
        "s.json: enum values 'a-b' and 'a_b' both become the member A_B; rename one (at #/properties/sort/enum/4)",
    ]


def _dmcg_fields(schema: dict[str, Any], name: str) -> list[tuple[str, bool]]:
    import datamodel_code_generator as generator  # the dev extra's cross-check, heavy: imported here only
    from datamodel_code_generator.enums import DataModelType

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        source = generator.generate(
            json.dumps(schema),
            input_file_type=generator.InputFileType.JsonSchema,
            output_model_type=DataModelType.DataclassesDataclass,
            target_python_version=generator.PythonVersion.PY_311,
            class_name=name,
            snake_case_field=True,
            disable_timestamp=True,
        )
    assert isinstance(source, str)
    tree = ast.parse(source)
    (cls,) = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == name]
    return [
        (statement.target.id, statement.value is None)
        for statement in cls.body
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)
    ]


@pytest.mark.parametrize(("schema", "name"), [(ADDRESS, "Address"), (NESTED, "Shipment")])
def test_same_fields_and_required_as_datamodel_code_generator(schema: dict[str, Any], name: str) -> None:
    ours = [(attribute(f.wire), not f.has_default) for f in imported(schema, name).records[0].fields]
    theirs = _dmcg_fields(schema, name)
    assert sorted(ours) == sorted(theirs)
