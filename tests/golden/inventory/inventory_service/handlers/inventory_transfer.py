"""Handler of inventory:transfer: Move stock between warehouses.

Yours to edit: svcgen created this stub once and never overwrites it.
"""

from __future__ import annotations

from svcgen.runtime import Context, Result

from ..models import StockTransfer, Transfer


async def handle(request: StockTransfer, context: Context) -> Result[Transfer]:
    return Result.not_implemented("inventory:transfer is not implemented yet")
