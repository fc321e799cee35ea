"""orders:place v1: capture, then answer. By `make demo`.

The payments client comes from the wiring: create_app() builds it once per process (one pooled HTTP
connection, closed at shutdown) and sends payments:capture where SVCGEN_TARGET_PAYMENTS_CAPTURE says.
"""

from __future__ import annotations

from svcgen.runtime import Context, Result

from ..clients import Clients
from ..models import Order, PlaceOrder, payments_CapturePayment, payments_Money


async def handle(request: PlaceOrder, context: Context) -> Result[Order]:
    if request.customer_id == "c-boom":
        raise RuntimeError("the order book is on fire")  # the demo's handler exception
    total = sum(item.quantity for item in request.items)
    order_id = f"o-{request.customer_id}-{total}"
    payment = payments_CapturePayment(
        order_id=order_id, amount=payments_Money(amount_minor=250 * total), idempotency_key=order_id
    )
    captured = await context.scope.get(Clients).payments_capture(payment)
    if not captured.is_successful:
        return Result.service_unavailable(f"payments answered {captured.status}")
    order = Order(order_id=order_id, customer_id=request.customer_id, items=request.items, total_items=total,
                  placed_at=request.placed_at)
    return Result.created(order)
