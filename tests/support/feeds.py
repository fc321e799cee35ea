"""A settable clock and small builders of feed documents for the collector tests."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from svcgen.collector import Collector, CollectorLimits, JsonFileStore, MemoryBackend, MemoryStore, Store
from svcgen.collector.store import Backend

START = 1_800_000_000.0
START_TEXT = "2027-01-15T08:00:00.000Z"


class Clock:
    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


StoreFactory = Callable[[], Store | Backend]
default_store: StoreFactory = MemoryStore
"""The store `collector()` uses when given none; the `any_store` fixture runs a test on each kind."""


_open_stores: dict[Path, JsonFileStore] = {}
"""The JSON-file store each path was last opened with by `collector()`."""


def crash(store: JsonFileStore) -> None:
    """Leave `store` as a killed collector would: its lock released (the kernel does that for a dead process), its
    background work stopped, nothing more written (no compaction)."""
    store._stop.set()
    if store._claim is not None:
        os.close(store._claim)
        store._claim = None


def collector(store: Store | Backend | None = None, clock: Clock | None = None, **options: Any) -> Collector:
    """A collector for a test; on a JSON-file store another collector of the test left open is crashed first, as
    a restart after a kill (one store takes one collector)."""
    if isinstance(store, JsonFileStore):
        earlier = _open_stores.get(store.path.resolve())
        if earlier is not None and earlier is not store:
            crash(earlier)
        _open_stores[store.path.resolve()] = store
    limits = options.pop("limits", None) or CollectorLimits()
    return Collector(store if store is not None else default_store(), clock=clock or Clock(), limits=limits,
                     **options)  # fmt: skip


def memory(c: Collector) -> MemoryBackend:
    """The memory backend of a collector built on a memory or JSON-file store (its tables, for white-box checks)."""
    assert isinstance(c.backend, MemoryBackend)
    return c.backend


def topic(
    id_: str, request: dict[str, Any] | None = None, version: str = "", response: dict[str, Any] | None = None
) -> dict[str, Any]:
    entry: dict[str, Any] = {"id": id_}
    if version:
        entry["version"] = version
    entry["requestSchema"] = request if request is not None else {"type": "object"}
    entry["responseSchema"] = response if response is not None else {}
    return entry


def descriptor(
    service: str = "orders",
    topics: list[dict[str, Any]] | None = None,
    *,
    instance: str | None = "i-1",
    version: str | None = None,
    digest: str | None = None,
    produces: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    document: dict[str, Any] = {"service": service}
    if version:
        document["serviceVersion"] = version
    document["runtime"] = "python"
    if instance:
        document["instanceId"] = instance
    document["topics"] = topics if topics is not None else [topic(f"{service}:get")]
    if produces is not None:
        document["produces"] = produces
    document["descriptorHash"] = digest or f"sha256:{service}-{version or ''}-1"
    return document


def heartbeat(
    service: str = "orders", *, instance: str | None = "i-1", digest: str | None = None, healthy: bool = True
) -> dict[str, Any]:
    document: dict[str, Any] = {"service": service, "sentAt": START_TEXT}
    if instance:
        document["instanceId"] = instance
    document["descriptorHash"] = digest or f"sha256:{service}--1"
    document["health"] = {"isHealthy": healthy, "healthChecks": {}}
    return document


def event(
    n: int,
    *,
    service: str = "orders",
    topic_id: str = "orders:get",
    status: str = "ok",
    trace: str | None = None,
    parent: str | None = None,
    span: str | None = None,
    duration: float | None = 2.0,
) -> dict[str, Any]:
    wire: dict[str, Any] = {
        "traceId": trace or f"{n:032x}",
        "spanId": span or f"{n:016x}",
        "service": service,
        "topic": topic_id,
        "status": status,
    }
    if parent:
        wire["parentSpanId"] = parent
    if duration is not None:
        wire["durationMs"] = duration
    wire["startedAt"] = START_TEXT
    return wire


def issue(
    service: str = "orders",
    *,
    fingerprint: str = "f" * 32,
    count: int = 1,
    first: str = START_TEXT,
    last: str = START_TEXT,
    exemplars: list[str] | None = None,
) -> dict[str, Any]:
    return {
        "fingerprint": fingerprint,
        "classification": "exception",
        "service": service,
        "topic": "orders:get",
        "status": "service-unavailable",
        "exceptionType": "LookupError",
        "count": count,
        "firstSeen": first,
        "lastSeen": last,
        "exemplarTraceIds": exemplars if exemplars is not None else [],
    }


def ok(answer: Any) -> Any:
    assert answer.status == "ok", (answer.status, answer.detail)
    return answer.payload
