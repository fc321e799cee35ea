"""Diagnostics: `file:line:col: message`, collected so a manifest reports every problem at once.

An error makes the manifest invalid (nothing is built); a warning is printed as
`file:line:col: warning: message` and changes nothing else.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from .model import Position

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Diagnostic:
    position: Position
    message: str
    severity: Severity = "error"

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    def __str__(self) -> str:
        label = "" if self.is_error else f"{self.severity}: "
        return f"{self.position}: {label}{self.message}"


def sort_diagnostics(diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
    """By (file, line, column); ties keep emission order. Exact duplicates are dropped."""
    unique = list(dict.fromkeys(diagnostics))
    return sorted(unique, key=lambda d: (d.position.file, d.position.line, d.position.column))


class ManifestError(Exception):
    """An invalid manifest: carries every diagnostic (its errors and any warnings), sorted by position."""

    def __init__(self, diagnostics: Iterable[Diagnostic]) -> None:
        self.diagnostics: list[Diagnostic] = sort_diagnostics(diagnostics)
        super().__init__(str(self))

    def __str__(self) -> str:
        return "\n".join(str(diagnostic) for diagnostic in self.diagnostics)
