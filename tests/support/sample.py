"""A small typed service used across runtime tests."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from svcgen.runtime import Context, HealthCheck, HealthCheckResult, HealthChecks, Identity, Registry, Result, Service


@dataclass
class LineItem:
    sku: str
    quantity: int = 1


@dataclass
class PlaceOrder:
    customer_id: str
    items: list[LineItem]
    placed_at: datetime
    note: str | None = None


@dataclass
class Order:
    order_id: str
    customer_id: str
    total_items: int


@dataclass
class PlaceOrderV2:
    customer_id: str
    items: list[LineItem] = field(default_factory=list)
    express: bool = False


@dataclass
class GetOrder:
    order_id: str
    verbose: bool = False


async def place_order(request: PlaceOrder, context: Context) -> Result[Order]:
    total = sum(item.quantity for item in request.items)
    return Result.created(Order("o-1", request.customer_id, total), headers={"x-handled-by": "v1"})


async def place_order_v2(request: PlaceOrderV2, context: Context) -> Result[Order]:
    return Result.ok(Order("o-2", request.customer_id, len(request.items)))


def get_order(request: GetOrder, context: Context) -> Result[Order]:
    """A sync handler."""
    if request.order_id == "missing":
        return Result.not_found(f"order {request.order_id} does not exist")
    return Result.ok(Order(request.order_id, "c-verbose" if request.verbose else "c", 0))


class SecretError(RuntimeError):
    pass


async def explode(request: dict[str, Any], context: Context) -> Result[None]:
    raise SecretError("database password is hunter2")


async def delete_order(request: GetOrder, context: Context) -> Result[None]:
    return Result.deleted()


def build_registry() -> Registry:
    registry = Registry()
    registry.add("orders:place", place_order, version="v1", summary="Place an order")
    registry.add("orders:place", place_order_v2, version="v2")
    registry.add("orders:get", get_order)
    registry.add("orders:explode", explode)
    registry.add("orders:delete", delete_order)
    return registry


def healthy_checks(database_ok: bool = True) -> HealthChecks:
    async def database() -> HealthCheckResult:
        return HealthCheckResult.ok() if database_ok else HealthCheckResult.failed("connection refused")

    def cache() -> bool:
        return True

    async def slow() -> HealthCheckResult:
        await asyncio.sleep(0)
        return HealthCheckResult.warning("running hot")

    return HealthChecks([HealthCheck("database", database), HealthCheck("cache", cache), HealthCheck("disk", slow)])


def build_service(*, database_ok: bool = True, **options: Any) -> Service:
    return Service(
        Identity("orders", service_version="1.4.2", binding="http"),
        build_registry(),
        health=healthy_checks(database_ok),
        **options,
    )
