"""Handler of inventory:movements: Recent stock movements of a SKU, newest first.

Yours to edit: svcgen created this stub once and never overwrites it.
"""

from __future__ import annotations

from svcgen.runtime import Context, Result

from ..models import Movement, MovementsQuery


async def handle(request: MovementsQuery, context: Context) -> Result[list[Movement]]:
    return Result.not_implemented("inventory:movements is not implemented yet")
