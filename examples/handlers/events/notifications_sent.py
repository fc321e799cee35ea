"""notifications:sent: how many confirmations went out. Written by `make demo`."""

from __future__ import annotations

from svcgen.runtime import Context, Result

from ..models import SentCount, SentQuery
from .on_bookings_booked import SENT


async def handle(request: SentQuery, context: Context) -> Result[SentCount]:
    wanted = [sent for sent in SENT if request.patient_id is None or sent == f"a-{request.patient_id}"]
    return Result.ok(SentCount(sent=len(wanted)))
