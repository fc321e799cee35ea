"""The four read models (docs/mesh-view.md, Queries), computed from the collector's tables on demand.

Vocabulary, the messaging sense: a topic's **consumers** handle it (their descriptor's or polled spec's
`topics` list it); its **providers** send it (their descriptor's `produces`). For example, when orders
sends `payments:capture` and payments handles it, the topic's providers are `[orders]` and its consumers
`[payments]`.

- fleet `{limit?, servicesAfter?, topicsAfter?}` → `{services: [{service, serviceVersion?, topics, health, instances,
  missingFeeds}], topics: [{topic, providers, consumers, invocations}], issues, issuesOmitted, nextServices?,
  nextTopics?}`: one bounded page. `services` one entry per (service, serviceVersion) of the first `limit` service
  names after `servicesAfter`, with `serviceVersion` when known; `topics` counts the topic ids the entry handles,
  `instances` its named instances heard within the retention, `staleInstances` those of them that missed three
  heartbeats; `missingFeeds` is the service's (feeds are not per version). `topics` the first `limit` topic ids
  after `topicsAfter`; `invocations` counts every trace event of the topic (all services, versions, statuses).
  `issues` the newest `limit` of the merged issues and the `contract-mismatch` issues derived from the catalog
  (mismatches.py), most recently seen first, then by fingerprint; `issuesOmitted` the rest. `nextServices` /
  `nextTopics` only when more follow: the cursor for the next page.
- service `{service}` → `{service, health, instances: [{instanceId, healthy?, stale, hashMatches, registerExpected,
  ...}],
  invocations, missingFeeds}`.
- topic `{topic}` → `{topic, providers, consumers, invocations, errors, clientErrors, errorRate, clientErrorRate,
  statusCounts, versions}`: `errors` counts server-side failures (5xx statuses, exceptions, statuses outside the
  table), `clientErrors` client answers (4xx), each rate over `invocations` (null without calls); `versions` has one
  `{version, providers, consumers, invocations, lastInvokedAt}` per version some service declared, once declared or
  invoked (`lastInvokedAt`: the newest `startedAt` of its trace events, null when none carried one), so a reviewer
  can tell whether an old version still has senders, handlers or traffic.
  An event (some descriptor's `events` declares it) adds `publishers` and `subscribers`, the services whose
  descriptors say they publish it and subscribe to it; a plain topic's answer has neither key.
- trace `{traceId}` → `{traceId, events}`: the events still in the trace window, in arrival order.
- contract `{service, topics?}` → `{service, serviceVersion?, registeredAt, descriptor, usage, declared}`: the
  service's newest registered descriptor (what `svcgen can-i-deploy` diffs a change against); `usage` one
  `{topic, version, providers, consumers, invocations, lastInvokedAt}` per (topic, version) the descriptor handles or
  sends, and per version of each asked topic; `declared` every registered service's copy of the asked topics
  (`{service, role, topic, version, requestSchema, responseSchema}`, role `consumer` or `provider`). Here a service
  declares what its newest descriptor says: an older serviceVersion it left behind declares nothing. `events` is
  every registered service's declaration of an event the service publishes or subscribes to, or of an asked
  `events` id (`{service, role, event, version, publisher, payloadSchema}`, role `publisher` or `subscriber`). With
  `windowMinutes` (at most the buckets' retention, 24 h by default) the answer adds `window` `{minutes, since,
  until}` and each usage `windowInvocations`, its calls in that window from the time buckets (exact across
  replicas; past the last hour a window is read in ten-minute periods, so it may start up to nine minutes early).
- with `window` (`5m`, `1h`, `24h`, ending at the collector's current minute), from the time buckets (buckets.py):
  the topic answer adds `window` (exact counts, rates, p50/p95/p99, per version, a sparkline); the fleet answer adds
  `ranking`, the first `limit` (service, topic, version) with calls in the window by impact, and `rankingOmitted`.

A topic some service once declared stays known: its answer is `ok`, with empty consumers and providers once
nobody handles or sends it, and its counters. Each query returns None for an unknown service, topic or trace
(the caller answers `not-found`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from ..runtime._descriptor import declared_entries
from ..runtime._mesh.clock import rfc3339
from .buckets import BucketBook, Figures, is_client_failure, is_server_failure
from .catalog import Catalog, Member, ServiceRecords, instance_view, is_stale
from .declarations import declared_events
from .issuebook import IssueBook, mismatch_issue, newest_first
from .mismatches import find_mismatches
from .missingfeeds import FeedLog
from .snapshot import CatalogEntry, CounterEntry, Json
from .store import DEFAULT_FLEET_LIMIT, FleetRows
from .tracelog import TraceLog


def fleet(
    catalog: Catalog,
    feeds: FeedLog,
    traces: TraceLog,
    issues: IssueBook,
    fresh_since: str,
    retained_since: str = "",
    *,
    limit: int = DEFAULT_FLEET_LIMIT,
    services_after: str = "",
    topics_after: str = "",
    rows: FleetRows | None = None,
) -> Json:
    """One page of the fleet (see the module docstring). `rows`: what a database backend read for the page (the
    tables then hold the page's rows only); None: the tables are whole (memory) and the page is picked here."""
    groups = catalog.grouped()
    by_service: defaultdict[str, list[Member]] = defaultdict(list)
    for member in catalog.members():
        by_service[member.service].append(member)
    if rows is None:
        heard = set(feeds.entries) | {counter["service"] for counter in traces.counters.values()}
        names = sorted(name for name in by_service.keys() | heard if name > services_after)
    else:
        names = rows.services
    examined = names[:limit]
    services = []
    for name in examined:
        members = sorted(by_service.get(name) or [Member(name, "", ServiceRecords())], key=lambda m: m.version)
        whole = groups.get(name) or ServiceRecords()
        for member in members:
            records = member.records
            entry: Json = {"service": name}
            if member.version:
                entry["serviceVersion"] = member.version
            entry["topics"] = len({topic for topic, _ in records.provided()})
            entry["health"] = records.health(fresh_since)
            listed = records.listed(retained_since)
            entry["instances"] = len(listed)
            entry["staleInstances"] = sum(is_stale(instance, fresh_since) for instance in listed)
            entry["missingFeeds"] = feeds.missing(name, described=whole.described, health=whole.has_health)
            services.append(entry)
    index = TopicIndex(groups, versions=False)
    if rows is None:
        invocations: defaultdict[str, int] = defaultdict(int)
        for counter in traces.counters.values():
            invocations[counter["topic"]] += counter["count"]
        topic_names = sorted(name for name in index.known | invocations.keys() if name > topics_after)
    else:
        invocations = defaultdict(int, rows.invocations)
        topic_names = rows.topics
    topics_examined = topic_names[:limit]
    topics = [
        {"topic": name, **index.parties(name), "invocations": invocations.get(name, 0)}
        for name in topics_examined
        if name in index.known or name in invocations  # a database's topic index may outlive an evicted entry
    ]
    if rows is None:
        stored: list[Json] = issues.snapshot()
        held = len(stored)
        mismatches = mismatch_issues(catalog)
    else:
        stored, held, mismatches = list(rows.issues), rows.issues_held, rows.mismatches
    mismatches_held = len(mismatches) if rows is None else rows.mismatches_held
    newest = newest_first([*stored, *mismatches])[:limit]
    answer: Json = {"services": services, "topics": topics, "issues": newest,
                    "issuesOmitted": held + mismatches_held - len(newest)}  # fmt: skip
    if len(names) > limit:
        answer["nextServices"] = examined[-1]
    if len(topic_names) > limit:
        answer["nextTopics"] = topics_examined[-1]
    return answer


def service(
    catalog: Catalog, feeds: FeedLog, traces: TraceLog, name: str, fresh_since: str, retained_since: str = ""
) -> Json | None:
    records = catalog.grouped().get(name)
    counted = [counter["count"] for counter in traces.counters.values() if counter["service"] == name]
    if records is None and name not in feeds.entries and not counted:
        return None
    records = records or ServiceRecords()
    return {
        "service": name,
        "health": records.health(fresh_since),
        "instances": [instance_view(instance, fresh_since) for instance in records.listed(retained_since)],
        "invocations": sum(counted),
        "missingFeeds": feeds.missing(name, described=records.described, health=records.has_health),
    }


def topic(catalog: Catalog, traces: TraceLog, name: str) -> Json | None:
    index = TopicIndex(catalog.grouped(), only=name)
    status_counts: defaultdict[str, int] = defaultdict(int)
    counters: list[CounterEntry] = []
    for counter in traces.counters.values():
        if counter["topic"] == name:
            status_counts[counter["status"]] += counter["count"]
            counters.append(counter)
    publishers, subscribers = event_parties(catalog.grouped().values(), name)
    if name not in index.known and not status_counts and not publishers and not subscribers:
        return None
    invocations = sum(status_counts.values())
    errors = sum(count for status, count in status_counts.items() if is_server_failure(status))
    client_errors = sum(count for status, count in status_counts.items() if is_client_failure(status))
    return {
        "topic": name,
        **index.parties(name),
        "invocations": invocations,
        "errors": errors,
        "clientErrors": client_errors,
        **({"errorRate": errors / invocations, "clientErrorRate": client_errors / invocations} if invocations else {}),
        "statusCounts": dict(sorted(status_counts.items())),
        "versions": index.versions(name, counters),
        # Only for an event: a plain topic's answer keeps its shape.
        **({"publishers": publishers, "subscribers": subscribers} if publishers or subscribers else {}),
    }


def event_parties(groups: Iterable[ServiceRecords], event: str) -> tuple[list[str], list[str]]:
    """The services whose descriptors say they publish `event`, and those that say they subscribe to it."""
    publishers: set[str] = set()
    subscribers: set[str] = set()
    for records in groups:
        for entry in records.entries:
            for declared in declared_events(entry):
                if declared.event == event:
                    (publishers if declared.role == "publisher" else subscribers).add(declared.service)
    return sorted(publishers), sorted(subscribers)


def _sorted(names: set[str]) -> list[str]:
    return list(names) if len(names) < 2 else sorted(names)  # most topics have one sender and one handler


@dataclass(slots=True)
class Parties:
    providers: set[str] = field(default_factory=set)
    consumers: set[str] = field(default_factory=set)


class TopicIndex:
    """Per topic id and per (topic id, version), the services that send it (providers) and those that handle it
    (consumers), and every topic id some service handles, sends or once handled (`known`); built in one pass over
    the catalog. With `only`, just that topic id's: a service whose documents do not name it is passed over
    without reading its topics (the topic query on a large catalog)."""

    def __init__(self, groups: dict[str, ServiceRecords], only: str | None = None, *, versions: bool = True) -> None:
        self.by_topic: defaultdict[str, Parties] = defaultdict(Parties)
        self.by_version: defaultdict[tuple[str, str], Parties] = defaultdict(Parties)
        self.known: set[str] = set()
        by_topic, by_version = self.by_topic, self.by_version
        for service_name, records in groups.items():
            if only is not None and not records.names(only):
                continue
            for key in records.produced():
                by_topic[key[0]].providers.add(service_name)
                if versions:
                    by_version[key].providers.add(service_name)
            for key in records.provided():
                by_topic[key[0]].consumers.add(service_name)
                if versions:
                    by_version[key].consumers.add(service_name)
            for key in records.removed():
                if versions:
                    by_version.setdefault(key, Parties())  # once declared, a version stays listed
            self.known.update(topic_id for topic_id, _ in records.removed())
        self.known.update(self.by_topic)

    def parties(self, topic_id: str) -> Json:
        parties = self.by_topic.get(topic_id)
        if parties is None:
            return {"providers": [], "consumers": []}
        return {"providers": _sorted(parties.providers), "consumers": _sorted(parties.consumers)}

    def versions(self, topic_id: str, counters: list[CounterEntry]) -> list[Json]:
        """Per version of `topic_id` declared, once declared or invoked: who declares it, and its traffic."""
        invocations: defaultdict[str, int] = defaultdict(int)
        last: dict[str, str] = {}
        for counter in counters:
            version = counter["version"]
            invocations[version] += counter["count"]
            started = counter.get("lastStartedAt")
            if started is not None and started > last.get(version, ""):
                last[version] = started
        declared = {version: parties for (name, version), parties in self.by_version.items() if name == topic_id}
        listed: list[Json] = []
        for version in sorted(declared.keys() | invocations.keys()):
            parties = declared.get(version) or Parties()
            listed.append({"version": version, "providers": sorted(parties.providers),
                           "consumers": sorted(parties.consumers), "invocations": invocations.get(version, 0),
                           "lastInvokedAt": last.get(version)})  # fmt: skip
        return listed


def contract_topics(entries: Iterable[CatalogEntry], name: str, asked: list[str], asked_events: Sequence[str] = ()
                    ) -> list[str] | None:
    """The topic and event ids the contract answer of `name` reads (the declarations and counters of each); None when
    it never registered. `entries`: at least the service's own catalog entries."""
    own = newest_descriptors(entries).get(name)
    if own is None:
        return None
    descriptor: Json = own["descriptor"]
    keys = {*declared_entries(descriptor, "topics"), *declared_entries(descriptor, "produces")}
    events = {declared.event for declared in declared_events(own)}
    return sorted({topic_id for topic_id, _ in keys} | set(asked) | events | set(asked_events))


def contract(entries: Iterable[CatalogEntry], counters: Iterable[CounterEntry], name: str, asked: list[str],
             asked_events: Sequence[str] = ()) -> Json | None:
    """See the module docstring; `counters` those of the topics `contract_topics` names (others are ignored);
    None when the service never registered a descriptor."""
    newest = newest_descriptors(entries)
    own = newest.get(name)
    if own is None:
        return None
    descriptor: Json = own["descriptor"]
    wanted = set(asked)
    keys = {*declared_entries(descriptor, "topics"), *declared_entries(descriptor, "produces")}
    parties: defaultdict[tuple[str, str], Parties] = defaultdict(Parties)
    declared: list[Json] = []
    for service_name, entry in sorted(newest.items()):
        for role, listed in (("consumer", "topics"), ("provider", "produces")):
            for key, topic_descriptor in declared_entries(entry["descriptor"], listed).items():
                if key in keys or key[0] in wanted:
                    side = parties[key].consumers if role == "consumer" else parties[key].providers
                    side.add(service_name)
                if key[0] in wanted:
                    declared.append({"service": service_name, "role": role, "topic": key[0], "version": key[1],
                                     "requestSchema": topic_descriptor.get("requestSchema"),
                                     "responseSchema": topic_descriptor.get("responseSchema")})  # fmt: skip
    invocations: defaultdict[tuple[str, str], int] = defaultdict(int)
    last: dict[tuple[str, str], str] = {}
    topic_ids = {topic_id for topic_id, _ in keys} | wanted
    for counter in counters:
        if counter["topic"] in topic_ids:
            key = (counter["topic"], counter["version"])
            invocations[key] += counter["count"]
            started = counter.get("lastStartedAt")
            if started is not None and started > last.get(key, ""):
                last[key] = started
    listed_keys = keys | {key for key in (*parties, *invocations) if key[0] in wanted}
    usage = [
        {"topic": key[0], "version": key[1], "providers": sorted(parties[key].providers),
         "consumers": sorted(parties[key].consumers), "invocations": invocations.get(key, 0),
         "lastInvokedAt": last.get(key)}
        for key in sorted(listed_keys)
    ]  # fmt: skip
    answer: Json = {"service": name}
    if own.get("serviceVersion"):
        answer["serviceVersion"] = own["serviceVersion"]
    event_ids = {declared.event for declared in declared_events(own)} | set(asked_events)
    events = [
        {"service": item.service, "role": item.role, "event": item.event, "version": item.version,
         "publisher": item.publisher, "payloadSchema": item.payload_schema}
        for _, entry in sorted(newest.items()) for item in declared_events(entry) if item.event in event_ids
    ]  # fmt: skip
    answer.update(registeredAt=own.get("registeredAt", ""), descriptor=descriptor, usage=usage, declared=declared,
                  events=events)
    return answer


def contract_window_cells(book: BucketBook, topic: str, minutes: int, now_minute: int
                          ) -> Iterator[tuple[tuple[str, str], int]]:
    """((topic, version), calls) per cell of `topic` in the window of `minutes` ending at `now_minute`."""
    first, last = book.span(minutes, now_minute)
    for key, _, cell in book.topic_cells(topic, first, last):
        yield (key[1], key[2]), int(cell[0])


def add_contract_window(answer: Json, cells: Iterable[tuple[tuple[str, str], int]], minutes: int,
                        now_minute: int) -> None:
    """The contract answer's `window` and each usage's `windowInvocations` (0 without calls in the window); a
    version with calls in the window only is listed too."""
    calls: defaultdict[tuple[str, str], int] = defaultdict(int)
    for key, count in cells:
        calls[key] += count
    usage: list[Json] = answer["usage"]
    listed = {(item["topic"], item["version"]) for item in usage}
    usage += [{"topic": key[0], "version": key[1], "providers": [], "consumers": [], "invocations": 0,
               "lastInvokedAt": None} for key in sorted(calls.keys() - listed)]  # fmt: skip
    usage.sort(key=lambda item: (item["topic"], item["version"]))
    for item in usage:
        item["windowInvocations"] = calls.get((item["topic"], item["version"]), 0)
    first, last = now_minute - minutes + 1, now_minute
    answer["window"] = {"minutes": minutes, "since": rfc3339(first * 60), "until": rfc3339((last + 1) * 60)}


def newest_descriptors(entries: Iterable[CatalogEntry]) -> dict[str, CatalogEntry]:
    """Per service, its catalog entry with the newest registered descriptor (its current contract)."""
    newest: dict[str, CatalogEntry] = {}
    for entry in entries:
        if "descriptor" not in entry:
            continue
        held = newest.get(entry["service"])
        if held is None or entry.get("registeredAt", "") >= held.get("registeredAt", ""):
            newest[entry["service"]] = entry
    return newest


def trace(traces: TraceLog, trace_id: str) -> Json | None:
    events = traces.trace(trace_id)
    return {"traceId": trace_id, "events": events} if events else None


def mismatch_issues(catalog: Catalog) -> list[Json]:
    """The collector's `contract-mismatch` issues of the catalog's current entries."""
    return [mismatch_issue(mismatch) for mismatch in find_mismatches(catalog.entries.values())]


SPARK_POINTS = 60
"""Most points a sparkline has: a 24 h window is drawn in 30-minute steps (its cells cover ten minutes)."""


def spark_step(minutes: int) -> int:
    """Minutes per sparkline point: a whole number of the window's cells, at most SPARK_POINTS points."""
    resolution = BucketBook.step(minutes)
    return resolution * max(1, -(-minutes // (SPARK_POINTS * resolution)))


def topic_window(book: BucketBook, name: str, window: str, minutes: int, now_minute: int) -> Json:
    first, last = book.span(minutes, now_minute)
    step = spark_step(minutes)
    points = -(-minutes // step)
    calls, errors = [0] * points, [0] * points
    total = Figures()
    by_version: dict[str, Figures] = {}
    for key, minute, cell in book.topic_cells(name, first, last):
        status = key[4]
        total.add(status, cell)
        by_version.setdefault(key[2], Figures()).add(status, cell)
        point = min(max(minute - first, 0) // step, points - 1)
        calls[point] += int(cell[0])
        if is_server_failure(status):
            errors[point] += int(cell[0])
    return {
        "window": window,
        "since": rfc3339(first * 60),
        "until": rfc3339((last + 1) * 60),
        **total.wire(minutes),
        "statusCounts": dict(sorted(total.status_counts.items())),
        "versions": [{"version": version, **figures.wire(minutes)} for version, figures in sorted(by_version.items())],
        "sparkline": {"stepMinutes": step, "calls": calls, "errors": errors},
    }


def ranking(book: BucketBook, minutes: int, now_minute: int) -> list[Json]:
    """(service, topic, version) with calls in the window: server-side failures first, then share of call time."""
    first, last = book.span(minutes, now_minute)
    groups: dict[tuple[str, str, str], Figures] = {}
    for key, cell in book.topic_totals(first, last):
        group = groups.get(key[:3])
        if group is None:
            group = groups[key[:3]] = Figures()
        group.add(key[4], cell)
    time_spent = sum(figures.total_ms for figures in groups.values()) or 1.0
    ranked = sorted(groups.items(), key=lambda item: (-item[1].errors, -item[1].total_ms, item[0]))
    return [{"service": service, "topic": topic, "version": version, **figures.wire(minutes),
             "impact": figures.total_ms / time_spent} for (service, topic, version), figures in ranked]  # fmt: skip
