"""The estate: manifest.json (one line per service) and services/<file>.json (its spec and health).

A service's heartbeats speak for its health only while fresh: an instance that missed three heartbeats is listed
with `stale: true` in its service file (`instances`, `staleInstances`) and not counted; one silent for longer than
the collector's retention is not listed. A service is in the estate when the collector has registered, polled or
heard a heartbeat from it; a
service known only from traces has no contract or health to show and stays out. `specUrl` and `healthUrl`
are the service's live well-known surfaces, `{baseUrl}{prefix}/spec|health`, known only for a service
with a base URL (a polled one); the artifact file of a service is derivable from its name (filenames.py).

The per-service spec is the last polled spec verbatim with the collector's hashes. A service never polled
shows the spec its registered descriptor implies (`{service, topics}`, the same topic descriptors), hashed
the same way, with `fetchedAtUtc` its register time and no previous hash.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from ...runtime._jsontext import content_hash, hash_bytes
from ...runtime._logging import shown
from ...runtime._topics import DEFAULT_PREFIX, normalize_prefix
from ..declarations import current_entries
from ..snapshot import CatalogEntry, InstanceEntry, Json, PollEntry, Snapshot
from .health import HealthVerdict, newest_poll, service_health
from .times import utc_text

CONTRACT_DRIFT: Final = "contract-drift"
"""The collector's own issue classification."""


@dataclass(slots=True)
class _ServiceFacts:
    name: str
    entry: CatalogEntry | None = None
    polls: list[PollEntry] = field(default_factory=list)
    instances: list[InstanceEntry] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Spec:
    text: str
    hash: str
    previous_hash: str | None
    fetched_at: str | None


def estate_names(snapshot: Snapshot) -> list[str]:
    names = {entry["service"] for entry in snapshot["catalog"]}
    names.update(poll["service"] for poll in snapshot["polls"])
    names.update(instance["service"] for instance in snapshot["instances"])
    return sorted(names)


def build_estate_manifest(snapshot: Snapshot, *, generated_at: str, prefix: str = DEFAULT_PREFIX) -> Json:
    drifting = _drifting_services(snapshot)
    services: list[Json] = []
    for facts in _facts(snapshot):
        poll = newest_poll(facts.polls)
        base_url = _base_url(facts.entry, poll)
        live = [instance for instance in facts.instances if not _stale(instance, snapshot)]
        services.append(
            {
                "name": facts.name,
                "status": service_health(poll, live).status,
                "contractDrift": facts.name in drifting,
                "specUrl": _surface_url(base_url, poll.get("prefix", prefix) if poll else prefix, "spec"),
                "healthUrl": _surface_url(base_url, poll.get("prefix", prefix) if poll else prefix, "health"),
            }
        )
    return {"generatedAtUtc": generated_at, "services": services}


def build_service_documents(snapshot: Snapshot) -> dict[str, Json]:
    """services/<file>.json per service name; the writer decides the file names."""
    drifting = _drifting_services(snapshot)
    documents: dict[str, Json] = {}
    for facts in _facts(snapshot):
        poll = newest_poll(facts.polls)
        live = [instance for instance in facts.instances if not _stale(instance, snapshot)]
        verdict: HealthVerdict = service_health(poll, live)
        named = sorted((i for i in facts.instances if i["instanceId"]), key=lambda instance: instance["instanceId"])
        spec = _spec_of(facts.entry)
        documents[facts.name] = {
            "name": facts.name,
            "fetchedAtUtc": spec.fetched_at if spec else None,
            "specJson": spec.text if spec else None,
            "specHash": spec.hash if spec else None,
            "previousSpecHash": spec.previous_hash if spec else None,
            "contractDrift": facts.name in drifting,
            "health": verdict.health,
            "error": poll.get("error") if poll is not None and not poll["ok"] else None,
            "instances": [_instance(instance, snapshot) for instance in named],
            "staleInstances": sum(1 for instance in named if _stale(instance, snapshot)),
        }
    return documents


def _facts(snapshot: Snapshot) -> list[_ServiceFacts]:
    facts = {name: _ServiceFacts(name) for name in estate_names(snapshot)}
    for name, entry in current_entries(snapshot["catalog"]).items():
        facts[name].entry = entry
    for poll in snapshot["polls"]:
        facts[poll["service"]].polls.append(poll)
    retained = snapshot.get("retainedSince", "")
    for instance in snapshot["instances"]:
        if instance.get("lastHeartbeatAt", retained) >= retained:  # long silent: not shown at all
            facts[instance["service"]].instances.append(instance)
    return list(facts.values())


def _stale(instance: InstanceEntry, snapshot: Snapshot) -> bool:
    """Missed three heartbeats when the snapshot was taken: its health no longer speaks for the service."""
    since = snapshot.get("staleSince")
    return since is not None and instance.get("lastHeartbeatAt", since) < since


def _instance(instance: InstanceEntry, snapshot: Snapshot) -> Json:
    stale = _stale(instance, snapshot)
    health = instance.get("health")
    return {
        "instanceId": instance["instanceId"],
        "stale": stale,
        "healthy": None if stale or health is None else health.get("isHealthy") is not False,
        "lastHeartbeatAt": utc_text(instance.get("lastHeartbeatAt")),
    }


def _drifting_services(snapshot: Snapshot) -> set[str]:
    """A contract-drift issue, or an instance whose heartbeat hash differs from the registered descriptor."""
    drifting = {
        issue["service"]
        for issue in snapshot["issues"]
        if isinstance(issue, Mapping)
        and issue.get("classification") == CONTRACT_DRIFT
        and isinstance(issue.get("service"), str)
    }
    drifting.update(instance["service"] for instance in snapshot["instances"] if not instance["hashMatches"])
    return drifting


def _spec_of(entry: CatalogEntry | None) -> _Spec | None:
    if entry is None:
        return None
    spec = entry.get("spec")
    if isinstance(spec, Mapping):
        data = hash_bytes(spec)
        return _Spec(
            data.decode("utf-8", "surrogatepass"),
            entry.get("specHash") or content_hash(data),
            entry.get("previousSpecHash"),
            utc_text(entry.get("specFetchedAt")),
        )
    descriptor = entry.get("descriptor")
    topics = descriptor.get("topics") if isinstance(descriptor, Mapping) else None
    if not isinstance(topics, list):
        return None
    data = hash_bytes({"service": entry["service"], "topics": topics})
    return _Spec(data.decode("utf-8", "surrogatepass"), content_hash(data), None, utc_text(entry.get("registeredAt")))


def _base_url(entry: CatalogEntry | None, poll: PollEntry | None) -> str | None:
    if poll is not None:
        return poll["baseUrl"]
    return entry.get("baseUrl") if entry is not None else None


def _surface_url(base_url: str | None, prefix: str, surface: str) -> str | None:
    if not base_url:
        return None
    # A --poll URL may carry user:password@ for the poller; the artifacts are published, so they leave it out.
    return f"{shown(base_url).rstrip('/')}{normalize_prefix(prefix)}/{surface}"
