"""Time values in the artifacts: every one an RFC 3339 UTC string (`...Z`), or null when unknown."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from ..clock import rfc3339

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


def parse_epoch(text: object) -> float | None:
    """Epoch seconds of an RFC 3339 / ISO 8601 string; None for anything unparseable (a missing input)."""
    if not isinstance(text, str) or not text:
        return None
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def utc_text(text: object) -> str | None:
    """Normalised to the one UTC form, so the artifacts never mix offsets; unparseable degrades to null."""
    epoch = parse_epoch(text)
    return None if epoch is None else rfc3339(epoch)
