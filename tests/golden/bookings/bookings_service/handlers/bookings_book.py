"""Handler of bookings:book: Book an appointment.

Yours to edit: svcgen created this stub once and never overwrites it.
"""

from __future__ import annotations

from svcgen.runtime import Context, Result

from ..models import Appointment, BookAppointment


async def handle(request: BookAppointment, context: Context) -> Result[Appointment]:
    return Result.not_implemented("bookings:book is not implemented yet")
