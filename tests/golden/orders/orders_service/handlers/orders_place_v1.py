"""Handler of orders:place (version v1): Place an order.

Yours to edit: svcgen created this stub once and never overwrites it.
"""

from __future__ import annotations

from svcgen.runtime import Context, Result

from ..models import Order, PlaceOrder


async def handle(request: PlaceOrder, context: Context) -> Result[Order]:
    return Result.not_implemented("orders:place is not implemented yet")
