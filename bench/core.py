"""Runtime core: envelope invoke against a hand-written baseline, and derivation cost for 1000 topics."""

from __future__ import annotations

import argparse
import dataclasses
import json
from datetime import datetime
from typing import Any

from bench.harness import Figure, Recorder, once_ms, per_await_us, run
from svcgen.runtime import Context, Identity, Registry, Result, Service
from svcgen.runtime._descriptor import build_descriptor
from svcgen.runtime._openapi import build_openapi
from svcgen.runtime._specdoc import build_spec


@dataclasses.dataclass
class Order:
    order_id: str
    customer_id: str
    quantity: int
    price: float
    express: bool


async def handle(request: Order, context: Context) -> Result[Order]:
    return Result.ok(request)


BODY = {"orderId": "o-1", "customerId": "c-1", "quantity": 3, "price": 9.5, "express": True}
ENVELOPE = json.dumps({"topic": "orders:place", "headers": {}, "body": json.dumps(BODY)}).encode()
BODY_TEXT = json.dumps(BODY)


async def raw_baseline() -> str:
    data = json.loads(BODY_TEXT)
    request = Order(data["orderId"], data["customerId"], data["quantity"], data["price"], data["express"])
    result = await handle(request, None)  # type: ignore[arg-type]
    order = result.payload
    assert order is not None
    return json.dumps({"orderId": order.order_id, "customerId": order.customer_id, "quantity": order.quantity,
                       "price": order.price, "express": order.express})


def registry_of(topics: int, distinct_types: int) -> Registry:
    """`topics` topics over `distinct_types` fresh 5-field record types (fresh, so no warm caches)."""
    types = [
        dataclasses.make_dataclass(
            f"T{i}",
            [("name", str), ("count", int), ("ratio", float), ("at", datetime), ("tags", list[str])],
        )
        for i in range(distinct_types)
    ]
    registry = Registry()
    for i in range(topics):
        version = "v2" if i % 10 == 0 else ""
        registry.add(f"domain{i % 37}:action-{i}", handle, version=version,
                     request=types[i % distinct_types], response=types[(i + 1) % distinct_types])
    return registry


def measure(record: Recorder, args: argparse.Namespace) -> None:
    registry = Registry()
    registry.add("orders:place", handle)
    service = Service(Identity("orders"), registry)
    calls = 20_000
    baseline = per_await_us(raw_baseline, calls)
    ours = per_await_us(lambda: service.invoke_envelope(ENVELOPE), calls)
    record(RAW, baseline, "µs")
    record("envelope invoke, 5-field typed handler", ours, "µs", baseline=RAW)
    record("  ratio to baseline", ours / baseline, "x", target=3)

    print()
    fresh = lambda: registry_of(1000, 500)  # noqa: E731
    record("OpenAPI, 1000 topics, schemas derived on the way", once_ms(build_openapi, fresh), "ms", target=60)
    record("descriptor, 1000 topics, schemas derived on the way",
           once_ms(lambda r: build_descriptor(Identity("s"), r, []), fresh), "ms", target=30)
    record("spec, 1000 topics, schemas derived on the way", once_ms(lambda r: build_spec("s", r), fresh), "ms")
    warm = registry_of(1000, 500)
    build_openapi(warm)
    record("OpenAPI, 1000 topics, schemas already derived", once_ms(lambda _: build_openapi(warm)), "ms", target=60)
    record("descriptor, 1000 topics, schemas already derived",
           once_ms(lambda _: build_descriptor(Identity("s"), warm, [])), "ms", target=30)

    print()
    small = Service(Identity("s"), registry_of(10, 10))
    large = Service(Identity("s"), registry_of(1000, 500))
    mesh: dict[str, Any] = {"topic": "svc:mesh"}
    small_us = per_await_us(lambda: small.invoke_envelope(mesh), 5000)
    large_us = per_await_us(lambda: large.invoke_envelope(mesh), 5000)
    record("svc:mesh answer, 10 topics", small_us, "µs")
    record("svc:mesh answer, 1000 topics", large_us, "µs", baseline="svc:mesh answer, 10 topics")
    record("  ratio 1000/10 topics (independent of topic count ≈ 1)", large_us / small_us, "x")


RAW = "raw baseline (json.loads, dataclass, handler, json.dumps)"


def main(argv: list[str] | None = None) -> list[Figure]:
    return run("bench/core.py", measure, argv)


if __name__ == "__main__":
    main()
