"""Generated code passes `ruff check` (the repository's rules and ruff's defaults) and `mypy --strict` untouched."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from svcgen.codegen.ownership import write_package
from svcgen.codegen.render import render_package
from svcgen.manifest import load_manifest
from tests.support.codegen import ESTATE, EXAMPLES, REPO, build_example

EDGE = "tests/codegen/manifests/edge.yaml"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """Every example (the estate's three services too) and the corner-case manifest, built side by side: (OUT,
    package names)."""
    out = tmp_path_factory.mktemp("quality")
    cwd = Path.cwd()
    os.chdir(REPO)
    try:
        packages = [build_example(example, out).name for example in (*EXAMPLES, *ESTATE)]
        edge = load_manifest(EDGE)
        write_package(render_package(edge, out), out / edge.package)
        packages.append(edge.package)
    finally:
        os.chdir(cwd)
    return out, packages


def tool(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True, timeout=300, check=False, env=env
    )


def test_ruff_with_the_repository_rules(built: tuple[Path, list[str]]) -> None:
    out, _ = built
    result = tool("ruff", "check", "--no-cache", "--config", str(REPO / "pyproject.toml"), ".", cwd=out)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_with_its_defaults(built: tuple[Path, list[str]]) -> None:
    out, _ = built
    result = tool("ruff", "check", "--no-cache", "--isolated", ".", cwd=out)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict(built: tuple[Path, list[str]]) -> None:
    out, packages = built
    # The svcgen checkout goes on MYPYPATH: mypy cannot follow the import hook of an editable install.
    env = {**os.environ, "MYPYPATH": str(REPO)}
    args = ["mypy", "--strict", "--no-incremental", "--config-file", os.devnull]
    result = tool(*args, *(arg for package in packages for arg in ("-p", package)), cwd=out, env=env)
    assert result.returncode == 0, result.stdout + result.stderr


def test_generated_contract_tests_pass(built: tuple[Path, list[str]]) -> None:
    """Served documents equal the committed ones for every example (the derivations cannot disagree), and each
    service starts and stops with its wiring under TestClient."""
    out, packages = built
    result = tool("pytest", "-q", "-p", "no:cacheprovider", *(f"{package}/tests" for package in packages), cwd=out)
    assert result.returncode == 0, result.stdout + result.stderr
    with_events = 2  # bookings and notifications also serve asyncapi.json
    # test_contracts (4) and test_service (1) for each package
    assert f"{5 * len(packages) + with_events} passed" in result.stdout
