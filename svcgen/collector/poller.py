"""The poller: pull `{prefix}/spec` and `{prefix}/health` from a configured fleet and fold them into a sink.

A service appears in the mesh by being pollable, without pushing anything. One sweep polls every target
concurrently, each poll bounded by a timeout; sweeps run on an interval (default 30 s) as one asyncio task
and never overlap. A failed poll is recorded as an error, never as data, and nothing a target answers (or
fails to answer) stops the loop. The surfaces are fetched and judged by `wellknown`, the probe's client too.
A target's failure is logged once when its polls start failing (with the reason) and once when it answers again,
not on every sweep: a service down for a day at the default interval would otherwise say so 2,880 times.

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
import functools
import hashlib
import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeAlias

import httpx

from ..runtime._logging import shown
from ..runtime._mesh.clock import MonotonicClock
from ..runtime._mesh.feeds import bearer
from ..runtime._topics import DEFAULT_PREFIX, normalize_prefix
from .wellknown import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_TIMEOUT,
    SurfaceAnswer,
    SurfaceClient,
    SurfaceProblem,
    health_document,
    spec_document,
)

logger = logging.getLogger("svcgen.mesh.poller")

DEFAULT_INTERVAL: Final = 30.0
DEFAULT_MAX_CONCURRENCY: Final = 16
DEFAULT_STOP_TIMEOUT: Final = 5.0



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


FleetEntry: TypeAlias = "tuple[str, str] | tuple[str, str, str]"
"""(service name, base URL) polled under the poller's prefix, or (name, base URL, that service's prefix)."""
FleetSource: TypeAlias = "Iterable[FleetEntry] | Callable[[], Iterable[FleetEntry] | Awaitable[Iterable[FleetEntry]]]"
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
        sink_blocks: bool = False,
    ) -> None:
        if interval <= 0 or timeout <= 0 or max_concurrency < 1 or max_body_bytes < 1:
            raise ValueError("interval, timeout, max_concurrency and max_body_bytes must be positive")
        self.sink = sink
        self.sink_blocks = sink_blocks
        """The sink does I/O of its own (the collector on PostgreSQL): each poll is recorded in a worker thread, so a
        slow or unreachable database never stalls the event loop the collector's HTTP surfaces answer on."""
        self.fleet = fleet
        self.prefix = normalize_prefix(prefix)
        self.interval = interval
        self.timeout = timeout
        self.max_concurrency = max_concurrency
        self.max_body_bytes = max_body_bytes
        self.stop_timeout = stop_timeout
        self._transport = transport
        self._headers = bearer(token)
        self._sleep = sleep
        self._clock = clock
        self._task: asyncio.Task[None] | None = None
        self._client: httpx.AsyncClient | None = None
        self._lock: asyncio.Lock | None = None
        self.sweeps = 0
        """Sweeps completed since construction."""
        self._specs: dict[tuple[str, str, str], tuple[bytes, dict[str, Any]]] = {}
        """Per target: SHA-256 of the last spec answer's bytes and the document parsed from them."""
        self._failing: dict[tuple[str, str, str], int] = {}
        """Per target whose polls fail: how many failed in a row (its outage was logged at the first)."""

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
            for gone in self._failing.keys() - set(targets):
                del self._failing[gone]
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
        self._log_outage((name, base, prefix), poll)
        record = functools.partial(self.sink.record_poll, name, base, spec=poll.spec, health=poll.health,
                                   error=poll.error, prefix=prefix)  # fmt: skip
        try:
            await asyncio.to_thread(record) if self.sink_blocks else record()
        except Exception:
            logger.exception("poll sink refused the poll of %s", name)
        return poll

    def _log_outage(self, target: tuple[str, str, str], poll: Poll) -> None:
        """Say once when a target's polls start failing and once when it answers again (the URL shown without its
        user:password@); each failed poll is still recorded."""
        name, base, _ = target
        failed = self._failing.get(target)
        if poll.error is not None:
            if failed is None:
                logger.warning("poll of %s at %s failed: %s; polled again every %g s, said again when it answers",
                               name, shown(base), poll.error, self.interval)  # fmt: skip
            self._failing[target] = (failed or 0) + 1
        elif failed is not None:
            del self._failing[target]
            logger.warning("poll of %s at %s answers again, after %d failed poll(s)", name, shown(base), failed)

    async def _poll(self, client: httpx.AsyncClient, name: str, base: str, prefix: str) -> Poll:
        surfaces = SurfaceClient(client, timeout=self.timeout, max_body_bytes=self.max_body_bytes,
                                 headers=self._headers)  # fmt: skip
        spec, health = await asyncio.gather(surfaces.spec(base, prefix), surfaces.health(base, prefix),
                                            return_exceptions=True)  # fmt: skip
        errors: list[str] = []
        spec_doc = self._parsed_spec((name, base, prefix), _answered(spec, f"{base}{prefix}/spec"), errors)
        health_doc: dict[str, Any] | None = None
        try:
            health_doc = health_document(_answered(health, f"{base}{prefix}/health"))
        except SurfaceProblem as exc:
            errors.append(f"health: {exc}")
        if errors:
            return Poll(name, base, error="; ".join(errors))
        return Poll(name, base, spec=spec_doc, health=health_doc)

    def _parsed_spec(self, target: tuple[str, str, str], answer: SurfaceAnswer,
                     errors: list[str]) -> dict[str, Any] | None:
        digest = b""
        if answer.status is not None:
            digest = hashlib.sha256(answer.content).digest()
            held = self._specs.get(target)
            if held is not None and held[0] == digest and 200 <= answer.status < 300:
                return held[1]
        try:
            document = spec_document(answer)
        except SurfaceProblem as exc:
            errors.append(f"spec: {exc}")
            return None
        self._specs[target] = (digest, document)
        return document


def _answered(answer: SurfaceAnswer | BaseException, url: str) -> SurfaceAnswer:
    # Anything else escaping a request is still only this target's failure.
    return answer if isinstance(answer, SurfaceAnswer) else SurfaceAnswer(url, error=type(answer).__name__)
