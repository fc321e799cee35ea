"""bookings:book: stores nothing (a demo), publishes `bookings:booked` and answers created once the stream has it.
Written by `make demo`."""

from __future__ import annotations

from svcgen.runtime import Context, Result

from ..events import Events
from ..models import Appointment, AppointmentBooked, BookAppointment


async def handle(request: BookAppointment, context: Context) -> Result[Appointment]:
    appointment = Appointment(appointment_id=f"a-{request.patient_id}", patient_id=request.patient_id,
                              slot=request.slot)  # fmt: skip
    booked = AppointmentBooked(appointment_id=appointment.appointment_id, patient_id=request.patient_id,
                               email=request.email, slot=request.slot)  # fmt: skip
    published = await context.scope.get(Events).bookings_booked(booked)
    if not published.is_successful:  # the booking is not confirmed unless its event is stored
        return Result.of(published.status, detail=published.detail)
    return Result.created(appointment)
