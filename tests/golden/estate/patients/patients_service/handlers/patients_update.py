"""Handler of patients:update.

Yours to edit: svcgen created this stub once and never overwrites it.
"""

from __future__ import annotations

from svcgen.runtime import Context, Result

from ..models import Patient_v2, PatientChange_v2


async def handle(request: PatientChange_v2, context: Context) -> Result[Patient_v2]:
    return Result.not_implemented("patients:update is not implemented yet")
