"""A real uvicorn server on 127.0.0.1 and a free port, run in a thread, bounded in time, with the settings every
svcgen server gets (`server_options`), logging aside: the test process keeps its own."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import uvicorn

from svcgen.runtime._http.limits import server_options

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
