"""Errors of the generator that a user can act on (the manifest itself validated)."""

from __future__ import annotations

from collections.abc import Iterable


class CodegenError(Exception):
    """A build that cannot go on; every line of the message is a complete, user-facing sentence."""

    def __init__(self, lines: str | Iterable[str]) -> None:
        self.lines: list[str] = [lines] if isinstance(lines, str) else list(lines)
        super().__init__("\n".join(self.lines))
