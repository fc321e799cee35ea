"""Waiting on conditions and on real server processes, shared by the end-to-end tests. Every wait has a
deadline; a process that will not stop is killed."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

import httpx

START_TIMEOUT = 30.0
STOP_TIMEOUT = 20.0


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "the condition") -> Any:
    """The predicate's first truthy value; fails the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout:g}s waiting for {what}"
        time.sleep(0.05)


def stop_process(process: subprocess.Popen[Any], *, graceful: bool = True) -> int:
    """SIGTERM (or SIGKILL) and wait; a process that outlives STOP_TIMEOUT is killed. Returns the exit code."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM if graceful else signal.SIGKILL)
        try:
            process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=STOP_TIMEOUT)
    return process.returncode


def wait_until_up(process: subprocess.Popen[Any], url: str, log: Path | None = None) -> None:
    """Until `url` answers at all; kills the process and fails with its log when it exits or never answers."""
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            if process.poll() is not None or time.monotonic() > deadline:
                stop_process(process, graceful=False)
                raise AssertionError(f"{url} did not come up; its log:\n{tail(log)}") from None
            time.sleep(0.05)


def tail(log: Path | None, lines: int = 40) -> str:
    if log is not None:
        with suppress(OSError):
            return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    return "(no log)"
