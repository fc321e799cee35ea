"""One fresh virtual environment per test session with a plain `pip install <repo>` (no extras), shared by the
tests that check what a user gets from `pip install svcgen`."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
INSTALL_TIMEOUT = 600.0
BOOTSTRAP = {"pip", "setuptools"}
"""What `python -m venv` puts there before svcgen: not counted as svcgen's weight."""

# Run inside the fresh venv: the bytes of every installed distribution's files.
_WEIGHTS = """
import json, sys
from importlib.metadata import distributions
from pathlib import Path
weights = {}
for dist in distributions():
    total = 0
    for file in dist.files or ():
        path = Path(str(dist.locate_file(file)))
        if path.is_file():
            total += path.stat().st_size
    weights[dist.metadata["Name"].lower()] = total
json.dump(weights, sys.stdout)
"""


@dataclass(frozen=True)
class FreshInstall:
    venv: Path
    pip_output: str
    weights: dict[str, int]
    """Installed distributions (lower-case names) and the bytes of their files, venv bootstrap excluded."""

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def svcgen(self) -> Path:
        return self.venv / "bin" / "svcgen"

    @property
    def site_packages(self) -> Path:
        return next((self.venv / "lib").glob("python3*/site-packages"))


@pytest.fixture(scope="session")
def fresh_install(tmp_path_factory: pytest.TempPathFactory) -> FreshInstall:
    venv = tmp_path_factory.mktemp("fresh") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "--disable-pip-version-check", str(REPO)],
        capture_output=True, text=True, timeout=INSTALL_TIMEOUT,
    )
    assert done.returncode == 0, f"pip install failed:\n{done.stdout}\n{done.stderr}"
    listed = subprocess.run([str(python), "-c", _WEIGHTS], capture_output=True, text=True, check=True, timeout=60)
    weights = {name: size for name, size in json.loads(listed.stdout).items() if name not in BOOTSTRAP}
    return FreshInstall(venv, done.stdout + done.stderr, weights)
