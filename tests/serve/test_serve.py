"""`svcgen serve` as shipped: httptools and uvloop, no access log unless asked, log lines with time and level,
and a user error raised while importing the package is one line and exit 1."""

from __future__ import annotations

import asyncio
import logging
import re
import socket
import subprocess
import sys
from pathlib import Path

import httpx

from svcgen.serving import CUT_SHORT, CutShort
from tests.support.processes import wait_for
from tests.support.server import second_ctrl_c_with_a_request_pending
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


def serve_once(package: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "svcgen", "serve", str(package), "--port", "0"],
                          capture_output=True, text=True, timeout=60, cwd=package.parent.parent)


def test_a_handler_importing_a_type_the_manifest_renamed_is_one_line_naming_its_file(tmp_path: Path) -> None:
    package = build_echo(tmp_path)
    # A kept handler after `Note` was renamed in the manifest and the package rebuilt.
    (package / "handlers" / "echo_say.py").write_text(
        "from svcgen.runtime import Context, Result\n\nfrom ..models import Memo, Note\n"
    )
    done = serve_once(package)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("echo_service: handlers/echo_say.py:3: ImportError: cannot import name 'Memo'"), lines


def test_a_syntax_error_in_a_handler_is_one_line_with_its_position(tmp_path: Path) -> None:
    package = build_echo(tmp_path)
    (package / "handlers" / "echo_say.py").write_text("async def handle(:\n")
    done = serve_once(package)
    assert done.returncode == 1
    assert done.stderr.splitlines() == ["echo_service: handlers/echo_say.py:1:18: SyntaxError: invalid syntax"]


def test_a_setting_wiring_py_requires_is_one_line_naming_its_line(tmp_path: Path) -> None:
    package = build_echo(tmp_path)
    # wire() reading a setting the environment lacks: the user's own line says what to fix.
    (package / "wiring.py").write_text(
        "from svcgen.runtime import Wiring\n\n\ndef wire(wiring: Wiring) -> None:\n"
        "    url = wiring.environ['ECHO_DATABASE_URL']\n"
    )
    done = serve_once(package)
    assert done.returncode == 1
    assert done.stderr.splitlines() == ["echo_service: wiring.py:5: KeyError: 'ECHO_DATABASE_URL'"], done.stderr


def test_a_handler_module_without_handle_is_one_line_naming_it(tmp_path: Path) -> None:
    package = build_echo(tmp_path)
    (package / "handlers" / "echo_say.py").write_text("async def handel(request: object, context: object) -> None:\n"
                                                      "    pass\n")
    done = serve_once(package)
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert "handlers/echo_say.py" in lines[0] and "handle" in lines[0], lines


def test_a_port_in_use_is_one_line_before_the_app_starts(tmp_path: Path) -> None:
    package = build_echo(tmp_path)
    (package / "wiring.py").write_text(
        "from svcgen.runtime import Wiring\n\n\nasync def startup() -> None:\n    print('started', flush=True)\n\n\n"
        "def wire(wiring: Wiring) -> None:\n    wiring.on_startup(startup)\n"
    )
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "svcgen", "serve", str(package), "--port", str(port)],
                              capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 1
    assert done.stdout == ""  # the app never started
    assert done.stderr.splitlines() == [f"cannot listen on 127.0.0.1:{port}: Address already in use"]


def test_not_a_package_is_one_line(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "svcgen", "serve", str(tmp_path)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [f"{tmp_path.as_posix()}: no generated package here (no app.py); "
                                        "build one: svcgen build M -o OUT"]


def test_a_second_ctrl_c_cuts_a_request_in_progress_short_in_one_line(tmp_path: Path) -> None:
    """A second Ctrl-C stops without waiting for the requests in progress: uvicorn printed a CancelledError
    traceback for each, and "ASGI 'lifespan' protocol appears unsupported" for the app's lifespan."""
    package = build_echo(tmp_path)
    with serving(package) as (base, process, log):
        port = int(base.rsplit(":", 1)[1])
        second_ctrl_c_with_a_request_pending(process, port, b"POST /say HTTP/1.1")
    lines = log.read_text().splitlines()
    assert all(LOG_LINE.match(line) for line in lines), lines
    assert [line for line in lines if "WARNING" in line or "ERROR" in line] == [
        next(line for line in lines if line.endswith(f" WARNING uvicorn.error: {CUT_SHORT}"))
    ]
    assert not any("lifespan" in line for line in lines), lines


def test_a_cancelled_error_of_the_apps_own_keeps_its_traceback() -> None:
    """Only a request whose task the server cancelled is cut short: a CancelledError that the app's own code lets
    out (an awaited task it cancelled) is a bug in it, shown in full."""

    def record() -> logging.LogRecord:
        error = asyncio.CancelledError()
        return logging.LogRecord("uvicorn.error", logging.ERROR, __file__, 1, "Exception in ASGI application\n", (),
                                 (type(error), error, None))  # fmt: skip

    async def own() -> logging.LogRecord:
        raised = record()
        assert CutShort().filter(raised)
        return raised

    async def cut_short(started: asyncio.Event) -> logging.LogRecord:
        try:
            started.set()
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            raised = record()
            assert CutShort().filter(raised)
            return raised
        raise AssertionError("not cancelled")

    async def both() -> tuple[logging.LogRecord, logging.LogRecord]:
        started = asyncio.Event()
        task = asyncio.create_task(cut_short(started))
        await started.wait()
        task.cancel()
        return await own(), await task

    kept, rewritten = asyncio.run(both())
    assert kept.levelno == logging.ERROR and kept.exc_info is not None
    assert rewritten.levelno == logging.WARNING and rewritten.exc_info is None
    assert rewritten.getMessage() == CUT_SHORT
