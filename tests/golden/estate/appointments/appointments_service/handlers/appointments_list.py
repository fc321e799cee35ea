"""Handler of appointments:list.

Yours to edit: svcgen created this stub once and never overwrites it.
"""

from __future__ import annotations

from svcgen.runtime import Context, Result

from ..models import ListBookings, Page_Booking


async def handle(request: ListBookings, context: Context) -> Result[Page_Booking]:
    return Result.not_implemented("appointments:list is not implemented yet")
