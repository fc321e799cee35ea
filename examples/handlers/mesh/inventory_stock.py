"""inventory:stock: fixed levels. By `make demo`."""

from __future__ import annotations

from datetime import UTC, datetime

from svcgen.runtime import Context, Result

from ..models import StockLevel, StockLevels, StockQuery


async def handle(request: StockQuery, context: Context) -> Result[StockLevels]:
    level = StockLevel(sku=request.sku, warehouse="main", on_hand=12, bin_location="A-3", updated_at=datetime.now(UTC))
    return Result.ok(StockLevels(sku=request.sku, levels=[level]))
