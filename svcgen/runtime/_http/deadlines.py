"""Connection deadlines for uvicorn: a connection that has not delivered a complete request (head and body)
within the idle timeout of opening, or of its previous response, is closed.

uvicorn arms its keep-alive timer only after a response and disarms it on any byte received, so a connection
that never sends a request, or trickles one byte at a time (slowloris), stays open forever. Here the deadline
is armed when the connection opens and after each response; bytes that arrive meanwhile do not move it. When
it passes, a connection whose request is complete and being handled is left alone (its response re-arms the
deadline); any other is closed, and an app still waiting for the body sees the client as gone. The timeout is
uvicorn's own `timeout_keep_alive` setting.

Imported through `server_options` only, so the runtime does not load uvicorn's protocol modules unless a
server is started with it.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # pragma: no cover - uvicorn[standard] installs httptools
    HttpToolsProtocol = None  # type: ignore[assignment,misc]


class _IdleDeadline:
    """Mixin over a uvicorn HTTP protocol (it reads `loop`, `transport`, `cycle`, `timeout_keep_alive`).

    A response only notes the time (`_idle_since`): the one timer of the connection, when it fires early, waits
    out what is left instead of being replaced on every response."""

    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    cycle: Any
    timeout_keep_alive: int  # as uvicorn declares it; a float works alike
    _idle_deadline: asyncio.TimerHandle | None = None
    _idle_since = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        self._idle_since = self.loop.time()
        self._arm_idle_deadline(self.timeout_keep_alive)

    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]
        self._idle_since = self.loop.time()
        if self._idle_deadline is None:  # it passed while a request was handled: the deadline starts again
            self._arm_idle_deadline(self.timeout_keep_alive)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._idle_deadline is not None:
            self._idle_deadline.cancel()
            self._idle_deadline = None
        super().connection_lost(exc)  # type: ignore[misc]

    def _arm_idle_deadline(self, delay: float) -> None:
        if not self.transport.is_closing():
            self._idle_deadline = self.loop.call_later(delay, self._idle_deadline_passed)

    def _idle_deadline_passed(self) -> None:
        self._idle_deadline = None
        left = self._idle_since + self.timeout_keep_alive - self.loop.time()
        if left > 0:  # a response came meanwhile: its deadline is later
            self._arm_idle_deadline(left)
            return
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete and not cycle.more_body:
            return  # a complete request is being handled; its response arms the deadline again
        self._close_idle()

    def _close_idle(self) -> None:
        self.transport.close()


class IdleClosingH11Protocol(_IdleDeadline, H11Protocol):
    def _close_idle(self) -> None:
        with contextlib.suppress(h11.LocalProtocolError):
            self.conn.send(h11.ConnectionClosed())
        self.transport.close()


if HttpToolsProtocol is not None:
    # At module level, so `--workers N` can hand it to each worker process (it is pickled by its name).
    class IdleClosingHttpToolsProtocol(_IdleDeadline, HttpToolsProtocol):
        pass


def protocol_class() -> type[asyncio.Protocol]:
    """httptools' protocol when it is installed (uvicorn prefers it too), else h11's; both with the deadline."""
    return IdleClosingH11Protocol if HttpToolsProtocol is None else IdleClosingHttpToolsProtocol
