"""Handler of patients:get (version v1).

Yours to edit: svcgen created this stub once and never overwrites it.
"""

from __future__ import annotations

from svcgen.runtime import Context, Result

from ..models import Patient_v1, Ref


async def handle(request: Ref, context: Context) -> Result[Patient_v1]:
    return Result.not_implemented("patients:get is not implemented yet")
