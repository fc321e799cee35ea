"""Handler of patients:register (version v2).

Yours to edit: svcgen created this stub once and never overwrites it.
"""

from __future__ import annotations

from svcgen.runtime import Context, Result

from ..models import Patient_v2, RegisterPatient_v2


async def handle(request: RegisterPatient_v2, context: Context) -> Result[Patient_v2]:
    return Result.not_implemented("patients:register is not implemented yet")
