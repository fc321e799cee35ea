"""Semantic stage: rules a JSON Schema cannot express, checked beside the schema stage's findings.

Every check runs and every problem is collected, so one run shows the whole picture.
"""

from __future__ import annotations

import json
import keyword
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ..runtime._codec import DecodeError
from ..runtime._naming import is_canonical_camel, slug
from ..runtime._status import FAILURE_CODES, SUCCESS_CODES
from ..runtime._topics import (
    DEFAULT_PREFIX,
    RESERVED_TOPIC_PREFIX,
    VERSION_PATH_PARAM,
    is_reserved_topic,
    normalize_prefix,
)
from .build import parse_duration, record_def, same_definition
from .contract import CONTRACT_KEYWORDS, check_enum, check_field_contract
from .diagnostics import Diagnostic
from .events import check_events
from .fits import RecordFields, ValueTypes
from .loader import JsonPath, YamlDocument
from .model import EnumDef, Position, RecordDef
from .owner import OwnedTopic, OwnerError, owned_topic
from .routes import ParsedRoute, RouteSyntaxError, ShadowIndex, parse_route, well_known_collision
from .schemaimport import SchemaImportError
from .security import check_security
from .sources import Sources
from .spelling import canonical_camel, did_you_mean, is_pascal_identifier, pascal_case, suggestion
from .typeexpr import CONTAINERS, SCALARS, TypeExpr, TypeExprError, parse_type
from .validate import SchemaFindings

_SCALAR_LIST = ", ".join(SCALARS)
MAX_TIMEOUT_SECONDS = 24 * 3600.0


def check_semantics(
    document: YamlDocument, base_dir: Path, findings: SchemaFindings, sources: Sources
) -> list[Diagnostic]:
    """Every semantic problem of the manifest (unsorted), skipping only what the schema stage's `findings`
    leave unreadable; `base_dir` resolves jsonSchema paths and `from:` paths, read through `sources`."""
    checker = _Checker(document, base_dir, findings, sources)
    checker.run()
    return checker.diagnostics


T = TypeVar("T")


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
        self.check_provided_clashes()
        check_events(self)
        self.check_type_names_known()
        self.check_defaults()
        self.check_unused()
        self.check_topic_ids("topics")
        self.check_topic_ids("produces")
        self.check_routes()
        self.check_statuses()
        self.check_timeouts()
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

    def check_health(self) -> None:
        seen: dict[str, str] = {}
        for index, name in enumerate(self.read(self.data, (), "health", list, []) or []):
            if not isinstance(name, str) or ("health", index) in self.findings.rejected:
                continue
            position = self.doc.at(("health", index))
            function = slug(name)
            if not function:
                self.error(position, f"health check {name!r} has no letters or digits to name its function")
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
                record.external = True
                relative = self.read(readable, path, "jsonSchema", str)
                if relative is None:
                    record.unknown()
                else:
                    self.check_json_schema(name, relative, record)
                continue
            fields = self.read(readable, path, "fields", dict)
            if fields is None:
                record.unknown()
                self.uses_known = False
                continue
            for wire, field_spec in fields.items():
                self.check_field(record, (*path, "fields", wire), wire, field_spec)

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
        self.exprs.append(_Expr(expr, text, path))
        return expr

    def check_type_names_known(self) -> None:
        if not self.types_known:
            return  # the 'types' section is unreadable: every name would look undefined
        candidates = [*self.records, *self.enums, *SCALARS]
        for item in self.exprs:
            for name in _record_names(item.expr):
                if name in self.records or name in self.enums:
                    continue
                where = f" in {item.text!r}" if item.text.strip() != name else ""
                match = did_you_mean(name, candidates)
                hint = (
                    f"did you mean {match!r}?"
                    if match is not None
                    else f"define it under 'types' or use a scalar ({_SCALAR_LIST})"
                )
                self.error(self.doc.at(item.path), f"unknown type {name!r}{where}; {hint}")

    def check_defaults(self) -> None:
        shapes: RecordFields = {
            name: {wire: (expr, required) for wire, (expr, required) in record.fields.items() if expr is not None}
            for name, record in self.records.items()
            if not record.external and record.shape_known
        }
        types = ValueTypes(shapes, self.enums)
        known = set(self.records) | set(self.enums)
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
                what = "default" if key == "default" else "example"
                keys = key if isinstance(key, tuple) else (key,)
                position = self.doc.at(("types", name, "fields", wire, *keys))
                mismatch = types.problem(expr, value)
                if mismatch is not None:
                    base = expr.args[0] if expr.is_nullable else expr
                    values = self.enums.get(base.name) if base.kind == "record" else None
                    hint = f"; use one of {', '.join(values)}" if values else _reason(mismatch)
                    self.error(
                        position, f"{what} of field {wire!r} must fit its type {expr}, got {_json(value)}{hint}"
                    )
                    continue
                contract = record.contracts.get(wire)
                if contract is None:
                    continue  # its keywords are already reported
                problem = types.problem(expr, value, contract)
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
            return
        try:
            owned = owned_topic(self.sources, self.base_dir, relative, topic_id, version)
        except OwnerError as error:
            self.uses_known = False
            self.error(self.doc.at((*path, error.key)), str(error))
            return
        self.parsed[(*path, "request")] = owned.topic.request
        self.parsed[(*path, "response")] = owned.topic.response
        self.owned.append((index, owned))

    def check_provided_clashes(self) -> None:
        """A type a `from:` entry takes must not differ from a local type, or another owner's, of its name."""
        taken: dict[str, tuple[RecordDef | EnumDef, int, OwnedTopic]] = {}
        for index, owned in self.owned:
            label = f"produces entry {owned.topic.id}"
            definitions: list[RecordDef | EnumDef] = [*owned.records, *owned.enums]
            for definition in definitions:
                name = definition.name
                theirs = f"the {name!r} that {label} takes from {owned.owner} ({owned.positions[name]})"
                earlier = taken.setdefault(name, (definition, index, owned))
                if earlier[0] is not definition and not same_definition(earlier[0], definition):
                    _, other_index, other = earlier
                    self.error(
                        self.doc.at(("produces", index, "from")),
                        f"{theirs} differs from the {name!r} that produces entry {other.topic.id} (line "
                        f"{self.doc.at(('produces', other_index)).line}) takes from {other.owner} "
                        f"({other.positions[name]}); the two owners must agree on it",
                    )
                local = self.local_definition(name)
                if local is not None and not same_definition(local, definition):
                    section = "enums" if name in self.enums else "types"
                    self.error(
                        self.doc.key_at((section, name)),
                        f"type {name!r} differs from {theirs}; remove the local type to use the owner's, or "
                        "rename it",
                    )

    def local_definition(self, name: str) -> RecordDef | EnumDef | None:
        """The manifest's own record or enum `name` as the model builds it; None when there is none or it cannot
        be read (its problems are reported where they are)."""
        if name in self.enums:
            spec = self.read(self.read(self.data, (), "enums", dict, {}), ("enums",), name, dict) or {}
            return EnumDef(name, self.enums[name], spec.get("description"))
        record = self.records.get(name)
        if record is None:
            return None
        if record.external:
            return self.external_definition(name)
        if not (record.names_known and record.shape_known):
            return None
        try:
            return record_def(name, self.data["types"][name])
        except (KeyError, TypeError, ValueError):
            return None

    def external_definition(self, name: str) -> RecordDef | None:
        relative = self.read(self.data["types"][name], ("types", name), "jsonSchema", str)
        try:
            return None if relative is None else self.sources.imported_types(name, relative, self.base_dir).records[0]
        except (SchemaImportError, ValueError):
            return None

    # -- topics ---------------------------------------------------------------------------------

    def topic_key(self, section: str, index: int) -> tuple[str | None, str | None]:
        """(id, version) of an entry, each None when it cannot be read."""
        entry = self.sections[section][index]
        version = self.read(entry, (section, index), "version", str, "")
        taken = dict(self.owned).get(index) if section == "produces" else None
        return (
            self.read(entry, (section, index), "id", str),
            version if taken is None else taken.topic.version,  # a `from:` entry has the owner's version
        )

    def check_topic_ids(self, section: str) -> None:
        seen: dict[tuple[str, str], int] = {}
        for index in range(len(self.sections[section])):
            topic_id, version = self.topic_key(section, index)
            if topic_id is None:
                continue
            position = self.doc.at((section, index, "id"))
            if section == "topics" and is_reserved_topic(topic_id):
                self.error(
                    position,
                    f"topic id {topic_id!r} is reserved: ids starting with {RESERVED_TOPIC_PREFIX!r} belong to "
                    "the runtime; choose another id",
                )
            # The id and version name the handler module and the operations, so they need a letter or digit.
            if not slug(topic_id):
                self.error(position, f"topic id {topic_id!r} needs at least one letter or digit, like orders:place")
            if version is None:
                continue  # unreadable: whether it repeats another entry is not known
            if version and not slug(version):
                self.error(
                    self.doc.at((section, index, "version")),
                    f"version {version!r} needs at least one letter or digit, like v1",
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
        for index in range(len(topics)):
            topic_id, version = self.topic_key("topics", index)
            if topic_id is not None:
                known = versions.setdefault(topic_id, set())
                versions[topic_id] = None if known is None or version is None else known | {version}
        prefix = self.read(self.data, (), "prefix", str, DEFAULT_PREFIX)
        placed: ShadowIndex[tuple[ParsedRoute, str, Position]] = ShadowIndex()
        for index, entry in enumerate(topics):
            topic_id, version = self.topic_key("topics", index)
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
        """`timeout:` is a duration the schema's pattern admits; here: more than nothing, at most a day."""
        for index, entry in enumerate(self.sections["topics"]):
            text = self.read(entry, ("topics", index), "timeout", str)
            if text is None:
                continue
            try:
                seconds = parse_duration(text)
            except ValueError:
                continue  # the schema stage reports it
            if not 0 < seconds <= MAX_TIMEOUT_SECONDS:
                self.error(
                    self.doc.at(("topics", index, "timeout")),
                    f"timeout {text!r} must be more than 0 and at most a day (1440m); write one like 2s or 500ms",
                )

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
                    (version,) = versions
                    registered = f"version {version!r}" if version else "no version"
                    self.error(
                        position,
                        f"route '{route}': {{version}} selects nothing, because topic {topic_id} is registered "
                        f"under one version only ({registered}); remove the segment or add another version",
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


def _record_names(expr: TypeExpr) -> Iterator[str]:
    """Record names in order of appearance, each once."""
    seen: set[str] = set()

    def walk(node: TypeExpr) -> Iterator[str]:
        if node.kind == "record" and node.name not in seen:
            seen.add(node.name)
            yield node.name
        for arg in node.args:
            yield from walk(arg)

    return walk(expr)


def _topic_label(topic_id: str | None, version: str | None, position: Position) -> str:
    if topic_id is None:
        return f"the topic at line {position.line}"
    return f"topic {topic_id} {version}" if version else f"topic {topic_id}"


def _json(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def _reason(error: DecodeError) -> str:
    """The codec's reason when it says more than "expected <type>" (a range, a missing or unexpected field)."""
    if not error.message.startswith("expected "):
        return f" ({error})"
    return ""
