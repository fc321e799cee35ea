"""Handler of appointments:book.

Yours to edit: svcgen created this stub once and never overwrites it.
"""

from __future__ import annotations

from svcgen.runtime import Context, Result

from ..models import Booking, BookVisit


async def handle(request: BookVisit, context: Context) -> Result[Booking]:
    return Result.not_implemented("appointments:book is not implemented yet")
