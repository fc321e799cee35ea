"""Handler of orders:place (version v1): Place an order. Copied in by `make demo`."""

from __future__ import annotations

from svcgen.runtime import Context, Result

from ..models import Order, PlaceOrder


async def handle(request: PlaceOrder, context: Context) -> Result[Order]:
    order = Order(
        order_id="o-1001",
        customer_id=request.customer_id,
        items=request.items,
        total_items=sum(item.quantity for item in request.items),
        placed_at=request.placed_at,
    )
    return Result.created(order)
