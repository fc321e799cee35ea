"""Model building: a document that passed both checks → the `Manifest` every generator reads."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from ..runtime._durations import parse_duration
from ..runtime._status import OK
from ..runtime._topics import DEFAULT_PREFIX, normalize_prefix
from .composition import CompositionError, Template, TypeSpace, qualified
from .contract import CONTRACT_KEYWORDS
from .diagnostics import Diagnostic, ManifestError
from .events import build_events, publisher_namespace, subscribed_events
from .loader import YamlDocument
from .model import (
    NO_DEFAULT,
    Deprecation,
    EnumDef,
    FieldDef,
    Manifest,
    MeshDef,
    Position,
    RecordDef,
    Requirement,
    Requirements,
    RouteDef,
    SchemeDef,
    SecurityDef,
    TopicDef,
)
from .owner import load_owner, owned_topic, owner_model
from .routes import parse_route
from .sources import Sources
from .typeexpr import parse_type


def default_package(service: str) -> str:
    """`order-desk` → `order_desk_service`."""
    return service.replace("-", "_") + "_service"


def build_manifest(document: YamlDocument, base_dir: Path, sources: Sources) -> Manifest:
    """Build the model; the document must already have passed the schema and semantic stages, whose owners'
    manifests and jsonSchema files `sources` holds. A jsonSchema type becomes records and enums of the same
    model (its own, then any nested ones); imported, composed, generic and versioned types become concrete records
    (composition.py)."""
    data: dict[str, Any] = document.data
    service: str = data["service"]
    mesh = data.get("mesh")
    templates: dict[str, Template] = {}
    enums = {
        name: EnumDef(name, tuple(spec["values"]), spec.get("description"))
        for name, spec in data.get("enums", {}).items()
    }
    twins: list[Template] = []
    """Records named like an earlier one (a jsonSchema file's helper record and a manifest type): kept, so the
    generator names the clash instead of one silently replacing the other."""
    for name, spec in data.get("types", {}).items():
        made = [template_def(name, spec)] if "jsonSchema" not in spec else []
        if "jsonSchema" in spec:
            imported = sources.imported_types(name, spec["jsonSchema"], base_dir)
            made = [
                Template(r.name, r.fields, r.description, r.deprecated, r.closed, r.json_schema)
                for r in imported.records
            ]
            enums |= {enum.name: enum for enum in imported.enums}
        for template in made:
            if template.name in templates:
                twins.append(template)
            else:
                templates[template.name] = template
    namespaces, aliases = imported_namespaces(sources, base_dir, data.get("imports", {}))
    versions = tuple(data.get("versions", ()))
    owned = {
        index: owned_topic(sources, base_dir, entry["from"], entry["id"], entry.get("version"))
        for index, entry in enumerate(data.get("produces", ()))
        if "from" in entry
    }
    for taken in owned.values():  # a from: entry's owner is a namespace too (semantics checked they are apart)
        namespace = aliases.get(taken.owner, taken.namespace)
        namespaces.setdefault(namespace, taken.manifest)
        aliases.setdefault(taken.owner, namespace)
    subscribed = subscribed_events(data, base_dir, sources)
    for published in subscribed.values():  # and a subscription's publisher
        namespace = publisher_namespace(published, aliases)
        namespaces.setdefault(namespace, published.manifest)
        aliases.setdefault(published.where, namespace)
    files = {alias: str(Path(path).resolve()) for path, alias in aliases.items()}
    space = TypeSpace(templates, enums, namespaces, versions, bool(data.get("closed", False)), files)
    try:
        space.declared()
        topics = tuple(
            replace(topic, request=space.resolve(topic.request, topic.version),
                    response=space.resolve(topic.response, topic.version))
            for entry in data.get("topics", ())
            for topic in _topics(entry)
        )
        produces: list[TopicDef] = []
        for index, entry in enumerate(data.get("produces", ())):
            if index not in owned:
                produces += [
                    replace(topic, request=space.resolve(topic.request, topic.version),
                            response=space.resolve(topic.response, topic.version))
                    for topic in _topics(entry)
                ]
                continue
            taken = owned[index]
            namespace = aliases.get(taken.owner, taken.namespace)
            produces.append(replace(
                taken.topic,
                routes=(),
                summary=entry.get("summary", taken.topic.summary),
                idempotent=entry.get("idempotent", taken.topic.idempotent),
                timeout=None,
                request=space.resolve(qualified(taken.topic.request, namespace), None),
                response=space.resolve(qualified(taken.topic.response, namespace), None),
            ))
        events, subscribes = build_events(data, space, subscribed, aliases)
    except CompositionError as error:
        raise ManifestError([Diagnostic(Position(document.file, 1, 1), str(error))]) from None
    records, all_enums = space.model()
    records += tuple(
        RecordDef(t.name, tuple(replace(f, type=space.resolve(f.type, None)) for f in t.fields), t.description,
                  t.json_schema, t.deprecated, bool(t.closed))
        for t in twins
    )
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
        types=records,
        enums=all_enums,
        topics=topics,
        produces=tuple(produces),
        events=events,
        subscribes=subscribes,
        versions=versions,
        namespaces=tuple(sorted(files.items())),
    )


def imported_namespaces(
    sources: Sources, base_dir: Path, imports: dict[str, str]
) -> tuple[dict[str, Manifest], dict[str, str]]:
    """`imports:` → (namespace → the owner's model, the owner's manifest path → its namespace)."""
    namespaces: dict[str, Manifest] = {}
    aliases: dict[str, str] = {}
    for alias, relative in imports.items():
        target, owner = load_owner(sources, base_dir, relative)
        namespaces[alias] = owner_model(owner.manifest, relative)
        aliases.setdefault(target.as_posix(), alias)
    return namespaces, aliases


def template_def(name: str, spec: dict[str, Any]) -> Template:
    """A record the manifest declares with `fields` (and `extends`, `params`, ...), in the manifest's terms."""
    return Template(
        name,
        fields=tuple(_field(wire, field_spec) for wire, field_spec in spec.get("fields", {}).items()),
        description=spec.get("description"),
        deprecated=spec.get("deprecated", False),
        closed=spec.get("closed"),
        params=tuple(spec.get("params", ())),
        extends=tuple(parse_type(base) for base in spec.get("extends", ())),
        omit=tuple(spec.get("omit", ())),
        partial=spec.get("partial", False),
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
    lifecycle = spec.get("deprecated")
    if isinstance(lifecycle, dict):  # the schemas say `deprecated: true`; the dates are the contract diff's
        contract["deprecated"] = True
    return FieldDef(wire, expr, default, spec.get("description"), contract, spec.get("added"), spec.get("removed"),
                    deprecation(lifecycle))


_SAFE_METHODS = frozenset({"GET", "HEAD"})


def deprecation(spec: Any) -> Deprecation | None:
    """`deprecated: {since, sunset, successor}` as the model holds it; None for anything else."""
    if not isinstance(spec, dict):
        return None
    return Deprecation(spec.get("since"), spec.get("sunset"), spec.get("successor"))


def _topics(entry: dict[str, Any]) -> list[TopicDef]:
    """The entry's (topic, version) definitions: one per version of `versions:`, else the one."""
    routes = tuple(parse_route(text) for text in entry.get("routes", ()))
    # A topic only read through GET routes changes nothing by being read again (events join this rule, §14).
    reads_only = bool(routes) and all(route.method in _SAFE_METHODS for route in routes)
    topic = TopicDef(
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
        deprecated=deprecation(entry.get("deprecated")),
        security=requirements(entry["security"]) if "security" in entry else None,
    )
    versions = entry.get("versions", [topic.version])
    # A route serves the newest version (a `{version}` segment serves each): it is bound once, to the last.
    return [
        replace(topic, version=version, routes=topic.routes if version == versions[-1] else ())
        for version in versions
    ]


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
