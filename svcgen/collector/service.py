"""The collector hosted as a service: the collector topics on a reserved-topic registry, plus a health check of its
own, so the HTTP binding serves it like any other service (`create_app(collector_service(collector))`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

from ..runtime._context import Context
from ..runtime._descriptor import Identity
from ..runtime._health import CheckFunction, HealthCheck, HealthCheckResult, HealthChecks
from ..runtime._mesh.messages import (
    Accepted,
    ContractAnswer,
    ContractQuery,
    FleetAnswer,
    FleetQuery,
    Heartbeat,
    IssueBatch,
    ServiceAnswer,
    ServiceDescriptor,
    ServiceQuery,
    TopicAnswer,
    TopicQuery,
    TraceAnswer,
    TraceBatch,
    TraceQuery,
)
from ..runtime._registry import Registry
from ..runtime._service import Service
from ..runtime._topics import (
    DEFAULT_PREFIX,
    HEARTBEAT_TOPIC,
    ISSUES_TOPIC,
    QUERY_CONTRACT_TOPIC,
    QUERY_FLEET_TOPIC,
    QUERY_SERVICE_TOPIC,
    QUERY_TOPIC_TOPIC,
    QUERY_TRACE_TOPIC,
    REGISTER_TOPIC,
    TRACES_TOPIC,
)
from .collector import Answer, Collector

DEFAULT_NAME: Final = "svc-collector"
FEED_THREADS: Final = 4
"""Feeds handled at once on a blocking backend (the PostgreSQL feed pool's size)."""
QUERY_THREADS: Final = 1
"""Queries answered at once on a blocking backend; more wait their turn. One: every query answered is Python work
on the process that takes the feeds, so one lane keeps ingest at 80 % or more of its pace however many clients
query (bench/fullstore.py); a query on a full store takes milliseconds, so the lane moves."""
QUERY_PREFIX: Final = "svc:mesh:query:"


def collector_service(
    collector: Collector | None = None,
    *,
    name: str = DEFAULT_NAME,
    instance_id: str | None = None,
    prefix: str = DEFAULT_PREFIX,
) -> Service:
    """A `Service` answering the collector topics (spec "Reserved topics") from `collector` (a fresh in-memory
    one by default). The handlers take and answer plain JSON, which the collector reads through the typed records of
    `messages`; the served spec and HTTP API document publish those records' schemas."""
    collector = collector if collector is not None else Collector()
    registry = Registry(allow_reserved=True)
    topics: dict[str, tuple[Callable[[Any], Answer], type, type]] = {
        REGISTER_TOPIC: (collector.register, ServiceDescriptor, Accepted),
        HEARTBEAT_TOPIC: (collector.heartbeat, Heartbeat, Accepted),
        TRACES_TOPIC: (collector.traces, TraceBatch, Accepted),
        ISSUES_TOPIC: (collector.issues, IssueBatch, Accepted),
        QUERY_FLEET_TOPIC: (collector.query_fleet, FleetQuery, FleetAnswer),
        QUERY_SERVICE_TOPIC: (collector.query_service, ServiceQuery, ServiceAnswer),
        QUERY_TOPIC_TOPIC: (collector.query_topic, TopicQuery, TopicAnswer),
        QUERY_TRACE_TOPIC: (collector.query_trace, TraceQuery, TraceAnswer),
        QUERY_CONTRACT_TOPIC: (collector.query_contract, ContractQuery, ContractAnswer),
    }
    # On a blocking backend feeds and queries wait in threads of their own: however many clients query, the feeds
    # keep their threads (and their database connections).
    feeds = ThreadPoolExecutor(FEED_THREADS, "svcgen-collector-feeds") if collector.backend.blocking else None
    reads = ThreadPoolExecutor(QUERY_THREADS, "svcgen-collector-queries") if collector.backend.blocking else None
    for topic, (answer, request, response) in topics.items():
        threads = reads if topic.startswith(QUERY_PREFIX) else feeds
        registry.add(topic, _handler(answer, threads), request=dict[str, Any], response=dict[str, Any],
                     published=(request, response))  # fmt: skip
    health = HealthChecks([HealthCheck("store", _store_check(collector))])
    identity = Identity(name, instance_id=instance_id, binding="http")
    return Service(identity, registry, health=health, prefix=prefix)


def _handler(
    answer: Callable[[Any], Answer], threads: ThreadPoolExecutor | None
) -> Callable[[dict[str, Any], Context], Any]:
    # In memory every ingest runs on the event loop, one at a time: no thread hops for a few microseconds of work.
    # On a database each one waits for a round trip, so it runs in a worker thread.
    async def handle(request: dict[str, Any], context: Context) -> Answer:
        if threads is not None:
            return await asyncio.get_running_loop().run_in_executor(threads, answer, request)
        return answer(request)

    handle.__qualname__ = f"collector.{getattr(answer, '__name__', 'answer')}"
    return handle


def _store_check(collector: Collector) -> CheckFunction:
    async def check() -> HealthCheckResult:
        problem = collector.store_problem
        if problem is None:
            return HealthCheckResult.ok()
        # Failed, not a warning: a collector that cannot persist refuses feeds or risks losing what it took. Feeds
        # refused are sent again by their reporters; polls lost are not (the next sweep polls again).
        return HealthCheckResult.failed(f"{problem}; {collector.store_failures} feed(s) refused and "
                                        f"{collector.polls_lost} poll(s) lost so far")  # fmt: skip

    return check

