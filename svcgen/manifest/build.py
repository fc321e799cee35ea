"""Model building: a document that passed both checks → the `Manifest` every generator reads."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..runtime._status import OK
from ..runtime._topics import DEFAULT_PREFIX, normalize_prefix
from .contract import CONTRACT_KEYWORDS
from .events import build_events
from .loader import YamlDocument
from .model import (
    NO_DEFAULT,
    EnumDef,
    FieldDef,
    Manifest,
    MeshDef,
    RecordDef,
    Requirement,
    Requirements,
    RouteDef,
    SchemeDef,
    SecurityDef,
    TopicDef,
)
from .owner import owned_topic
from .routes import parse_route
from .sources import Sources
from .typeexpr import parse_type


def default_package(service: str) -> str:
    """`order-desk` → `order_desk_service`."""
    return service.replace("-", "_") + "_service"


def build_manifest(document: YamlDocument, base_dir: Path, sources: Sources) -> Manifest:
    """Build the model; the document must already have passed the schema and semantic stages, whose owners'
    manifests and jsonSchema files `sources` holds. A jsonSchema type becomes records and enums of the same
    model (its own, then any nested ones)."""
    data: dict[str, Any] = document.data
    service: str = data["service"]
    mesh = data.get("mesh")
    records: list[RecordDef] = []
    enums = [
        EnumDef(name, tuple(spec["values"]), spec.get("description")) for name, spec in data.get("enums", {}).items()
    ]
    for name, spec in data.get("types", {}).items():
        if "jsonSchema" in spec:
            imported = sources.imported_types(name, spec["jsonSchema"], base_dir)
            records += imported.records
            enums += imported.enums
        else:
            records.append(record_def(name, spec))
    produces: list[TopicDef] = []
    for entry in data.get("produces", ()):
        if "from" not in entry:
            produces.append(_topic(entry))
            continue
        owned = owned_topic(sources, base_dir, entry["from"], entry["id"], entry.get("version"))
        produces.append(
            replace(
                owned.topic,
                routes=(),
                summary=entry.get("summary", owned.topic.summary),
                idempotent=entry.get("idempotent", owned.topic.idempotent),
                timeout=None,
            )
        )
        # A type already declared (here or by an earlier entry) is the same one: semantics checked they agree.
        known = {record.name for record in records} | {enum.name for enum in enums}
        records += [record for record in owned.records if record.name not in known]
        enums += [enum for enum in owned.enums if enum.name not in known]
    known = {record.name for record in records} | {enum.name for enum in enums}
    events, subscribes, taken_records, taken_enums = build_events(data, base_dir, known, sources)
    return Manifest(
        path=document.file.replace("\\", "/"),
        service=service,
        package=data.get("package", default_package(service)),
        title=data.get("title", "Svc service"),
        api_version=data.get("apiVersion", "1.0.0"),
        prefix=normalize_prefix(data.get("prefix", DEFAULT_PREFIX)),
        service_version=data.get("serviceVersion"),
        placement=dict(data["placement"]) if "placement" in data else None,
        health=tuple(data.get("health", ())),
        mesh=None if mesh is None else _mesh(mesh),
        security=_security(data["security"]) if "security" in data else None,
        invoke=bool(data.get("invoke", True)),
        types=tuple(records + taken_records),
        enums=tuple(enums + taken_enums),
        topics=tuple(_topic(entry) for entry in data.get("topics", ())),
        produces=tuple(produces),
        events=events,
        subscribes=subscribes,
    )


def same_definition(one: RecordDef | EnumDef, other: RecordDef | EnumDef) -> bool:
    """The same type, wherever each was declared (a jsonSchema path is where, not what)."""
    if isinstance(one, RecordDef) and isinstance(other, RecordDef):
        return replace(one, json_schema=None) == replace(other, json_schema=None)
    return one == other


def _mesh(spec: dict[str, Any]) -> MeshDef:
    # A trailing '/' would double up in `{collector}{prefix}/invoke` and `{otlp}/v1/traces`.
    return MeshDef(
        collector=spec["collector"].rstrip("/") if "collector" in spec else None,
        heartbeat_seconds=float(spec.get("heartbeatSeconds", 30.0)),
        issues=bool(spec.get("issues", True)),
        otlp=spec["otlp"].rstrip("/") if "otlp" in spec else None,
        transport=spec.get("transport", "http"),
        nats=spec.get("nats"),
    )


def record_def(name: str, spec: dict[str, Any]) -> RecordDef:
    """A record the manifest declares with `fields`."""
    return RecordDef(
        name,
        fields=tuple(_field(wire, field_spec) for wire, field_spec in spec["fields"].items()),
        description=spec.get("description"),
        deprecated=spec.get("deprecated", False),
    )


def _field(wire: str, spec: str | dict[str, Any]) -> FieldDef:
    if isinstance(spec, str):
        spec = {"type": spec}
    expr = parse_type(spec["type"])
    default = spec.get("default", None if expr.is_nullable else NO_DEFAULT)
    contract = {key: value for key, value in spec.items() if key in CONTRACT_KEYWORDS}
    return FieldDef(wire, expr, default, spec.get("description"), contract)


def parse_duration(text: str) -> float:
    """Seconds of a manifest duration (`2s`, `500ms`, `1.5m`); ValueError when it is not one."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not a duration; write one like 2s, 500ms or 1.5m")
    return float(match.group(1)) * _DURATION_UNITS[match.group(2)]


_DURATION = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m)")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0}
_SAFE_METHODS = frozenset({"GET", "HEAD"})


def _topic(entry: dict[str, Any]) -> TopicDef:
    routes = tuple(parse_route(text) for text in entry.get("routes", ()))
    # A topic only read through GET routes changes nothing by being read again (events join this rule, §14).
    reads_only = bool(routes) and all(route.method in _SAFE_METHODS for route in routes)
    return TopicDef(
        id=entry["id"],
        version=entry.get("version", ""),
        request=parse_type(entry["request"]),
        response=parse_type(entry["response"]),
        summary=entry.get("summary"),
        routes=tuple(RouteDef(route.method, route.path) for route in routes),
        success=tuple(entry.get("success", (OK,))),
        failures=tuple(entry.get("failures", ())),
        idempotent=bool(entry.get("idempotent", reads_only)),
        timeout=parse_duration(entry["timeout"]) if "timeout" in entry else None,
        security=requirements(entry["security"]) if "security" in entry else None,
    )


def _security(spec: dict[str, Any]) -> SecurityDef:
    return SecurityDef(
        schemes=tuple(_scheme(name, scheme) for name, scheme in spec.get("schemes", {}).items()),
        default=requirements(spec.get("default", [])),
        well_known=requirements(spec.get("wellKnown", [])),
    )


def _scheme(name: str, spec: dict[str, Any]) -> SchemeDef:
    audience = spec.get("audience", ())
    return SchemeDef(
        name,
        spec["type"],
        description=spec.get("description"),
        issuer=spec.get("issuer", ""),
        audience=(audience,) if isinstance(audience, str) else tuple(audience),
        jwks=spec.get("jwks", ""),
        key=spec.get("key", ""),
        algorithms=tuple(spec.get("algorithms", ())),
        header=spec.get("header", "").lower(),
    )


def requirements(entries: list[Any]) -> Requirements:
    """`[staff, {partner: [], staff: [patients:read]}]` → ((("staff", ()),), (("partner", ()), ("staff", ...)));
    each entry's schemes sorted by name, scopes sorted, so equal requirements compare equal."""
    parsed: list[Requirement] = []
    for entry in entries:
        if isinstance(entry, str):
            parsed.append(((entry, ()),))
        else:
            parsed.append(tuple((name, tuple(sorted(set(scopes)))) for name, scopes in sorted(entry.items())))
    return tuple(parsed)
