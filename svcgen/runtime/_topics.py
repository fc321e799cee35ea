"""The topic descriptor `{id, version?, requestSchema, responseSchema}`: the one form the spec and the
service descriptor both carry, for served (registrations) and sent (produced) topics alike."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

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
