"""`mypy --strict` on a generated package sees `svcgen.runtime` through the install alone (no MYPYPATH, the
checkout not on the path): the README's install (`make test`, an editable install) is a plain path entry."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .conftest import REPO


def test_mypy_strict_passes_on_a_generated_package(tmp_path: Path) -> None:
    out = tmp_path / "out"
    built = subprocess.run([sys.executable, "-m", "svcgen", "build", str(REPO / "examples/manifests/orders.yaml"),
                            "-o", str(out)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    env = {name: value for name, value in os.environ.items() if name not in ("MYPYPATH", "PYTHONPATH")}
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"), "orders_service"],
        capture_output=True, text=True, timeout=300, cwd=out, env=env,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "no issues found in" in checked.stdout
