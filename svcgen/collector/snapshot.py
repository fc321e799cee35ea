"""The collector snapshot: everything a collector knows, as plain JSON, and the contract between its parts.

The collector exports and restores it, the stores save and load it, and the UI artifacts are written from
it alone (`svcgen artifacts --store FILE -o DIR`). Times are RFC 3339 UTC strings. Optional keys are
omitted when unknown, never null. Every list is bounded by the collector's caps.
"""

from __future__ import annotations

from typing import Any, Final, NotRequired, TypedDict

SNAPSHOT_FORMAT: Final = 1

Json = dict[str, Any]


class TopicChange(TypedDict):
    """A consumer (a service handling the topic) re-registered it with a different schema."""

    topic: str
    version: str
    at: str
    fields: list[str]
    """Which of `requestSchema`, `responseSchema` changed."""
    fromSchemas: NotRequired[str]
    toSchemas: NotRequired[str]
    """Hashes of the topic's schemas before and after (sha256 of `{requestSchema, responseSchema}`): a change to
    schemas already seen is not recorded again."""


class CatalogEntry(TypedDict):
    """One (service, serviceVersion): the newest register and the newest successful poll of it."""

    service: str
    serviceVersion: NotRequired[str]
    descriptor: NotRequired[Json]
    """The last registered descriptor, verbatim."""
    descriptorHash: NotRequired[str]
    registeredAt: NotRequired[str]
    spec: NotRequired[Json]
    """The last spec document, from a poll of `{prefix}/spec`."""
    specHash: NotRequired[str]
    """`sha256:` + hex of the spec as JSON with sorted keys, no whitespace."""
    previousSpecHash: NotRequired[str]
    specFetchedAt: NotRequired[str]
    baseUrl: NotRequired[str]
    """Known when the service is polled."""
    changes: list[TopicChange]
    removedTopics: list[Json]
    """`{topic, version}` a re-register or a newer spec no longer provides."""


class InstanceEntry(TypedDict):
    service: str
    instanceId: str
    serviceVersion: NotRequired[str]
    descriptorHash: NotRequired[str]
    hashMatches: bool
    """False when the heartbeat's hash differs from the registered descriptor's."""
    registerExpected: bool
    """Set by a hash mismatch; cleared by the next register."""
    health: NotRequired[Json]
    """The heartbeat's `{isHealthy, healthChecks}`."""
    lastHeartbeatAt: NotRequired[str]


class PollEntry(TypedDict):
    """The newest poll of one configured fleet member (name + base URL)."""

    service: str
    baseUrl: str
    prefix: NotRequired[str]
    """Where its well-known surfaces are, when not under the default prefix."""
    at: str
    ok: bool
    error: NotRequired[str]
    """Why the poll failed: non-2xx, timeout, bad JSON, connection refused."""
    health: NotRequired[Json]
    """The health aggregate (200 and 503 answers are both data)."""
    failures: int
    """Failed polls in a row."""


class FeedEntry(TypedDict):
    """Which feeds a service has sent; drives `missingFeeds`."""

    service: str
    traces: bool
    issueBatches: int
    """Issue batches received; an empty batch counts."""
    unexplainedFailures: int
    """Failing trace events seen while no issues batch had ever been received."""


class CounterEntry(TypedDict):
    """Exact per (service, topic, version, status); never trimmed with the trace window."""

    service: str
    topic: str
    version: str
    status: str
    count: int
    totalDurationMs: float
    """Sum over events that carried `durationMs`; `timedCount` of them."""
    timedCount: int
    firstStartedAt: NotRequired[str]
    lastStartedAt: NotRequired[str]


class EdgeEntry(TypedDict):
    """A client service calling a server service, found by a span whose parent is another service's span."""

    client: str
    server: str
    count: int
    errors: int
    """Calls that failed on the server's side (5xx statuses, exceptions, statuses outside the table)."""
    clientErrors: NotRequired[int]
    """Calls answered with a client failure (4xx); absent in snapshots written before it was counted."""
    recentDurationsMs: list[float]
    """The newest durations, bounded; percentiles are computed from these."""
    firstStartedAt: NotRequired[str]
    lastStartedAt: NotRequired[str]


class TraceWindow(TypedDict):
    cap: int
    dropped: int
    """Events pushed out of the window since the collector started; counters keep them."""
    events: list[Json]
    """Raw trace events as received, oldest first."""


class BatchEntry(TypedDict):
    """A traces or issues batch already counted, by the `batchId` its reporter sent."""

    feed: str
    """`traces` or `issues`."""
    batchId: str
    accepted: int
    """What the batch was answered, answered again to a retry."""


class Snapshot(TypedDict):
    format: int
    savedAt: str
    staleSince: NotRequired[str]
    """Instances whose last heartbeat is older are stale (three missed heartbeats when the snapshot was taken)."""
    retainedSince: NotRequired[str]
    """Instances silent since before it are no longer shown."""
    catalog: list[CatalogEntry]
    instances: list[InstanceEntry]
    polls: list[PollEntry]
    feeds: list[FeedEntry]
    issues: list[Json]
    """Merged issues in the wire shape of docs/mesh-view.md (Issues), including the collector's own `contract-drift`."""
    counters: list[CounterEntry]
    edges: list[EdgeEntry]
    buckets: NotRequired[list[list[Any]]]
    """Per-minute cells of the time buckets (buckets.py), `[kind, key..., minute, count, timed, totalMs, bins...]`:
    kind `t` for a topic series (service, topic, version, transport, status), `e` for an edge (client, server,
    status)."""
    windows: NotRequired[dict[str, Any]]
    """What windows.json shows, computed by a running collector for the artifact writer (instead of `buckets`)."""
    transports: NotRequired[list[list[str]]]
    """`[service, topic, version, status, transport]` of the bucketed calls that said their transport."""
    traces: TraceWindow
    skipped: int
    """Malformed trace or issue entries skipped since the collector started."""
    batches: NotRequired[list[BatchEntry]]
    """The newest batch ids seen, oldest first."""
    dropped: NotRequired[dict[str, int]]
    """What the limits dropped or refused, per table, as the fleet query's `dropped`."""
