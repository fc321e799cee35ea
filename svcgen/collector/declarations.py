"""Reading the catalog: which entry stands for a service, and the topics it serves and sends.

Descriptors and specs are outside input kept verbatim by the collector (decoded JSON: objects are dicts), so every
read here is defensive: a malformed topic entry is skipped, a missing or non-object schema is the open schema `{}`
(the topic descriptor default), a missing or non-string version is the empty version.
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from dataclasses import dataclass
from typing import Any

from ..runtime._mesh.clock import parse_rfc3339
from .snapshot import CatalogEntry, Json

_NEVER = float("-inf")


@dataclass(frozen=True, slots=True)
class TopicContract:
    service: str
    topic: str
    version: str
    request_schema: Json
    response_schema: Json

    @property
    def key(self) -> tuple[str, str]:
        return self.topic, self.version


def current_entries(catalog: Iterable[CatalogEntry]) -> dict[str, CatalogEntry]:
    """One entry per service: the one heard from last (register or spec poll); older serviceVersions are
    history. Ties go to the greater serviceVersion so the choice never depends on list order."""
    chosen: dict[str, CatalogEntry] = {}
    for entry in catalog:
        name = entry["service"]
        if name not in chosen or _recency(entry) > _recency(chosen[name]):
            chosen[name] = entry
    return dict(sorted(chosen.items()))


def served_topics(entry: CatalogEntry, topic_ids: Container[str] | None = None) -> list[TopicContract]:
    """From the newer of the registered descriptor and the polled spec; the other when it has no topic list. Only
    those of `topic_ids` when given."""
    descriptor_topics = _topic_list(entry.get("descriptor"), "topics")
    spec_topics = _topic_list(entry.get("spec"), "topics")
    if descriptor_topics is None or spec_topics is None:
        chosen = descriptor_topics if spec_topics is None else spec_topics
    else:
        newer_spec = _at(entry.get("specFetchedAt")) > _at(entry.get("registeredAt"))
        chosen = spec_topics if newer_spec else descriptor_topics
    return _contracts(entry["service"], chosen or [], topic_ids)


def produced_topics(entry: CatalogEntry) -> list[TopicContract]:
    """The descriptor's `produces`: topics the service sends. A spec does not say."""
    return _contracts(entry["service"], _topic_list(entry.get("descriptor"), "produces") or [])


@dataclass(frozen=True, slots=True)
class EventContract:
    """One event as one service's descriptor declares it: `role` `publisher` (then `publisher` is the service
    itself) or `subscriber`."""

    service: str
    role: str
    event: str
    version: str
    publisher: str
    payload_schema: Json


def declared_events(entry: CatalogEntry) -> list[EventContract]:
    """The descriptor's `events`: what the service publishes and subscribes to. A spec does not say."""
    descriptor = entry.get("descriptor")
    events = descriptor.get("events") if isinstance(descriptor, dict) else None
    if not isinstance(events, dict):
        return []
    service = entry["service"]
    declared: list[EventContract] = []
    for role, key in (("publisher", "publishes"), ("subscriber", "subscribes")):
        listed = events.get(key)
        for item in listed if isinstance(listed, list) else []:
            if not isinstance(item, dict) or not isinstance(item.get("id"), str):
                continue
            version = item.get("version")
            publisher = service if role == "publisher" else item.get("publisher")
            if not isinstance(publisher, str):
                continue
            declared.append(EventContract(service, role, item["id"], version if isinstance(version, str) else "",
                                          publisher, _schema(item.get("payloadSchema"))))  # fmt: skip
    return declared


def _recency(entry: CatalogEntry) -> tuple[float, str]:
    heard = max(_at(entry.get("registeredAt")), _at(entry.get("specFetchedAt")))
    return heard, entry.get("serviceVersion", "")


def _at(text: object) -> float:
    epoch = parse_rfc3339(text)
    return _NEVER if epoch is None else epoch


def _topic_list(document: object, key: str) -> list[Any] | None:
    if not isinstance(document, dict):
        return None
    topics = document.get(key)
    return topics if isinstance(topics, list) else None


def _contracts(service: str, entries: list[Any], topic_ids: Container[str] | None = None) -> list[TopicContract]:
    contracts: dict[tuple[str, str], TopicContract] = {}
    for item in entries:
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            continue
        if topic_ids is not None and item["id"] not in topic_ids:
            continue
        version = item.get("version")
        contract = TopicContract(
            service=service,
            topic=item["id"],
            version=version if isinstance(version, str) else "",
            request_schema=_schema(item.get("requestSchema")),
            response_schema=_schema(item.get("responseSchema")),
        )
        contracts.setdefault(contract.key, contract)  # a duplicated key: the first entry stands
    return [contracts[key] for key in sorted(contracts)]


def _schema(value: object) -> Json:
    return dict(value) if isinstance(value, dict) else {}
