"""Handler of results:record: Record a lab result.

Yours to edit: svcgen created this stub once and never overwrites it.
"""

from __future__ import annotations

from svcgen.runtime import Context, Result

from ..models import LabResult, Recorded


async def handle(request: LabResult, context: Context) -> Result[Recorded]:
    return Result.not_implemented("results:record is not implemented yet")
