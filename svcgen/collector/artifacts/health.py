"""Artifact health (`healthy | unhealthy | unreachable`) from the newest poll and the heartbeats.

The newest evidence decides:

- heartbeats newer than the newest poll (every heartbeat when the service is not polled) speak for the
  service: `unhealthy` when any of them says `isHealthy: false`, else `healthy`. A pushing service is
  reachable whatever a poll of it says, so a heartbeat after a failed poll overrides `unreachable`;
- otherwise a failed newest poll is `unreachable`; a successful one is its aggregate's `isHealthy`, or
  `healthy` when it carried no aggregate (the service answered and has no checks to report);
- with neither a poll nor a heartbeat the status is `unreachable`: no health was ever seen, and the spec's value
  set has no other word for it (a null badge reads as healthy on mesh dashboards). `health` and the service
  file's `error` are both null then, which is how the dashboard tells it from a failed poll ("no health seen").

The `health` shown beside it is the aggregate that decided: the poll's, or the newest heartbeat that
agrees with the status. Null when none did (a failed poll, or no evidence).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from ...runtime._mesh.clock import parse_rfc3339
from ..snapshot import InstanceEntry, Json, PollEntry

HEALTHY: Final = "healthy"
UNHEALTHY: Final = "unhealthy"
UNREACHABLE: Final = "unreachable"


@dataclass(frozen=True, slots=True)
class HealthVerdict:
    status: str
    health: Json | None


def newest_poll(polls: Iterable[PollEntry]) -> PollEntry | None:
    """A name polled at several base URLs: the newest poll stands (ties: the greater base URL)."""
    ranked = sorted(polls, key=lambda poll: (parse_rfc3339(poll["at"]) or 0.0, poll["baseUrl"]))
    return ranked[-1] if ranked else None


def service_health(poll: PollEntry | None, instances: Iterable[InstanceEntry]) -> HealthVerdict:
    beats = _heartbeats_after(instances, parse_rfc3339(poll["at"]) if poll is not None else None)
    if beats:
        return _from_heartbeats(beats)
    if poll is None:
        return HealthVerdict(UNREACHABLE, None)
    if not poll["ok"]:
        return HealthVerdict(UNREACHABLE, None)
    health = poll.get("health")
    if not isinstance(health, Mapping):
        return HealthVerdict(HEALTHY, None)
    return HealthVerdict(_status_of(health), dict(health))


def _heartbeats_after(instances: Iterable[InstanceEntry], since: float | None) -> list[tuple[float, Json]]:
    """(time, aggregate) of each instance's last heartbeat after `since`, newest first."""
    beats: list[tuple[float, str, Json]] = []
    for instance in instances:
        at = parse_rfc3339(instance.get("lastHeartbeatAt"))
        if at is None or (since is not None and at <= since):
            continue
        health = instance.get("health")
        # A heartbeat's isHealthy defaults to true, so a beat without an aggregate reads healthy.
        aggregate = dict(health) if isinstance(health, Mapping) else {"isHealthy": True, "healthChecks": {}}
        beats.append((at, instance["instanceId"], aggregate))
    beats.sort(key=lambda beat: beat[:2], reverse=True)
    return [(at, aggregate) for at, _, aggregate in beats]


def _from_heartbeats(beats: list[tuple[float, Json]]) -> HealthVerdict:
    unhealthy = [health for _, health in beats if _status_of(health) == UNHEALTHY]
    if unhealthy:
        return HealthVerdict(UNHEALTHY, unhealthy[0])
    return HealthVerdict(HEALTHY, beats[0][1])


def _status_of(health: Mapping[str, object]) -> str:
    return UNHEALTHY if health.get("isHealthy") is False else HEALTHY
