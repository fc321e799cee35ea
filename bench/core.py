"""Runtime core: envelope invoke against a hand-written baseline, and derivation cost for 1000 topics."""

from __future__ import annotations

import argparse
import dataclasses
import enum
import json
import re
from datetime import datetime
from typing import Annotated, Any

from bench.harness import Figure, Recorder, once_ms, per_await_us, run
from svcgen.runtime import Context, Identity, Meta, Registry, Result, Service
from svcgen.runtime._descriptor import build_descriptor, build_spec
from svcgen.runtime._openapi import build_openapi


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


class Country(enum.StrEnum):
    DE = "DE"
    FR = "FR"
    NL = "NL"


@dataclasses.dataclass(kw_only=True)
class Signup:
    """A request with 10 constrained fields, as a manifest with contract details generates it."""

    customer_id: Annotated[str, Meta(min_length=1, max_length=64, pattern="^c-[0-9]+$")]
    email: Annotated[str, Meta(format="email")]
    country: Country
    quantity: Annotated[int, Meta(minimum=1, maximum=1000)]
    price: Annotated[float, Meta(exclusive_minimum=0, maximum=1_000_000)]
    note: Annotated[str, Meta(max_length=200)]
    tags: Annotated[list[str], Meta(max_items=10)]
    code: Annotated[str, Meta(min_length=2, max_length=3)]
    floor: Annotated[int, Meta(minimum=0)]
    ratio: Annotated[float, Meta(minimum=0, maximum=1)]


async def handle_signup(request: Signup, context: Context) -> Result[Signup]:
    return Result.ok(request)


SIGNUP = {"customerId": "c-17", "email": "a@b.de", "country": "NL", "quantity": 3, "price": 9.5, "note": "ring twice",
          "tags": ["new"], "code": "ab", "floor": 2, "ratio": 0.5}  # fmt: skip
SIGNUP_TEXT = json.dumps(SIGNUP)
SIGNUP_ENVELOPE = json.dumps({"topic": "signup", "headers": {}, "body": SIGNUP_TEXT}).encode()
_CUSTOMER = re.compile("^c-[0-9]+$")
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")


async def raw_signup_baseline() -> str:
    """The same request checked by hand: every constraint written out inline, no listing of several errors."""
    d = json.loads(SIGNUP_TEXT)
    customer_id, email, quantity, price, note = d["customerId"], d["email"], d["quantity"], d["price"], d["note"]
    tags, code, floor, ratio = d["tags"], d["code"], d["floor"], d["ratio"]
    if not (isinstance(customer_id, str) and 1 <= len(customer_id) <= 64 and _CUSTOMER.search(customer_id)):
        raise ValueError("customerId")
    if not (isinstance(email, str) and _EMAIL.fullmatch(email)):
        raise ValueError("email")
    if not (type(quantity) is int and 1 <= quantity <= 1000):
        raise ValueError("quantity")
    if not (isinstance(price, int | float) and 0 < price <= 1_000_000):
        raise ValueError("price")
    if not (isinstance(note, str) and len(note) <= 200):
        raise ValueError("note")
    if not (isinstance(tags, list) and len(tags) <= 10 and all(isinstance(tag, str) for tag in tags)):
        raise ValueError("tags")
    if not (isinstance(code, str) and 2 <= len(code) <= 3):
        raise ValueError("code")
    if not (type(floor) is int and floor >= 0):
        raise ValueError("floor")
    if not (isinstance(ratio, int | float) and 0 <= ratio <= 1):
        raise ValueError("ratio")
    request = Signup(customer_id=customer_id, email=email, country=Country(d["country"]), quantity=quantity,
                     price=float(price), note=note, tags=tags, code=code, floor=floor, ratio=float(ratio))  # fmt: skip
    result = await handle_signup(request, None)  # type: ignore[arg-type]
    s = result.payload
    assert s is not None
    return json.dumps({"customerId": s.customer_id, "email": s.email, "country": s.country.value,
                       "quantity": s.quantity, "price": s.price, "note": s.note, "tags": s.tags, "code": s.code,
                       "floor": s.floor, "ratio": s.ratio})  # fmt: skip


async def handle_any(request: Any, context: Context) -> Result[Any]:
    return Result.ok(request)


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
        registry.add(f"domain{i % 37}:action-{i}", handle_any, version=version,
                     request=types[i % distinct_types], response=types[(i + 1) % distinct_types])
    return registry


def measure(record: Recorder, args: argparse.Namespace) -> None:
    registry = Registry()
    registry.add("orders:place", handle)
    registry.add("signup", handle_signup)
    service = Service(Identity("orders"), registry)
    calls = 20_000
    baseline = per_await_us(raw_baseline, calls)
    ours = per_await_us(lambda: service.invoke_envelope(ENVELOPE), calls)
    record(RAW, baseline, "µs")
    record("envelope invoke, 5-field typed handler", ours, "µs", baseline=RAW)
    record("  ratio to baseline", ours / baseline, "x", target=3)

    checked_baseline = per_await_us(raw_signup_baseline, calls)
    checked = per_await_us(lambda: service.invoke_envelope(SIGNUP_ENVELOPE), calls)
    record(RAW_CHECKED, checked_baseline, "µs")
    record("envelope invoke, 10 constrained fields", checked, "µs", baseline=RAW_CHECKED)
    record("  ratio to its baseline", checked / checked_baseline, "x", target=3)

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
RAW_CHECKED = "raw baseline, 10 constraints checked by hand"


def main(argv: list[str] | None = None) -> list[Figure]:
    return run("bench/core.py", measure, argv)


if __name__ == "__main__":
    main()
