"""The four read models (DESIGN §7 "Collector queries"), computed from the collector's tables on demand.

- fleet `{}` → `{services: [{service, topics, health, instances, missingFeeds}], topics: [{topic, providers,
  consumers, invocations}], issues}`: `topics` of a service are the topic ids it provides, `instances` is how many
  instances it has; providers come from descriptors and polled specs, consumers from descriptors' `produces`;
  `invocations` counts every trace event of the topic (all services, versions, statuses); `issues` are the merged
  issues, most recently seen first.
- service `{service}` → `{service, health, instances: [{instanceId, healthy?, hashMatches, registerExpected, ...}],
  invocations, missingFeeds}`.
- topic `{topic}` → `{topic, providers, consumers, invocations, errors, statusCounts}`.
- trace `{traceId}` → `{traceId, events}`: the events still in the trace window, in arrival order.

Each returns None for an unknown service, topic or trace (the caller answers `not-found`).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from .catalog import Catalog, ServiceRecords, instance_view
from .feeds import FeedLog
from .issues import IssueBook
from .snapshot import Json
from .traces import TraceLog, is_failure


def fleet(catalog: Catalog, feeds: FeedLog, traces: TraceLog, issues: IssueBook, fresh_since: str) -> Json:
    groups = catalog.grouped()
    invocations: defaultdict[str, int] = defaultdict(int)
    names = set(groups) | set(feeds.entries)
    for counter in traces.counters.values():
        invocations[counter["topic"]] += counter["count"]
        names.add(counter["service"])
    providers: defaultdict[str, set[str]] = defaultdict(set)
    consumers: defaultdict[str, set[str]] = defaultdict(set)
    services = []
    for name in sorted(names):
        records = groups.get(name) or ServiceRecords()
        provided = {topic for topic, _ in records.provided()}
        for topic in provided:
            providers[topic].add(name)
        for topic, _ in records.produced():
            consumers[topic].add(name)
        services.append({
            "service": name,
            "topics": sorted(provided),
            "health": records.health(fresh_since),
            "instances": len(records.instances),
            "missingFeeds": feeds.missing(name, described=records.described, health=records.has_health),
        })
    topics = [
        {
            "topic": topic,
            "providers": sorted(providers.get(topic, ())),
            "consumers": sorted(consumers.get(topic, ())),
            "invocations": invocations.get(topic, 0),
        }
        for topic in sorted(providers.keys() | consumers.keys() | invocations.keys())
    ]
    return {"services": services, "topics": topics, "issues": newest_issues(issues)}


def service(catalog: Catalog, feeds: FeedLog, traces: TraceLog, name: str, fresh_since: str) -> Json | None:
    records = catalog.grouped().get(name)
    counted = [counter["count"] for counter in traces.counters.values() if counter["service"] == name]
    if records is None and name not in feeds.entries and not counted:
        return None
    records = records or ServiceRecords()
    return {
        "service": name,
        "health": records.health(fresh_since),
        "instances": [instance_view(instance) for instance in records.instances],
        "invocations": sum(counted),
        "missingFeeds": feeds.missing(name, described=records.described, health=records.has_health),
    }


def topic(catalog: Catalog, traces: TraceLog, name: str) -> Json | None:
    providers: set[str] = set()
    consumers: set[str] = set()
    for service_name, records in catalog.grouped().items():
        if any(topic_id == name for topic_id, _ in records.provided()):
            providers.add(service_name)
        if any(topic_id == name for topic_id, _ in records.produced()):
            consumers.add(service_name)
    status_counts: defaultdict[str, int] = defaultdict(int)
    for counter in traces.counters.values():
        if counter["topic"] == name:
            status_counts[counter["status"]] += counter["count"]
    if not providers and not consumers and not status_counts:
        return None
    return {
        "topic": name,
        "providers": sorted(providers),
        "consumers": sorted(consumers),
        "invocations": sum(status_counts.values()),
        "errors": sum(count for status, count in status_counts.items() if is_failure(status)),
        "statusCounts": dict(sorted(status_counts.items())),
    }


def trace(traces: TraceLog, trace_id: str) -> Json | None:
    events = traces.trace(trace_id)
    return {"traceId": trace_id, "events": events} if events else None


def newest_issues(issues: IssueBook) -> list[Json]:
    listed: list[dict[str, Any]] = issues.snapshot()
    listed.sort(key=lambda issue: issue["lastSeen"], reverse=True)
    return listed
