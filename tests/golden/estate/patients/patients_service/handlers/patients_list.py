"""Handler of patients:list.

Yours to edit: svcgen created this stub once and never overwrites it.
"""

from __future__ import annotations

from svcgen.runtime import Context, Result

from ..models import ListPatients, Page_Patient_v2


async def handle(request: ListPatients, context: Context) -> Result[Page_Patient_v2]:
    return Result.not_implemented("patients:list is not implemented yet")
