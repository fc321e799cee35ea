"""Handler of payments:get-capture.

Yours to edit: svcgen created this stub once and never overwrites it.
"""

from __future__ import annotations

from svcgen.runtime import Context, Result

from ..models import Capture, GetCapture


async def handle(request: GetCapture, context: Context) -> Result[Capture]:
    return Result.not_implemented("payments:get-capture is not implemented yet")
