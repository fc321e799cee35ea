"""Handler of inventory:stock: Stock levels of a SKU.

Yours to edit: svcgen created this stub once and never overwrites it.
"""

from __future__ import annotations

from svcgen.runtime import Context, Result

from ..models import StockLevels, StockQuery


async def handle(request: StockQuery, context: Context) -> Result[StockLevels]:
    return Result.not_implemented("inventory:stock is not implemented yet")
