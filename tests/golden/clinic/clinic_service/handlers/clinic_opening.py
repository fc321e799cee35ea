"""Handler of clinic:opening: Opening hours, public.

Yours to edit: svcgen created this stub once and never overwrites it.
"""

from __future__ import annotations

from svcgen.runtime import Context, Result

from ..models import Opening, OpeningQuery


async def handle(request: OpeningQuery, context: Context) -> Result[list[Opening]]:
    return Result.not_implemented("clinic:opening is not implemented yet")
