"""Handler of the event bookings:booked from bookings: An appointment was booked.

Yours to edit: svcgen created this stub once and never overwrites it. A success acknowledges the event; a failure
or an exception has it delivered again after the subscription's next backoff step, and after its last attempt it
goes to the dead-letter stream (`svcgen events dead-letters list`). `context.delivery` says which attempt this is.
"""

from __future__ import annotations

from svcgen.runtime import Context, Result

from ..models import bookings_AppointmentBooked


async def handle(event: bookings_AppointmentBooked, context: Context) -> Result[None]:
    return Result.not_implemented("bookings:booked is not handled yet")
