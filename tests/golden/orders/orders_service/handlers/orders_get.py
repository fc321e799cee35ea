"""Handler of orders:get: Fetch an order by id.

Yours to edit: svcgen created this stub once and never overwrites it.
"""

from __future__ import annotations

from svcgen.runtime import Context, Result

from ..models import GetOrder, Order


async def handle(request: GetOrder, context: Context) -> Result[Order]:
    return Result.not_implemented("orders:get is not implemented yet")
