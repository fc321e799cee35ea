"""payments:capture: always captured. Written by `make demo`."""

from __future__ import annotations

from datetime import UTC, datetime

from svcgen.runtime import Context, Result

from ..models import Capture, CapturePayment


async def handle(request: CapturePayment, context: Context) -> Result[Capture]:
    return Result.ok(Capture(capture_id="cap-" + request.order_id, order_id=request.order_id, amount=request.amount,
                             captured_at=datetime.now(UTC)))
