"""`svcgen serve` as shipped: httptools and uvloop, no access log unless asked, log lines with time and level,
and a user error raised while importing the package is one line and exit 1."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import httpx

from tests.support.processes import wait_for
from tests.support.serving import build_echo, serving

LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (DEBUG|INFO|WARNING|ERROR|CRITICAL) \S+: ")


def mapped_libraries(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text()


def test_serves_on_httptools_and_uvloop_without_access_log(tmp_path: Path) -> None:
    package = build_echo(tmp_path)
    with serving(package) as (base, process, log):
        answer = httpx.post(base + "/say", json={"text": "hi"}, timeout=10)
        assert answer.status_code == 501  # the stub
        maps = mapped_libraries(process.pid)
        assert "/uvloop/loop." in maps
        assert "/httptools/parser/parser." in maps
        wait_for(lambda: "Uvicorn running on" in log.read_text(), what="the startup line")
    lines = log.read_text().splitlines()
    assert lines
    assert all(LOG_LINE.match(line) for line in lines), lines
    assert not any("POST /say" in line for line in lines)


def test_workers_each_serve_with_the_connection_deadline(tmp_path: Path) -> None:
    # Each worker process is handed the protocol class by pickling: a class made inside a function cannot be.
    package = build_echo(tmp_path)
    with serving(package, "--workers", "2") as (base, _, log):
        answers = [httpx.post(base + "/say", json={"text": "hi"}, timeout=10).status_code for _ in range(4)]
        workers = wait_for(lambda: log.read_text().count("Started server process") >= 2 or None, what="2 workers")
    assert answers == [501] * 4 and workers
    assert "Traceback" not in log.read_text()


def test_access_log_on_request(tmp_path: Path) -> None:
    package = build_echo(tmp_path)
    with serving(package, "--access-log") as (base, _, log):
        httpx.post(base + "/say", json={"text": "hi"}, timeout=10)
        line = wait_for(lambda: next((line for line in log.read_text().splitlines() if "POST /say" in line), None),
                        what="the access log line")
    assert LOG_LINE.match(line)
    assert "501" in line


def test_a_user_error_on_import_is_one_line_and_exit_1(tmp_path: Path) -> None:
    package = build_echo(tmp_path)
    # Stands for the generated package's API-level check against a runtime it was not built for.
    (package / "handlers" / "echo_say.py").write_text(
        "from svcgen.runtime import require_api_level\n\nrequire_api_level(99, 'echo_service')\n"
    )
    done = subprocess.run([sys.executable, "-m", "svcgen", "serve", str(package), "--port", "0"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 1
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert "echo_service was generated for svcgen runtime API level 99" in lines[0]


def test_not_a_package_is_one_line(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "svcgen", "serve", str(tmp_path)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [f"{tmp_path.as_posix()}: no generated package here (no app.py); "
                                        "build one: svcgen build M -o OUT"]
