"""Handler of patients:register (version v1).

Yours to edit: svcgen created this stub once and never overwrites it.
"""

from __future__ import annotations

from svcgen.runtime import Context, Result

from ..models import Patient_v1, RegisterPatient_v1


async def handle(request: RegisterPatient_v1, context: Context) -> Result[Patient_v1]:
    return Result.not_implemented("patients:register is not implemented yet")
