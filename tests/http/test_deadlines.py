"""Connection deadlines against a real uvicorn server and raw sockets: a connection that has not delivered a
complete request within the idle timeout of opening or of its previous response is closed, however it trickles;
a request being handled is never cut off."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager

from svcgen.runtime import Context, Identity, Registry, Result, Service, create_app
from svcgen.runtime._http.limits import server_options
from tests.support.server import running

IDLE = 0.5
BOUND = 5.0
"""No test waits longer than this for the server to close a connection."""


async def slow(request: dict[str, str], context: Context) -> Result[dict[str, str]]:
    await asyncio.sleep(IDLE * 3)
    return Result.ok({"slept": "yes"})


def app() -> object:
    registry = Registry()
    registry.add("t:slow", slow)
    return create_app(Service(Identity("t"), registry), ["GET /slow -> t:slow"])


@contextmanager
def served() -> Iterator[tuple[str, int]]:
    with running(app(), **server_options(idle_timeout=IDLE) | {"log_config": None}) as base:
        host, port = base.removeprefix("http://").split(":")
        yield host, int(port)


def closed_after(sock: socket.socket, trickle: bytes = b"", every: float = 0.1) -> float:
    """Seconds until the server closes `sock` (reads to EOF, sending `trickle` a byte at a time meanwhile)."""
    started = time.monotonic()
    sock.setblocking(False)
    pending = bytearray(trickle)
    while time.monotonic() - started < BOUND:
        try:
            if not sock.recv(65536):
                return time.monotonic() - started
        except BlockingIOError:
            pass
        except ConnectionResetError:
            return time.monotonic() - started
        if pending:
            try:
                sock.send(bytes(pending[:1]))
                del pending[:1]
            except OSError:
                return time.monotonic() - started
        time.sleep(every)
    raise AssertionError(f"the server kept the connection open for {BOUND} s")


def test_a_connection_that_sends_nothing_is_closed() -> None:
    with served() as address, socket.create_connection(address, timeout=BOUND) as sock:
        took = closed_after(sock)
    assert IDLE * 0.8 <= took < IDLE + 2.0


def test_a_partial_request_head_is_closed_however_slowly_it_trickles() -> None:
    head = b"GET /slow HTTP/1.1\r\nhost: 127.0.0.1\r\nx-padding: " + b"a" * 40
    with served() as address, socket.create_connection(address, timeout=BOUND) as sock:
        took = closed_after(sock, trickle=head, every=0.05)  # a byte every 50 ms: more than the timeout's worth
    assert took < IDLE + 2.0


def test_a_request_whose_body_never_completes_is_closed() -> None:
    with served() as address, socket.create_connection(address, timeout=BOUND) as sock:
        sock.sendall(b"POST /svc/invoke HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 100\r\n\r\n{\"topic\"")
        took = closed_after(sock)
    assert took < IDLE + 2.0


def test_a_slow_handler_is_answered_and_keep_alive_then_idles_out() -> None:
    """The handler takes three idle timeouts: its request is complete, so the connection is kept for the answer;
    a second request on the same connection works; then the idle connection is closed."""
    request = b"GET /slow HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n"
    with served() as address, socket.create_connection(address, timeout=BOUND) as sock:
        for _ in range(2):
            sock.sendall(request)
            answer = b""
            while b'{"slept":"yes"}' not in answer:
                chunk = sock.recv(65536)
                assert chunk, f"closed before the answer: {answer!r}"
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 200 ")
        took = closed_after(sock)
    assert took < IDLE + 2.0


def test_many_idle_connections_do_not_stay() -> None:
    with served() as address:
        sockets = [socket.create_connection(address, timeout=BOUND) for _ in range(50)]
        try:
            time.sleep(IDLE + 1.0)
            for sock in sockets:
                sock.settimeout(BOUND)
                assert sock.recv(1) == b""
        finally:
            for sock in sockets:
                sock.close()
