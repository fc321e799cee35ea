"""Shared by the serve tests: a small manifest built into OUT, and `svcgen serve` run as a real process."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.processes import stop_process, wait_until_up
from tests.support.server import free_port

ECHO = """svcgen: 1
service: echo
types:
  Note:
    fields:
      text: string
topics:
  - {id: "echo:say", request: Note, response: Note, routes: ["POST /say"]}
"""


def write_atomically(path: Path, text: str) -> None:
    """As an editor saves: the new bytes appear at once, never a half-written file."""
    scratch = path.with_name(path.name + ".tmp")
    scratch.write_text(text)
    os.replace(scratch, path)


def build_echo(tmp_path: Path, manifest: str = ECHO) -> Path:
    """tmp/echo.yaml built into tmp/out (from inside OUT, so the header names it relative to OUT); OUT/PACKAGE."""
    (tmp_path / "echo.yaml").write_text(manifest)
    out = tmp_path / "out"
    out.mkdir()
    built = subprocess.run([sys.executable, "-m", "svcgen", "build", "../echo.yaml", "-o", "."],
                           capture_output=True, text=True, timeout=120, cwd=out)
    assert built.returncode == 0, built.stderr
    return out / "echo_service"


@contextmanager
def serving(package: Path, *options: str) -> Iterator[tuple[str, subprocess.Popen[bytes], Path]]:
    """`svcgen serve PACKAGE OPTIONS` on 127.0.0.1 and a free port: (base URL, process, its log)."""
    port = free_port()
    log = package.parent.parent / f"serve-{port}.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "svcgen", "serve", str(package), "--port", str(port), *options],
            stdout=sink, stderr=subprocess.STDOUT, cwd=package.parent.parent,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            wait_until_up(process, base + "/svc/spec", log)
            yield base, process, log
        finally:
            stop_process(process)
