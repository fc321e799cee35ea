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
def served(idle: float = IDLE) -> Iterator[tuple[str, int]]:
    with running(app(), **server_options(idle_timeout=idle) | {"log_config": None}) as base:
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


def test_each_answer_starts_the_deadline_again_long_after_the_connection_opened() -> None:
    """Answers every 0.3 s for more than twice the idle timeout: the deadline armed at the opening passes meanwhile
    and waits out what is left of the latest answer's instead of closing; once idle, the connection is closed."""
    idle = 2.0
    request = b"GET /svc/spec HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n"
    with served(idle) as address, socket.create_connection(address, timeout=BOUND) as sock:
        started = time.monotonic()
        answered = 0
        while time.monotonic() - started < idle * 2.5:
            sock.sendall(request)
            answer = b""
            while not _whole(answer):
                chunk = sock.recv(65536)
                assert chunk, f"closed {time.monotonic() - started:.1f} s after opening, {answered} answers in"
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 200 ")
            answered += 1
            time.sleep(0.3)
        took = closed_after(sock)
    assert took < idle + 2.0


def _whole(answer: bytes) -> bool:
    head, _, body = answer.partition(b"\r\n\r\n")
    lengths = [line for line in head.lower().split(b"\r\n") if line.startswith(b"content-length:")]
    return bool(lengths) and len(body) >= int(lengths[0].split(b":")[1])


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
