"""Shared by the codegen tests: the examples, building them, reading a built tree, running the CLI."""

from __future__ import annotations

import importlib
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

from svcgen.codegen.ownership import write_package
from svcgen.codegen.render import render_package
from svcgen.manifest import load_manifest

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "golden"
EXAMPLES = ("bookings", "clinic", "inventory", "notifications", "orders", "payments")
ESTATE = ("patients", "billing", "appointments")
"""examples/estate/<service>/<service>.yaml: three services whose types cross by `imports:` (built into
tests/golden/estate/<service>/)."""
CLI = "from svcgen.cli import main; main()"
_TOOL_DIRS = frozenset({"__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"})


def manifest_path(example: str) -> str:
    """The example's manifest as builds name it: relative to the repository (headers carry it)."""
    if example in ESTATE:
        return f"examples/estate/{example}/{example}.yaml"
    return f"examples/manifests/{example}.yaml"


def build_example(example: str, out: Path, *, named_from: Path | None = None) -> Path:
    """Build in-process into OUT (the working directory must be the repository); returns OUT/<package>.

    `named_from`: the OUT the headers name the manifest from, when not `out` (the golden tree is built as if
    into tests/golden/<example>)."""
    model = load_manifest(manifest_path(example))
    package_dir = out / model.package
    write_package(render_package(model, named_from or out), package_dir)
    return package_dir


def tree(root: Path) -> dict[str, bytes]:
    """Every file under `root` by POSIX relative path, tool caches left out."""
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and not _TOOL_DIRS & set(path.relative_to(root).parts)
    }


def run_cli(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )


@contextmanager
def imported(out: Path, package: str) -> Iterator[ModuleType]:
    """`OUT/<package>` imported from `out`; every module of it forgotten afterwards, so the next test imports its
    own build."""
    _forget(package)  # a build of the same package another test imported and kept
    sys.path.insert(0, str(out))
    try:
        yield importlib.import_module(package)
    finally:
        sys.path.remove(str(out))
        _forget(package)


def _forget(package: str) -> None:
    for name in [name for name in sys.modules if name == package or name.startswith(package + ".")]:
        del sys.modules[name]
