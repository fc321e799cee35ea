"""The mesh topics' messages, declared once as typed records: the four feeds (register, heartbeat, traces, issues)
and the four collector queries, each request and answer (spec "Reserved topics", docs/mesh-view.md).

The reporter encodes its feeds through the runtime codec and the collector decodes them through it, so both sides
hold one rule, and the collector's served spec publishes these schemas for its eight topics. Wire names are the
camelCase of the attributes; a value that is not known is omitted, never null (`Meta(omit_null=True)`), and a time
is written in the mesh's one form, UTC to the millisecond with `Z` (`Meta(utc_millis=True)`, docs/wire.md).

The collector reads a batch entry by entry: a malformed entry is skipped and counted, not the batch refused (spec
"Collector ingest"), so a batch is first read with its entries still raw (`RawTraceBatch`, `RawIssueBatch`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, ClassVar, Final

from .._meta import Meta

MAX_TEXT: Final = 256
"""Longest id, name or status a feed may carry."""

PLAIN_TEXT: Final = r"^[^\x00\u202a-\u202e\u2066-\u2069]*$"
"""No NUL (no store's text can hold one: PostgreSQL refuses it) and no bidirectional override or isolate
(U+202A-U+202E, U+2066-U+2069), which would make a name read otherwise on the dashboard than it is: a feed
carries neither."""

MAX_DETAIL: Final = 1024
"""Longest failure detail a trace event may carry."""

NO_NUL: Final = r"^[^\x00]*$"
"""No NUL character: free text (a failure detail) a store can hold; names are held to PLAIN_TEXT."""

Text = Annotated[str, Meta(min_length=1, max_length=MAX_TEXT, pattern=PLAIN_TEXT)]
"""An id or a name: non-empty, bounded, plain (`PLAIN_TEXT`)."""
StatusText = Annotated[str, Meta(max_length=MAX_TEXT, pattern=PLAIN_TEXT)]
"""A result status as sent (an empty or unknown one is counted as a failure)."""
Count = Annotated[int, Meta(minimum=0)]
MAX_FLEET_LIMIT: Final = 1000
"""The most entries a fleet query may ask for per list (the collector's `MAX_FLEET_LIMIT`)."""
Minutes = Annotated[int, Meta(minimum=1)]

_MESH = Meta(omit_null=True, utc_millis=True)


# --- register: the service descriptor ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicDescriptor:
    """A served or sent topic: `{id, version?, requestSchema, responseSchema}`."""

    __svcgen_meta__: ClassVar[Meta] = _MESH
    id: Text
    version: Annotated[str, Meta(max_length=MAX_TEXT, pattern=PLAIN_TEXT)] | None = None
    request_schema: Any = None
    response_schema: Any = None


@dataclass(frozen=True, slots=True)
class PublishedEvent:
    """An event the service publishes: `{id, version, payloadSchema}`."""

    __svcgen_meta__: ClassVar[Meta] = _MESH
    id: Text
    version: Annotated[str, Meta(max_length=MAX_TEXT, pattern=PLAIN_TEXT)] = ""
    payload_schema: Any = None


@dataclass(frozen=True, slots=True)
class SubscribedEvent:
    """An event the service subscribes to, from `publisher`: `{id, version, publisher, payloadSchema}`."""

    __svcgen_meta__: ClassVar[Meta] = _MESH
    id: Text
    publisher: Text
    version: Annotated[str, Meta(max_length=MAX_TEXT, pattern=PLAIN_TEXT)] = ""
    payload_schema: Any = None


@dataclass(frozen=True, slots=True)
class EventDeclarations:
    """A descriptor's `events`: what the service publishes and what it subscribes to."""

    __svcgen_meta__: ClassVar[Meta] = _MESH
    publishes: list[PublishedEvent] = field(default_factory=list)
    subscribes: list[SubscribedEvent] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ServiceDescriptor:
    """The register feed's body: identity, served topics and sent topics (the `svc:mesh` answer)."""

    __svcgen_meta__: ClassVar[Meta] = _MESH
    service: Text
    service_version: Text | None = None
    runtime: Text | None = None
    binding: Text | None = None
    instance_id: Text | None = None
    placement: dict[str, str] | None = None
    topics: list[TopicDescriptor] | None = None
    produces: list[TopicDescriptor] | None = None
    events: EventDeclarations | None = None
    degraded: list[str] | None = None
    profile: dict[str, Any] | None = None
    descriptor_hash: Text | None = None


# --- heartbeat -----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CheckResult:
    __svcgen_meta__: ClassVar[Meta] = _MESH
    status: str
    detail: str | None = None


@dataclass(frozen=True, slots=True)
class HealthDocument:
    """`{isHealthy, healthChecks}`; absent, a service is healthy with no checks."""

    is_healthy: bool = True
    health_checks: dict[str, CheckResult] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Heartbeat:
    __svcgen_meta__: ClassVar[Meta] = _MESH
    service: Text
    sent_at: datetime | None = None
    instance_id: Text | None = None
    descriptor_hash: Text | None = None
    """The registered descriptor's hash: one that differs makes the collector ask for a register."""
    health: HealthDocument | None = None


# --- traces --------------------------------------------------------------------------------------------------


# Not frozen (treat it as immutable): a frozen dataclass sets each field through object.__setattr__, several times
# the cost, and the collector reads hundreds per batch.
@dataclass(slots=True)
class TraceEntry:
    """One finished invocation, as a service traced it."""

    __svcgen_meta__: ClassVar[Meta] = _MESH
    trace_id: Text
    span_id: Text
    service: Text
    topic: Text
    status: StatusText
    parent_span_id: Text | None = None
    instance_id: Text | None = None
    topic_version: Text | None = None
    exception_type: Text | None = None
    duration_ms: Annotated[float, Meta(minimum=0)] | None = None
    started_at: datetime | None = None
    correlation_id: Text | None = None
    transport: Text | None = None
    """What carried the call: `http`, `nats`, `envelope` or `event`."""
    failure_detail: Annotated[str, Meta(min_length=1, max_length=MAX_DETAIL, pattern=NO_NUL)] | None = None
    """The runtime's own reason for a failure (e.g. a response that did not fit its type), never a handler's text."""


@dataclass(frozen=True, slots=True)
class TraceBatch:
    """`batchId` is the same on every resend of a batch, so the collector counts it once."""

    __svcgen_meta__: ClassVar[Meta] = _MESH
    events: list[TraceEntry]
    batch_id: Text | None = None


@dataclass(frozen=True, slots=True)
class RawTraceBatch:
    """A batch whose entries are wire forms: what the collector reads first, and what the reporter sends (each
    entry written by `TraceEntry`'s codec)."""

    __svcgen_meta__: ClassVar[Meta] = _MESH
    events: list[Any]
    batch_id: Text | None = None


# --- issues --------------------------------------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)  # not frozen, as TraceEntry
class IssueEntry:
    """Failures of one fingerprint over a window; `count` is a delta (merged at the collector)."""

    __svcgen_meta__: ClassVar[Meta] = _MESH
    fingerprint: Text
    classification: Text
    service: Text | None = None
    """The batch's service (a batch speaks for one service)."""
    topic: Text
    version: Text | None = None
    transport: Text | None = None
    status: StatusText
    exception_type: Text | None = None
    count: Annotated[int, Meta(minimum=1)]
    first_seen: datetime
    last_seen: datetime
    exemplar_trace_ids: list[Text] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class IssueBatch:
    """An issue aggregator's flush; an empty one is the issues feed's liveness beat."""

    __svcgen_meta__: ClassVar[Meta] = _MESH
    service: Text
    issues: list[IssueEntry]
    batch_id: Text | None = None


@dataclass(frozen=True, slots=True)
class RawIssueBatch:
    service: Text
    issues: list[Any]
    batch_id: Text | None = None


@dataclass(frozen=True, slots=True)
class Accepted:
    """A feed's answer: how many entries were accepted; `reregister` when the collector wants a register."""

    __svcgen_meta__: ClassVar[Meta] = _MESH
    accepted: Count
    reregister: bool | None = None


# --- queries -------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FleetQuery:
    """One page of the fleet: at most `limit` services (by name, after `servicesAfter`), topics (by id, after
    `topicsAfter`) and issues (newest first); with `window` (`5m`, `1h`, `24h`) also what happened in it, ranked by
    impact. Ask the next page with the answer's `nextServices` / `nextTopics`."""

    __svcgen_meta__: ClassVar[Meta] = _MESH
    window: Text | None = None
    limit: Annotated[int, Meta(minimum=1, maximum=MAX_FLEET_LIMIT)] | None = None
    """Most entries per list (services, topics, issues, ranking); 200 when absent."""
    services_after: Text | None = None
    """List the services whose names sort after this one (the previous answer's `nextServices`)."""
    topics_after: Text | None = None
    """List the topics whose ids sort after this one (the previous answer's `nextTopics`)."""


@dataclass(frozen=True, slots=True)
class ServiceQuery:
    service: Text


@dataclass(frozen=True, slots=True)
class TopicQuery:
    __svcgen_meta__: ClassVar[Meta] = _MESH
    topic: Text
    window: Text | None = None
    """`5m`, `1h` or `24h`: adds the topic's figures within that window (`window` in the answer)."""


@dataclass(frozen=True, slots=True)
class TraceQuery:
    trace_id: Text


@dataclass(frozen=True, slots=True)
class ContractQuery:
    """The contract `service` runs now, and who uses it; `topics` adds the declared copies of other topics (the ones
    a change of the service would send), by topic id; `events` the declarations of other events (the ones a change
    would subscribe to), by event id."""

    service: Text
    topics: list[Text] = field(default_factory=list)
    events: list[Text] = field(default_factory=list)
    window_minutes: Minutes | None = None
    """Adds each usage's `windowInvocations`, counted in the time buckets over the minutes ending now, when the
    collector's buckets hold that span (else the answer has no `window` and the counts are all-time only)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetService:
    """One (service, serviceVersion) of the fleet."""

    __svcgen_meta__: ClassVar[Meta] = _MESH
    service: str
    service_version: str | None = None
    topics: Count
    """Topic ids the entry handles."""
    health: str
    """`unknown`, `healthy`, `degraded` or `unhealthy`."""
    instances: Count
    """Named instances heard within the collector's retention."""
    stale_instances: Count = 0
    """Of them, those that missed three heartbeats (not counted healthy)."""
    missing_feeds: list[str]
    """In the order descriptor, health, traces, issues."""


@dataclass(frozen=True, slots=True)
class TopicParties:
    """Who handles a topic (consumers) and who sends it (providers)."""

    topic: str
    providers: list[str]
    consumers: list[str]
    invocations: Count


@dataclass(slots=True, kw_only=True)
class FleetIssue(IssueEntry):
    """An issue of the fleet answer: a merged one, or the collector's `contract-mismatch`, which also names the
    consumer and the first breaking path (`detail`)."""

    consumer: Text | None = None
    detail: str | None = None


@dataclass(frozen=True, slots=True)
class FleetAnswer:
    __svcgen_meta__: ClassVar[Meta] = _MESH
    services: list[FleetService]
    topics: list[TopicParties]
    issues: list[FleetIssue]
    """Merged by fingerprint across instances and batches (each with its `service`), and the contract mismatches:
    the newest `limit`, most recently seen first (then by fingerprint)."""
    issues_omitted: Count
    """Issues held but left out of `issues` (older than the newest `limit`)."""
    dropped: dict[str, Count]
    """What the collector's limits dropped or refused, per table."""
    next_services: str | None = None
    """Present when more services follow: ask again with `servicesAfter` set to it."""
    next_topics: str | None = None
    """Present when more topics follow: ask again with `topicsAfter` set to it."""
    window: str | None = None
    ranking: list[RankedTopic] | None = None
    """With a `window`: the first `limit` (service, topic, version) with calls in it, by impact: server-side failures
    first, then the share of all the window's call time it took (`impact`, 0..1)."""
    ranking_omitted: Count | None = None
    """With a `window`: ranked entries left out of `ranking`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class InstanceView:
    __svcgen_meta__: ClassVar[Meta] = _MESH
    instance_id: str
    healthy: bool | None = None
    """Absent for a stale instance, or one that never sent health."""
    stale: bool = False
    """It missed three heartbeats."""
    hash_matches: bool
    """False when the instance's heartbeat carries another descriptor hash than the registered one."""
    register_expected: bool
    service_version: str | None = None
    last_heartbeat_at: str | None = None


@dataclass(frozen=True, slots=True)
class ServiceAnswer:
    service: str
    health: str
    instances: list[InstanceView]
    invocations: Count
    missing_feeds: list[str]


@dataclass(frozen=True, slots=True)
class TopicVersion:
    """One version of a topic: who declares it and its traffic, so a reviewer can tell whether it can go."""

    version: str
    providers: list[str]
    consumers: list[str]
    invocations: Count
    last_invoked_at: str | None
    """The newest `startedAt` of its trace events; null when none carried one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicAnswer:
    __svcgen_meta__: ClassVar[Meta] = _MESH
    topic: str
    providers: list[str]
    consumers: list[str]
    invocations: Count
    errors: Count
    """Server-side failures: 5xx statuses, exceptions, statuses outside the table."""
    client_errors: Count
    """Client answers (4xx)."""
    error_rate: float | None = None
    """Absent without calls, as `clientErrorRate`."""
    client_error_rate: float | None = None
    status_counts: dict[str, Count]
    versions: list[TopicVersion]
    window: WindowFigures | None = None
    publishers: list[str] | None = None
    """Only when the topic is an event: the services whose descriptors say they publish it."""
    subscribers: list[str] | None = None
    """Only when the topic is an event: the services whose descriptors say they subscribe to it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LatencyFigures:
    __svcgen_meta__: ClassVar[Meta] = _MESH
    invocations: Count
    errors: Count
    """Server-side failures."""
    client_errors: Count
    error_rate: float | None
    client_error_rate: float | None
    requests_per_minute: float
    avg_duration_ms: float | None
    p50_latency_ms: float | None
    p95_latency_ms: float | None
    p99_latency_ms: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class WindowVersion(LatencyFigures):
    version: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Sparkline:
    __svcgen_meta__: ClassVar[Meta] = _MESH
    """Calls and server-side failures per step of the window, oldest first."""

    step_minutes: Count
    calls: list[Count]
    errors: list[Count]


@dataclass(frozen=True, slots=True, kw_only=True)
class WindowFigures(LatencyFigures):
    """A topic within a time window: exact counts from the per-minute buckets, percentiles from their histograms."""

    window: str
    since: str
    until: str
    status_counts: dict[str, Count]
    versions: list[WindowVersion]
    sparkline: Sparkline


@dataclass(frozen=True, slots=True, kw_only=True)
class RankedTopic(LatencyFigures):
    service: str
    topic: str
    version: str
    impact: float


@dataclass(frozen=True, slots=True)
class VersionUsage:
    """One (topic, version): who declares it and its traffic."""

    topic: str
    version: str
    providers: list[str]
    consumers: list[str]
    invocations: Count
    last_invoked_at: str | None
    window_invocations: Count | None = None
    """Calls within the asked window (time buckets); absent without a window the collector can count."""


@dataclass(frozen=True, slots=True)
class ContractWindow:
    """The span `windowInvocations` count: `minutes` ending at the collector's current minute; [since, until)."""

    minutes: Count
    since: str
    until: str


@dataclass(frozen=True, slots=True)
class DeclaredSchemas:
    """A registered service's copy of a (topic, version): `consumer` when it handles it, `provider` when it sends it."""

    service: str
    role: str
    topic: str
    version: str
    request_schema: Any
    response_schema: Any


@dataclass(frozen=True, slots=True)
class DeclaredEvent:
    """A registered service's declaration of an (event, version) of `publisher`: role `publisher` (then `publisher`
    is the service itself) or `subscriber`, with its copy of the payload schema."""

    service: str
    role: str
    event: str
    version: str
    publisher: str
    payload_schema: Any


@dataclass(frozen=True, slots=True, kw_only=True)
class ContractAnswer:
    """The newest registered descriptor of the service, the usage of every (topic, version) it handles or sends
    (and of every version of the asked topics), the declared copies of the asked topics, and every declaration of
    the events it publishes or subscribes to (and of the asked events)."""

    __svcgen_meta__: ClassVar[Meta] = _MESH
    service: str
    service_version: str | None = None
    registered_at: str
    descriptor: dict[str, Any]
    usage: list[VersionUsage]
    declared: list[DeclaredSchemas]
    events: list[DeclaredEvent] = field(default_factory=list)
    window: ContractWindow | None = None


@dataclass(frozen=True, slots=True)
class TraceAnswer:
    trace_id: str
    events: list[TraceEntry]
    """The trace's events still in the collector's window, in arrival order."""
