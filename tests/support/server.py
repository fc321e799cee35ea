"""A real uvicorn server on 127.0.0.1 and a free port, run in a thread, bounded in time, with the settings every
svcgen server gets (`server_options`), logging aside: the test process keeps its own."""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import uvicorn

from svcgen.runtime._http.limits import server_options
from tests.support.processes import wait_for

STARTUP_TIMEOUT = 10.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def accepts(port: int) -> bool:
    """Whether a server on 127.0.0.1:port takes connections."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def second_ctrl_c_with_a_request_pending(process: subprocess.Popen[bytes], port: int, request_line: bytes) -> None:
    """Ctrl-C the server at 127.0.0.1:port while a request (`request_line`, its body still arriving) is in progress,
    then Ctrl-C again once it no longer accepts connections; it must exit 0."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as pending:
        pending.sendall(request_line + b"\r\nhost: x\r\ncontent-length: 100\r\n\r\n{")
        process.send_signal(signal.SIGINT)
        wait_for(lambda: not accepts(port), 10, "the server to stop accepting connections")
        pending.sendall(b" ")  # still sending: not an idle connection the server may close by itself
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0


@contextlib.contextmanager
def running(app: Any, **options: Any) -> Iterator[str]:
    """Yields the base URL; stops the server on exit. `options` override `server_options()`."""
    port = free_port()
    settings = {**server_options(), "log_config": None, **options}
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on", **settings)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=STARTUP_TIMEOUT)
