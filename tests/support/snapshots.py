"""Hand-built collector snapshots for the artifact tests, with descriptors and specs shaped like the
generated examples (orders, payments, inventory; schemas trimmed).

`sample_snapshot()` is a stable fixture for other tests too (the dashboard's):
`write_artifacts(sample_snapshot(), tmp_path, now=NOW)` gives a realistic artifact directory with every
rule exercised: a re-registered topic with a schema change, two providers disagreeing, removed topics,
a failed poll, an unhealthy heartbeat, contract drift, reserved topics, counters and edges.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from svcgen.collector.snapshot import (
    SNAPSHOT_FORMAT,
    CatalogEntry,
    CounterEntry,
    EdgeEntry,
    InstanceEntry,
    Json,
    PollEntry,
    Snapshot,
)

NOW = "2026-11-22T10:10:00.000Z"
NOW_EPOCH = 1795342200.0
"""NOW as epoch seconds."""

STRING: Json = {"type": "string"}
INTEGER: Json = {"type": "integer"}
LINE_ITEM: Json = {
    "type": "object",
    "properties": {"sku": STRING, "quantity": INTEGER},
    "required": ["sku"],
}
ORDER: Json = {
    "type": "object",
    "properties": {
        "orderId": STRING,
        "customerId": STRING,
        "status": STRING,
        "items": {"type": "array", "items": LINE_ITEM},
        "placedAt": {"type": "string", "format": "date-time"},
    },
    "required": ["orderId", "customerId", "items", "placedAt"],
}
GET_ORDER: Json = {
    "type": "object",
    "properties": {"orderId": STRING, "verbose": {"type": "boolean"}},
    "required": ["orderId"],
}
PLACE_ORDER_V1: Json = {
    "type": "object",
    "properties": {
        "customerId": STRING,
        "items": {"type": "array", "items": LINE_ITEM},
        "note": {"type": ["string", "null"]},
    },
    "required": ["customerId", "items"],
}
PLACE_ORDER_V2: Json = {
    "type": "object",
    "properties": {
        "customerId": STRING,
        "items": {"type": "array", "items": LINE_ITEM},
        "gift": {"type": "boolean"},
        "tags": {"type": "array", "items": STRING},
    },
    "required": ["customerId", "items"],
}
MONEY: Json = {
    "type": "object",
    "properties": {"amountMinor": INTEGER, "currency": STRING},
    "required": ["amountMinor"],
}
CAPTURE_PAYMENT: Json = {
    "type": "object",
    "properties": {"orderId": STRING, "amount": MONEY, "idempotencyKey": STRING},
    "required": ["orderId", "amount"],
}
CAPTURE_PAYMENT_FLAT: Json = {
    "type": "object",
    "properties": {"orderId": STRING, "amountMinor": INTEGER, "currency": STRING},
    "required": ["orderId", "amountMinor"],
}
CAPTURE: Json = {
    "type": "object",
    "properties": {"captureId": STRING, "capturedAt": {"type": "string", "format": "date-time"}},
    "required": ["captureId", "capturedAt"],
}
REFUND: Json = {
    "type": "object",
    "properties": {"captureId": STRING, "reason": {"type": ["string", "null"]}},
    "required": ["captureId"],
}
STOCK_QUERY: Json = {
    "type": "object",
    "properties": {"sku": STRING, "warehouse": {"type": ["string", "null"]}},
    "required": ["sku"],
}
STOCK: Json = {"type": "object", "properties": {"sku": STRING, "onHand": INTEGER}, "required": ["sku", "onHand"]}


def topic(topic_id: str, request: Json, response: Json, version: str = "") -> Json:
    """A topic descriptor as the runtime emits it: the version only when non-empty."""
    entry: Json = {"id": topic_id}
    if version:
        entry["version"] = version
    entry["requestSchema"] = request
    entry["responseSchema"] = response
    return entry


def descriptor(service: str, version: str, topics: list[Json], produces: list[Json] | None = None) -> Json:
    document: Json = {"service": service, "serviceVersion": version, "runtime": "python", "binding": "http"}
    document["topics"] = topics
    if produces is not None:
        document["produces"] = produces
    document["profile"] = {"name": "cloud-service"}
    document["descriptorHash"] = spec_hash({"service": service, "topics": topics})
    return document


def spec_hash(document: Any) -> str:
    """The collector's spec hash: sha256 of the JSON with sorted keys, no whitespace."""
    return "sha256:" + hashlib.sha256(orjson.dumps(document, option=orjson.OPT_SORT_KEYS)).hexdigest()


def catalog_entry(service: str, **fields: Any) -> CatalogEntry:
    entry: dict[str, Any] = {"service": service, "changes": [], "removedTopics": []}
    entry.update(fields)
    return entry  # type: ignore[return-value]


def poll(service: str, at: str, *, ok: bool = True, base_url: str = "", **fields: Any) -> PollEntry:
    entry: dict[str, Any] = {
        "service": service,
        "baseUrl": base_url or f"http://{service}.internal:8000",
        "at": at,
        "ok": ok,
        "failures": 0 if ok else 1,
    }
    entry.update(fields)
    return entry  # type: ignore[return-value]


def instance(
    service: str, instance_id: str, *, at: str | None = None, healthy: bool = True, **fields: Any
) -> InstanceEntry:
    entry: dict[str, Any] = {
        "service": service,
        "instanceId": instance_id,
        "hashMatches": True,
        "registerExpected": False,
    }
    if at is not None:
        entry["lastHeartbeatAt"] = at
        entry["health"] = {"isHealthy": healthy, "healthChecks": {}}
    entry.update(fields)
    return entry  # type: ignore[return-value]


def counter(service: str, topic_id: str, status: str, count: int, **fields: Any) -> CounterEntry:
    entry: dict[str, Any] = {
        "service": service,
        "topic": topic_id,
        "version": "",
        "status": status,
        "count": count,
        "totalDurationMs": 0.0,
        "timedCount": 0,
    }
    entry.update(fields)
    return entry  # type: ignore[return-value]


def edge(
    client: str, server: str, count: int, errors: int = 0, durations: list[float] | None = None, **fields: Any
) -> EdgeEntry:
    entry: dict[str, Any] = {
        "client": client,
        "server": server,
        "count": count,
        "errors": errors,
        "recentDurationsMs": list(durations or []),
    }
    entry.update(fields)
    return entry  # type: ignore[return-value]


def empty_snapshot() -> Snapshot:
    return {
        "format": SNAPSHOT_FORMAT,
        "savedAt": NOW,
        "catalog": [],
        "instances": [],
        "polls": [],
        "feeds": [],
        "issues": [],
        "counters": [],
        "edges": [],
        "traces": {"cap": 1000, "dropped": 0, "events": []},
        "skipped": 0,
    }


ORDERS_TOPICS = [
    topic("orders:get", GET_ORDER, ORDER),
    topic("orders:place", PLACE_ORDER_V1, ORDER, "v1"),
    topic("orders:place", PLACE_ORDER_V2, ORDER, "v2"),
]
ORDERS_SPEC: Json = {"service": "orders", "topics": ORDERS_TOPICS}
ORDERS_PREVIOUS_SPEC_HASH = "sha256:" + "0" * 64


def sample_snapshot() -> Snapshot:
    """A small estate, at NOW. Built fresh on every call, so a test may mutate it."""
    snapshot = empty_snapshot()
    snapshot["catalog"] = [
        # orders: registered, then polled; re-registered orders:place v2 with a new request schema and
        # dropped orders:cancel; an older serviceVersion still lists orders:lookup.
        catalog_entry(
            "orders",
            serviceVersion="1.4.2",
            descriptor=descriptor(
                "orders", "1.4.2", ORDERS_TOPICS, [topic("payments:capture", CAPTURE_PAYMENT_FLAT, CAPTURE)]
            ),
            registeredAt="2026-11-22T10:00:00.000Z",
            spec=ORDERS_SPEC,
            specHash=spec_hash(ORDERS_SPEC),
            previousSpecHash=ORDERS_PREVIOUS_SPEC_HASH,
            specFetchedAt="2026-11-22T10:05:00.000Z",
            baseUrl="http://orders.internal:8000",
            changes=[
                {
                    "topic": "orders:place",
                    "version": "v2",
                    "at": "2026-11-22T10:03:00.000Z",
                    "fields": ["requestSchema"],
                }
            ],
            removedTopics=[{"topic": "orders:cancel", "version": ""}],
        ),
        catalog_entry(
            "orders",
            serviceVersion="1.4.1",
            descriptor=descriptor(
                "orders", "1.4.1", [topic("orders:get", GET_ORDER, ORDER), topic("orders:lookup", GET_ORDER, ORDER)]
            ),
            registeredAt="2026-11-21T09:00:00.000Z",
        ),
        # payments and payments-eu both serve payments:capture, with different request schemas.
        catalog_entry(
            "payments",
            serviceVersion="2.0.1",
            descriptor=descriptor(
                "payments",
                "2.0.1",
                [topic("payments:capture", CAPTURE_PAYMENT, CAPTURE), topic("payments:refund", REFUND, CAPTURE)],
                [topic("notifications:send", {"type": "object"}, {}, "v2")],
            ),
            registeredAt="2026-11-22T10:01:00.000Z",
        ),
        catalog_entry(
            "payments-eu",
            serviceVersion="2.0.0",
            descriptor=descriptor("payments-eu", "2.0.0", [topic("payments:capture", CAPTURE_PAYMENT_FLAT, CAPTURE)]),
            registeredAt="2026-11-22T10:02:00.000Z",
        ),
        # inventory: only polled (no descriptor); its newest poll failed.
        catalog_entry(
            "inventory",
            spec={"service": "inventory", "topics": [topic("inventory:stock", STOCK_QUERY, STOCK)]},
            specHash=spec_hash({"service": "inventory", "topics": [topic("inventory:stock", STOCK_QUERY, STOCK)]}),
            specFetchedAt="2026-11-22T09:30:00.000Z",
            baseUrl="http://inventory.internal:8000",
        ),
        # the collector itself serves reserved topics.
        catalog_entry(
            "mesh-collector",
            descriptor=descriptor(
                "mesh-collector",
                "0.1.0",
                [topic("svc:mesh:query:fleet", {}, {}), topic("svc:mesh:register", {}, {})],
            ),
            registeredAt="2026-11-22T09:00:00.000Z",
        ),
    ]
    snapshot["polls"] = [
        poll(
            "orders",
            "2026-11-22T10:05:00.000Z",
            base_url="http://orders.internal:8000",
            health={
                "isHealthy": True,
                "healthChecks": {"cache": {"status": "warning", "detail": "slow"}, "database": {"status": "ok"}},
            },
        ),
        poll(
            "inventory",
            "2026-11-22T10:05:00.000Z",
            ok=False,
            base_url="http://inventory.internal:8000",
            error="connection refused",
            failures=3,
        ),
    ]
    snapshot["instances"] = [
        instance("orders", "orders-1", at="2026-11-22T10:04:00.000Z"),
        instance(
            "payments",
            "payments-1",
            at="2026-11-22T10:06:00.000Z",
            healthy=False,
            hashMatches=False,
            registerExpected=True,
            health={"isHealthy": False, "healthChecks": {"database": {"status": "failed", "detail": "timeout"}}},
        ),
    ]
    snapshot["feeds"] = [
        {"service": "orders", "traces": True, "issueBatches": 4, "unexplainedFailures": 0},
        {"service": "payments", "traces": True, "issueBatches": 0, "unexplainedFailures": 2},
    ]
    snapshot["issues"] = [
        {
            "fingerprint": "c0ffee" * 5 + "00",
            "classification": "contract-drift",
            "service": "orders",
            "topic": "orders:place",
            "version": "v2",
            "status": "contract-drift",
            "count": 1,
            "firstSeen": "2026-11-22T10:03:00.000Z",
            "lastSeen": "2026-11-22T10:03:00.000Z",
            "exemplarTraceIds": [],
        }
    ]
    snapshot["counters"] = [
        counter(
            "orders",
            "orders:place",
            "ok",
            12,
            version="v2",
            totalDurationMs=120.0,
            timedCount=10,
            firstStartedAt="2026-11-22T10:00:30.000Z",
            lastStartedAt="2026-11-22T10:08:00.000Z",
        ),
        counter(
            "payments",
            "payments:capture",
            "service-unavailable",
            2,
            totalDurationMs=50.0,
            timedCount=2,
            firstStartedAt="2026-11-22T10:01:00.000Z",
            lastStartedAt="2026-11-22T10:07:00.000Z",
        ),
        counter(
            "payments",
            "payments:capture",
            "ok",
            38,
            totalDurationMs=380.0,
            timedCount=38,
            firstStartedAt="2026-11-22T10:00:00.000Z",
            lastStartedAt="2026-11-22T10:09:00.000Z",
        ),
    ]
    snapshot["edges"] = [
        edge(
            "orders",
            "payments",
            40,
            errors=2,
            durations=[float(ms) for ms in range(1, 101)],
            firstStartedAt="2026-11-22T10:00:00.000Z",
            lastStartedAt="2026-11-22T10:10:00.000Z",
        ),
        edge("web", "orders", 3),
    ]
    snapshot["traces"]["events"] = [
        {
            "traceId": "4bf92f3577b34da6a3ce929d0e0e4736",
            "spanId": "00f067aa0ba902b7",
            "service": "orders",
            "topic": "orders:place",
            "topicVersion": "v2",
            "status": "ok",
            "durationMs": 12.5,
            "startedAt": "2026-11-22T10:08:00.000Z",
        }
    ]
    return snapshot
