"""One NATS connection per server per process, opened on first use and closed at shutdown.

The binding and every NATS sender of a process share it (keyed by `nats://host:port`); `connect` is the seam
tests use to hand in their own connection. nats-py (`svcgen[nats]`) is imported only by the default `connect`.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final, TypeAlias
from urllib.parse import urlsplit

from .._logging import shown

if TYPE_CHECKING:
    from nats.aio.client import Client

logger = logging.getLogger("svcgen.nats")

DEFAULT_PORT: Final = 4222
CONNECT_TIMEOUT: Final = 2
"""Seconds the first connect may take; afterwards nats-py reconnects on its own, without limit."""
RECONNECT_WAIT: Final = 2
"""Seconds between attempts to get a lost connection back."""
DRAIN_TIMEOUT: Final = 5
"""Seconds closing a connection waits for its subscriptions and replies to finish."""
NATS_MISSING: Final = "NATS needs nats-py: pip install 'svcgen[nats]'"

ConnectFactory: TypeAlias = Callable[[str], Awaitable["Client"]]
"""Server URL (`nats://host:port`) → an open connection."""


class NatsError(Exception):
    """A NATS setting or server this process cannot use; the message is one line."""


def nats_installed() -> bool:
    return importlib.util.find_spec("nats") is not None


def server_of(url: str) -> str:
    """`nats://host:port` of a NATS URL (its path, if any, is not part of the server); NatsError when malformed."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port or DEFAULT_PORT
    except ValueError:
        raise NatsError(f"{shown(url)!r} is not a nats://host:port URL") from None
    if parts.scheme not in ("nats", "tls") or not parts.hostname:
        raise NatsError(f"{shown(url)!r} is not a nats://host:port URL")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    credentials = parts.netloc.rpartition("@")[0]
    return f"{parts.scheme}://{credentials + '@' if credentials else ''}{host}:{port}"


async def open_connection(server: str) -> Client:
    """nats-py's connection to `server`, reconnecting without limit once it was up; an outage is two log lines."""
    if not nats_installed():
        raise NatsError(NATS_MISSING)
    import nats
    import nats.errors

    where = shown(server)
    opened: list[Client] = []
    failures: list[Exception] = []
    # An outage is said once when the connection is lost (with why) and once when it is back; the attempts in
    # between (one every RECONNECT_WAIT s, each refused while the server is down) only at debug.
    dropped = (OSError, nats.errors.StaleConnectionError)  # what a dropped connection reports (UnexpectedEOF, ...)
    why: list[str] = []
    lost_at: list[float] = []

    async def on_error(error: Exception) -> None:
        if not opened:  # before the first connect succeeds, its failure says it in one line
            failures.append(error)
            return
        reason = str(error) or type(error).__name__
        if lost_at or opened[0].is_reconnecting or isinstance(error, dropped):
            why[:] = [reason]  # the disconnect line, next, says it
            logger.debug("NATS %s: %s", where, reason)
            return
        logger.warning("NATS %s: %s", where, reason)

    async def on_disconnect() -> None:
        if opened and opened[0].is_closed:  # closing disconnects too: nothing to say then
            return
        lost_at[:] = [time.monotonic()]
        reason = why[0] if why else "disconnected"
        logger.warning("NATS %s: connection lost (%s); reconnecting every %g s", where, reason, RECONNECT_WAIT)

    async def on_reconnect() -> None:
        down = time.monotonic() - lost_at[0] if lost_at else 0.0
        lost_at.clear()
        why.clear()
        logger.warning("NATS %s: connected again after %.0f s; serving and sending on NATS again", where, down)

    try:
        # The first connect gives up after a second try (a wrong URL is one line, not an endless retry) ...
        connection = await nats.connect(
            server, connect_timeout=CONNECT_TIMEOUT, max_reconnect_attempts=1, reconnect_time_wait=0.2,
            error_cb=on_error, disconnected_cb=on_disconnect, reconnected_cb=on_reconnect, drain_timeout=DRAIN_TIMEOUT,
            name="svcgen",
        )
    except Exception as error:
        # The first failure is the server's reason (`'Authorization Violation'`); the retry's is often just the
        # reset of the connection the server closed after saying it.
        cause = failures[0] if failures else error
        raise NatsError(f"cannot connect to NATS at {where}: {cause or type(cause).__name__}") from None
    # ... and once up, a lost connection is retried without limit (nats-py reads these options when it drops).
    connection.options["max_reconnect_attempts"] = -1
    connection.options["reconnect_time_wait"] = RECONNECT_WAIT
    opened.append(connection)
    return connection


class NatsConnections:
    """The process's NATS connections, one per server; `aclose` drains and closes each (what it did not open
    itself too: whatever `connect` returned is this object's)."""

    def __init__(self, connect: ConnectFactory | None = None) -> None:
        self._connect = connect or open_connection
        self._open: dict[str, Client] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self.closed = False

    async def get(self, url: str) -> Client:
        """The connection to the server of `url`, opened on first use; NatsError when it cannot be opened."""
        server = server_of(url)
        found = self._open.get(server)
        if found is not None:
            return found
        if self.closed:
            raise NatsError("the NATS connections of this process are closed")
        lock = self._locks.setdefault(server, asyncio.Lock())
        async with lock:
            found = self._open.get(server)
            if found is None:
                found = self._open[server] = await self._connect(server)
        return found

    async def aclose(self) -> None:
        self.closed = True
        opened, self._open = self._open, {}
        for server, connection in opened.items():
            try:
                if not connection.is_closed:
                    await connection.drain()
            except Exception as error:
                logger.warning("NATS %s: closing failed (%s)", shown(server), type(error).__name__)
                with contextlib.suppress(Exception):
                    await connection.close()
