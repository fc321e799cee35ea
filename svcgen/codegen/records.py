"""models.py as data: one dataclass per manifest record, in manifest order, with its imports.

Attributes are snake_case (the runtime derives the camelCase wire name back); `@dataclass(kw_only=True)`
keeps manifest field order whatever the defaults. A record from a JSON Schema is embedded as
datamodel-code-generator wrote it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from ..manifest.model import Manifest, RecordDef
from ..runtime._naming import camel_to_snake
from .annotations import BUILTIN_TYPE_NAMES, annotation
from .defaults import RecordIndex, field_assignment
from .errors import CodegenError
from .external import ExternalModel
from .imports import WRAP_AT, Imports
from .literals import docstring
from .names import attribute

# Names a class body uses besides record names; a field attribute named like one shadows it there.
_BODY_NAMES = BUILTIN_TYPE_NAMES | {"datetime", "field", "codec_for"}


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
    external: ExternalModel | None = None


@dataclass(frozen=True)
class ModelsView:
    imports: list[str]
    records: tuple[RecordView, ...]


def models_view(manifest: Manifest, externals: Mapping[str, ExternalModel]) -> ModelsView:
    imports = Imports()
    imports.name("__future__", "annotations")
    index = RecordIndex.of(manifest.types)
    views: list[RecordView] = []
    for record in manifest.types:
        external = externals.get(record.name)
        if external is not None:
            imports.update(external.imports)
            views.append(RecordView(record.name, None, (), external))
        else:
            views.append(_record_view(record, index, imports))
    _check_names(views, imports)
    return ModelsView(imports.lines(), tuple(views))


def _record_view(record: RecordDef, index: RecordIndex, imports: Imports) -> RecordView:
    imports.name("dataclasses", "dataclass")
    shadowed = {attribute(f.wire) for f in record.fields} & _BODY_NAMES
    fields = []
    for f in record.fields:
        attr = attribute(f.wire)
        # A keyword-escaped attribute (`from_`) converts back on its own; the metadata says so explicitly.
        wire = f.wire if attr != camel_to_snake(f.wire) else None
        text = annotation(f.type, imports, shadowed=shadowed)
        assignment = field_assignment(f, index, imports, wire=wire, shadowed=shadowed)
        room = WRAP_AT - len(f"    {attr}: {text}")
        fields.append(
            FieldView(attr, text, assignment.text(room), docstring(f.description, 4) if f.description else None)
        )
    return RecordView(record.name, docstring(record.description, 4) if record.description else None, tuple(fields))


def _check_names(views: list[RecordView], imports: Imports) -> None:
    defined = [name for view in views for name in (view.external.defined if view.external else (view.name,))]
    problems = [
        f"models.py would define {name} {count} times (a record and a class of a jsonSchema type share the name); "
        "rename the record or the schema's title"
        for name, count in sorted(Counter(defined).items())
        if count > 1
    ]
    problems += [
        f"record {name} has the name of an import models.py needs; rename the record"
        for name in sorted(set(defined) & imports.names())
    ]
    if problems:
        raise CodegenError(problems)
