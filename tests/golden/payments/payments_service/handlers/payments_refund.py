"""Handler of payments:refund: Refund all or part of a capture.

Yours to edit: svcgen created this stub once and never overwrites it.
"""

from __future__ import annotations

from svcgen.runtime import Context, Result

from ..models import Refund, RefundPayment


async def handle(request: RefundPayment, context: Context) -> Result[Refund]:
    return Result.not_implemented("payments:refund is not implemented yet")
