"""Handler of inventory:reserve: Reserve stock for an order.

Yours to edit: svcgen created this stub once and never overwrites it.
"""

from __future__ import annotations

from svcgen.runtime import Context, Result

from ..models import Reservation, Reserve


async def handle(request: Reserve, context: Context) -> Result[Reservation]:
    return Result.not_implemented("inventory:reserve is not implemented yet")
