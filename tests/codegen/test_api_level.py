"""The generated package checks the runtime's API level before anything else of it is imported."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from svcgen.codegen import render, render_package, write_package
from svcgen.manifest import load_manifest_text
from svcgen.runtime import API_LEVEL

from .test_paths import MANIFEST


def build(out: Path) -> Path:
    manifest = load_manifest_text(MANIFEST, str(out / "m.yaml"))
    write_package(render_package(manifest, out), out / manifest.package)
    return out / manifest.package


def import_in_a_fresh_process(out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "import paths_service.app"],
        cwd=out, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_the_level_check_is_the_first_statement(tmp_path: Path) -> None:
    package = build(tmp_path)
    body = ast.parse((package / "__init__.py").read_text()).body
    docstring, runtime_import, check = body
    assert isinstance(docstring, ast.Expr) and isinstance(runtime_import, ast.ImportFrom)
    assert ast.unparse(runtime_import) == "from svcgen.runtime import require_api_level"
    assert ast.unparse(check) == f"require_api_level({API_LEVEL}, 'paths_service')"
    assert import_in_a_fresh_process(tmp_path).returncode == 0


@pytest.mark.parametrize(
    ("built_for", "fix"),
    [
        (API_LEVEL + 1, "upgrade svcgen (pip install --upgrade svcgen) to the release that built it"),
        (API_LEVEL - 1, "rebuild it with this svcgen (svcgen build MANIFEST -o OUT)"),
    ],
)
def test_a_package_built_for_another_level_fails_at_import_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, built_for: int, fix: str
) -> None:
    monkeypatch.setattr(render, "API_LEVEL", built_for)  # as a build by another svcgen release would write it
    build(tmp_path)
    imported = import_in_a_fresh_process(tmp_path)
    assert imported.returncode == 1
    assert imported.stderr.splitlines()[-1] == (
        f"svcgen.runtime._version.RuntimeMismatch: paths_service was generated for svcgen runtime API level "
        f"{built_for}, but the installed runtime is at level {API_LEVEL}: {fix}"
    )
