"""The poller: pull `{prefix}/spec` and `{prefix}/health` from a configured fleet and fold them into a sink.

A service appears in the mesh by being pollable, without pushing anything. One sweep polls every target
concurrently, each poll bounded by a timeout; sweeps run on an interval (default 30 s) as one asyncio task
and never overlap. A failed poll is recorded as an error, never as data, and nothing a target answers (or
fails to answer) stops the loop.

With the collector's token, every poll request carries `authorization: Bearer <token>` too, so services behind the
same lock answer it.

Health answers: 200 and 503 both carry the health aggregate (503 = unhealthy data). A 404 or 405 on the
health surface with a good spec is a service without health checks (the spec only serves the surface when
checks are supplied): it is recorded as a successful poll with `health=None`.

A spec whose bytes are the same as the target's last one is not parsed again: the sink gets the very same
document object, so it can tell it is unchanged without comparing it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeAlias

import httpx
import orjson

from .._reserved import DEFAULT_PREFIX, normalize_prefix
from .clock import MonotonicClock
from .feeds import bearer

logger = logging.getLogger("svcgen.mesh.poller")

DEFAULT_INTERVAL: Final = 30.0
DEFAULT_TIMEOUT: Final = 5.0
DEFAULT_MAX_CONCURRENCY: Final = 16
DEFAULT_MAX_BODY_BYTES: Final = 4 * 1024 * 1024
DEFAULT_STOP_TIMEOUT: Final = 5.0

_NO_HEALTH_SURFACE: Final = frozenset({404, 405})


class PollSink(Protocol):
    """Where polls land (the collector). `error` None is a successful poll; otherwise spec and health are None."""

    def record_poll(
        self,
        service: str,
        base_url: str,
        *,
        spec: dict[str, Any] | None,
        health: dict[str, Any] | None,
        error: str | None,
        prefix: str = DEFAULT_PREFIX,
    ) -> None: ...


Target: TypeAlias = "tuple[str, str] | tuple[str, str, str]"
"""(service name, base URL) polled under the poller's prefix, or (name, base URL, that service's prefix)."""
FleetSource: TypeAlias = "Iterable[Target] | Callable[[], Iterable[Target] | Awaitable[Iterable[Target]]]"
Sleep: TypeAlias = Callable[[float], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Poll:
    """One target's outcome in a sweep, exactly as handed to the sink."""

    service: str
    base_url: str
    spec: dict[str, Any] | None = None
    health: dict[str, Any] | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class _Failed(Exception):
    """A surface's answer that is not data; the message says why."""


class Poller:
    def __init__(
        self,
        sink: PollSink,
        fleet: FleetSource,
        *,
        prefix: str = DEFAULT_PREFIX,
        interval: float = DEFAULT_INTERVAL,
        timeout: float = DEFAULT_TIMEOUT,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        stop_timeout: float = DEFAULT_STOP_TIMEOUT,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Sleep = asyncio.sleep,
        clock: MonotonicClock = time.monotonic,
        token: str | None = None,
    ) -> None:
        if interval <= 0 or timeout <= 0 or max_concurrency < 1 or max_body_bytes < 1:
            raise ValueError("interval, timeout, max_concurrency and max_body_bytes must be positive")
        self.sink = sink
        self.fleet = fleet
        self.prefix = normalize_prefix(prefix)
        self.interval = interval
        self.timeout = timeout
        self.max_concurrency = max_concurrency
        self.max_body_bytes = max_body_bytes
        self.stop_timeout = stop_timeout
        self._transport = transport
        self._headers = {"accept": "application/json", **bearer(token)}
        self._sleep = sleep
        self._clock = clock
        self._task: asyncio.Task[None] | None = None
        self._client: httpx.AsyncClient | None = None
        self._lock: asyncio.Lock | None = None
        self.sweeps = 0
        """Sweeps completed since construction."""
        self._specs: dict[tuple[str, str, str], tuple[bytes, dict[str, Any]]] = {}
        """Per target: SHA-256 of the last spec answer's bytes and the document parsed from them."""

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Start sweeping now and then every `interval` seconds; needs a running event loop. Idempotent."""
        if self.running:
            return
        self._task = asyncio.get_running_loop().create_task(self._run(), name="svcgen-poller")

    async def stop(self) -> None:
        """Cancel the loop and any in-flight requests; returns within `stop_timeout` seconds."""
        task, self._task = self._task, None
        if task is None or task.done():
            return
        task.cancel()
        await asyncio.wait({task}, timeout=self.stop_timeout)
        if not task.done():
            logger.warning("poller did not stop within %.1fs", self.stop_timeout)

    async def sweep(self) -> list[Poll]:
        """Poll every target once and record each result; never raises for a target's or the sink's sake."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock, self._client_for_sweep() as client:
            targets = await self._targets()
            for gone in self._specs.keys() - set(targets):
                del self._specs[gone]
            gate = asyncio.Semaphore(self.max_concurrency)
            polls = await asyncio.gather(
                *(self._poll_and_record(client, gate, name, url, prefix) for name, url, prefix in targets)
            )
            self.sweeps += 1
        failed = sum(not poll.ok for poll in polls)
        logger.debug("sweep %d: %d target(s), %d failed", self.sweeps, len(polls), failed)
        return list(polls)

    async def _run(self) -> None:
        async with self._new_client() as client:
            self._client = client
            try:
                while True:
                    started = self._clock()
                    try:
                        await self.sweep()
                    except Exception:
                        # A bug in a sweep must not end polling; the next one may well succeed.
                        logger.exception("poller sweep failed")
                    await self._sleep(max(0.0, self.interval - (self._clock() - started)))
            finally:
                self._client = None

    def _new_client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(timeout=self.timeout, transport=self._transport, follow_redirects=False)

    @contextlib.asynccontextmanager
    async def _client_for_sweep(self) -> AsyncIterator[httpx.AsyncClient]:
        if self._client is not None:
            yield self._client
            return
        async with self._new_client() as client:
            yield client

    async def _targets(self) -> list[tuple[str, str, str]]:
        try:
            source = self.fleet() if callable(self.fleet) else self.fleet
            if inspect.isawaitable(source):
                source = await source
            entries = list(source)
        except Exception:
            logger.exception("poller fleet source failed; this sweep polls nothing")
            return []
        targets: list[tuple[str, str, str]] = []
        for entry in entries:
            if isinstance(entry, tuple) and len(entry) in (2, 3) and all(isinstance(part, str) for part in entry) \
                    and entry[0] and entry[1]:
                prefix = normalize_prefix(entry[2]) if len(entry) == 3 else self.prefix
                targets.append((entry[0], entry[1].rstrip("/"), prefix))
            else:
                logger.warning("poller skips fleet entry %r: expected (name, base URL[, prefix])", entry)
        return targets

    async def _poll_and_record(
        self, client: httpx.AsyncClient, gate: asyncio.Semaphore, name: str, base: str, prefix: str
    ) -> Poll:
        async with gate:
            poll = await self._poll(client, name, base, prefix)
        if poll.error is not None:
            logger.warning("poll of %s at %s failed: %s", name, base, poll.error)
        try:
            self.sink.record_poll(name, base, spec=poll.spec, health=poll.health, error=poll.error, prefix=prefix)
        except Exception:
            logger.exception("poll sink refused the poll of %s", name)
        return poll

    async def _poll(self, client: httpx.AsyncClient, name: str, base: str, prefix: str) -> Poll:
        spec, health = await asyncio.gather(
            self._surface(client, f"{base}{prefix}/spec"),
            self._surface(client, f"{base}{prefix}/health"),
            return_exceptions=True,
        )
        errors: list[str] = []
        spec_doc = self._parsed_spec((name, base, prefix), spec, errors)
        health_doc = _health(health, errors)
        if errors:
            return Poll(name, base, error="; ".join(errors))
        return Poll(name, base, spec=spec_doc, health=health_doc)

    def _parsed_spec(self, target: tuple[str, str, str], answer: tuple[int, bytes] | BaseException,
                     errors: list[str]) -> dict[str, Any] | None:
        digest = b""
        if isinstance(answer, tuple):
            status, body = answer
            digest = hashlib.sha256(body).digest()
            held = self._specs.get(target)
            if held is not None and held[0] == digest and 200 <= status < 300:
                return held[1]
        document = _spec(answer, errors)
        if document is not None:
            self._specs[target] = (digest, document)
        return document

    async def _surface(self, client: httpx.AsyncClient, url: str) -> tuple[int, bytes]:
        """(status, body) of a GET, the body capped at `max_body_bytes`; raises `_Failed` otherwise."""
        try:
            # One deadline for the whole exchange: httpx's timeout is per phase, and a trickling
            # body could otherwise hold the sweep far beyond it.
            async with asyncio.timeout(self.timeout):
                async with client.stream("GET", url, headers=self._headers) as response:
                    chunks: list[bytes] = []
                    size = 0
                    async for chunk in response.aiter_bytes():
                        size += len(chunk)
                        if size > self.max_body_bytes:
                            raise _Failed(f"answer exceeds {self.max_body_bytes} bytes")
                        chunks.append(chunk)
                    return response.status_code, b"".join(chunks)
        except (TimeoutError, httpx.TimeoutException):
            raise _Failed(f"no answer within {self.timeout:g}s") from None
        except httpx.HTTPError as exc:
            raise _Failed(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__) from None


def _spec(answer: tuple[int, bytes] | BaseException, errors: list[str]) -> dict[str, Any] | None:
    try:
        status, body = _answer(answer)
        if not 200 <= status < 300:
            raise _Failed(f"HTTP {status}")
        document = _object(body)
        if not isinstance(document.get("topics"), list):
            raise _Failed("not a service spec (no topics array)")
        return document
    except _Failed as exc:
        errors.append(f"spec: {exc}")
        return None


def _health(answer: tuple[int, bytes] | BaseException, errors: list[str]) -> dict[str, Any] | None:
    try:
        status, body = _answer(answer)
        if status in _NO_HEALTH_SURFACE:
            return None
        if status not in (200, 503):
            raise _Failed(f"HTTP {status}")
        document = _object(body)
        if not isinstance(document.get("isHealthy"), bool):
            raise _Failed("not a health aggregate (no boolean isHealthy)")
        return document
    except _Failed as exc:
        errors.append(f"health: {exc}")
        return None


def _answer(answer: tuple[int, bytes] | BaseException) -> tuple[int, bytes]:
    if isinstance(answer, _Failed):
        raise answer
    if isinstance(answer, BaseException):
        # Anything else escaping a request is still only this target's failure.
        raise _Failed(type(answer).__name__)
    return answer


def _object(body: bytes) -> dict[str, Any]:
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise _Failed("body is not valid JSON") from None
    if not isinstance(document, dict):
        raise _Failed("body is not a JSON object")
    return document
