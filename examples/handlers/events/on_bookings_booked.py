"""bookings:booked: sends the confirmation (here: counts it). An address at bounce.example fails until the file
named by NOTIFY_FIXED exists, so `make demo` shows retries, a dead letter and its replay. Written by `make demo`."""

from __future__ import annotations

import os
from pathlib import Path

from svcgen.runtime import Context, Result

from ..models import bookings_AppointmentBooked

SENT: list[str] = []


async def handle(event: bookings_AppointmentBooked, context: Context) -> Result[None]:
    attempt = context.delivery.attempt if context.delivery is not None else 1
    fixed = Path(os.environ.get("NOTIFY_FIXED", "/nonexistent")).exists()
    if event.email.endswith("@bounce.example") and not fixed:
        print(f"notifications: {event.email} bounced (attempt {attempt})", flush=True)
        return Result.service_unavailable("the mail server refused the address")
    SENT.append(event.appointment_id)
    print(f"notifications: confirmation for {event.appointment_id} sent to {event.email} (attempt {attempt})",
          flush=True)  # fmt: skip
    return Result.ok()
