"""Handler of notifications:sent: How many confirmations were sent.

Yours to edit: svcgen created this stub once and never overwrites it.
"""

from __future__ import annotations

from svcgen.runtime import Context, Result

from ..models import SentCount, SentQuery


async def handle(request: SentQuery, context: Context) -> Result[SentCount]:
    return Result.not_implemented("notifications:sent is not implemented yet")
