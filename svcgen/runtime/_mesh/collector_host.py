"""The collector host: the collector behind the HTTP binding, the poller on its interval, the UI artifacts
rewritten on an interval, and the dashboard at `/`; all started and stopped with the ASGI lifespan."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import httpx

from .._http.app import HttpApp
from .._reserved import DEFAULT_PREFIX
from .artifacts import write_artifacts
from .artifacts.site import ArtifactSite
from .collector import Collector, JsonFileStore, collector_service
from .poller import DEFAULT_INTERVAL as DEFAULT_POLL_INTERVAL
from .poller import Poller, Target

logger = logging.getLogger("svcgen.mesh.collector")

DEFAULT_ARTIFACTS_INTERVAL: Final = 10.0


@dataclass(frozen=True)
class CollectorSettings:
    store: Path | None = None
    """JSON-file store; None keeps the state in memory only."""
    fleet: Sequence[Target] = ()
    """(name, base URL) of services to poll; their surfaces live under `prefix`."""
    poll_interval: float = DEFAULT_POLL_INTERVAL
    artifacts: Path | None = None
    """Where the UI artifacts are written; None uses a temporary directory removed at shutdown."""
    artifacts_interval: float = DEFAULT_ARTIFACTS_INTERVAL
    prefix: str = DEFAULT_PREFIX


class CollectorHost:
    def __init__(
        self,
        settings: CollectorSettings,
        *,
        collector: Collector | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.settings = settings
        store = JsonFileStore(settings.store) if settings.store is not None else None
        self.collector = collector if collector is not None else Collector(store)
        self.api = HttpApp(collector_service(self.collector, prefix=settings.prefix))
        self.poller = (
            Poller(
                self.collector,
                list(settings.fleet),
                prefix=settings.prefix,
                interval=settings.poll_interval,
                transport=transport,
            )
            if settings.fleet
            else None
        )
        self._own_artifacts = settings.artifacts is None
        self.artifacts = settings.artifacts or Path(tempfile.mkdtemp(prefix="svcgen-artifacts-"))
        self.app = ArtifactSite(self.artifacts, self.api)
        self.artifact_writes = 0
        self._writer: asyncio.Task[None] | None = None
        self.api.on_startup.append(self.start)
        self.api.on_shutdown.append(self.stop)

    async def start(self) -> None:
        if self.poller is not None:
            self.poller.start()
        self._writer = asyncio.get_running_loop().create_task(self._write_every_interval(), name="svcgen-artifacts")

    async def stop(self) -> None:
        if self.poller is not None:
            await self.poller.stop()
        if self._writer is not None:
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer
        await self.write_artifacts()
        self.collector.flush()
        if self._own_artifacts:
            shutil.rmtree(self.artifacts, ignore_errors=True)

    async def write_artifacts(self) -> None:
        """Write the artifacts from a fresh snapshot; the file I/O runs off the event loop."""
        try:
            snapshot = self.collector.snapshot()
            await asyncio.to_thread(write_artifacts, snapshot, self.artifacts, prefix=self.settings.prefix)
            self.artifact_writes += 1
        except Exception as exc:
            logger.warning("writing the UI artifacts to %s failed (%s: %s); retrying in %g s", self.artifacts,
                           type(exc).__name__, exc, self.settings.artifacts_interval)

    async def _write_every_interval(self) -> None:
        while True:
            await self.write_artifacts()
            await asyncio.sleep(self.settings.artifacts_interval)
