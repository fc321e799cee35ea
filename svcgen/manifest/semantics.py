"""Semantic stage: rules a JSON Schema cannot express, checked beside the schema stage's findings.

Every check runs and every problem is collected, so one run shows the whole picture.
"""

from __future__ import annotations

import datetime as dt
import json
import keyword
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from ..runtime._codec import DecodeError
from ..runtime._durations import parse_duration
from ..runtime._naming import is_canonical_camel, slug
from ..runtime._status import FAILURE_CODES, SUCCESS_CODES
from ..runtime._topics import (
    DEFAULT_PREFIX,
    RESERVED_TOPIC_PREFIX,
    VERSION_PATH_PARAM,
    is_reserved_topic,
    normalize_prefix,
)
from .build import record_def, template_def
from .composition import (
    ABSENT,
    CompositionError,
    Problem,
    TypeSpace,
    composed_fields,
    extends_cycle,
    first_difference,
    qualified,
    substituted,
)
from .contract import CONTRACT_KEYWORDS, check_enum, check_field_contract
from .diagnostics import Diagnostic
from .events import check_events
from .fits import ValueTypes
from .loader import JsonPath, YamlDocument
from .model import EnumDef, FieldDef, Manifest, Position
from .owner import OwnedTopic, OwnerError, load_owner, owned_topic
from .routes import ParsedRoute, RouteSyntaxError, ShadowIndex, parse_route, well_known_collision
from .schemaimport import SchemaImportError
from .security import check_security
from .sources import Sources
from .spelling import canonical_camel, did_you_mean, is_pascal_identifier, pascal_case, suggestion
from .typeexpr import CONTAINERS, SCALARS, TypeExpr, TypeExprError, parse_type, rename_records
from .validate import SchemaFindings

_SCALAR_LIST = ", ".join(SCALARS)
MAX_TIMEOUT_SECONDS = 24 * 3600.0
_NAMESPACE = re.compile(r"^[a-z][a-z0-9_]*$")


def _is_namespace(name: str) -> bool:
    return bool(_NAMESPACE.match(name)) and name not in SCALARS and name not in CONTAINERS


def _namespace_proposal(alias: str, relative: str) -> str:
    """A valid namespace to suggest for a refused one: the name made valid, else the owner's file name (`list:
    owner.yaml` → `owner`), never the refused name itself."""
    for candidate in (slug(alias), slug(Path(relative).stem), f"{slug(alias)}_types"):
        if _is_namespace(candidate):
            return candidate
    return "patients"


def check_semantics(
    document: YamlDocument, base_dir: Path, findings: SchemaFindings, sources: Sources
) -> list[Diagnostic]:
    """Every semantic problem of the manifest (unsorted), skipping only what the schema stage's `findings`
    leave unreadable; `base_dir` resolves jsonSchema paths and `from:` paths, read through `sources`."""
    checker = _Checker(document, base_dir, findings, sources)
    checker.run()
    return checker.diagnostics


T = TypeVar("T")


SHADOWED_MODULES: frozenset[str] = frozenset(sys.stdlib_module_names) | {
    "svcgen", "uvicorn", "uvloop", "httptools", "httpx", "httpcore", "anyio", "sniffio", "h11", "orjson", "yaml",
    "click", "jinja2", "jsonschema", "watchfiles",
}
"""Top-level modules a served package meets in the same process: a package of one of these names is imported
as the other (`json` is already loaded when `svcgen serve` imports `json.app`) or replaces it for everyone."""

@dataclass
class _Record:
    fields: dict[str, tuple[TypeExpr | None, bool]] = field(default_factory=dict)
    """Wire name → (parsed type or None when it did not parse, required)."""
    defaults: dict[str, Any] = field(default_factory=dict)
    """Wire name → the field's explicit default."""
    contracts: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Wire name → the field's contract keywords, when they are usable for checking values."""
    external: bool = False
    names_known: bool = True
    """False when its fields could not be read at all (a misspelt 'fields', a rejected value)."""
    shape_known: bool = True
    """False when some field's type or default could not be read."""

    def unknown(self) -> None:
        self.names_known = self.shape_known = False


@dataclass(frozen=True)
class _Expr:
    expr: TypeExpr
    text: str
    path: JsonPath
    """Where it is written; a position is looked up only for a diagnostic."""
    params: tuple[str, ...] = ()
    """The type parameters of the generic record it is written in."""


class _Checker:
    """Runs on whatever shape the manifest has: a check whose input the schema stage rejected or a misspelt
    key hid is skipped, and only that check."""

    def __init__(self, document: YamlDocument, base_dir: Path, findings: SchemaFindings, sources: Sources) -> None:
        self.doc = document
        self.sources = sources
        self.data: dict[str, Any] = document.data if isinstance(document.data, dict) else {}
        self.base_dir = base_dir
        self.findings = findings
        self.diagnostics: list[Diagnostic] = []
        self.records: dict[str, _Record] = {}
        self.exprs: list[_Expr] = []
        self.parsed: dict[JsonPath, TypeExpr | None] = {}
        self.sections: dict[str, list[Any]] = {}
        self.enums: dict[str, tuple[str, ...]] = {}
        self.types_known = True
        """Every record name is known, so a name missing from `records` is really undefined."""
        self.uses_known = True
        """Every type expression of topics, produces entries and fields was read, so every use is known."""
        self.owned: list[tuple[int, OwnedTopic]] = []
        """The `from:` produces entries that resolved (by index), with what they take from their owners."""
        self.namespaces: dict[str, Manifest] = {}
        """Namespace → the owner's model: `imports:` aliases, and the owners `from:` entries name."""
        self.namespace_files: dict[str, str] = {}
        """Namespace → the owner's manifest file."""
        self.aliases: dict[str, str] = {}
        """An imported owner's manifest file → its alias."""
        self.unreadable_namespaces: set[str] = set()
        self.owner_unread = False
        """A `from:` entry's owner could not be taken: a namespace this manifest does not know may be that owner's."""
        self.generics: dict[str, tuple[str, ...]] = {}
        """Generic record → its type parameters."""
        self.owner_generics: dict[str, frozenset[str]] = {}
        """Namespace → the generic records its owner's manifest declares (its model holds only their concrete uses)."""
        self.bases: dict[str, list[TypeExpr]] = {}
        """Record → the records it extends (as written)."""
        self.params: tuple[str, ...] = ()
        """The type parameters of the record whose fields are being read."""

    def error(self, position: Position, message: str) -> None:
        self.diagnostics.append(Diagnostic(position, message))

    def warn(self, position: Position, message: str) -> None:
        self.diagnostics.append(Diagnostic(position, message, "warning"))

    def read(self, mapping: Any, path: JsonPath, key: str, kind: type[T], default: T | None = None) -> T | None:
        """`mapping[key]` when it is a `kind` the schema accepted; `default` when the key is absent and no
        unknown key meant it; None when the manifest says something there this run cannot read."""
        if not isinstance(mapping, dict):
            return None
        if key not in mapping:
            return None if (path, key) in self.findings.misspelt or path in self.doc.partial else default
        value = mapping[key]
        if not isinstance(value, kind) or (*path, key) in self.findings.rejected:
            return None
        return value

    def run(self) -> None:
        self.check_package()
        self.check_health()
        self.check_enums(self.read(self.data, (), "enums", dict, {}) or {})
        self.check_imports()
        types = self.read(self.data, (), "types", dict, {})
        if types is None:
            self.types_known = self.uses_known = False
        self.check_types(types or {})
        for section in ("topics", "produces"):
            entries = self.read(self.data, (), section, list, [])
            if entries is None:
                self.uses_known = False
            self.sections[section] = entries or []
            for index, entry in enumerate(self.sections[section]):
                if section == "produces" and isinstance(entry, dict) and "from" in entry:
                    self.take_provided(index, entry)
                    continue
                for role in ("request", "response"):
                    path = (section, index, role)
                    if section == "produces":
                        self.check_produced_role(index, entry, role)
                    self.parsed[path] = self.parse(self.read(entry, (section, index), role, str), path)
        self.check_composition(types or {})
        check_events(self)
        self.check_local_copies(types or {})
        self.check_type_names_known()
        self.check_defaults()
        self.check_unused()
        self.check_topic_ids("topics")
        self.check_topic_ids("produces")
        self.check_routes()
        self.check_statuses()
        self.check_timeouts()
        self.check_deprecations()
        self.check_versions(types or {})
        check_security(self.doc, self.findings, self.error, self.warn)

    # -- identity -------------------------------------------------------------------------------

    def check_package(self) -> None:
        package = self.read(self.data, (), "package", str)
        if package is not None and keyword.iskeyword(package):
            self.error(
                self.doc.at(("package",)),
                f"package {package!r} is a Python keyword and cannot be imported; choose another name, "
                f"like {package + '_service'!r}",
            )
        elif package is not None and package in SHADOWED_MODULES:
            self.error(
                self.doc.at(("package",)),
                f"package {package!r} is the name of a module the service itself imports (Python's standard "
                f"library, svcgen or its server); the generated package would hide it, or be hidden by it; "
                f"choose another name, like {package + '_service'!r}",
            )

    def check_health(self) -> None:
        seen: dict[str, str] = {}
        for index, name in enumerate(self.read(self.data, (), "health", list, []) or []):
            if not isinstance(name, str) or ("health", index) in self.findings.rejected:
                continue
            position = self.doc.at(("health", index))
            function = slug(name)
            if not function:
                self.error(position, f"health check {name!r} has no ASCII letters or digits to name its function")
            elif not function.isidentifier():
                self.error(
                    position,
                    f"health check {name!r} becomes the function name {function!r}, which is not a Python "
                    "identifier; start the name with a letter",
                )
            elif keyword.iskeyword(function):
                self.error(
                    position,
                    f"health check {name!r} becomes the function name {function!r}, which is a Python keyword; "
                    "choose another name",
                )
            elif function in seen:
                if seen[function] != name:  # an exact repeat is the schema's finding
                    self.error(
                        position,
                        f"health checks {seen[function]!r} and {name!r} both become the function {function}(); "
                        "rename one",
                    )
            else:
                seen[function] = name

    # -- types ----------------------------------------------------------------------------------

    def check_enums(self, enums: dict[str, Any]) -> None:
        for name, spec in enums.items():
            self.check_type_name(name, "enums")
            values = self.read(spec, ("enums", name), "values", list)
            if values is None:
                continue
            self.enums[name] = tuple(str(value) for value in values)
            self.check_enum_values(name, values)

    def check_enum_values(self, name: str, values: list[Any]) -> None:
        def report(index: int, message: str) -> None:
            self.error(self.doc.at(("enums", name, "values", index)), message)

        check_enum(values, report)

    def check_types(self, types: dict[str, Any]) -> None:
        for name in types:
            self.check_type_name(name)
            if name in self.enums:
                self.error(
                    self.doc.key_at(("types", name)),
                    f"type name {name!r} is also an enum (line {self.doc.key_at(('enums', name)).line}); "
                    "rename one",
                )
            record = _Record()
            self.records[name] = record
            path: JsonPath = ("types", name)
            readable = self.read(types, ("types",), name, dict)
            if readable is not None and "jsonSchema" in readable:
                for key in ("closed", "omit", "partial", "params"):
                    if key in readable:  # (`fields` and `extends` beside jsonSchema are the schema stage's)
                        self.error(
                            self.doc.key_at((*path, key)),
                            f"{key!r} does not apply to a type from a jsonSchema file (the file says what the type "
                            f"is: closed by its additionalProperties: false); remove {key!r}",
                        )
                record.external = True
                relative = self.read(readable, path, "jsonSchema", str)
                if relative is None:
                    record.unknown()
                else:
                    self.check_json_schema(name, relative, record)
                continue
            self.params = self.check_params(name, readable)
            bases = self.read(readable, path, "extends", list, [])
            fields = self.read(readable, path, "fields", dict, {} if bases else None)
            if fields is None or bases is None:
                record.unknown()
                self.uses_known = False
                self.params = ()
                continue
            if bases or (readable is not None and ("omit" in readable or "partial" in readable)):
                self.bases.setdefault(name, [])  # composed: checked, and its fields known, once all are read
            for index, base in enumerate(bases):
                expr = self.parse(base if isinstance(base, str) else None, (*path, "extends", index))
                if expr is not None:
                    self.bases[name].append(expr)
            for wire, field_spec in fields.items():
                self.check_field(record, (*path, "fields", wire), wire, field_spec)
            self.params = ()

    def check_field(self, record: _Record, path: JsonPath, wire: str, spec: Any) -> None:
        self.check_field_name(wire, path)
        if isinstance(spec, dict):
            expr = self.parse(self.read(spec, path, "type", str), (*path, "type"))
            if (path, "default") in self.findings.misspelt or (*path, "default") in self.findings.rejected:
                record.shape_known = False  # what the default is, or whether there is one, is not known
            elif "default" in spec:
                record.defaults[wire] = spec["default"]
            if expr is not None and (*path, "type") not in self.findings.rejected:
                usable = check_field_contract(
                    spec,
                    expr,
                    self.enums,
                    lambda key, message: self.error(self.doc.at((*path, key)), message),
                )
                if usable:
                    record.contracts[wire] = {key: spec[key] for key in spec if key in CONTRACT_KEYWORDS}
        else:
            expr = self.parse(spec if isinstance(spec, str) and path not in self.findings.rejected else None, path)
        if expr is None:
            record.shape_known = False
        required = wire not in record.defaults and not (expr is not None and expr.is_nullable)
        record.fields[wire] = (expr, required)
        self.parsed[path] = expr

    def check_type_name(self, name: str, section: str = "types") -> None:
        position = self.doc.key_at((section, name))
        if name in SCALARS or name in CONTAINERS:
            self.error(
                position,
                f"type name {name!r} is a built-in type name; name the record in PascalCase, like {name.title()!r}",
            )
        elif name in SCALARS.values():
            scalar = next(key for key, value in SCALARS.items() if value == name)
            self.error(
                position,
                f"type name {name!r} collides with the Python type of the scalar {scalar!r}; choose another name",
            )
        elif keyword.iskeyword(name):
            self.error(position, f"type name {name!r} is a Python keyword; choose another name")
        elif not is_pascal_identifier(name):
            proposal = pascal_case(name)
            hint = (
                f"did you mean {proposal!r}?"
                if proposal
                else "use letters and digits starting with an upper-case letter, like LineItem"
            )
            self.error(position, f"type name {name!r} must be a PascalCase identifier; {hint}")

    def check_field_name(self, wire: str, path: JsonPath) -> None:
        if is_canonical_camel(wire):
            return
        proposal = canonical_camel(wire)
        hint = (
            f"did you mean {proposal!r}?"
            if proposal
            else "use letters and digits starting with a lower-case letter, like orderId"
        )
        self.error(self.doc.key_at(path), f"field name {wire!r} is not canonical camelCase; {hint}")

    def check_json_schema(self, name: str, relative: str, record: _Record) -> None:
        position = self.doc.at(("types", name, "jsonSchema"))
        try:
            schema = self.sources.json_schema(self.base_dir, relative)
        except ValueError as error:
            self.error(position, str(error))
            return
        if not isinstance(schema, dict):
            kind = type(schema).__name__
            self.error(position, f"jsonSchema file {relative!r} must hold a JSON Schema object, not a JSON {kind}")
            return
        # Imported here: only a manifest with jsonSchema types pays for importing jsonschema.
        from jsonschema import Draft202012Validator  # type: ignore[import-untyped,unused-ignore]
        from jsonschema.exceptions import SchemaError  # type: ignore[import-untyped,unused-ignore]

        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as error:
            where = "/".join(str(part) for part in error.absolute_path) or "the top level"
            self.error(position, f"jsonSchema file {relative!r} is not a valid JSON Schema at {where}: {error.message}")
            return
        try:
            imported = self.sources.imported_types(name, relative, self.base_dir)
        except SchemaImportError as error:
            for problem in error.problems:
                self.error(position, problem)
            record.unknown()
            return
        # Only names matter here (route placeholders); the rest was checked as it was translated.
        record.fields = {f.wire: (None, not f.has_default) for f in imported.records[0].fields}

    def parse(self, text: str | None, path: JsonPath) -> TypeExpr | None:
        """The type expression `text` found at `path`; None (and every use no longer known) when it is
        unreadable or invalid."""
        if text is None:
            self.uses_known = False
            return None
        try:
            expr = parse_type(text)
        except TypeExprError as error:
            self.uses_known = False
            message = f"invalid type expression {text!r}: {error} (at character {error.offset + 1})"
            self.error(self.doc.at(path), message)
            return None
        self.exprs.append(_Expr(expr, text, path, self.params))
        return expr

    def check_type_names_known(self) -> None:
        if not self.types_known:
            return  # the 'types' section is unreadable: every name would look undefined
        candidates = [*self.records, *self.enums, *SCALARS]
        for item in self.exprs:
            for ref in _record_refs(item.expr):
                name = ref.name
                if name in item.params:
                    if ref.args:
                        self.error(self.doc.at(item.path), f"type parameter {name!r} takes no arguments")
                    continue
                if "." in name:
                    self.check_imported_name(ref, item)
                    continue
                if name in self.records or name in self.enums:
                    self.check_arguments(ref, item)
                    continue
                where = f" in {item.text!r}" if item.text.strip() != name else ""
                match = did_you_mean(name, candidates)
                hint = (
                    f"did you mean {match!r}?"
                    if match is not None
                    else f"define it under 'types' or use a scalar ({_SCALAR_LIST})"
                )
                self.error(self.doc.at(item.path), f"unknown type {name!r}{where}; {hint}")

    def check_imported_name(self, ref: TypeExpr, item: _Expr) -> None:
        namespace, local = ref.name.split(".", 1)
        if namespace in self.unreadable_namespaces:
            return
        owner = self.namespaces.get(namespace)
        if owner is None and self.owner_unread:
            return  # perhaps the namespace of an owner whose `from:` entry is already reported
        if owner is None:
            hint = suggestion(namespace, list(self.namespaces)) or (
                f"; import its manifest under 'imports: {{{namespace}: <path>}}'"
            )
            self.error(self.doc.at(item.path), f"unknown namespace {namespace!r} in {item.text!r}{hint}")
            return
        names = [record.name for record in owner.types] + [enum.name for enum in owner.enums]
        # An owner's generic record reaches us only as its concrete uses, `Page_Patient_v2` (not `Patient_v2`: a
        # record per version), so `patients.Page[Visit]` names none of them.
        instances = [name for name in names if name.startswith(f"{local}_")
                     and name[len(local) + 1 :] not in owner.versions]  # fmt: skip
        generic = local in self.owner_generics.get(namespace, ()) or bool(ref.args and instances)
        if local not in names and generic:
            uses = f" ({', '.join(f'{namespace}.{name}' for name in instances)})" if instances else ", and it uses none"
            self.error(self.doc.at(item.path), f"{namespace}.{local} is a generic record of {owner.service}, imported "
                       f"only as the concrete records its manifest uses{uses}; applying it to other arguments is "
                       f"not supported: declare {local} under 'types' here")  # fmt: skip
        # A record whose fields differ between the owner's versions reaches us as one record per version.
        elif local not in names and (per_version := [n for v in owner.versions if (n := f"{local}_{v}") in names]):
            uses = ", ".join(f"{namespace}.{name}" for name in per_version)
            self.error(self.doc.at(item.path), f"{namespace}.{local} changes with the versions of {owner.service}, "
                       f"so it is imported as one record per version its manifest uses: {uses}; name one")  # fmt: skip
        elif local not in names:
            hint = suggestion(local, names) or (f"; it has {', '.join(names)}" if names else "; it has no types")
            self.error(self.doc.at(item.path), f"{owner.service} ({namespace}) has no type {local!r}{hint}")
        elif ref.args:
            self.error(self.doc.at(item.path), f"{ref.name} is not a generic record; write it without arguments")

    def check_arguments(self, ref: TypeExpr, item: _Expr) -> None:
        """A generic record is used with one argument per parameter, any other record without."""
        params = self.generics.get(ref.name, ())
        if len(ref.args) == len(params):
            return
        if not params:
            message = f"{ref.name} is not a generic record; write it without arguments"
        else:
            example = f"{ref.name}[{', '.join(params)}]"
            count = f"{len(params)} type argument{'s' if len(params) > 1 else ''}"
            message = f"{ref.name} takes {count}, like {example}, not {len(ref.args)}"
        self.error(self.doc.at(item.path), message)

    def check_versions(self, types: dict[str, Any]) -> None:
        """Fields' `added`/`removed` and topics' `versions` name versions of the manifest's ordered `versions:`."""
        versions = self.read(self.data, (), "versions", list, [])
        if versions is None:
            return
        order = {version: index for index, version in enumerate(versions) if isinstance(version, str)}
        listed = ", ".join(order) if order else None

        def check(value: Any, path: JsonPath) -> int | None:
            if not isinstance(value, str) or path in self.findings.rejected:
                return None
            if value not in order:
                hint = f"one of {listed}" if listed else "listed first under the manifest's 'versions:', like [v1, v2]"
                self.error(self.doc.at(path), f"version {value!r} is not a version of this service; use {hint}")
                return None
            return order[value]

        for name, spec in types.items():
            fields = spec.get("fields") if isinstance(spec, dict) else None
            for wire, field_spec in (fields or {}).items() if isinstance(fields, dict) else ():
                if not isinstance(field_spec, dict):
                    continue
                path: JsonPath = ("types", name, "fields", wire)
                added = check(field_spec["added"], (*path, "added")) if "added" in field_spec else None
                removed = check(field_spec["removed"], (*path, "removed")) if "removed" in field_spec else None
                if added is not None and removed is not None and removed <= added:
                    self.error(
                        self.doc.at((*path, "removed")),
                        f"field {wire!r} is removed at {field_spec['removed']}, not after it is added at "
                        f"{field_spec['added']}; removed must come later in 'versions:'",
                    )
        for index, entry in enumerate(self.sections.get("topics", [])):
            if not isinstance(entry, dict) or "versions" not in entry:
                continue
            if "version" in entry:
                self.error(
                    self.doc.key_at(("topics", index, "versions")),
                    "a topic has 'version' or 'versions', not both; list every version under 'versions'",
                )
            for number, version in enumerate(entry["versions"] if isinstance(entry["versions"], list) else ()):
                check(version, ("topics", index, "versions", number))

    def check_defaults(self) -> None:
        shapes: dict[str, dict[str, tuple[TypeExpr, bool]]] = {
            name: {wire: (expr, required) for wire, (expr, required) in record.fields.items() if expr is not None}
            for name, record in self.records.items()
            if not record.external and record.shape_known
        }
        enums = dict(self.enums)
        # An owner's records and enums as this manifest writes them (`shared.Money`): a default of an imported type is
        # decoded like a local one. The owner's own imports are its concrete records (`shared_Ref`), qualified alike.
        for namespace, owner in self.namespaces.items():
            for owned in owner.types:
                shapes[f"{namespace}.{owned.name}"] = {
                    f.wire: (qualified(f.type, namespace), not f.has_default and not f.type.is_nullable)
                    for f in owned.fields
                }
            enums.update((f"{namespace}.{owned.name}", owned.values) for owned in owner.enums)
        known = set(self.records) | set(enums) | set(shapes)

        def applied(expr: TypeExpr) -> TypeExpr:
            """`Box[integer]` as a record of its own whose fields have the arguments for the parameters, so a value
            is decoded by what `T` stands for (nested applications alike)."""

            def rename(ref: TypeExpr) -> TypeExpr:
                params = self.generics.get(ref.name, ())
                if not ref.args or len(params) != len(ref.args) or ref.name not in shapes:
                    return ref
                name = str(ref)
                if name not in shapes:
                    shapes[name] = {}  # named before its fields: a generic record may contain itself
                    arguments = dict(zip(params, ref.args, strict=True))
                    shapes[name] = {wire: (applied(substituted(field_type, arguments)), required)
                                    for wire, (field_type, required) in shapes[ref.name].items()}  # fmt: skip
                return TypeExpr("record", name)

            return rename_records(expr, rename)

        checks: list[tuple[str, str, str | tuple[str, int], Any, TypeExpr, TypeExpr]] = []
        for name, record in self.records.items():
            checked: list[tuple[str, str | tuple[str, int], Any]]
            checked = [(wire, "default", value) for wire, value in record.defaults.items()]
            checked += [
                (wire, ("examples", index), example)
                for wire, contract in record.contracts.items()
                if isinstance(contract.get("examples"), list)
                for index, example in enumerate(contract["examples"])
            ]
            for wire, key, value in checked:
                expr = record.fields[wire][0]
                if expr is None or not expr.records() <= known:
                    continue  # already reported: the type itself is wrong
                checks.append((name, wire, key, value, expr, applied(expr)))
        types = ValueTypes(shapes, enums)  # after `applied` made every application's record
        for name, wire, key, value, expr, concrete in checks:
            what = "default" if key == "default" else "example"
            keys = key if isinstance(key, tuple) else (key,)
            position = self.doc.at(("types", name, "fields", wire, *keys))
            mismatch = types.problem(concrete, value)
            if mismatch is not None:
                base = expr.args[0] if expr.is_nullable else expr
                values = enums.get(base.name) if base.kind == "record" else None
                hint = f"; use one of {', '.join(values)}" if values else _reason(mismatch)
                self.error(position, f"{what} of field {wire!r} must fit its type {expr}, got {_json(value)}{hint}")
                continue
            contract = self.records[name].contracts.get(wire)
            if contract is None:
                continue  # its keywords are already reported
            problem = types.problem(concrete, value, contract)
            if problem is not None:
                self.error(
                    position, f"{what} {_json(value)} of field {wire!r} breaks the field's own contract: {problem}"
                )

    def check_unused(self) -> None:
        if not self.uses_known:
            return  # an unread reference could be the one use; stay quiet rather than guess
        reachable: set[str] = set()
        pending = [
            name
            for path, expr in self.parsed.items()
            if path[0] in ("topics", "produces", "events", "subscribes") and expr is not None
            for name in expr.records()
        ]
        while pending:
            name = pending.pop()
            if name in reachable or name not in self.records:
                continue
            reachable.add(name)
            pending.extend(ref for expr, _ in self.records[name].fields.values() if expr for ref in expr.records())
            pending.extend(ref for base in self.bases.get(name, ()) for ref in base.records())
        for name in self.records:
            # A record named like a scalar can never be referenced; its name error already says so.
            if name not in reachable and name not in SCALARS and name not in CONTAINERS:
                self.warn(
                    self.doc.key_at(("types", name)),
                    f"type {name!r} is not used by any topic or produces entry; remove it or reference it",
                )

    # -- produces from an owner ---------------------------------------------------------------

    def check_produced_role(self, index: int, entry: Any, role: str) -> None:
        """Without `from:` a produces entry declares its own request and response."""
        path: JsonPath = ("produces", index)
        if isinstance(entry, dict) and role not in entry and (path, role) not in self.findings.misspelt:
            self.error(
                self.doc.key_at(path),
                f"missing required key {role!r} in each produces entry; add it: a type expression like string, "
                "list[LineItem] or LineItem, or take the types from the owner with 'from: <its manifest>'",
            )

    def take_provided(self, index: int, entry: dict[str, Any]) -> None:
        """A `from:` entry: the owner's topic and the types it reaches stand for request and response."""
        path: JsonPath = ("produces", index)
        for role in ("request", "response"):
            if role in entry:
                self.error(
                    self.doc.key_at((*path, role)),
                    f"a produces entry with 'from' takes its {role} type from the owner's manifest; remove "
                    f"{role!r}, or 'from' to declare the types here",
                )
        relative, topic_id = self.read(entry, path, "from", str), self.read(entry, path, "id", str)
        version = self.read(entry, path, "version", str)
        if relative is None or topic_id is None or (version is None and "version" in entry):
            self.uses_known = False  # unreadable: what it takes is not known
            self.owner_unread = True
            return
        try:
            owned = owned_topic(self.sources, self.base_dir, relative, topic_id, version)
        except OwnerError as error:
            self.uses_known = False
            self.owner_unread = True
            self.error(self.doc.at((*path, error.key)), str(error))
            return
        namespace = self.take_namespace(path, owned.service, owned.owner, owned.manifest) or owned.namespace
        self.parsed[(*path, "request")] = qualified(owned.topic.request, namespace)
        self.parsed[(*path, "response")] = qualified(owned.topic.response, namespace)
        self.owned.append((index, owned))

    # -- types for an estate: imports, composition, generics, versions ----------------------------

    def check_imports(self) -> None:
        """`imports:` names each owner's manifest under a namespace; its types are `<namespace>.<Name>`."""
        imports = self.read(self.data, (), "imports", dict, {})
        if imports is None:
            self.types_known = self.uses_known = False
            return
        for alias, relative in imports.items():
            path: JsonPath = ("imports", alias)
            if not isinstance(alias, str) or not isinstance(relative, str) or path in self.findings.rejected:
                self.unreadable_namespaces.add(str(alias))
                continue
            if not _is_namespace(alias):
                proposal = _namespace_proposal(alias, relative)
                built_in = alias in SCALARS or alias in CONTAINERS
                what = "a built-in type name" if built_in else "not a namespace"
                rule = " and not a built-in type name" if built_in else ""
                self.error(
                    self.doc.key_at(path),
                    f"{alias!r} is {what}: a namespace is lower-case letters, digits and '_' starting with a letter"
                    f"{rule}, like {proposal!r}",
                )
                self.unreadable_namespaces.add(alias)
                continue
            try:
                target, loaded = load_owner(self.sources, self.base_dir, relative)
            except OwnerError as error:
                self.unreadable_namespaces.add(alias)
                self.error(self.doc.at(path), str(error))
                continue
            earlier = self.aliases.setdefault(target.as_posix(), alias)
            if earlier != alias:
                # Each namespace generates its own classes: two would be two types for each of the owner's.
                names = [*(r.name for r in loaded.manifest.types), *(e.name for e in loaded.manifest.enums)]
                own = [name for name in names if "_" not in name]
                example = f" ({earlier}.{own[0]} is not {alias}.{own[0]})" if own else ""
                self.error(
                    self.doc.key_at(path),
                    f"{relative!r} is already imported as {earlier!r}: one owner's types under two namespaces would "
                    f"be two copies of each that do not mix{example}; import it once and write {earlier}.<Name>",
                )
            self.namespaces[alias] = loaded.manifest
            self.namespace_files[alias] = target.as_posix()
            declared = loaded.document.data.get("types") if isinstance(loaded.document.data, dict) else None
            self.owner_generics[alias] = frozenset(
                name for name, spec in (declared.items() if isinstance(declared, dict) else ())
                if isinstance(spec, dict) and spec.get("params")
            )

    def check_params(self, name: str, spec: Any) -> tuple[str, ...]:
        """A generic record's type parameters (`params: [T]`), which its fields may use as types."""
        params = self.read(spec, ("types", name), "params", list, [])
        if not params or not all(isinstance(param, str) for param in params):
            return ()
        for index, param in enumerate(params):
            if param in self.records or param in self.enums or param in SCALARS:
                self.error(
                    self.doc.at(("types", name, "params", index)),
                    f"type parameter {param!r} is also the name of a type; name it T, U or another free name",
                )
        self.generics[name] = tuple(params)
        return tuple(params)

    def take_namespace(self, path: JsonPath, service: str, owner: str, model: Manifest) -> str | None:
        """The namespace a `from:` entry's types are reached under (the `imports:` alias naming the owner's file,
        else the owner's service name), taken for `model`; None (reported at the entry's `from`) when it already
        names another manifest."""
        namespace = self.aliases.get(owner, service.replace("-", "_"))
        earlier = self.namespace_files.get(namespace)
        if earlier is not None and earlier != owner:
            entries = self.read(self.data, (), str(path[0]), list, []) or []
            entry = entries[path[1]] if isinstance(path[1], int) and path[1] < len(entries) else None
            relative = self.read(entry, path, "from", str)
            self.error(
                self.doc.at((*path, "from")),
                f"the owner {service} ({owner}) would take the namespace {namespace!r}, which already names "
                f"{earlier}; import it under another name with 'imports: {{<name>: {relative or '<its path>'}}}'",
            )
            return None
        self.namespaces[namespace] = model
        self.namespace_files[namespace] = owner
        return namespace

    def check_local_copies(self, types: dict[str, Any]) -> None:
        """A local record named like an owner's type, with the same fields, is a copy of it: a type of its own (the
        two live apart), which was usually meant to be the owner's. Say so, naming the first difference when it
        drifted. A same-named record with other fields is just another type (two owners may both have a Ref)."""
        for name, spec in types.items():
            record = self.records.get(name)
            if record is None or record.external or not (record.names_known and record.shape_known):
                continue
            if not isinstance(spec, dict) or set(spec) & {"extends", "params"}:
                continue
            for namespace, owner in self.namespaces.items():
                theirs = next((r for r in owner.types if r.name == name), None)
                if theirs is None:
                    continue
                try:
                    ours = record_def(name, spec)
                except (KeyError, TypeError, ValueError):
                    continue
                if [f.wire for f in ours.fields] != [f.wire for f in theirs.fields]:
                    continue
                ours = replace(ours, closed=bool(spec.get("closed", self.data.get("closed", False))))
                mine = replace(ours, fields=tuple(replace(f, type=_as_owners(f.type, namespace)) for f in ours.fields))
                owned = replace(theirs, json_schema=None, fields=tuple(
                    replace(f, type=qualified(f.type, namespace)) for f in theirs.fields
                ))
                difference = first_difference(mine, owned)
                if difference is None:
                    message = (
                        f"type {name!r} repeats {namespace}.{name}; they are two types: use {namespace}.{name} "
                        "and remove this copy"
                    )
                else:
                    path, here, there = difference[0], _shown(difference[1]), _shown(difference[2])
                    message = (
                        f"type {name!r} is not {namespace}.{name}: they differ first at {path} ({here} here, "
                        f"{there} in {owner.service}); use {namespace}.{name} to take the owner's, or rename this one"
                    )
                self.warn(self.doc.key_at(("types", name)), message)

    def type_space(self, types: dict[str, Any], excluded: set[str]) -> TypeSpace:
        """The readable records as composition sees them (for checking what they compose into)."""
        templates = {}
        for name, spec in types.items():
            record = self.records.get(name)
            if record is None or record.external or name in excluded or not record.names_known:
                continue
            try:
                templates[name] = template_def(name, spec)
            except (KeyError, TypeError, ValueError, AttributeError):
                continue
        enums = {name: EnumDef(name, values) for name, values in self.enums.items()}
        return TypeSpace(templates, enums, self.namespaces)

    def check_composition(self, types: dict[str, Any]) -> None:
        """extends/omit/partial: cycles, omitted fields that do not exist, fields defined twice differently; a
        composed record's fields are then known (route placeholders, unused types)."""
        if not self.bases:
            return
        graph = {name: [base.name for base in bases] for name, bases in self.bases.items()}
        cyclic: set[str] = set()
        for name in self.bases:
            cycle = extends_cycle(name, graph)
            if cycle is not None:
                cyclic.add(name)
                self.error(
                    self.doc.at(("types", name, "extends")),
                    f"{name} extends itself ({' → '.join(cycle)}); remove one of the bases",
                )
        for name, bases in self.bases.items():
            for index, base in enumerate(bases):
                if base.name in self.enums or base.kind != "record":
                    self.error(
                        self.doc.at(("types", name, "extends", index)),
                        f"{name} extends {base}, which is not a record; extends lists records",
                    )
        space = self.type_space(types, cyclic)
        for name in self.bases:
            template = space.templates.get(name)
            record = self.records[name]
            if template is None:
                record.unknown()
                continue
            problems: list[Problem] = []

            def fields_of(base: TypeExpr) -> tuple[FieldDef, ...] | None:
                try:
                    return space.base_fields(base)
                except CompositionError:
                    return None

            fields = composed_fields(template, fields_of, problems)
            for problem in problems:
                self.error(self.doc.at(("types", name, *problem.where)), problem.message)
            if fields is None or problems:
                record.unknown()
                continue
            record.fields = {f.wire: (f.type, not f.has_default) for f in fields}

    # -- topics ---------------------------------------------------------------------------------

    def topic_keys(self, section: str, index: int) -> list[tuple[str | None, str | None]]:
        """(id, version) of an entry (one per version of its `versions:`), each None when it cannot be read."""
        entry = self.sections[section][index]
        version = self.read(entry, (section, index), "version", str, "")
        taken = dict(self.owned).get(index) if section == "produces" else None
        topic_id = self.read(entry, (section, index), "id", str)
        if taken is not None:
            return [(topic_id, taken.topic.version)]  # a `from:` entry has the owner's version
        versions = self.read(entry, (section, index), "versions", list, None)
        if isinstance(entry, dict) and "versions" in entry:
            if versions is None or not all(isinstance(v, str) for v in versions):
                return [(topic_id, None)]
            return [(topic_id, v) for v in versions]
        return [(topic_id, version)]

    def each_key(self, section: str) -> Iterator[tuple[int, str | None, str | None]]:
        for index in range(len(self.sections[section])):
            for topic_id, version in self.topic_keys(section, index):
                yield index, topic_id, version

    def check_topic_ids(self, section: str) -> None:
        seen: dict[tuple[str, str], int] = {}
        checked: set[int] = set()
        for index, topic_id, version in self.each_key(section):
            if topic_id is None:
                continue
            position = self.doc.at((section, index, "id"))
            first = index not in checked  # an entry with `versions:` has several keys; its id is checked once
            checked.add(index)
            if first and section == "topics" and is_reserved_topic(topic_id):
                self.error(
                    position,
                    f"topic id {topic_id!r} is reserved: ids starting with {RESERVED_TOPIC_PREFIX!r} belong to "
                    "the runtime; choose another id",
                )
            # The id and version name the handler module and the operations, so they need an ASCII letter or digit.
            if first and not slug(topic_id):
                message = f"topic id {topic_id!r} needs at least one ASCII letter or digit, like orders:place"
                self.error(position, message)
            if version is None:
                continue  # unreadable: whether it repeats another entry is not known
            if version and not slug(version) and "versions" not in self.sections[section][index]:
                self.error(
                    self.doc.at((section, index, "version")),
                    f"version {version!r} needs at least one ASCII letter or digit, like v1",
                )
            key = (topic_id, version)
            if key in seen:
                what = "topic" if section == "topics" else "produces entry"
                label = f"{topic_id!r} version {version!r}" if version else f"{topic_id!r} without a version"
                self.error(
                    position,
                    f"{what} {label} is already defined at line {seen[key]}; each (id, version) must be unique",
                )
            else:
                seen[key] = position.line

    def check_routes(self) -> None:
        topics = self.sections["topics"]
        versions: dict[str, set[str] | None] = {}
        """Topic id → its versions; None when one of them cannot be read."""
        for _, topic_id, version in self.each_key("topics"):
            if topic_id is not None:
                known = versions.setdefault(topic_id, set())
                versions[topic_id] = None if known is None or version is None else known | {version}
        prefix = self.read(self.data, (), "prefix", str, DEFAULT_PREFIX)
        placed: ShadowIndex[tuple[ParsedRoute, str, Position]] = ShadowIndex()
        for index, entry in enumerate(topics):
            topic_id, version = self.topic_keys("topics", index)[0]
            label = _topic_label(topic_id, version, self.doc.at(("topics", index)))
            for number, text in enumerate(self.read(entry, ("topics", index), "routes", list, []) or []):
                path = ("topics", index, "routes", number)
                if not isinstance(text, str) or path in self.findings.rejected:
                    continue
                position = self.doc.at(path)
                try:
                    route = parse_route(text)
                except RouteSyntaxError as error:
                    self.error(position, str(error))
                    continue
                request = self.parsed.get(("topics", index, "request"))
                self.check_placeholders(route, topic_id, request, versions.get(topic_id or ""), position)
                if prefix is not None:
                    self.check_well_known(route, normalize_prefix(prefix), position)
                shadowing = placed.shadowing(route)
                if shadowing is not None:
                    earlier, earlier_label, earlier_position = shadowing
                    self.error(
                        position,
                        f"route '{route}' ({label}) can never match: route '{earlier}' ({earlier_label}, "
                        f"line {earlier_position.line}) comes first and matches every request it would; "
                        "list it before that route, or remove it",
                    )
                placed.add(route, (route, label, position))

    def check_statuses(self) -> None:
        """`success:` holds success statuses and `failures:` failure statuses, each from the status table once."""
        kinds = {
            "success": (SUCCESS_CODES, FAILURE_CODES, "failures"),
            "failures": (FAILURE_CODES, SUCCESS_CODES, "success"),
        }
        for index, entry in enumerate(self.sections["topics"]):
            for key, (allowed, other, other_key) in kinds.items():
                statuses = self.read(entry, ("topics", index), key, list, None)
                if statuses is None:
                    continue
                if key == "success" and not statuses:
                    self.error(
                        self.doc.at(("topics", index, key)),
                        "success needs at least one status, like [created]; leave it out for the default [ok]",
                    )
                seen: set[str] = set()
                for number, status in enumerate(statuses):
                    path = ("topics", index, key, number)
                    if not isinstance(status, str) or path in self.findings.rejected:
                        continue
                    position = self.doc.at(path)
                    choices = ", ".join(allowed)
                    if status in other:
                        self.error(
                            position,
                            f"{status!r} is a {'failure' if key == 'success' else 'success'} status (HTTP "
                            f"{other[status]}), so it cannot be under '{key}'; list it under '{other_key}', or use "
                            f"one of {choices}",
                        )
                    elif status not in allowed:
                        hint = suggestion(status, [*allowed, *other]) or f"; use one of {choices}"
                        self.error(position, f"{status!r} is not a status{hint}")
                    elif status in seen:
                        self.error(position, f"status {status!r} is listed twice under '{key}'; remove one")
                    seen.add(status)

    def check_timeouts(self) -> None:
        """`timeout:` is a duration by the rule every duration of the manifest follows, at most a day."""
        for index, entry in enumerate(self.sections["topics"]):
            text = self.read(entry, ("topics", index), "timeout", str)
            if text is None:
                continue
            position = self.doc.at(("topics", index, "timeout"))
            try:
                seconds = parse_duration(text)
            except ValueError as error:
                self.error(position, f"timeout {error}")
                continue
            if seconds > MAX_TIMEOUT_SECONDS:
                self.error(position, f"timeout {text!r} must be at most a day (24h); write one like 2s or 500ms")

    def check_deprecations(self) -> None:
        """`deprecated: {since, sunset, successor}` on topics and fields: real dates, the sunset not before the
        start, a successor this manifest serves (a warning when it does not: it may be another service's)."""
        served = {f"{topic_id}@{version}" if version else str(topic_id)
                  for index in range(len(self.sections.get("topics", [])))
                  for topic_id, version in self.topic_keys("topics", index)}  # fmt: skip
        places: list[tuple[JsonPath, Any]] = [
            (("topics", index, "deprecated"), entry.get("deprecated"))
            for index, entry in enumerate(self.sections.get("topics", [])) if isinstance(entry, dict)
        ]
        types = self.data.get("types")
        for name, spec in (types.items() if isinstance(types, dict) else ()):
            fields = spec.get("fields") if isinstance(spec, dict) else None
            for wire, field_spec in (fields.items() if isinstance(fields, dict) else ()):
                if isinstance(field_spec, dict):
                    places.append((("types", name, "fields", wire, "deprecated"), field_spec.get("deprecated")))
        for path, lifecycle in places:
            if not isinstance(lifecycle, dict) or path in self.findings.rejected:
                continue
            dates: dict[str, dt.date] = {}
            for key in ("since", "sunset"):
                text = lifecycle.get(key)
                if isinstance(text, str) and (*path, key) not in self.findings.rejected:
                    try:
                        dates[key] = dt.date.fromisoformat(text)
                    except ValueError:
                        self.error(self.doc.at((*path, key)), f"{key} {text!r} is not a calendar date (YYYY-MM-DD)")
            if "since" in dates and "sunset" in dates and dates["sunset"] < dates["since"]:
                self.error(self.doc.at((*path, "sunset")),
                           f"sunset {dates['sunset']} is before since {dates['since']}; the sunset comes after")
            successor = lifecycle.get("successor")
            if path[0] == "topics" and isinstance(successor, str) and successor not in served:
                hint = suggestion(successor, sorted(served)) or ""
                self.warn(self.doc.at((*path, "successor")),
                          f"successor {successor!r} is not a topic version of this manifest{hint}")

    def check_well_known(self, route: ParsedRoute, prefix: str, position: Position) -> None:
        surface = well_known_collision(route, prefix)
        if surface is not None:
            self.error(
                position,
                f"route '{route}' collides with the well-known surface {surface} that the runtime serves under "
                f"the prefix {prefix or '/'}; move the route or set another 'prefix'",
            )

    def check_placeholders(
        self,
        route: ParsedRoute,
        topic_id: str | None,
        request: TypeExpr | None,
        versions: set[str] | None,
        position: Position,
    ) -> None:
        record = self.records.get(request.name) if request is not None and request.kind == "record" else None
        for name in route.params:
            if name == VERSION_PATH_PARAM:
                if versions is None or len(versions) > 1:
                    continue
                if record is not None and VERSION_PATH_PARAM in record.fields:
                    self.error(
                        position,
                        f"route '{route}': {{version}} is reserved for selecting the topic version and is never "
                        "delivered to request field 'version'; rename the field and its placeholder",
                    )
                else:
                    # A warning: removing a version must not force a route change on the remaining one's callers.
                    (version,) = versions
                    registered = f"version {version!r}" if version else "the unversioned topic"
                    self.warn(
                        position,
                        f"route '{route}': {{version}} has only {registered} of {topic_id} to select; the route "
                        "keeps serving its callers (drop the segment once nobody calls it this way)",
                    )
            elif request is None or (request.kind == "record" and request.name not in self.records):
                continue  # the request type is already reported
            elif record is None:
                self.error(
                    position,
                    f"route '{route}' has placeholder {{{name}}}, but the request type {request} is not a record; "
                    "placeholders name fields of a record request",
                )
            elif name not in record.fields and record.names_known:
                fields = list(record.fields)
                if fields:
                    hint = suggestion(name, fields) or "; its fields are " + ", ".join(fields)
                else:
                    hint = "; its JSON Schema declares no properties" if record.external else "; it has no fields"
                self.error(position, f"route placeholder {{{name}}} names no field of {request.name}{hint}")


def _record_refs(expr: TypeExpr) -> Iterator[TypeExpr]:
    """Record references (a generic one with its arguments) in order of appearance, each once."""
    seen: set[TypeExpr] = set()

    def walk(node: TypeExpr) -> Iterator[TypeExpr]:
        if node.kind == "record" and node not in seen:
            seen.add(node)
            yield node
        for arg in node.args:
            yield from walk(arg)

    return walk(expr)


def _as_owners(expr: TypeExpr, namespace: str) -> TypeExpr:
    """A local copy's type expression as the owner's would read: a local name stands for the owner's type of that
    name (`Money` → `payments.Money`); a name already under a namespace (`payments.Money`) stays as written."""
    return rename_records(expr, lambda ref: ref if "." in ref.name else replace(ref, name=f"{namespace}.{ref.name}"))


def _topic_label(topic_id: str | None, version: str | None, position: Position) -> str:
    if topic_id is None:
        return f"the topic at line {position.line}"
    return f"topic {topic_id} {version}" if version else f"topic {topic_id}"


def _json(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def _shown(value: Any) -> str:
    """A value of a definition in a message: absent, a type expression as written, or JSON."""
    if value is ABSENT or isinstance(value, TypeExpr):
        return str(value)
    try:
        return _json(value)
    except TypeError:
        return str(value)


def _reason(error: DecodeError) -> str:
    """The codec's reason when it says more than "expected <type>" (a range, a missing or unexpected field)."""
    if not error.message.startswith("expected "):
        return f" ({error})"
    return ""
