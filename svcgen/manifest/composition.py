"""Types for an estate: namespaces, composition, generic records and per-field versions, resolved into the model.

A manifest writes types in its own terms: `patients.Patient` (an imported owner's type), `Page[Patient]` (a generic
record applied), records that `extends` others (with `omit` and `partial`), fields `added`/`removed` at a version.
Everything after the manifest layer (codegen, the codec, every derived document, the diff) sees concrete records
only, so this is the one place that knows those words. Concrete names are Python class names and component names
alike, built with `_`, which a manifest's own PascalCase names never contain (so they cannot collide with them):

- `patients.Patient` → `patients_Patient` (the namespace, then the owner's concrete name);
- `Page[Patient]` → `Page_Patient`; `Pair[string, list[Tag]]` → `Pair_string_list_Tag`;
- a record whose fields differ between versions, at version v1 → `Patient_v1`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..runtime._naming import slug
from .model import EnumDef, FieldDef, Manifest, RecordDef
from .typeexpr import TypeExpr, rename_records

SEPARATOR = "_"
"""Joins the parts of a concrete name; a manifest's own type names are PascalCase without it."""


class CompositionError(ValueError):
    """A type that cannot be resolved; `where` is the key under the record (`extends`, `omit`, `fields`, ...)."""


@dataclass(frozen=True)
class Template:
    """A manifest record before resolution: its own fields in manifest terms, and how it is composed."""

    name: str
    fields: tuple[FieldDef, ...] = ()
    description: str | None = None
    deprecated: bool = False
    closed: bool | None = None
    """None: the manifest's default."""
    json_schema: str | None = None
    params: tuple[str, ...] = ()
    extends: tuple[TypeExpr, ...] = ()
    omit: tuple[str, ...] = ()
    partial: bool = False


@dataclass
class Problem:
    where: tuple[str | int, ...]
    """Path under the record: ("extends", 0), ("omit", 1), ("fields", "name")."""
    message: str


def qualified(expr: TypeExpr, namespace: str) -> TypeExpr:
    """An owner's type expression as the importing manifest writes it (`Name` → `patients.Name`)."""
    return rename_records(expr, lambda ref: replace(ref, name=f"{namespace}.{ref.name}"))


def substituted(expr: TypeExpr, arguments: Mapping[str, TypeExpr]) -> TypeExpr:
    """`expr` with a generic record's parameters replaced by its arguments."""

    def rename(ref: TypeExpr) -> TypeExpr:
        if ref.name in arguments and not ref.args:
            return arguments[ref.name]
        return replace(ref, args=tuple(substituted(arg, arguments) for arg in ref.args))

    return rename_records(expr, rename)


def made_optional(f: FieldDef) -> FieldDef:
    """`partial: true`: the field as `T?` defaulting to null, so an absent field reads as None."""
    expr = f.type
    if expr.kind == "union":  # `A | B` → `A | B?`, the form a manifest writes (and parses back)
        if not any(member.is_nullable for member in expr.args):
            expr = replace(expr, args=(*expr.args[:-1], TypeExpr("nullable", args=(expr.args[-1],))))
    elif not expr.is_nullable:
        expr = TypeExpr("nullable", args=(expr,))
    return replace(f, type=expr, default=None)


FieldsOf = Callable[[TypeExpr], tuple[FieldDef, ...] | None]
"""A base's fields in the importing manifest's terms; None when it cannot be read (reported where it is)."""


def composed_fields(template: Template, fields_of: FieldsOf, problems: list[Problem]) -> tuple[FieldDef, ...] | None:
    """The record's fields: every base's in order, less `omit`, then its own; `partial` makes them optional.
    Appends to `problems`; None when a base cannot be read."""
    merged: dict[str, tuple[FieldDef, str]] = {}

    def add(f: FieldDef, origin: str, where: tuple[str | int, ...]) -> None:
        earlier = merged.get(f.wire)
        if earlier is not None and earlier[0].type != f.type:
            problems.append(Problem(where, (
                f"field {f.wire!r} is defined twice with different types: {earlier[0].type} in {earlier[1]} and "
                f"{f.type} in {origin}; give both the same type, or omit one with 'omit: [{f.wire}]'"
            )))
        merged[f.wire] = (f, origin) if earlier is None or origin == template.name else (f, earlier[1])

    known = True
    for index, base in enumerate(template.extends):
        base_fields = fields_of(base)
        if base_fields is None:
            known = False
            continue
        for f in base_fields:
            add(f, str(base), ("extends", index))
    for index, wire in enumerate(template.omit):
        if wire in merged:
            del merged[wire]
        elif not template.extends:
            problems.append(Problem(("omit", index), (
                f"omit needs 'extends': {template.name} has no base to leave {wire!r} out of; remove 'omit'"
            )))
        elif known:
            names = ", ".join(merged) or "none"
            problems.append(Problem(("omit", index), (
                f"omit names {wire!r}, which no base of {template.name} has (its bases' fields: {names}); "
                "remove it or correct the name"
            )))
    for f in template.fields:
        add(f, template.name, ("fields", f.wire))
    if not known:
        return None
    fields = tuple(f for f, _ in merged.values())
    return tuple(made_optional(f) for f in fields) if template.partial else fields


def extends_cycle(name: str, bases: Mapping[str, Iterable[str]]) -> list[str] | None:
    """`[A, B, A]` when local record `name` extends itself through others; None otherwise."""

    def walk(current: str, trail: list[str]) -> list[str] | None:
        for base in bases.get(current, ()):
            if base == name:
                return [*trail, base]
            if base not in trail:
                found = walk(base, [*trail, base])
                if found is not None:
                    return found
        return None

    return walk(name, [name])


class _Absent:
    def __repr__(self) -> str:
        return "absent"


ABSENT: Any = _Absent()
"""A key one side does not have, as `first_difference` reports it."""


def first_difference(one: Any, other: Any, path: str = "") -> tuple[str, Any, Any] | None:
    """The first place two JSON-like values (or model definitions) differ: (path, one's value, other's), a missing
    key as ABSENT."""
    if hasattr(one, "__dataclass_fields__") and type(one) is type(other):
        for name in one.__dataclass_fields__:
            found = first_difference(getattr(one, name), getattr(other, name), f"{path}.{name}" if path else name)
            if found is not None:
                return found
        return None
    if isinstance(one, tuple | list) and isinstance(other, tuple | list):
        for index, (a, b) in enumerate(zip(one, other, strict=False)):
            label = getattr(a, "wire", None) or getattr(a, "name", None) or str(index)
            found = first_difference(a, b, f"{path}[{label}]")
            if found is not None:
                return found
        if len(one) != len(other):
            return (f"{path} (length)", len(one), len(other))
        return None
    if isinstance(one, dict) and isinstance(other, dict):
        for key in dict.fromkeys([*one, *other]):
            where = f"{path}.{key}" if path else str(key)
            found = first_difference(one.get(key, ABSENT), other.get(key, ABSENT), where)
            if found is not None:
                return found
        return None
    return None if one == other else (path, one, other)


@dataclass
class TypeSpace:
    """Resolves the manifest's type expressions into concrete records and enums, registering each once, in the
    order first reached (the manifest's own records first, in manifest order)."""

    templates: dict[str, Template]
    enums: dict[str, EnumDef]
    namespaces: dict[str, Manifest]
    versions: tuple[str, ...] = ()
    closed: bool = False
    files: dict[str, str] = field(default_factory=dict)
    """Namespace → the owner's manifest file (resolved): an owner's own imports of the same file are the same types."""
    records: dict[str, RecordDef | None] = field(default_factory=dict)
    """Concrete name → record (None while its fields are being resolved)."""
    reached_enums: dict[str, EnumDef] = field(default_factory=dict)
    _composed: dict[str, tuple[FieldDef, ...]] = field(default_factory=dict)
    _versioned: dict[str, bool] = field(default_factory=dict)
    _composing: set[str] = field(default_factory=set)
    _sources: dict[str, object] = field(default_factory=dict)
    """Concrete name → what it was made from, so two different types never take one name."""
    _instances: dict[object, str] = field(default_factory=dict)
    """A generic or versioned instance (template, arguments, version) → its concrete name."""

    def declared(self) -> None:
        """Register every plain record of the manifest (generic ones only when applied), in manifest order."""
        for name, template in self.templates.items():
            if not template.params:
                self.resolve(TypeExpr("record", name), None)

    def resolve(self, expr: TypeExpr, version: str | None) -> TypeExpr:
        """The concrete expression of `expr` (manifest terms) at `version` (None: the latest)."""
        return rename_records(expr, lambda ref: self._reference(ref, version))

    def model(self) -> tuple[tuple[RecordDef, ...], tuple[EnumDef, ...]]:
        """The records (the manifest's own in manifest order, then the others as first reached) and enums."""
        own = [self.records[name] for name in self.templates if name in self.records]
        others = [record for name, record in self.records.items() if name not in self.templates]
        enums = [*self.enums.values(), *(e for name, e in self.reached_enums.items() if name not in self.enums)]
        return tuple(record for record in (*own, *others) if record is not None), tuple(enums)

    # -- references ------------------------------------------------------------------------------

    def _reference(self, ref: TypeExpr, version: str | None) -> TypeExpr:
        if not ref.args and (ref.name in self.records or ref.name in self.reached_enums or ref.name in self.enums):
            return ref  # concrete already (or a generic record's argument, resolved before it was substituted)
        if "." in ref.name:
            return self._imported(ref)
        template = self.templates.get(ref.name)
        if template is None:
            raise CompositionError(f"unknown type {ref.name!r}")
        if len(ref.args) != len(template.params):
            raise CompositionError(f"{ref.name} takes {len(template.params)} type arguments, got {len(ref.args)}")
        args = tuple(self.resolve(arg, version) for arg in ref.args)
        at = self._at(version) if self._is_versioned(ref.name) else None
        name = ref.name
        if args or at is not None:  # a plain record keeps its name: it has no '_', so it claims nothing
            name = SEPARATOR.join([ref.name, *(_mangled(arg) for arg in args)])
            if at is not None:
                name = f"{name}{SEPARATOR}{slug(at)}"
            name = self._instance_name(name, (ref.name, args, at))
        if name not in self.records:
            self.records[name] = None  # placed now: recursion and later references find it
            arguments = dict(zip(template.params, args, strict=True))
            fields = []
            for f in self._fields(template):
                if at is not None and not self._present(f, at):
                    continue
                concrete = self.resolve(substituted(f.type, arguments) if arguments else f.type, version)
                if concrete is f.type and f.added is None and f.removed is None:
                    fields.append(f)
                else:
                    fields.append(replace(f, type=concrete, added=None, removed=None))
            closed = self.closed if template.closed is None else template.closed
            self.records[name] = RecordDef(
                name, tuple(fields), template.description, template.json_schema, template.deprecated, closed
            )
        return TypeExpr("record", name)

    def _imported(self, ref: TypeExpr) -> TypeExpr:
        namespace, local = ref.name.split(".", 1)
        owner = self.namespaces.get(namespace)
        if owner is None:
            raise CompositionError(f"unknown namespace {namespace!r}")
        if ref.args:
            raise CompositionError(f"{ref.name} is not a generic record")
        ours = {file: alias for alias, file in self.files.items()}
        for inner, file in owner.namespaces:  # a type the owner imports from an owner this manifest imports too
            if local.startswith(inner + SEPARATOR) and file in ours:
                return self._imported(TypeExpr("record", f"{ours[file]}.{local[len(inner) + 1:]}"))
        name = f"{namespace}{SEPARATOR}{local}"
        for enum in owner.enums:
            if enum.name == local:
                self._claim(name, (owner.path, local))
                self.reached_enums.setdefault(name, replace(enum, name=name))
                return TypeExpr("record", name)
        record = next((record for record in owner.types if record.name == local), None)
        if record is None:
            raise CompositionError(f"{owner.service} has no type {local!r}")
        self._claim(name, (owner.path, local))
        if name not in self.records:
            self.records[name] = None
            fields = tuple(
                replace(f, type=rename_records(qualified(f.type, namespace), self._imported)) for f in record.fields
            )
            self.records[name] = replace(record, name=name, fields=fields)
        return TypeExpr("record", name)

    def _instance_name(self, name: str, source: object) -> str:
        """`name` for the generic or versioned instance `source`, or `name_2`, `name_3`, ... when another instance
        has it: `Box[Box[string]?]` and `Box[Box[string?]]` both read Box_Box_string_null."""
        unique = self._instances.get(source)
        if unique is None:
            unique, count = name, 1
            while unique in self._sources:
                count += 1
                unique = f"{name}{SEPARATOR}{count}"
            self._sources[unique] = source
            self._instances[source] = unique
        return unique

    def _claim(self, name: str, source: object) -> None:
        earlier = self._sources.setdefault(name, source)
        if earlier != source:
            raise CompositionError(
                f"two different types would both be named {name} in the generated code; rename one of them"
            )

    # -- composition and versions ----------------------------------------------------------------

    def _fields(self, template: Template) -> tuple[FieldDef, ...]:
        composed = self._composed.get(template.name)
        if composed is None:
            if template.name in self._composing:
                raise CompositionError(f"{template.name} extends itself")
            self._composing.add(template.name)
            problems: list[Problem] = []
            try:
                found = composed_fields(template, self.base_fields, problems)
            finally:
                self._composing.discard(template.name)
            if problems or found is None:
                raise CompositionError(problems[0].message if problems else f"{template.name}: a base is unreadable")
            composed = self._composed[template.name] = found
        return composed

    def base_fields(self, base: TypeExpr) -> tuple[FieldDef, ...] | None:
        """A base record's fields in this manifest's terms (an owner's qualified with its namespace)."""
        if "." in base.name:
            namespace, local = base.name.split(".", 1)
            owner = self.namespaces.get(namespace)
            record = None if owner is None else next((r for r in owner.types if r.name == local), None)
            if record is None:
                return None
            return tuple(replace(f, type=qualified(f.type, namespace)) for f in record.fields)
        template = self.templates.get(base.name)
        if template is None or len(base.args) != len(template.params):
            return None
        fields = self._fields(template)
        if not template.params:
            return fields
        arguments = dict(zip(template.params, base.args, strict=True))
        return tuple(replace(f, type=substituted(f.type, arguments)) for f in fields)

    def _is_versioned(self, name: str) -> bool:
        """Whether the record's fields differ between versions (its own, or a record it reaches)."""
        if not self.versions:
            return False
        known = self._versioned.get(name)
        if known is not None:
            return known
        self._versioned[name] = False  # a cycle adds nothing
        template = self.templates[name]
        fields = self._fields(template)
        versioned = any(f.added is not None or f.removed is not None for f in fields) or any(
            ref in self.templates and self._is_versioned(ref)
            for f in fields
            for ref in f.type.records()
        )
        self._versioned[name] = versioned
        return versioned

    def _at(self, version: str | None) -> str:
        return version if version in self.versions else self.versions[-1]

    def _present(self, f: FieldDef, version: str) -> bool:
        index = self.versions.index(version)
        if f.added is not None and self.versions.index(f.added) > index:
            return False
        return f.removed is None or self.versions.index(f.removed) > index


def _mangled(expr: TypeExpr) -> str:
    """A concrete argument as part of a generic instance's name."""
    match expr.kind:
        case "scalar" | "record":
            return expr.name
        case "nullable":
            return f"{_mangled(expr.args[0])}{SEPARATOR}null"
        case "union":
            return f"{SEPARATOR}or{SEPARATOR}".join(_mangled(arg) for arg in expr.args)
    return f"{expr.kind}{SEPARATOR}{_mangled(expr.args[0])}"
