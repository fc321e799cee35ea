"""Handler of billing:bill.

Yours to edit: svcgen created this stub once and never overwrites it.
"""

from __future__ import annotations

from svcgen.runtime import Context, Result

from ..models import Bill, Invoice


async def handle(request: Bill, context: Context) -> Result[Invoice]:
    return Result.not_implemented("billing:bill is not implemented yet")
