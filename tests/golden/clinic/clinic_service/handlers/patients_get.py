"""Handler of patients:get: A patient's record.

Yours to edit: svcgen created this stub once and never overwrites it.
"""

from __future__ import annotations

from svcgen.runtime import Context, Result

from ..models import Patient, PatientRef


async def handle(request: PatientRef, context: Context) -> Result[Patient]:
    return Result.not_implemented("patients:get is not implemented yet")
