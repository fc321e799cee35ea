"""`KeepAliveTransport`: a lean HTTP/1.1 transport under httpx for the plain-HTTP calls a service repeats all day
(its collector feeds).

Through httpx's client and its default transport (httpcore's pool over anyio and h11) a feed POST costs the
service about 1 ms of CPU, on every trace batch (bench/REPORT.md, "Tracing's cost"). This one writes the request
itself on kept-alive asyncio connections and parses the answer with httptools (C, as uvicorn does). It serves
two ways: as an httpx transport (`handle_async_request`), and called directly (`post`) by `HttpSender` and the
OTLP exporter, which skips httpx's client layer as well: about a quarter of the cost through httpx. Errors are
httpx's own transport errors either way. An `HttpSender` built without a transport or client (the generated
clients') takes one for its plain-HTTP calls to hosts no proxy stands before (`direct_transport`).

Scope: plain `http://` only (`lean_transport` gives one only for such a URL; https, proxies and HTTP/2 stay with
httpx's transport), request bodies read whole, no `HEAD`. One request per connection at a time; a concurrent
call opens another connection, up to `max_connections` per origin (then it waits for one), and up to `max_idle`
idle ones are kept per origin. A kept connection the server closed meanwhile is noticed when its answer never
starts: the request goes once more on a new connection, as httpcore does.
"""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import Iterable
from typing import Any, Final, cast

import httpx

try:
    import httptools
except ImportError:  # pragma: no cover - uvicorn[standard] installs it; without it httpx's transport serves
    httptools = None  # type: ignore[assignment]

DEFAULT_MAX_IDLE: Final = 4
DEFAULT_MAX_CONNECTIONS: Final = 100
"""Per origin, as httpx's default pool."""
CLIENT_MAX_IDLE: Final = 20
"""Idle connections a sender's own transport keeps per origin (httpx's default too): a service's handlers call
their targets concurrently, where a feed sends one call at a time."""

Origin = tuple[str, int]
Answer = tuple[int, list[tuple[bytes, bytes]], bytes]
"""Status code, headers, body."""


class _NotAnswered(Exception):
    """The connection closed before any byte of the answer: a kept connection the server had let go."""


class _Connection(asyncio.Protocol):
    """One kept-alive connection: the protocol receiving its bytes and the parser reading one answer at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._answer: asyncio.Future[None] | None = None
        self._parser: Any = None
        self._started = False
        self._headers_done = False
        self._complete = False
        self._keep_alive = False
        self._status = 0
        self._headers: list[tuple[bytes, bytes]] = []
        self._chunks: list[bytes] = []

    # -- asyncio.Protocol ------------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass, but writes alike

    def data_received(self, data: bytes) -> None:
        if self._parser is None:  # bytes nobody asked for: the connection cannot be trusted with a next answer
            self.close()
            return
        self._started = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(httpx.RemoteProtocolError(f"malformed HTTP answer ({type(exc).__name__})"))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._complete or self._answer is None or self._answer.done():
            return
        if not self._started:
            self._fail(_NotAnswered())
        elif self._headers_done and not self._framed():
            self._done()  # an answer without a length ends where the connection does
        else:
            self._fail(httpx.RemoteProtocolError("the server closed the connection in the middle of the answer"))

    # -- httptools callbacks ---------------------------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        self._headers_done = True
        # Read here: once the message is complete the parser has moved on and no longer says.
        self._keep_alive = self._parser.should_keep_alive()
        self._status = self._parser.get_status_code()

    def on_body(self, body: bytes) -> None:
        self._chunks.append(body)

    def on_message_complete(self) -> None:
        self._done()

    # -- one exchange ----------------------------------------------------------------------------------------

    async def exchange(self, head: bytes, body: bytes, timeout: float | None) -> Answer:
        """Write one request and wait for its whole answer: (status code, headers, body). Raises `_NotAnswered`,
        httpx's `ReadTimeout` or `RemoteProtocolError`."""
        transport = self.transport
        if transport is None or self.closed:
            raise _NotAnswered
        self._parser = httptools.HttpResponseParser(self)
        self._started = self._headers_done = self._complete = self._keep_alive = False
        self._status = 0
        self._headers, self._chunks = [], []
        self._answer = asyncio.get_running_loop().create_future()
        transport.write(head + body if len(body) < 65536 else head)
        if len(body) >= 65536:
            transport.write(body)
        try:
            async with asyncio.timeout(timeout):
                await self._answer
        except TimeoutError:
            self.close()
            raise httpx.ReadTimeout("no answer within the read timeout") from None
        finally:
            self._answer = None
        if not self._keep_alive:
            self.close()
        self._parser = None
        return self._status, self._headers, b"".join(self._chunks)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _framed(self) -> bool:
        names = {name.lower() for name, _ in self._headers}
        return b"content-length" in names or b"transfer-encoding" in names

    def _done(self) -> None:
        self._complete = True
        if self._answer is not None and not self._answer.done():
            self._answer.set_result(None)

    def _fail(self, exc: Exception) -> None:
        if self._answer is not None and not self._answer.done():
            self._answer.set_exception(exc)


class KeepAliveTransport(httpx.AsyncBaseTransport):
    """See the module. `max_idle`: idle connections kept per origin; `max_connections`: connections open to one
    origin at once (as httpx's pool bounds them): a call past it waits for one to come free, within its connect
    timeout (`httpx.PoolTimeout` past it)."""

    def __init__(self, *, max_idle: int = DEFAULT_MAX_IDLE, max_connections: int = DEFAULT_MAX_CONNECTIONS) -> None:
        if httptools is None:  # pragma: no cover
            raise RuntimeError("KeepAliveTransport needs httptools (installed with uvicorn[standard])")
        if max_connections < 1:
            raise ValueError("max_connections must be at least 1")
        self.max_idle = max_idle
        self.max_connections = max_connections
        self._idle: dict[Origin, list[_Connection]] = {}
        self._slots: dict[Origin, asyncio.Semaphore] = {}
        self._closed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme != "http" or request.method == "HEAD":
            raise httpx.UnsupportedProtocol(f"KeepAliveTransport sends plain-HTTP requests only, not {url.scheme}")
        timeouts = request.extensions.get("timeout") or {}
        body = await request.aread()
        try:
            head = _head(request.method.encode("ascii"), url.raw_path, request.headers.raw)
            status, headers, content = await self.exchange(
                (url.host, url.port or 80), head, body, timeouts.get("connect"), timeouts.get("read")
            )
        except httpx.TransportError as exc:
            exc.request = request
            raise
        return httpx.Response(status, headers=headers, stream=httpx.ByteStream(content), request=request)

    async def post(
        self, url: httpx.URL, headers: list[tuple[bytes, bytes]], body: bytes, timeout: float | None
    ) -> Answer:
        """POST `body` to a plain-HTTP `url` with `headers` (host and length added here), without httpx's client
        layer (`HttpSender` calls this: about half of what a call costs through the client). Raises httpx's
        transport errors."""
        if url.scheme != "http":
            raise httpx.UnsupportedProtocol(f"KeepAliveTransport sends plain-HTTP requests only, not {url.scheme}")
        # identity: the answer is read as it comes, never decompressed here.
        length = str(len(body)).encode()
        head = _head(b"POST", url.raw_path,
                     [(b"host", url.netloc), (b"accept-encoding", b"identity"), (b"content-length", length), *headers])
        return await self.exchange((url.host, url.port or 80), head, body, timeout, timeout)

    async def exchange(
        self, origin: Origin, head: bytes, body: bytes, connect_timeout: float | None, read_timeout: float | None
    ) -> Answer:
        """One request (its head and body as they go on the wire) on a kept connection to `origin`, or a new one."""
        if self._closed:
            raise httpx.ConnectError("the transport is closed")
        slots = self._slots.get(origin)
        if slots is None:
            slots = self._slots[origin] = asyncio.Semaphore(self.max_connections)
        if slots.locked():
            try:
                async with asyncio.timeout(connect_timeout):
                    await slots.acquire()
            except TimeoutError:
                where = f"{origin[0]}:{origin[1]}"
                raise httpx.PoolTimeout(f"all {self.max_connections} connections to {where} stayed busy") from None
        else:
            await slots.acquire()  # one is free: no wait
        try:
            return await self._exchange(origin, head, body, connect_timeout, read_timeout)
        finally:
            slots.release()

    async def _exchange(
        self, origin: Origin, head: bytes, body: bytes, connect_timeout: float | None, read_timeout: float | None
    ) -> Answer:
        connection = self._kept(origin)
        try:
            if connection is not None:
                try:
                    answer = await connection.exchange(head, body, read_timeout)
                except _NotAnswered:
                    self._forget(origin)  # its siblings idled as long: let them go too
                    connection = None
            if connection is None:
                connection = await _connect(origin, connect_timeout)
                try:
                    answer = await connection.exchange(head, body, read_timeout)
                except _NotAnswered:
                    raise httpx.RemoteProtocolError("the server closed the connection without answering") from None
        except BaseException:
            if connection is not None:
                connection.close()
            raise
        self._give_back(origin, connection)
        return answer

    async def aclose(self) -> None:
        self._closed = True
        for origin in list(self._idle):
            self._forget(origin)

    def _kept(self, origin: Origin) -> _Connection | None:
        idle = self._idle.get(origin)
        while idle:
            connection = idle.pop()
            if not connection.closed:
                return connection
        return None

    def _give_back(self, origin: Origin, connection: _Connection) -> None:
        idle = self._idle.setdefault(origin, [])
        if connection.closed or self._closed or len(idle) >= self.max_idle:
            connection.close()
        else:
            idle.append(connection)

    def _forget(self, origin: Origin) -> None:
        for connection in self._idle.pop(origin, []):
            connection.close()


def lean_transport(url: str) -> KeepAliveTransport | None:
    """A `KeepAliveTransport` for calls to `url` when it is plain HTTP, goes straight to its host (`goes_direct`) and
    httptools is there; else None: httpx's own transport, which honours the environment's proxy as an httpx client
    does."""
    if httptools is None or not url.lower().startswith("http://"):
        return None
    return KeepAliveTransport() if goes_direct(httpx.URL(url).host) else None


def direct_transport() -> KeepAliveTransport | None:
    """A `KeepAliveTransport` for a sender's plain-HTTP calls to hosts it reaches straight (`goes_direct`), when
    httptools is there; else None."""
    return None if httptools is None else KeepAliveTransport(max_idle=CLIENT_MAX_IDLE)


def goes_direct(host: str) -> bool:
    """Whether a plain-HTTP call to `host` goes straight to it: the environment names no `http_proxy`/`all_proxy`,
    or its `no_proxy` names the host (read from the environment on every call: cache the answer per host)."""
    proxies = urllib.request.getproxies_environment()
    if not (proxies.get("http") or proxies.get("all")):
        return True
    return bool(urllib.request.proxy_bypass(host))


async def _connect(origin: Origin, timeout: float | None) -> _Connection:
    loop = asyncio.get_running_loop()
    where = f"{origin[0]}:{origin[1]}"
    try:
        async with asyncio.timeout(timeout):
            _, connection = await loop.create_connection(_Connection, origin[0], origin[1])
    except TimeoutError:
        raise httpx.ConnectTimeout(f"no connection to {where} within the timeout") from None
    except OSError as exc:
        raise httpx.ConnectError(f"cannot connect to {where} ({type(exc).__name__})") from None
    return connection


def _head(method: bytes, target: bytes, headers: Iterable[tuple[bytes, bytes]]) -> bytes:
    """A request's line and headers as they go on the wire."""
    lines = [method, b" ", target, b" HTTP/1.1\r\n"]
    for name, value in headers:
        lines += [name, b": ", value, b"\r\n"]
    lines.append(b"\r\n")
    return b"".join(lines)
