"""models.py as data: one StrEnum per manifest enum, one dataclass per record, in manifest order, with imports.

Attributes are snake_case (the runtime derives the camelCase wire name back); `@dataclass(kw_only=True)`
keeps manifest field order whatever the defaults. A field with contract details is `Annotated[T, Meta(...)]`;
a closed or deprecated record carries `__svcgen_meta__`. Records from a JSON Schema were translated into the
same model when the manifest was read, so they render like any other.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from ..manifest.contract import member_name
from ..manifest.model import EnumDef, FieldDef, Manifest, RecordDef
from ..runtime._meta import META_ARGUMENTS
from ..runtime._naming import attribute, camel_to_snake, snake_to_camel
from .defaults import RecordIndex, field_assignment
from .errors import CodegenError
from .imports import WRAP_AT, Imports
from .literals import docstring, py_str, py_value
from .typehints import BUILTIN_TYPE_NAMES, annotation

# Names a class body uses besides record names; a field attribute named like one shadows it there.
_BODY_NAMES = BUILTIN_TYPE_NAMES | {"datetime", "field", "Annotated", "Meta", "ClassVar"}


@dataclass(frozen=True)
class FieldView:
    attr: str
    annotation: str
    assignment: str
    """`""`, `" = value"` or `" = field(...)"` (one argument per line when long)."""
    docstring: str | None


@dataclass(frozen=True)
class RecordView:
    name: str
    docstring: str | None
    fields: tuple[FieldView, ...]
    meta: str | None = None
    """`Meta(...)` of the record itself (closed, deprecated), or None."""
    source: str | None = None
    """The JSON Schema file it was translated from."""


@dataclass(frozen=True)
class EnumView:
    name: str
    docstring: str | None
    members: tuple[tuple[str, str], ...]
    """(member name, wire value literal)."""


@dataclass(frozen=True)
class ModelsView:
    imports: list[str]
    enums: tuple[EnumView, ...]
    records: tuple[RecordView, ...]


def models_view(manifest: Manifest) -> ModelsView:
    imports = Imports()
    imports.name("__future__", "annotations")
    index = RecordIndex.of(manifest.types, manifest.enums)
    enums = tuple(_enum_view(e, imports) for e in manifest.enums)
    views = [_record_view(record, index, imports) for record in manifest.types]
    _check_names([*(e.name for e in enums), *(view.name for view in views)], imports)
    return ModelsView(imports.lines(), enums, tuple(views))


def _enum_view(e: EnumDef, imports: Imports) -> EnumView:
    imports.name("enum", "StrEnum")
    return EnumView(
        e.name,
        docstring(e.description, 4) if e.description else None,
        tuple((member_name(value), py_str(value)) for value in e.values),
    )


def _meta_call(arguments: dict[str, Any], imports: Imports) -> str:
    meta = imports.name("svcgen.runtime", "Meta")
    return f"{meta}({', '.join(f'{name}={py_value(value)}' for name, value in arguments.items())})"


def _field_meta(f: FieldDef) -> dict[str, Any]:
    contract = dict(f.contract)
    if f.description is not None:
        contract["description"] = f.description
    # Keyword order is Meta's own, so the same contract always renders alike.
    # `is`, not `in`: a bound of 0 is a value, only a missing key or `deprecated: false` declares nothing.
    return {
        argument: contract[key]
        for key, argument in META_ARGUMENTS.items()
        if contract.get(key) is not None and contract.get(key) is not False
    }


def _record_view(record: RecordDef, index: RecordIndex, imports: Imports) -> RecordView:
    imports.name("dataclasses", "dataclass")
    shadowed = {attribute(f.wire) for f in record.fields} & _BODY_NAMES
    fields = []
    for f in record.fields:
        attr = attribute(f.wire)
        # A keyword-escaped attribute (`from_`) converts back on its own; the metadata says so explicitly.
        wire = f.wire if attr != camel_to_snake(f.wire) or snake_to_camel(attr) != f.wire else None
        text = annotation(f.type, imports, shadowed=shadowed)
        meta = _field_meta(f)
        if meta:
            text = f"{imports.name('typing', 'Annotated')}[{text}, {_meta_call(meta, imports)}]"
        assignment = field_assignment(f, index, imports, wire=wire, shadowed=shadowed)
        room = WRAP_AT - len(f"    {attr}: {text}")
        fields.append(FieldView(attr, text, assignment.text(room), None))
    record_meta = {"closed": record.closed, "deprecated": record.deprecated}
    meta_text = None
    if any(record_meta.values()):
        imports.name("typing", "ClassVar")
        meta_text = _meta_call({key: True for key, value in record_meta.items() if value}, imports)
    return RecordView(
        record.name,
        docstring(record.description, 4) if record.description else None,
        tuple(fields),
        meta_text,
        record.json_schema,
    )


def _check_names(defined: list[str], imports: Imports) -> None:
    problems = [
        f"models.py would define {name} {count} times (a type of the manifest and one translated from a jsonSchema "
        "file share the name); rename one"
        for name, count in sorted(Counter(defined).items())
        if count > 1
    ]
    problems += [
        f"record {name} has the name of an import models.py needs; rename the record"
        for name in sorted(set(defined) & imports.names())
    ]
    if problems:
        raise CodegenError(problems)
