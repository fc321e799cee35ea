"""Diagnostic formatting and ordering."""

from __future__ import annotations

from svcgen.manifest.diagnostics import Diagnostic, ManifestError
from svcgen.manifest.model import Position


def test_diagnostic_prints_file_line_column_message() -> None:
    assert str(Diagnostic(Position("a/m.yaml", 3, 5), "bad")) == "a/m.yaml:3:5: bad"


def test_error_sorts_by_line_then_column_keeping_emission_order_on_ties() -> None:
    error = ManifestError(
        [
            Diagnostic(Position("m.yaml", 9, 1), "late"),
            Diagnostic(Position("m.yaml", 2, 7), "second"),
            Diagnostic(Position("m.yaml", 2, 3), "first"),
            Diagnostic(Position("m.yaml", 2, 7), "tie"),
            Diagnostic(Position("m.yaml", 2, 3), "first"),
        ]
    )
    assert [d.message for d in error.diagnostics] == ["first", "second", "tie", "late"]
    assert str(error) == "m.yaml:2:3: first\nm.yaml:2:7: second\nm.yaml:2:7: tie\nm.yaml:9:1: late"
    assert error.args == (str(error),)
