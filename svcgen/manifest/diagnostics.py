"""Diagnostics: `file:line:col: message`, collected so a manifest reports every problem at once."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .model import Position


@dataclass(frozen=True)
class Diagnostic:
    position: Position
    message: str

    def __str__(self) -> str:
        return f"{self.position}: {self.message}"


def sort_diagnostics(diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
    """By (file, line, column); ties keep emission order. Exact duplicates are dropped."""
    unique = list(dict.fromkeys(diagnostics))
    return sorted(unique, key=lambda d: (d.position.file, d.position.line, d.position.column))


class ManifestError(Exception):
    """An invalid manifest: carries every diagnostic, sorted by position."""

    def __init__(self, diagnostics: Iterable[Diagnostic]) -> None:
        self.diagnostics: list[Diagnostic] = sort_diagnostics(diagnostics)
        super().__init__(str(self))

    def __str__(self) -> str:
        return "\n".join(str(diagnostic) for diagnostic in self.diagnostics)
