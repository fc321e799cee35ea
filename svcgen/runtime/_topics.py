"""The topic descriptor `{id, version?, requestSchema, responseSchema}`: the one form the spec and the
service descriptor both carry, for served (registrations) and sent (produced) topics alike.

Reserved names: the `svc:` topic namespace and the default well-known prefix.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final, Protocol

from ._schema import JsonSchema


class TopicContract(Protocol):
    """What a `Registration` and a `ProducedTopic` have in common."""

    @property
    def topic(self) -> str: ...

    @property
    def version(self) -> str: ...

    @property
    def request_schema(self) -> JsonSchema: ...

    @property
    def response_schema(self) -> JsonSchema: ...


def topic_descriptor(contract: TopicContract) -> dict[str, Any]:
    """Schemas are embedded verbatim (the cached, shared dicts); an empty version is omitted."""
    entry: dict[str, Any] = {"id": contract.topic}
    if contract.version:
        entry["version"] = contract.version
    entry["requestSchema"] = contract.request_schema
    entry["responseSchema"] = contract.response_schema
    return entry


def topic_descriptors(contracts: Iterable[TopicContract]) -> list[dict[str, Any]]:
    """Descriptors in sorted (id, version) order, whatever order the contracts come in."""
    return [topic_descriptor(c) for c in sorted(contracts, key=lambda c: (c.topic, c.version))]


RESERVED_TOPIC_PREFIX: Final = "svc:"
DEFAULT_PREFIX: Final = "/svc"

MESH_TOPIC: Final = "svc:mesh"
SPEC_TOPIC: Final = "svc:spec"
HEALTHCHECK_TOPIC: Final = "svc:healthcheck"
REGISTER_TOPIC: Final = "svc:mesh:register"
HEARTBEAT_TOPIC: Final = "svc:mesh:heartbeat"
TRACES_TOPIC: Final = "svc:mesh:traces"
ISSUES_TOPIC: Final = "svc:mesh:issues"
QUERY_FLEET_TOPIC: Final = "svc:mesh:query:fleet"
QUERY_SERVICE_TOPIC: Final = "svc:mesh:query:service"
QUERY_TOPIC_TOPIC: Final = "svc:mesh:query:topic"
QUERY_TRACE_TOPIC: Final = "svc:mesh:query:trace"
QUERY_CONTRACT_TOPIC: Final = "svc:mesh:query:contract"
UNKNOWN_TOPIC: Final = "svc:unknown"
"""Where an invocation of a topic the service does not have is counted (its issues, the collector's counters): one
bucket per service, so callers cannot fill those tables with made-up names. The name stays in its trace event."""

VERSION_HEADERS: Final = ("svc-version", "version", "x-version")
"""Caller headers that select a topic version, in order of precedence."""
VERSION_ECHO_HEADER: Final = "svc-version"
"""The header a response echoes the selected version in, and a client call selects its version with."""
VERSION_PATH_PARAM: Final = "version"


def is_reserved_topic(topic: str) -> bool:
    return topic.startswith(RESERVED_TOPIC_PREFIX)


def normalize_prefix(prefix: str) -> str:
    """`svc`, `/svc/` and `/svc` all mean `/svc`; an empty or `/` prefix mounts at the root."""
    stripped = prefix.strip().strip("/")
    return f"/{stripped}" if stripped else ""
