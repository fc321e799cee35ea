"""A deprecated topic version: its dates, and the response headers that tell callers (RFC 9745, RFC 8594)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from email.utils import format_datetime
from typing import Final

DEPRECATION_HEADER: Final = "deprecation"
SUNSET_HEADER: Final = "sunset"


@dataclass(frozen=True)
class Deprecation:
    """`deprecated: {since, sunset, successor}` of a topic version: ISO dates (`2026-01-01`) and the
    `topic@version` callers should move to."""

    since: str | None = None
    sunset: str | None = None
    successor: str | None = None

    def headers(self) -> tuple[tuple[str, str], ...]:
        """`deprecation: @<unix seconds>` (RFC 9745) and `sunset: <HTTP-date>` (RFC 8594), each when its date is
        given; computed once per registration, sent with every answer."""
        headers = []
        if self.since is not None:
            headers.append((DEPRECATION_HEADER, f"@{int(_midnight(self.since).timestamp())}"))
        if self.sunset is not None:
            headers.append((SUNSET_HEADER, format_datetime(_midnight(self.sunset), usegmt=True)))
        return tuple(headers)


def _midnight(day: str) -> dt.datetime:
    return dt.datetime.combine(dt.date.fromisoformat(day), dt.time(), dt.UTC)
