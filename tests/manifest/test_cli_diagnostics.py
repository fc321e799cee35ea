"""How validate, build and check print a manifest's diagnostics, and their exit status."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from svcgen.cli import main

ROOT = Path(__file__).resolve().parents[2]
CASES = Path("tests", "golden", "errors")
INVALID = (CASES / "many_at_once.yaml").as_posix()
WARNED = (CASES / "unused_types.yaml").as_posix()


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def golden(manifest: str) -> str:
    return Path(manifest).with_suffix(".txt").read_text(encoding="utf-8")


@pytest.fixture(autouse=True)
def in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


def test_validate_prints_every_diagnostic_of_an_invalid_manifest_and_exits_1() -> None:
    result = run("validate", INVALID)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == golden(INVALID)
    assert "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert any(": warning: " in line for line in lines) and any(": warning: " not in line for line in lines)


def test_validate_prints_warnings_of_a_valid_manifest_and_exits_0() -> None:
    result = run("validate", WARNED)
    assert result.exit_code == 0
    assert result.stdout == f"{WARNED}: valid (4 types, 1 topic)\n"
    assert result.stderr == golden(WARNED)


def test_validate_of_a_clean_manifest_prints_nothing_on_stderr() -> None:
    result = run("validate", "examples/manifests/orders.yaml")
    assert result.exit_code == 0 and result.stderr == ""


def test_validate_of_a_missing_file_is_one_line() -> None:
    result = run("validate", "no/such.yaml")
    assert result.exit_code == 1
    assert result.stderr == "no/such.yaml:1:1: manifest file not found\n"


def test_build_goes_on_after_warnings_and_check_repeats_them(tmp_path: Path) -> None:
    built = run("build", WARNED, "-o", str(tmp_path))
    assert built.exit_code == 0, built.output
    assert built.stderr == golden(WARNED)
    assert (tmp_path / "orders_service" / "app.py").is_file()
    checked = run("check", WARNED, "-o", str(tmp_path))
    assert checked.exit_code == 0, checked.output
    assert checked.stderr == golden(WARNED)


def test_build_of_an_invalid_manifest_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run("build", INVALID, "-o", str(out))
    assert result.exit_code == 1
    assert result.stderr == golden(INVALID)
    assert not out.exists()
