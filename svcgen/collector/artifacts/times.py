"""Time values in the artifacts: every one an RFC 3339 UTC string (`...Z`), or null when unknown."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from ...runtime._mesh.clock import parse_rfc3339, rfc3339

Now = datetime | float | None
"""When the artifacts are generated: an aware or naive-UTC datetime, epoch seconds, or None for the wall clock."""


def epoch_of(now: Now) -> float:
    if now is None:
        return time.time()
    if isinstance(now, datetime):
        aware = now if now.tzinfo is not None else now.replace(tzinfo=UTC)
        return aware.timestamp()
    return float(now)


def generated_at(now: Now) -> str:
    return rfc3339(epoch_of(now))


def utc_text(text: object) -> str | None:
    """Normalised to the one UTC form, so the artifacts never mix offsets; unparseable degrades to null."""
    epoch = parse_rfc3339(text)
    return None if epoch is None else rfc3339(epoch)
