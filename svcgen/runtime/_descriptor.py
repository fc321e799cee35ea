"""The service descriptor: identity plus served and sent topic descriptors, built once per service.

Answered on `svc:mesh` and sent as the register feed body. A value that is not known is omitted, never
null. Topics: a missing registry (None) is unknown, so `topics` is omitted and `registry` is degraded;
an empty registry is `topics: []`. Produces likewise: None is unknown (`produces` omitted,
`outbound-registry` degraded) while `[]` states the service sends nothing and is emitted as `produces: []`,
so the two cases stay distinguishable in the document and in its hash.

Service identity inputs: what the host knows that the registry cannot derive.

Outbound contracts: the topics a service sends (manifest `produces`), typed like registrations.

The service spec `{service, topics}`: answered on `svc:spec` and served at `{prefix}/spec`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Final

import orjson

from ._jsontext import document_hash
from ._registry import Registry
from ._schema import JsonSchema, schema_of
from ._topics import topic_descriptors

DEGRADED_REGISTRY: Final = "registry"
DEGRADED_OUTBOUND_REGISTRY: Final = "outbound-registry"
UNHASHED_KEYS: Final = frozenset({"instanceId", "degraded", "profile", "descriptorHash"})
"""Per-instance or advisory keys: two instances of one contract share a hash."""


@dataclass(frozen=True, slots=True)
class Descriptor:
    document: dict[str, Any]
    """Key order: service, serviceVersion, runtime, binding, instanceId, placement, topics, produces,
    events, degraded, profile, descriptorHash. Embeds the shared cached schemas: read-only."""
    hash: str
    """`sha256:` + hex digest of the canonical form of the document without `UNHASHED_KEYS`."""
    json_text: str
    """Compact JSON text of `document`: the `svc:mesh` answer body."""


def build_descriptor(
    identity: Identity,
    registry: Registry | None,
    produces: Sequence[ProducedTopic] | None = None,
    events: Mapping[str, Any] | None = None,
) -> Descriptor:
    document: dict[str, Any] = {"service": identity.service}
    _put(document, "serviceVersion", identity.service_version)
    _put(document, "runtime", identity.runtime)
    _put(document, "binding", identity.binding)
    _put(document, "instanceId", identity.instance_id)
    if identity.placement:
        # Sorted so the committed bytes do not depend on how the mapping was built.
        document["placement"] = dict(sorted(identity.placement.items()))
    if registry is not None:
        document["topics"] = topic_descriptors(registry)
    if produces is not None:
        _check_unique(produces)
        document["produces"] = topic_descriptors(produces)
    if events is not None:
        # Hashed like the rest of the contract; omitted for a service with no events, so its bytes never change.
        document["events"] = dict(events)
    degraded = _degraded(identity, registry is None, produces is None)
    if degraded:
        document["degraded"] = degraded
    if identity.profile:
        document["profile"] = dict(identity.profile)
    document["descriptorHash"] = descriptor_hash = document_hash(
        {k: v for k, v in document.items() if k not in UNHASHED_KEYS}
    )
    return Descriptor(document, descriptor_hash, orjson.dumps(document).decode())


def _put(document: dict[str, Any], key: str, value: str | None) -> None:
    if value:
        document[key] = value


def _degraded(identity: Identity, no_registry: bool, no_produces: bool) -> list[str]:
    names = list(identity.degraded or ())
    if no_registry:
        names.append(DEGRADED_REGISTRY)
    if no_produces:
        names.append(DEGRADED_OUTBOUND_REGISTRY)
    return list(dict.fromkeys(names))


def _check_unique(produces: Sequence[ProducedTopic]) -> None:
    seen: set[tuple[str, str]] = set()
    for produced in produces:
        key = (produced.topic, produced.version)
        if key in seen:
            raise ValueError(f"produces lists {produced.topic!r} (version {produced.version!r}) twice")
        seen.add(key)


@dataclass(frozen=True)
class Identity:
    service: str
    service_version: str | None = None
    instance_id: str | None = None
    runtime: str = "python"
    binding: str | None = None
    """The transport in use, for example `http`."""
    placement: Mapping[str, str] | None = None
    degraded: Sequence[str] | None = None
    """Names of inputs missing when the descriptor was built (`registry`, `outbound-registry`)."""
    profile: Mapping[str, Any] | None = field(default=None)

    def __post_init__(self) -> None:
        if not isinstance(self.service, str) or not self.service:
            raise ValueError("identity: service must be a non-empty string")


@dataclass(frozen=True)
class ProducedTopic:
    topic: str
    version: str = ""
    request_type: Any = Any
    response_type: Any = Any
    idempotent: bool = False
    """Whether the owner may run it twice: retried as it is, else with an `Idempotency-Key` (not in the descriptor)."""

    def __post_init__(self) -> None:
        if not isinstance(self.topic, str) or not self.topic:
            raise ValueError(f"produced topic id must be a non-empty string, got {self.topic!r}")

    @cached_property
    def request_schema(self) -> JsonSchema:
        """Shared with every other user of the type: never mutate it."""
        return schema_of(self.request_type)

    @cached_property
    def response_schema(self) -> JsonSchema:
        """Shared with every other user of the type: never mutate it."""
        return schema_of(self.response_type)


def build_spec(service: str, registry: Registry) -> dict[str, Any]:
    return {"service": service, "topics": topic_descriptors(registry)}


def declared_entries(descriptor: Mapping[str, Any], key: str) -> dict[tuple[str, str], Any]:
    """A descriptor's `topics`, `produces` or `events` list keyed by (id, version; "" for none), skipping anything
    malformed: a descriptor read back from a feed or a query is untrusted JSON."""
    listed = descriptor.get(key)
    found: dict[tuple[str, str], Any] = {}
    for item in listed if isinstance(listed, list) else ():
        if isinstance(item, dict) and isinstance(item.get("id"), str):
            version = item.get("version")
            found[(item["id"], version if isinstance(version, str) else "")] = item
    return found
