"""Golden diagnostics: tests/golden/errors/<case>.yaml must print exactly <case>.txt.

The manifest is loaded by its repo-relative path (as a user would pass it on the command line),
so the expected text names `tests/golden/errors/<case>.yaml`. A case whose diagnostics are all
warnings is a valid manifest. `pytest --update-golden` rewrites the .txt files from the current output.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from svcgen.manifest import Diagnostic, ManifestError, load_manifest_with_warnings

ROOT = Path(__file__).resolve().parents[2]
CASES_DIR = Path("tests", "golden", "errors")
CASES = sorted(path.stem for path in (ROOT / CASES_DIR).glob("*.yaml"))


def diagnose(manifest: str) -> tuple[list[Diagnostic], bool]:
    """Every diagnostic of the manifest, and whether it loaded (valid, maybe with warnings)."""
    try:
        loaded = load_manifest_with_warnings(manifest)
    except ManifestError as error:
        return error.diagnostics, False
    return list(loaded.warnings), True


def test_there_are_enough_cases() -> None:
    assert len(CASES) >= 12


@pytest.mark.parametrize("case", CASES)
def test_golden_errors(case: str, update_golden: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    manifest = (CASES_DIR / f"{case}.yaml").as_posix()
    diagnostics, valid = diagnose(manifest)
    assert diagnostics, "every case has something to say"
    assert valid == all(not diagnostic.is_error for diagnostic in diagnostics)
    assert all(str(d).startswith(f"{manifest}:") for d in diagnostics)
    actual = "".join(f"{diagnostic}\n" for diagnostic in diagnostics)
    expected_file = CASES_DIR / f"{case}.txt"
    if update_golden:
        expected_file.write_text(actual, encoding="utf-8", newline="\n")
        return
    assert expected_file.exists(), f"{expected_file} is missing; run pytest --update-golden to create it"
    assert actual == expected_file.read_text(encoding="utf-8")
