"""Handler of payments:capture: Capture an authorised payment.

Yours to edit: svcgen created this stub once and never overwrites it.
"""

from __future__ import annotations

from svcgen.runtime import Context, Result

from ..models import Capture, CapturePayment


async def handle(request: CapturePayment, context: Context) -> Result[Capture]:
    return Result.not_implemented("payments:capture is not implemented yet")
