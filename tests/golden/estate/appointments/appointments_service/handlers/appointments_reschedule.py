"""Handler of appointments:reschedule.

Yours to edit: svcgen created this stub once and never overwrites it.
"""

from __future__ import annotations

from svcgen.runtime import Context, Result

from ..models import Booking, Reschedule


async def handle(request: Reschedule, context: Context) -> Result[Booking]:
    return Result.not_implemented("appointments:reschedule is not implemented yet")
