"""Records a manifest takes from an external JSON Schema: dataclasses by datamodel-code-generator.

The schema is handed to datamodel-code-generator as a library (dataclasses, snake_case fields, no
timestamp) and its module is taken apart: the imports join models.py's import block, the class
definitions are embedded verbatim. A property whose name is not canonical camelCase (`postal_code`,
`zip-code`) gets `field(metadata={"wire": ...})`, the runtime's wire-name override, so the generated
dataclass still reads and writes the schema's own names.
"""

from __future__ import annotations

import ast
import copy
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..manifest.model import RecordDef
from ..manifest.semantics import load_json_schema
from ..runtime._naming import is_canonical_camel, snake_to_camel
from .errors import CodegenError
from .imports import Imports

WIRE_METADATA_KEY = "x-metadata"
"""Schema extension datamodel-code-generator writes into `field(metadata=...)` (prefix stripped)."""

JSONSCHEMA_EXTRA_MISSING = (
    "jsonSchema types need datamodel-code-generator, an optional extra: pip install 'svcgen[jsonschema]'"
)

_SUBSCHEMA = ("items", "additionalProperties", "not", "if", "then", "else", "contains", "unevaluatedItems",
              "unevaluatedProperties", "propertyNames")
_SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")


@dataclass(frozen=True)
class ExternalModel:
    name: str
    source: str
    """The jsonSchema path as the manifest writes it."""
    imports: Imports
    body: str
    """The definitions, two empty lines apart, without imports."""
    defined: tuple[str, ...]
    """Top-level names the body defines, in order."""


def external_model(record: RecordDef, base_dir: Path) -> ExternalModel:
    """The dataclass(es) of `record`, whose `json_schema` path is relative to `base_dir`."""
    assert record.json_schema is not None
    where = f"type {record.name} (jsonSchema {record.json_schema})"
    try:
        schema = load_json_schema(base_dir, record.json_schema)
    except ValueError as error:
        raise CodegenError(f"{where}: {error}") from None
    if not isinstance(schema, dict):
        raise CodegenError(f"{where}: the file must hold a JSON Schema object")
    annotated = copy.deepcopy(schema)
    _mark_wire_names(annotated)
    source = _generate(annotated, record.name, where)
    return _split(source, record, schema, where)


def _generate(schema: dict[str, Any], class_name: str, where: str) -> str:
    # Imported on use: the generator is heavy, an optional extra, and only manifests with jsonSchema types need it.
    try:
        from datamodel_code_generator import (
            DatetimeClassType,
            Formatter,
            InputFileType,
            LiteralType,
            PythonVersion,
            generate,
        )
        from datamodel_code_generator.enums import DataModelType
    except ImportError:
        raise CodegenError(f"{where}: {JSONSCHEMA_EXTRA_MISSING}") from None

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            output = generate(
                schema,
                input_file_type=InputFileType.JsonSchema,
                output_model_type=DataModelType.DataclassesDataclass,
                target_python_version=PythonVersion.PY_311,
                class_name=class_name,
                snake_case_field=True,
                disable_timestamp=True,
                disable_future_imports=True,
                output_datetime_class=DatetimeClassType.Datetime,
                enum_field_as_literal=LiteralType.All,
                keyword_only=True,
                use_double_quotes=True,
                use_standard_collections=True,
                use_union_operator=True,
                use_schema_description=True,
                use_field_description=True,
                parent_scoped_naming=True,
                field_extra_keys_without_x_prefix={WIRE_METADATA_KEY},
                formatters=[Formatter.BUILTIN],
            )
    except Exception as error:  # the generator's own errors are many and unexported; all mean "cannot"
        raise CodegenError(f"{where}: datamodel-code-generator cannot generate a dataclass: {error}") from None
    if not isinstance(output, str):
        raise CodegenError(f"{where}: datamodel-code-generator produced several modules; use one self-contained schema")
    return output


def _mark_wire_names(schema: Any) -> None:
    for sub in _subschemas(schema):
        properties = sub.get("properties")
        if not isinstance(properties, dict):
            continue
        for name, prop in properties.items():
            if isinstance(prop, dict) and not is_canonical_camel(name):
                prop[WIRE_METADATA_KEY] = {"wire": name}


def _subschemas(schema: Any) -> Iterator[dict[str, Any]]:
    if not isinstance(schema, dict):
        return
    yield schema
    for key in _SUBSCHEMA:
        yield from _subschemas(schema.get(key))
    for key in _SUBSCHEMA_LISTS:
        items = schema.get(key)
        if isinstance(items, list):
            for item in items:
                yield from _subschemas(item)
    for key in _SUBSCHEMA_MAPS:
        entries = schema.get(key)
        if isinstance(entries, dict):
            for item in entries.values():
                yield from _subschemas(item)


def _property_names(schema: Any) -> set[str]:
    return {
        name for sub in _subschemas(schema) if isinstance(sub.get("properties"), dict) for name in sub["properties"]
    }


def _split(source: str, record: RecordDef, schema: dict[str, Any], where: str) -> ExternalModel:
    tree = ast.parse(source)
    lines = source.splitlines()
    imports = Imports()
    blocks: list[str] = []
    defined: list[str] = []
    properties = _property_names(schema)
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            if node.module != "__future__":
                for alias in node.names:
                    imports.name(node.module, alias.name, alias.asname)
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                imports.module(alias.name, alias.asname)
            continue
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        end = node.end_lineno or node.lineno
        blocks.append("\n".join(line.rstrip() for line in lines[first - 1 : end]))
        defined.extend(_defined_names(node))
        if isinstance(node, ast.ClassDef):
            _check_wire_names(node, properties, where)
    if record.name not in defined:
        raise CodegenError(f"{where}: datamodel-code-generator defined no {record.name}; its definitions: {defined}")
    return ExternalModel(record.name, record.json_schema or "", imports, "\n\n\n".join(blocks), tuple(defined))


def _defined_names(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
        return [node.name]
    if isinstance(node, ast.Assign):
        return [target.id for target in node.targets if isinstance(target, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    return []


def _check_wire_names(node: ast.ClassDef, properties: set[str], where: str) -> None:
    """Every field must convert back to a property name, or carry its wire name: nothing may go astray."""
    for statement in node.body:
        if not isinstance(statement, ast.AnnAssign) or not isinstance(statement.target, ast.Name):
            continue
        attr = statement.target.id
        if _has_wire_metadata(statement.value) or snake_to_camel(attr) in properties:
            continue
        raise CodegenError(
            f"{where}: field {node.name}.{attr} has no wire name svcgen can derive "
            f"({snake_to_camel(attr)!r} is not a property of the schema)"
        )


def _has_wire_metadata(value: ast.expr | None) -> bool:
    if not isinstance(value, ast.Call):
        return False
    return any(keyword.arg == "metadata" for keyword in value.keywords)
