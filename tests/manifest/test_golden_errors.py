"""Golden diagnostics: tests/golden/errors/<case>.yaml must print exactly <case>.txt.

The manifest is loaded by its repo-relative path (as a user would pass it on the command line),
so the expected text names `tests/golden/errors/<case>.yaml`. `pytest --update-golden` rewrites
the .txt files from the current output.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from svcgen.manifest import ManifestError, load_manifest

ROOT = Path(__file__).resolve().parents[2]
CASES_DIR = Path("tests", "golden", "errors")
CASES = sorted(path.stem for path in (ROOT / CASES_DIR).glob("*.yaml"))


def test_there_are_enough_cases() -> None:
    assert len(CASES) >= 12


@pytest.mark.parametrize("case", CASES)
def test_golden_errors(case: str, update_golden: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    manifest = (CASES_DIR / f"{case}.yaml").as_posix()
    with pytest.raises(ManifestError) as info:
        load_manifest(manifest)
    actual = f"{info.value}\n"
    assert all(str(d).startswith(f"{manifest}:") for d in info.value.diagnostics)
    expected_file = CASES_DIR / f"{case}.txt"
    if update_golden:
        expected_file.write_text(actual, encoding="utf-8", newline="\n")
        return
    assert expected_file.exists(), f"{expected_file} is missing; run pytest --update-golden to create it"
    assert actual == expected_file.read_text(encoding="utf-8")
