"""topics.json: the topic map, from the registered descriptors and polled specs of the current services.

The messaging vocabulary (the collector's queries use it too): a topic's consumers handle it (their descriptor's
or spec's `topics` list it); its producers send it (their descriptor's `produces`; the queries call them
providers). The version is `""` for an unversioned topic, as in the snapshot.

Schemas come from the consumers, the first in service-name order, or from the producers when nobody handles the
topic. `schemaMismatch` is true when two consumers disagree on either schema, or when a producer's schemas do not
fit a consumer's (collector/mismatches.py: what it sends is refused, or what it is answered does not decode).
`changes` (only present when there are some) are the consumers' re-registrations with a new schema, each change
once. `removedTopics` are topics once handled (named in a catalog entry's `removedTopics`, or handled by an older
serviceVersion) that no current consumer handles.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from ...runtime._jsontext import hash_bytes
from ...runtime._topics import is_reserved_topic
from ..declarations import TopicContract, current_entries, produced_topics, served_topics
from ..mismatches import find_mismatches, mismatched_topics
from ..snapshot import Json, Snapshot
from .times import utc_text

TopicKey = tuple[str, str]


@dataclass(frozen=True, slots=True)
class TopicView:
    topic: str
    version: str
    consumers: list[str]
    producers: list[str]
    request_schema: Json
    response_schema: Json
    schema_mismatch: bool
    changes: list[Json]

    @property
    def reserved(self) -> bool:
        return is_reserved_topic(self.topic)


def topic_views(snapshot: Snapshot) -> list[TopicView]:
    current = current_entries(snapshot["catalog"])
    served: dict[TopicKey, list[TopicContract]] = defaultdict(list)
    sent: dict[TopicKey, list[TopicContract]] = defaultdict(list)
    for entry in current.values():
        for contract in served_topics(entry):
            served[contract.key].append(contract)
        for contract in produced_topics(entry):
            sent[contract.key].append(contract)
    changes = _changes_by_topic(snapshot, served)
    incompatible = mismatched_topics(find_mismatches(current.values()))
    views: list[TopicView] = []
    for key in sorted(served.keys() | sent.keys()):
        handlers, senders = served.get(key, []), sent.get(key, [])
        source = handlers or senders
        views.append(
            TopicView(
                topic=key[0],
                version=key[1],
                consumers=[contract.service for contract in handlers],
                producers=[contract.service for contract in senders],
                request_schema=source[0].request_schema,
                response_schema=source[0].response_schema,
                schema_mismatch=len({_schemas_text(contract) for contract in handlers}) > 1 or key in incompatible,
                changes=changes.get(key, []),
            )
        )
    return views


def build_topics(snapshot: Snapshot, *, generated_at: str) -> Json:
    topics: list[Json] = []
    for view in topic_views(snapshot):
        item: Json = {
            "topic": view.topic,
            "version": view.version,
            "reserved": view.reserved,
            "consumers": [{"service": name} for name in view.consumers],
            "producers": [{"service": name} for name in view.producers],
            "requestSchema": view.request_schema,
            "responseSchema": view.response_schema,
            "schemaMismatch": view.schema_mismatch,
        }
        if view.changes:
            item["changes"] = view.changes
        topics.append(item)
    return {"generatedAtUtc": generated_at, "topics": topics, "removedTopics": removed_topics(snapshot)}


def removed_topics(snapshot: Snapshot) -> list[Json]:
    current = current_entries(snapshot["catalog"])
    still_served = {contract.key for entry in current.values() for contract in served_topics(entry)}
    removed: set[TopicKey] = set()
    for entry in snapshot["catalog"]:
        for item in entry["removedTopics"]:
            if isinstance(item, Mapping) and isinstance(item.get("topic"), str):
                version = item.get("version")
                removed.add((item["topic"], version if isinstance(version, str) else ""))
        if current.get(entry["service"]) is not entry:
            removed.update(contract.key for contract in served_topics(entry))
    return [{"topic": topic, "version": version} for topic, version in sorted(removed - still_served)]


def _changes_by_topic(snapshot: Snapshot, served: Mapping[TopicKey, list[TopicContract]]) -> dict[TopicKey, list[Json]]:
    """Changes the current entries recorded for topics they still serve, oldest first."""
    changes: dict[TopicKey, list[Json]] = defaultdict(list)
    for name, entry in current_entries(snapshot["catalog"]).items():
        for change in entry["changes"]:
            key = (change["topic"], change["version"])
            if name in {contract.service for contract in served.get(key, [])}:
                fields = sorted(field for field in change["fields"] if isinstance(field, str))
                changes[key].append({"service": name, "at": utc_text(change["at"]), "fields": fields})
    for items in changes.values():
        items.sort(key=lambda item: (item["at"] or "", item["service"]))
    return dict(changes)


def _schemas_text(contract: TopicContract) -> bytes:
    return hash_bytes([contract.request_schema, contract.response_schema])
