"""The collector host: the collector behind the HTTP binding, the poller on its interval, the UI artifacts
rewritten on an interval, and the dashboard at `/`; all started and stopped with the ASGI lifespan.

With a token (`CollectorSettings.token`) the host is locked (`TokenLock`): every request but the dashboard page
itself must carry `authorization: Bearer <token>`, else it is answered 401 `{status: unauthorized, detail}` and
reaches nothing. The page is the packaged static file and holds no data; its fetches carry the token (see
dashboard.html). The poller sends the same token to the services it polls."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hmac
import ipaddress
import logging
import shutil
import tempfile
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

import httpx

from ..runtime import _status as st
from ..runtime._http.app import HttpApp
from ..runtime._http.requests import AsgiScope, Receive, Send
from ..runtime._http.responses import send_failure
from ..runtime._mesh.feeds import TOKEN_ENV
from ..runtime._mesh.jetstream import MeshStream
from ..runtime._mesh.reporter import DEFAULT_INTERVAL
from ..runtime._security import WWW_AUTHENTICATE_HEADER
from ..runtime._topics import DEFAULT_PREFIX
from . import Collector, JsonFileStore, collector_service
from .artifacts import write_artifacts
from .artifacts.site import DASHBOARD, ArtifactSite
from .collector import HEARTBEAT_MISSES
from .jetstream import FeedConsumer
from .poller import DEFAULT_INTERVAL as DEFAULT_POLL_INTERVAL
from .poller import FleetEntry, Poller
from .store import Backend

logger = logging.getLogger("svcgen.mesh.collector")

DEFAULT_ARTIFACTS_INTERVAL: Final = 10.0
DATABASE_SCHEMES: Final = ("postgresql://", "postgres://")


@dataclass(frozen=True)
class CollectorSettings:
    store: Path | None = None
    """JSON-file store; None keeps the state in memory only (unless `database` is set)."""
    database: str | None = None
    """A PostgreSQL URL (`postgresql://...`): the state lives in its tables, shared by every replica given it."""
    fleet: Sequence[FleetEntry] = ()
    """(name, base URL) of services to poll; their surfaces live under `prefix`."""
    poll_interval: float = DEFAULT_POLL_INTERVAL
    artifacts: Path | None = None
    """Where the UI artifacts are written; None uses a temporary directory removed at shutdown."""
    artifacts_interval: float = DEFAULT_ARTIFACTS_INTERVAL
    prefix: str = DEFAULT_PREFIX
    token: str | None = None
    """Lock the host with this bearer token (see the module docstring); None leaves it open."""
    nats: str | None = None
    """A NATS URL: also take the feeds from its JetStream stream, through a durable consumer (jetstream.py)."""
    nats_stream: MeshStream = field(default_factory=MeshStream)
    heartbeat_seconds: float = DEFAULT_INTERVAL
    """The reporters' heartbeat interval: an instance silent for three of them is stale."""


class TokenLock:
    """ASGI middleware: an HTTP request other than `GET|HEAD` of the dashboard page needs `authorization: Bearer
    <token>` (constant-time compare); otherwise it is answered 401 with the failure body and never reaches `app`.
    Lifespan events pass through; a websocket without the token is closed."""

    OPEN_PATHS: Final = frozenset({"/", f"/{DASHBOARD}"})

    def __init__(self, app: ArtifactSite, token: str) -> None:
        if not token:
            raise ValueError("the collector token must not be empty")
        self.app = app
        self._token = token.encode()

    async def __call__(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan" or self._admits(scope):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        # RFC 9110 wants a challenge on every 401; worded as a service's guard words it (RFC 6750's error only when
        # a bearer token was refused).
        challenge = 'Bearer realm="svc"' + (', error="invalid_token"' if _bearer(scope) else "")
        await send_failure(send, 401, st.UNAUTHORIZED, "this collector wants `authorization: Bearer <token>`",
                           {WWW_AUTHENTICATE_HEADER: challenge})  # fmt: skip

    def _admits(self, scope: AsgiScope) -> bool:
        if scope["type"] == "http" and scope["method"] in ("GET", "HEAD") and scope["path"] in self.OPEN_PATHS:
            return True
        return hmac.compare_digest(_bearer(scope), self._token)


def _bearer(scope: AsgiScope) -> bytes:
    """The token of the request's first `authorization: Bearer <token>`, else b''."""
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, credentials = value.partition(b" ")
            return credentials.strip() if scheme.lower() == b"bearer" else b""
    return b""


def collector_token(token_file: Path | None, environ: Mapping[str, str]) -> str | None:
    """The token from `token_file` (its text without surrounding whitespace), else from SVCGEN_COLLECTOR_TOKEN, else
    None. Raises ValueError with a one-line reason for an unreadable or empty file."""
    if token_file is None:
        return environ.get(TOKEN_ENV, "").strip() or None
    try:
        token = token_file.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{token_file}: cannot read the token ({getattr(exc, 'strerror', None) or exc})") from None
    if not token or any(char.isspace() for char in token):
        raise ValueError(f"{token_file}: expected one token (no spaces) in the file")
    return token


def exposed_without_token(host: str, token: str | None) -> bool:
    """Whether binding `host` without a token lets anyone who reaches it write to the collector (any address but
    loopback; a host name other than localhost counts as reachable)."""
    if token:
        return False
    if host == "localhost":
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return True


def is_database_url(store: str) -> bool:
    """Whether a `--store` value names a PostgreSQL database rather than a JSON file."""
    return store.startswith(DATABASE_SCHEMES)


def without_password(store: str) -> str:
    """A store URL fit for a log line: its password replaced by `***`."""
    parts = urlsplit(store)
    if not is_database_url(store) or parts.password is None:
        return store
    return parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@", 1)).geturl()


def _store(settings: CollectorSettings) -> JsonFileStore | Backend | None:
    if settings.database is not None:
        from .postgres import PostgresStore  # psycopg is an extra: imported only when asked for

        # A database it cannot use from the start is a wrong URL more likely than an outage: refused in one line.
        return PostgresStore(settings.database, refuse_at_start=True)
    return JsonFileStore(settings.store) if settings.store is not None else None


class CollectorHost:
    def __init__(
        self,
        settings: CollectorSettings,
        *,
        collector: Collector | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.settings = settings
        if collector is None:
            collector = Collector(_store(settings), stale_after=HEARTBEAT_MISSES * settings.heartbeat_seconds)
        self.collector = collector
        self.api = HttpApp(collector_service(self.collector, prefix=settings.prefix))
        self.poller = (
            Poller(
                self.collector,
                list(settings.fleet),
                prefix=settings.prefix,
                interval=settings.poll_interval,
                transport=transport,
                token=settings.token,
                sink_blocks=self.collector.backend.blocking,
            )
            if settings.fleet
            else None
        )
        self.feeds = FeedConsumer(settings.nats, self.api.service, settings.nats_stream) if settings.nats else None
        self.artifacts = settings.artifacts or Path(tempfile.mkdtemp(prefix="svcgen-artifacts-"))
        # Only a directory made here is removed: at stop, or at the latest when the process exits, as it does when
        # the lifespan's shutdown never runs (a host never started, a server's forced exit on a second Ctrl-C).
        self._remove_artifacts = weakref.finalize(self, shutil.rmtree, self.artifacts, ignore_errors=True)
        if settings.artifacts is not None:
            self._remove_artifacts.detach()
        site = ArtifactSite(self.artifacts, self.api, prefix=settings.prefix, locked=bool(settings.token))
        self.app: ArtifactSite | TokenLock = TokenLock(site, settings.token) if settings.token else site
        self.artifact_writes = 0
        self.artifact_failures = 0
        """Artifact writes that failed (the store away, the directory unwritable); the next one is tried anyway."""
        self._artifacts_failing = False
        self._writer: asyncio.Task[None] | None = None
        self._stopping: asyncio.Event | None = None
        self._flushed = False
        self.api.on_startup.append(self.start)
        self.api.on_shutdown.append(self.stop)

    async def start(self) -> None:
        if self.poller is not None:
            self.poller.start()
        if self.feeds is not None:
            self.feeds.start()
        self._stopping = asyncio.Event()
        self._writer = asyncio.get_running_loop().create_task(self._write_every_interval(), name="svcgen-artifacts")

    async def stop(self) -> None:
        try:
            if self.feeds is not None:
                await self.feeds.stop()  # before the store closes: what it took is committed, the rest redelivered
            if self.poller is not None:
                await self.poller.stop()
            if self._writer is not None and self._stopping is not None:
                # Not cancelled mid-write: its thread would go on writing, past the final write and the removal.
                self._stopping.set()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._writer
            await self.write_artifacts()
            self._flush()
        finally:
            self._remove_artifacts()  # a temporary directory only; once

    def finish(self) -> None:
        """What `stop` leaves undone once the server has exited without the lifespan's shutdown (uvicorn skips it
        on a second Ctrl-C, and when it cannot bind): the last artifacts and the store written out, nothing else
        (the event loop is gone: the feeds' messages in hand are redelivered, a poll in flight is polled again).
        Nothing to do after `stop`. Blocking; bounded by the store's own timeouts."""
        if self._flushed:
            return
        logger.warning("the server stopped without its shutdown (a second Ctrl-C, say): writing out the store "
                       "before exiting")  # fmt: skip
        try:
            if self.settings.artifacts is not None:  # a temporary directory goes anyway
                self._write_artifacts_now()
            self._flush()
        finally:
            self._remove_artifacts()

    def _flush(self) -> None:
        self.collector.flush()
        self._flushed = True

    async def write_artifacts(self) -> None:
        """Write the artifacts from a fresh snapshot; the file I/O runs off the event loop."""
        try:
            # A blocking backend (a database) is read off the event loop.
            blocking = self.collector.backend.blocking
            read = self.collector.artifact_snapshot
            snapshot = await asyncio.to_thread(read) if blocking else read()
            await asyncio.to_thread(write_artifacts, snapshot, self.artifacts, prefix=self.settings.prefix)
        except Exception as exc:
            self._artifacts_failed(exc)
            return
        self._artifacts_written()

    def _write_artifacts_now(self) -> None:
        """`write_artifacts` with no event loop."""
        try:
            write_artifacts(self.collector.artifact_snapshot(), self.artifacts, prefix=self.settings.prefix)
        except Exception as exc:
            self._artifacts_failed(exc)
            return
        self._artifacts_written()

    def _artifacts_failed(self, exc: Exception) -> None:
        self.artifact_failures += 1
        if not self._artifacts_failing:  # once per outage, as the feeds say theirs (a store away for hours)
            self._artifacts_failing = True
            logger.warning("writing the UI artifacts to %s failed (%s: %s); retrying every %g s", self.artifacts,
                           type(exc).__name__, exc, self.settings.artifacts_interval)  # fmt: skip

    def _artifacts_written(self) -> None:
        self.artifact_writes += 1
        if self._artifacts_failing:
            self._artifacts_failing = False
            logger.warning("writing the UI artifacts to %s again (%d write(s) failed so far)", self.artifacts,
                           self.artifact_failures)  # fmt: skip

    async def _write_every_interval(self) -> None:
        assert self._stopping is not None  # set by start()
        while not self._stopping.is_set():
            await self.write_artifacts()
            # The collector's tables are large and long-lived: moved out of the collector's generations, a full
            # collection no longer walks them on every query (a fleet query at a full store: 90 ms p50 -> 34 ms).
            gc.freeze()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.settings.artifacts_interval)
