"""The catalog: what each service says it is (register, polled spec) and how its instances are doing (heartbeats,
polled health).

- Entries are keyed by (service, serviceVersion); a re-register replaces the key's descriptor and records a
  TopicChange per topic whose request/response schema changed and a removed topic per topic no longer provided.
  A polled spec lands on the service's most recently updated entry (a spec carries no serviceVersion), with the
  same diffing against the previous spec.
- A schema change is recorded once: a topic's change to schemas it already had in the entry's recorded changes is
  not recorded again. So the same change seen by a register and by a poll is one change, and instances of one
  serviceVersion that disagree during a rolling deploy do not list it over and over.
- Instances are keyed by (service, instanceId). An instance exists once something names it: a register without
  `instanceId` creates none (it settles the drift of the instances already on its hash); a heartbeat without one is
  kept under `""` for its health, and is neither listed nor counted as an instance.
- Bounded in entries (`CollectorLimits.catalog`, `instances`, `polls`) and, together, in the JSON bytes of the documents
  they hold (`CollectorLimits.catalog_bytes`): past it the least recently updated entry of the table holding the most
  bytes goes. `evicted` counts what went, per table.
- A heartbeat whose descriptor hash is none of the service's registered hashes sets `hashMatches: false` and
  `registerExpected: true` (a drift); a heartbeat from a service the collector holds no descriptor for sets
  `registerExpected` too (the collector lost it or never had it). The next register of the instance clears both.
- The fleet read model has one member per (service, serviceVersion) (`members`): an instance belongs to the entry
  of its serviceVersion, else to the one of its descriptor hash, else to the service's newest; a poll to the entry
  it updated (same base URL), else to the newest.

An instance that has missed three heartbeats (silent for the collector's `stale_after`) is `stale`: listed with
`stale: true`, never counted healthy; one silent for longer than the retention is no longer listed (`listed`).

Health of a service (`health`), from the instances heard within `stale_after` and the polls:
- `unknown`: no health data (no fresh heartbeat, no poll);
- `healthy`: every fresh instance and every poll reports healthy (a successful poll of a service with no health
  checks to report counts as healthy, as the service's artifact status says);
- `unhealthy`: none does (a failed poll counts as unhealthy: the service is unreachable);
- `degraded`: some do, some do not.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import orjson

from ..runtime._descriptor import UNHASHED_KEYS
from ..runtime._jsontext import document_hash
from ..runtime._topics import DEFAULT_PREFIX
from .caps import CollectorLimits
from .declarations import declared_events
from .snapshot import CatalogEntry, InstanceEntry, Json, PollEntry, TopicChange
from .wire import require

Health = Literal["unknown", "healthy", "degraded", "unhealthy"]
_SCHEMAS: Final = ("requestSchema", "responseSchema")
NO_INSTANCE_ID: Final = ""
_TABLES: Final = ("catalog", "instances", "polls")


def descriptor_hash(descriptor: Json) -> str:
    """The descriptor's own hash, else the one it would have without its unhashed keys (docs/wire.md, Derived
    documents)."""
    sent = descriptor.get("descriptorHash")
    if isinstance(sent, str) and sent:
        return sent
    return document_hash({k: v for k, v in descriptor.items() if k not in UNHASHED_KEYS})


def _topics(document: Json | None, key: str = "topics") -> dict[tuple[str, str], Json]:
    """(id, version) → topic descriptor; entries that are not topic descriptors are ignored."""
    listed = document.get(key) if document else None
    topics: dict[tuple[str, str], Json] = {}
    if isinstance(listed, list):
        for topic in listed:
            if isinstance(topic, dict) and isinstance(topic.get("id"), str):
                version = topic.get("version")
                topics[(topic["id"], version if isinstance(version, str) else "")] = topic
    return topics


@dataclass(slots=True)
class ServiceRecords:
    entries: list[CatalogEntry] = field(default_factory=list)
    instances: list[InstanceEntry] = field(default_factory=list)
    polls: list[PollEntry] = field(default_factory=list)

    @property
    def described(self) -> bool:
        """A descriptor registered or a spec polled."""
        return any("descriptor" in entry or "spec" in entry for entry in self.entries)

    @property
    def has_health(self) -> bool:
        """Whether the service ever sent or answered health (drives `missingFeeds`)."""
        return any("health" in item for item in (*self.instances, *self.polls))

    def names(self, topic_id: str) -> bool:
        """Whether any of the service's documents (descriptors, specs, removed topics) mention `topic_id`: a cheap
        test before reading its topics."""
        for entry in self.entries:
            for document, key in ((entry.get("descriptor"), "topics"), (entry.get("descriptor"), "produces"),
                                  (entry.get("spec"), "topics")):  # fmt: skip
                listed = document.get(key) if document else None
                if isinstance(listed, list) and any(isinstance(t, dict) and t.get("id") == topic_id for t in listed):
                    return True
            if any(item.get("topic") == topic_id for item in entry.get("removedTopics", ())):
                return True
        return False

    def provided(self) -> set[tuple[str, str]]:
        """(topic, version) the service's descriptors and specs list."""
        topics: set[tuple[str, str]] = set()
        for entry in self.entries:
            topics.update(_topics(entry.get("descriptor")))
            topics.update(_topics(entry.get("spec")))
        return topics

    @property
    def named_instances(self) -> list[InstanceEntry]:
        """The instances something named (see the module docstring)."""
        return [instance for instance in self.instances if instance["instanceId"] != NO_INSTANCE_ID]

    def declared(self) -> frozenset[str] | None:
        """The topic ids the service handles or once handled, and the events it publishes or subscribes to (a
        publish and each delivery are traced under the event's id); None while it is not described (no descriptor
        registered, no spec polled)."""
        if not self.described:
            return None
        events = {event.event for entry in self.entries for event in declared_events(entry)}
        return frozenset({topic for topic, _ in self.provided() | self.removed()} | events)

    def removed(self) -> set[tuple[str, str]]:
        """(topic, version) the service once provided and no longer does."""
        topics: set[tuple[str, str]] = set()
        for entry in self.entries:
            for item in entry["removedTopics"]:
                if isinstance(item.get("topic"), str):
                    version = item.get("version")
                    topics.add((item["topic"], version if isinstance(version, str) else ""))
        return topics

    def listed(self, retained_since: str) -> list[InstanceEntry]:
        """The named instances heard within the retention (or never heartbeating: registered only)."""
        return [instance for instance in self.named_instances
                if instance.get("lastHeartbeatAt", retained_since) >= retained_since]  # fmt: skip

    def produced(self) -> set[tuple[str, str]]:
        """(topic, version) the service's descriptors say it sends."""
        topics: set[tuple[str, str]] = set()
        for entry in self.entries:
            topics.update(_topics(entry.get("descriptor"), "produces"))
        return topics

    def health(self, fresh_since: str) -> Health:
        """See the module docstring; `fresh_since` is the RFC 3339 time before which a heartbeat is stale."""
        seen: list[bool] = []
        for instance in self.instances:
            health = instance.get("health")
            if health is not None and instance.get("lastHeartbeatAt", "") >= fresh_since:
                seen.append(health.get("isHealthy") is not False)
        for poll in self.polls:
            if not poll["ok"]:
                seen.append(False)
            else:  # a service that answered with no health checks to report is healthy, as its artifact says
                seen.append(poll.get("health", {}).get("isHealthy") is not False)
        if not seen:
            return "unknown"
        if all(seen):
            return "healthy"
        return "degraded" if any(seen) else "unhealthy"


@dataclass(frozen=True, slots=True)
class HeartbeatVerdict:
    reregister: bool
    """Tell the reporter to register again."""
    drift: bool
    """The heartbeat's hash differs from every hash registered for the service."""


@dataclass(frozen=True, slots=True)
class Member:
    """One fleet entry: a (service, serviceVersion) and what belongs to it."""

    service: str
    version: str
    records: ServiceRecords


class Catalog:
    def __init__(self, limits: CollectorLimits) -> None:
        self.limits = limits
        self.entries: OrderedDict[tuple[str, str], CatalogEntry] = OrderedDict()
        self.instances: OrderedDict[tuple[str, str], InstanceEntry] = OrderedDict()
        self.polls: OrderedDict[tuple[str, str], PollEntry] = OrderedDict()
        self.evicted = dict.fromkeys(_TABLES, 0)
        """Entries dropped per table, past its cap or the byte budget."""
        self._sizes: dict[str, dict[Any, int]] = {table: {} for table in _TABLES}
        self._bytes = dict.fromkeys(_TABLES, 0)

    # --- ingest ---------------------------------------------------------------------------------------------

    def register(self, service: str, descriptor: Json, at: str) -> None:
        version = descriptor.get("serviceVersion")
        version = version if isinstance(version, str) else ""
        entry = self._entry(service, version)
        previous = entry.get("descriptor")
        if previous is not None:
            self._diff(entry, _topics(previous), _topics(descriptor), at)
        digest = descriptor_hash(descriptor)
        entry["descriptor"] = descriptor
        entry["descriptorHash"] = digest
        entry["registeredAt"] = at
        self._resize("catalog", (service, version), _entry_size(entry))
        named = instance_id(descriptor)
        if named == NO_INSTANCE_ID:
            for instance in self.instances.values():
                if instance["service"] == service and instance.get("descriptorHash") == digest:
                    instance["hashMatches"] = True
                    instance["registerExpected"] = False
            return
        instance = self._instance(service, named)
        if version:
            instance["serviceVersion"] = version
        instance["descriptorHash"] = digest
        instance["hashMatches"] = True
        instance["registerExpected"] = False

    def heartbeat(self, service: str, heartbeat: Json, health: Json, at: str) -> HeartbeatVerdict:
        instance = self._instance(service, instance_id(heartbeat))
        sent = heartbeat.get("descriptorHash")
        held = {entry["descriptorHash"] for entry in self._of(service) if "descriptorHash" in entry}
        drift = False
        if not held:
            instance["registerExpected"] = True
        elif isinstance(sent, str) and sent:
            drift = sent not in held
            instance["hashMatches"] = not drift
            if drift:
                instance["registerExpected"] = True
        if isinstance(sent, str) and sent:
            instance["descriptorHash"] = sent
        instance["health"] = health
        instance["lastHeartbeatAt"] = at
        verdict = HeartbeatVerdict(instance["registerExpected"], drift)
        self._resize("instances", (service, instance_id(heartbeat)), _json_size(health))
        return verdict

    def poll(
        self, service: str, base_url: str, at: str, *, spec: Json | None, health: Json | None, error: str | None,
        prefix: str = DEFAULT_PREFIX,
    ) -> None:
        key = (service, base_url)
        previous = self.polls.get(key)
        poll = PollEntry(service=service, baseUrl=base_url, at=at, ok=error is None, failures=0)
        if prefix != DEFAULT_PREFIX:
            poll["prefix"] = prefix
        if error is not None:
            poll["error"] = error
            poll["failures"] = (previous["failures"] if previous else 0) + 1
        elif health is not None:
            poll["health"] = health
        self._put("polls", key, poll)
        self._resize("polls", key, _json_size(health) if error is None and health is not None else 0)
        if error is not None:
            return
        version = self._newest_version(service)
        entry = self._entry(service, version)
        entry["baseUrl"] = base_url
        if spec is None:
            return
        if spec is entry.get("spec"):
            entry["specFetchedAt"] = at
            return
        digest = document_hash(spec)
        if digest != entry.get("specHash"):
            if "spec" in entry:
                self._diff(entry, _topics(entry.get("spec")), _topics(spec), at)
            if "specHash" in entry:
                entry["previousSpecHash"] = entry["specHash"]
            entry["spec"] = spec
            entry["specHash"] = digest
            self._resize("catalog", (service, version), _entry_size(entry))
        entry["specFetchedAt"] = at

    # --- reads ----------------------------------------------------------------------------------------------

    def services(self) -> set[str]:
        names = {service for service, _ in self.entries}
        names.update(service for service, _ in self.instances)
        names.update(service for service, _ in self.polls)
        return names

    def records(self, service: str) -> ServiceRecords:
        """The catalog entries of `service` (instances and polls left out)."""
        return ServiceRecords(entries=self._of(service))

    def grouped(self) -> dict[str, ServiceRecords]:
        """Everything the catalog holds, per service, in one pass (a fleet query must not rescan per service)."""
        groups: dict[str, ServiceRecords] = {}
        for (service, _), entry in self.entries.items():
            groups.setdefault(service, ServiceRecords()).entries.append(entry)
        for (service, _), instance in self.instances.items():
            groups.setdefault(service, ServiceRecords()).instances.append(instance)
        for (service, _), poll in self.polls.items():
            groups.setdefault(service, ServiceRecords()).polls.append(poll)
        return groups

    def members(self) -> list[Member]:
        """The fleet read model's entries, sorted by (service, serviceVersion); see the module docstring."""
        members: dict[tuple[str, str], Member] = {}
        by_service: dict[str, list[Member]] = {}
        newest: dict[str, Member] = {}
        for (service, version), entry in self.entries.items():
            member = members[(service, version)] = Member(service, version, ServiceRecords(entries=[entry]))
            by_service.setdefault(service, []).append(member)
            if service not in newest or _heard(entry) >= _heard(newest[service].records.entries[0]):
                newest[service] = member

        def owner(service: str, key: str, value: str | None) -> Member:
            """The service's member whose entry has `key` == `value`, else its newest (made when it has none)."""
            for member in by_service.get(service, ()) if value is not None else ():
                if member.records.entries[0].get(key) == value:
                    return member
            found = newest.get(service)
            if found is None:
                found = newest[service] = members[(service, "")] = Member(service, "", ServiceRecords())
            return found

        for (service, _), instance in self.instances.items():
            own_version, digest = instance.get("serviceVersion"), instance.get("descriptorHash")
            belongs = members.get((service, own_version)) if own_version else None
            if belongs is None:
                belongs = owner(service, "descriptorHash", digest)
            belongs.records.instances.append(instance)
        for (service, base_url), poll in self.polls.items():
            owner(service, "baseUrl", base_url).records.polls.append(poll)
        return [members[key] for key in sorted(members)]

    def expects_register(self, service: str, instance_id: str) -> bool:
        instance = self.instances.get((service, instance_id))
        return instance is not None and instance["registerExpected"]

    def held_spec(self, service: str) -> Json | None:
        """The spec the next poll of `service` would be compared with."""
        entry = self._spec_entry(service)
        return entry.get("spec") if entry is not None else None

    def holds_spec(self, service: str, spec: Json) -> bool:
        """Whether `spec` is the spec held for `service`: the same object (the poller hands the same one over
        while the bytes it fetches do not change), else the same hash."""
        entry = self._spec_entry(service)
        if entry is None or "spec" not in entry:
            return False
        return spec is entry["spec"] or entry.get("specHash") == document_hash(spec)

    def adopt_spec(self, service: str, spec: Json) -> None:
        """Hold `spec`, equal to the held one, in its place: the next poll handing it over is then recognised
        as unchanged without hashing it."""
        entry = self._spec_entry(service)
        if entry is not None and "spec" in entry:
            entry["spec"] = spec

    def _spec_entry(self, service: str) -> CatalogEntry | None:
        """The entry a poll of `service` lands on (see `poll`)."""
        return self.entries.get((service, self._newest_version(service)))

    def _of(self, service: str) -> list[CatalogEntry]:
        return [entry for (name, _), entry in self.entries.items() if name == service]

    # --- helpers --------------------------------------------------------------------------------------------

    def _entry(self, service: str, version: str) -> CatalogEntry:
        key = (service, version)
        entry = self.entries.get(key)
        if entry is None:
            entry = CatalogEntry(service=service, changes=[], removedTopics=[])
            if version:
                entry["serviceVersion"] = version
        self._put("catalog", key, entry)
        return entry

    def _newest_version(self, service: str) -> str:
        newest = ""
        for name, version in self.entries:
            if name == service:
                newest = version
        return newest

    def _instance(self, service: str, instance_id: str) -> InstanceEntry:
        key = (service, instance_id)
        instance = self.instances.get(key)
        if instance is None:
            instance = InstanceEntry(service=service, instanceId=instance_id, hashMatches=True, registerExpected=False)
        self._put("instances", key, instance)
        return instance

    # --- bounds ---------------------------------------------------------------------------------------------

    def _table(self, table: str) -> tuple[OrderedDict[Any, Any], int]:
        if table == "catalog":
            return self.entries, self.limits.catalog
        if table == "instances":
            return self.instances, self.limits.instances
        return self.polls, self.limits.polls

    def _put(self, table: str, key: Any, value: Any) -> None:
        """Insert or refresh `key` as the newest of `table`; the oldest go past its cap."""
        rows, cap = self._table(table)
        rows[key] = value
        rows.move_to_end(key)
        while len(rows) > cap:
            self._evict_oldest(table)

    def _resize(self, table: str, key: Any, size: int) -> None:
        """Record the document bytes `key` holds; past the budget the oldest of the largest table go."""
        if key not in self._table(table)[0]:
            return  # evicted already
        sizes = self._sizes[table]
        self._bytes[table] += size - sizes.get(key, 0)
        sizes[key] = size
        while sum(self._bytes.values()) > self.limits.catalog_bytes:
            self._evict_oldest(max(_TABLES, key=self._bytes.__getitem__))

    def _evict_oldest(self, table: str) -> None:
        key, _ = self._table(table)[0].popitem(last=False)
        self._bytes[table] -= self._sizes[table].pop(key, 0)
        self.evicted[table] += 1

    def _diff(self, entry: CatalogEntry, old: dict[tuple[str, str], Json], new: dict[tuple[str, str], Json],
              at: str) -> None:
        """Record changes (see the module docstring) and removals from `old` to `new`."""
        for key, topic in new.items():
            before = old.get(key)
            if before is None:
                continue
            fields = [name for name in _SCHEMAS if before.get(name, {}) != topic.get(name, {})]
            if not fields:
                continue
            schemas = _schemas_hash(topic)
            known = {digest for change in entry["changes"] if (change["topic"], change["version"]) == key
                     for digest in (change.get("fromSchemas"), change.get("toSchemas"))}
            if schemas not in known:
                entry["changes"].append(TopicChange(topic=key[0], version=key[1], at=at, fields=fields,
                                                    fromSchemas=_schemas_hash(before), toSchemas=schemas))
        del entry["changes"][: -self.limits.changes]
        removed = entry["removedTopics"]
        # A topic provided again is no longer removed.
        removed[:] = [item for item in removed if (item.get("topic"), item.get("version", "")) not in new]
        for key in old.keys() - new.keys():
            removed.append({"topic": key[0], "version": key[1]})
        del removed[: -self.limits.removed_topics]

    # --- snapshot -------------------------------------------------------------------------------------------

    def snapshot(self) -> tuple[list[CatalogEntry], list[InstanceEntry], list[PollEntry]]:
        # Descriptors, specs and health documents are replaced, never mutated, so they are shared.
        catalog = [
            CatalogEntry(**{**entry, "changes": list(entry["changes"]),
                            "removedTopics": list(entry["removedTopics"])})
            for entry in self.entries.values()
        ]
        instances = [InstanceEntry(**instance) for instance in self.instances.values()]
        polls = [PollEntry(**poll) for poll in self.polls.values()]
        return catalog, instances, polls

    def restore(self, catalog: list[CatalogEntry], instances: list[InstanceEntry], polls: list[PollEntry]) -> None:
        for entry in catalog:
            require(entry, {"service": str, "changes": list, "removedTopics": list})
            copied = CatalogEntry(**{**entry, "changes": list(entry["changes"]),
                                     "removedTopics": list(entry["removedTopics"])})
            key = (entry["service"], entry.get("serviceVersion", ""))
            self._put("catalog", key, copied)
            self._resize("catalog", key, _entry_size(copied))
        for instance in instances:
            require(instance, {"service": str, "instanceId": str, "hashMatches": bool, "registerExpected": bool})
            key = (instance["service"], instance["instanceId"])
            self._put("instances", key, InstanceEntry(**instance))
            self._resize("instances", key, _json_size(instance.get("health")))
        for poll in polls:
            require(poll, {"service": str, "baseUrl": str, "at": str, "ok": bool, "failures": int})
            key = (poll["service"], poll["baseUrl"])
            self._put("polls", key, PollEntry(**poll))
            self._resize("polls", key, _json_size(poll.get("health")))


def _json_size(document: Json | None) -> int:
    return 0 if document is None else len(orjson.dumps(document))


def _entry_size(entry: CatalogEntry) -> int:
    return _json_size(entry.get("descriptor")) + _json_size(entry.get("spec"))


def _schemas_hash(topic: Json) -> str:
    return document_hash({name: topic.get(name, {}) for name in _SCHEMAS})


def _heard(entry: CatalogEntry) -> str:
    """When the entry was last heard of (RFC 3339 UTC text of one clock, so text order is time order)."""
    return max(entry.get("registeredAt", ""), entry.get("specFetchedAt", ""))


def instance_id(document: Json) -> str:
    """The instance a register or heartbeat speaks for (NO_INSTANCE_ID when it names none)."""
    value = document.get("instanceId")
    return value if isinstance(value, str) else NO_INSTANCE_ID


def is_stale(instance: InstanceEntry, fresh_since: str) -> bool:
    """Heartbeated once and silent since before `fresh_since` (three missed heartbeats)."""
    return instance.get("lastHeartbeatAt", fresh_since) < fresh_since


def instance_view(instance: InstanceEntry, fresh_since: str) -> dict[str, Any]:
    """`healthy` only for a live instance: a stale one says `stale: true` and nothing about its health."""
    view: dict[str, Any] = {"instanceId": instance["instanceId"]}
    health = instance.get("health")
    stale = is_stale(instance, fresh_since)
    if health is not None and not stale:
        view["healthy"] = health.get("isHealthy") is not False
    view["stale"] = stale
    view["hashMatches"] = instance["hashMatches"]
    view["registerExpected"] = instance["registerExpected"]
    if "serviceVersion" in instance:
        view["serviceVersion"] = instance["serviceVersion"]
    if "lastHeartbeatAt" in instance:
        view["lastHeartbeatAt"] = instance["lastHeartbeatAt"]
    return view
