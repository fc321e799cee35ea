"""A record type taken from an external JSON Schema, translated into the manifest's own model.

The supported subset becomes records, enums and field contract keywords exactly like a manifest's own, so
one representation reaches models.py, the codec and every document. A keyword the runtime cannot enforce
is a problem naming the file, the keyword and its JSON pointer: never dropped silently.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..runtime._meta import CONSTRAINT_KEYWORDS, FORMATS
from ..runtime._naming import attribute
from .contract import check_enum
from .model import NO_DEFAULT, EnumDef, FieldDef, RecordDef
from .spelling import pascal_case
from .typeexpr import TypeExpr

_ANNOTATIONS = frozenset({"$schema", "$id", "$comment", "title", "description", "examples", "deprecated", "default"})
_RECORD_KEYS = _ANNOTATIONS | {"type", "properties", "required", "additionalProperties", "$defs", "definitions"}
_VALUE_KEYS = _ANNOTATIONS | CONSTRAINT_KEYWORDS | {"type", "enum", "items", "$ref", "anyOf", "oneOf"}
_CONTRACT_KEYS = CONSTRAINT_KEYWORDS | {"examples", "deprecated"}
_SCALAR_TYPES = {"string": "string", "integer": "integer", "number": "float", "boolean": "boolean"}


class SchemaImportError(ValueError):
    """Every problem of one schema file, each a full sentence."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


@dataclass
class ImportedTypes:
    records: list[RecordDef] = field(default_factory=list)
    """The named type first, then the records it nests or refers to."""
    enums: list[EnumDef] = field(default_factory=list)


def translate_json_schema(name: str, source: str, schema: Any) -> ImportedTypes:
    """Raises SchemaImportError listing every keyword or construct it cannot translate."""
    translator = _Translator(name, source, schema)
    translator.record(translator.claim(name), schema, "")
    if translator.problems:
        raise SchemaImportError(translator.problems)
    return translator.imported


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


class _Translator:
    def __init__(self, root: str, source: str, schema: Any) -> None:
        self.root = root
        self.source = source
        self.schema = schema
        self.imported = ImportedTypes()
        self.problems: list[str] = []
        self.named: dict[str, str] = {}
        """JSON pointer of a $defs entry → the record or enum name it became."""
        self.taken: set[str] = set()
        """The record and enum names given so far."""

    def claim(self, name: str) -> str:
        """`name`, or `name2`, `name3`, ... when the schema already made a type of that name: a nested `address`
        object and a `$defs/Address` are both `<Type>Address` by the naming rule, yet two different types."""
        unique, count = name, 1
        while unique in self.taken:
            count += 1
            unique = f"{name}{count}"
        self.taken.add(unique)
        return unique

    def problem(self, pointer: str, message: str) -> None:
        self.problems.append(f"{self.source}: {message} (at #{pointer})")

    def unsupported(self, schema: Mapping[str, Any], allowed: frozenset[str], pointer: str) -> None:
        for key in schema:
            if key not in allowed:
                self.problem(
                    f"{pointer}/{_escape(key)}",
                    f"keyword {key!r} cannot be enforced by the svcgen runtime here; remove it or express the rule "
                    "with type, properties, required, additionalProperties: false, enum, items, $ref and the "
                    "constraint keywords",
                )

    def record(self, name: str, schema: Any, pointer: str) -> None:
        if not isinstance(schema, dict):
            self.problem(pointer, "a record schema must be an object")
            return
        self.unsupported(schema, _RECORD_KEYS, pointer)
        if schema.get("type", "object") != "object":
            self.problem(f"{pointer}/type", f"type {schema.get('type')!r} is not a record; use type: object")
        extra = schema.get("additionalProperties", True)
        if extra not in (True, False):
            self.problem(
                f"{pointer}/additionalProperties",
                "additionalProperties beside properties must be true or false (a map needs no properties)",
            )
        record = RecordDef(
            name,
            description=schema.get("description"),
            json_schema=self.source,
            deprecated=schema.get("deprecated") is True,
            closed=extra is False,
        )
        index = len(self.imported.records)
        self.imported.records.append(record)
        required = set(schema.get("required", ()))
        properties = schema.get("properties", {})
        self.attributes(name, properties, pointer)
        fields = tuple(
            self.field(name, wire, prop, f"{pointer}/properties/{_escape(wire)}", wire in required)
            for wire, prop in properties.items()
        )
        self.imported.records[index] = RecordDef(
            name, fields, record.description, record.json_schema, record.deprecated, record.closed
        )

    def attributes(self, record: str, properties: Mapping[str, Any], pointer: str) -> None:
        """Each property must become its own Python attribute of the record's dataclass."""
        seen: dict[str, str] = {}
        for wire in properties:
            name = attribute(wire)
            at = f"{pointer}/properties/{_escape(wire)}"
            why = (
                "it is empty" if not wire
                else "Python mangles a name that starts with '__'" if name.startswith("__")
                else f"{name!r} is not a Python identifier" if not name.isidentifier()
                else None
            )  # fmt: skip
            if why is not None:
                self.problem(at, f"property name {wire!r} cannot name a Python attribute of {record}: {why}; rename it")
                continue
            key = unicodedata.normalize("NFKC", name)  # how Python reads the identifier
            if key in seen:
                self.problem(
                    at,
                    f"properties {seen[key]!r} and {wire!r} would both be the Python attribute {name} of {record} "
                    "(svcgen names attributes in snake_case); rename one",
                )
            else:
                seen[key] = wire

    def field(self, owner: str, wire: str, schema: Any, pointer: str, required: bool) -> FieldDef:
        if not isinstance(schema, dict):
            self.problem(pointer, "a property schema must be an object")
            return FieldDef(wire, TypeExpr("scalar", "any"))
        expr = self.type_of(owner + (pascal_case(wire) or "Field"), schema, pointer)
        declared = {**_nullable_member(schema), **schema}
        contract = {key: declared[key] for key in declared if key in _CONTRACT_KEYS}
        if declared.get("format") == "date-time":
            del contract["format"]  # the datetime type itself
        default: Any = NO_DEFAULT
        if not required:
            default = schema.get("default")
            if default is None and expr.kind != "nullable":
                expr = TypeExpr("nullable", args=(expr,))  # optional without a default: absent reads as null
        return FieldDef(wire, expr, default, schema.get("description"), contract)

    def type_of(self, name: str, schema: Mapping[str, Any], pointer: str, nested: bool = False) -> TypeExpr:
        """The type of a property (`nested`: of a list's items or a map's values, which carry no constraints)."""
        if nested:
            for key in schema:
                if key in CONSTRAINT_KEYWORDS and not (key == "format" and schema[key] == "date-time"):
                    self.problem(
                        f"{pointer}/{_escape(key)}",
                        f"keyword {key!r} inside items or additionalProperties cannot be enforced: svcgen constrains "
                        "fields, not the items of a list or map; remove it or make the items records",
                    )
        kind = schema.get("type")
        is_object = kind == "object" or (isinstance(kind, list) and "object" in kind)
        self.unsupported(schema, _VALUE_KEYS | _RECORD_KEYS if is_object else _VALUE_KEYS, pointer)
        if "$ref" in schema:
            return TypeExpr("record", self.reference(schema["$ref"], f"{pointer}/$ref"))
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return self.nullable_choice(name, schema[key], f"{pointer}/{key}", nested)
        kinds = schema.get("type")
        kinds = [kinds] if isinstance(kinds, str) else list(kinds or [])
        nullable = "null" in kinds
        kinds = [kind for kind in kinds if kind != "null"]
        expr = self.plain_type(name, schema, kinds, pointer)
        return TypeExpr("nullable", args=(expr,)) if nullable else expr

    def plain_type(self, name: str, schema: Mapping[str, Any], kinds: list[str], pointer: str) -> TypeExpr:
        if "enum" in schema:
            values = [value for value in schema["enum"] if value is not None]
            if not all(isinstance(value, str) for value in values) or kinds not in ([], ["string"]):
                self.problem(f"{pointer}/enum", "enum values must be strings (an enum is a string type)")
            # Indexes of the enum as written (check_enum passes over its null).
            check_enum(list(schema["enum"]), lambda index, message: self.problem(f"{pointer}/enum/{index}", message))
            name = self.claim(name)
            self.imported.enums.append(EnumDef(name, tuple(str(value) for value in values), schema.get("description")))
            return TypeExpr("record", name)
        if len(kinds) > 1:
            self.problem(f"{pointer}/type", f"a value of several types {kinds} cannot be enforced; use one type")
            return TypeExpr("scalar", "any")
        kind = kinds[0] if kinds else None
        if kind in _SCALAR_TYPES:
            form = schema.get("format")
            if kind == "string" and form == "date-time":
                return TypeExpr("scalar", "datetime")
            if form is not None and (kind != "string" or form not in FORMATS):
                known = ", ".join(FORMATS)
                self.problem(f"{pointer}/format", f"format {form!r} is not enforced; use one of date-time, {known}")
            return TypeExpr("scalar", _SCALAR_TYPES[kind])
        if kind == "array":
            items = schema.get("items", {})
            if not isinstance(items, dict):
                self.problem(f"{pointer}/items", "items must be one schema")
                return TypeExpr("list", args=(TypeExpr("scalar", "any"),))
            return TypeExpr("list", args=(self.type_of(name + "Item", items, f"{pointer}/items", nested=True),))
        if kind == "object":
            if "properties" in schema:
                name = self.claim(name)
                self.record(name, schema, pointer)
                return TypeExpr("record", name)
            values = schema.get("additionalProperties", {})
            if not isinstance(values, dict):
                return TypeExpr("map", args=(TypeExpr("scalar", "any"),))
            inner = self.type_of(name + "Value", values, f"{pointer}/additionalProperties", nested=True)
            return TypeExpr("map", args=(inner,))
        if kind is not None:
            self.problem(f"{pointer}/type", f"type {kind!r} is not a JSON Schema type svcgen knows")
        return TypeExpr("scalar", "any")

    def nullable_choice(self, name: str, members: Any, pointer: str, nested: bool) -> TypeExpr:
        choices = [member for member in members if member != {"type": "null"}] if isinstance(members, list) else []
        if len(choices) != 1 or len(members) != 2 or not isinstance(choices[0], dict):
            self.problem(pointer, "a choice between schemas cannot be enforced; only [schema, {type: null}] is")
            return TypeExpr("scalar", "any")
        return TypeExpr("nullable", args=(self.type_of(name, choices[0], f"{pointer}/0", nested),))

    def reference(self, ref: Any, pointer: str) -> str:
        parts = ref.split("/") if isinstance(ref, str) else []
        if len(parts) != 3 or parts[0] != "#" or parts[1] not in ("$defs", "definitions"):
            self.problem(pointer, f"$ref {ref!r} cannot be followed; refer to #/$defs/<Name> in the same file")
            return "Any"
        if ref in self.named:
            return self.named[ref]
        key = parts[2].replace("~1", "/").replace("~0", "~")
        target = self.schema.get(parts[1], {}).get(key)
        name = self.root + (pascal_case(key) or "Definition")
        if target is None:
            self.problem(pointer, f"$ref {ref!r} names no definition")
        elif isinstance(target, dict) and (target.get("type") == "object" or "properties" in target):
            name = self.named[ref] = self.claim(name)  # named first: the record may refer to itself
            self.record(name, target, ref[1:])
        elif isinstance(target, dict) and "enum" in target:
            name = self.plain_type(name, target, ["string"], ref[1:]).name
        else:
            self.problem(pointer, f"$ref {ref!r} must name an object or an enum definition")
        self.named[ref] = name
        return name


def _nullable_member(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    """The one non-null member of `anyOf`/`oneOf: [schema, {type: null}]`, whose keywords are the field's; else {}."""
    for key in ("anyOf", "oneOf"):
        members = schema.get(key)
        if isinstance(members, list) and len(members) == 2:
            others = [member for member in members if member != {"type": "null"}]
            if len(others) == 1 and isinstance(others[0], dict):
                return others[0]
    return {}
