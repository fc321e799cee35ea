"""topics.json: the topic map, from the registered descriptors and polled specs of the current services.

The messaging vocabulary (the collector's queries use it too): a topic's consumers handle it (their descriptor's
or spec's `topics` list it); its producers send it (their descriptor's `produces`; the queries call them
providers). The version is `""` for an unversioned topic, as in the snapshot.

Schemas come from the consumers, the first in service-name order, or from the producers when nobody handles the
topic. `schemaMismatch` is true when two consumers disagree on either schema, or when a producer's schemas do not
fit a consumer's (collector/mismatches.py: what it sends is refused, or what it is answered does not decode).
`changes` (only present when there are some) are the consumers' re-registrations with a new schema, each change
once, with its `kind` and a `description`. `removedTopics` are topics once handled (named in a catalog entry's
`removedTopics`, or handled by an older serviceVersion) that no current consumer handles.

The contract gate's verdicts, by the contract diff's rules on the served JSON Schemas (runtime/_compatibility.py):
`compatibility` judges the version against the topic's previous version (`baselineVersion`, null for the first:
`overall` is then `baseline`), `overall` one of `identical`, `compatible`, `risky` (warnings only) or `breaking`, and
`changes` each rule that fired (`kind` the rule id, `compatibility` `breaking`, `risky` or `compatible`);
`versionCompatibility` the overall verdict against every other version of the topic; `declaredSchemas` each current
service's copy (role `consumer` or `producer`). `retire` says whether the version could go: `ready` when no producer
declares it and no traffic used it within `windowSeconds` before `generatedAtUtc` (`lastInvokedAt` the newest).

`events` (only present when some current service declares events): per (event, version), its `publishers` and
`subscribers` (from the descriptors' `events`) and the `payloadSchema`, the first publisher's.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from ...runtime._compatibility import RULES_BY_ID, WireDirection, schema_changes
from ...runtime._jsontext import hash_bytes
from ...runtime._mesh.clock import parse_rfc3339, rfc3339
from ...runtime._topics import is_reserved_topic
from ..declarations import (
    EventContract,
    TopicContract,
    current_entries,
    declared_events,
    produced_topics,
    served_topics,
)
from ..mismatches import find_mismatches, mismatched_topics
from ..snapshot import Json, Snapshot
from .times import utc_text

TopicKey = tuple[str, str]

RETIRE_WINDOW_SECONDS: Final = 7 * 86400
"""Traffic this recent keeps a (topic, version) from being retire-ready (`svcgen can-i-deploy`'s default window)."""
_VERDICTS: Final = {"error": "breaking", "warning": "risky", "info": "compatible"}


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
    declared: list[TopicContract] = field(default_factory=list)
    """Every current service's copy: the consumers' first, then the producers'."""

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
                declared=[*handlers, *senders],
            )
        )
    return views


def build_topics(snapshot: Snapshot, *, generated_at: str) -> Json:
    topics: list[Json] = []
    views = topic_views(snapshot)
    versions: dict[str, list[TopicView]] = defaultdict(list)
    for view in views:
        versions[view.topic].append(view)
    traffic = _last_invoked(snapshot)
    now = parse_rfc3339(generated_at)
    cutoff = None if now is None else rfc3339(now - RETIRE_WINDOW_SECONDS)
    for view in views:
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
        siblings = sorted(versions[view.topic], key=lambda other: _version_order(other.version))
        item["compatibility"] = _compatibility(view, siblings)
        item["versionCompatibility"] = {other.version: _judged(other, view)[0]
                                        for other in siblings if other is not view}  # fmt: skip
        item["declaredSchemas"] = [
            {"service": contract.service, "role": "consumer" if index < len(view.consumers) else "producer",
             "requestSchema": contract.request_schema, "responseSchema": contract.response_schema}
            for index, contract in enumerate(view.declared)
        ]  # fmt: skip
        last = traffic.get((view.topic, view.version))
        recent = last is not None and (cutoff is None or last >= cutoff)
        item["retire"] = {"ready": not view.producers and not recent, "producers": list(view.producers),
                          "lastInvokedAt": last, "windowSeconds": RETIRE_WINDOW_SECONDS}
        topics.append(item)
    document: Json = {"generatedAtUtc": generated_at, "topics": topics, "removedTopics": removed_topics(snapshot)}
    events = event_map(snapshot)
    if events:
        document["events"] = events
    return document


def event_map(snapshot: Snapshot) -> list[Json]:
    """Per (event, version) the current services declare: its publishers and subscribers, and the payload schema
    (the first publisher's, in service-name order, else the first subscriber's)."""
    declared: dict[TopicKey, list[EventContract]] = defaultdict(list)
    for entry in current_entries(snapshot["catalog"]).values():
        for contract in declared_events(entry):
            declared[(contract.event, contract.version)].append(contract)
    listed: list[Json] = []
    for (event, version), contracts in sorted(declared.items()):
        publishers = sorted({c.service for c in contracts if c.role == "publisher"})
        subscribers = sorted({c.service for c in contracts if c.role == "subscriber"})
        source = sorted(contracts, key=lambda c: (c.role != "publisher", c.service))[0]
        listed.append({"event": event, "version": version,
                       "publishers": [{"service": name} for name in publishers],
                       "subscribers": [{"service": name} for name in subscribers],
                       "payloadSchema": source.payload_schema})  # fmt: skip
    return listed


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
                changes[key].append({"service": name, "at": utc_text(change["at"]), "fields": fields,
                                     "kind": _change_kind(fields), "description": _change_description(name, key,
                                                                                                     fields)})
    for items in changes.values():
        items.sort(key=lambda item: (item["at"] or "", item["service"]))
    return dict(changes)


def _change_kind(fields: list[str]) -> str:
    """`request-schema-changed`, `response-schema-changed` or `schemas-changed`."""
    if fields == ["requestSchema"]:
        return "request-schema-changed"
    if fields == ["responseSchema"]:
        return "response-schema-changed"
    return "schemas-changed"


def _change_description(service: str, key: TopicKey, fields: list[str]) -> str:
    named = " and ".join(field.removesuffix("Schema") for field in fields) or "schema"
    label = f"{key[0]}@{key[1]}" if key[1] else key[0]
    return f"{service} re-registered {label} with a different {named} schema"


def _compatibility(view: TopicView, siblings: Sequence[TopicView]) -> Json:
    """The version against the topic's previous one (`baselineVersion`)."""
    earlier = [other for other in siblings if _version_order(other.version) < _version_order(view.version)]
    if not earlier:
        return {"baselineVersion": None, "overall": "baseline", "changes": []}
    baseline = earlier[-1]
    overall, changes = _judged(baseline, view)
    return {"baselineVersion": baseline.version, "overall": overall, "changes": changes}


def _judged(old: TopicView, new: TopicView) -> tuple[str, list[Json]]:
    """The overall verdict and the changes from `old`'s schemas to `new`'s, callers of `old` moving to `new`."""
    changes = []
    sides: tuple[tuple[WireDirection, Json, Json], ...] = (("request", old.request_schema, new.request_schema),
                                                          ("response", old.response_schema, new.response_schema))
    for direction, before, after in sides:
        for rule_id, path in schema_changes(before or {}, after or {}, direction=direction):
            rule = RULES_BY_ID[rule_id]
            changes.append({"kind": rule_id, "direction": direction, "path": path, "description": rule.why,
                            "compatibility": _VERDICTS[rule.level]})
    found = {change["compatibility"] for change in changes}
    overall = next((verdict for verdict in ("breaking", "risky") if verdict in found),
                   "compatible" if changes else "identical")
    return overall, changes


def _version_order(version: str) -> tuple[tuple[int, int | str], ...]:
    """`v2` before `v10`: ASCII digit runs compare as numbers, anything else (a registered "v1²") as text."""
    return tuple((0, int(part)) if part.isascii() and part.isdigit() else (1, part)
                 for part in re.findall(r"\d+|\D+", version))


def _last_invoked(snapshot: Snapshot) -> dict[TopicKey, str]:
    """The newest `startedAt` of each (topic, version)'s trace events, in the one UTC form."""
    last: dict[TopicKey, str] = {}
    for counter in snapshot["counters"]:
        started = utc_text(counter.get("lastStartedAt"))
        key = (counter["topic"], counter["version"])
        if started is not None and started > last.get(key, ""):
            last[key] = started
    return last


def _schemas_text(contract: TopicContract) -> bytes:
    return hash_bytes([contract.request_schema, contract.response_schema])
