"""`TestClient` and `AsyncTestClient`: a generated package's app under test, its lifespan and wiring run.

Each builds the app the way `create_app()` does in production (wiring.py's `wire` included), with three
changes a test wants: the topics the service produces go to in-memory fake owners (`owners`), its events go
through an in-memory broker (`broker`), dependencies can be overridden (an override wins over what `wire`
provides), and settings come from `environ`. Entering runs the app's startup (the wiring's hooks, the mesh, the
event bus, a NATS binding if configured), leaving runs its shutdown, as a server would; requests go to the app in
process, never over a socket.

The mesh stays in the process unless the test passes its own (`mesh=MeshHost(...)`): the trace middleware and the
issue aggregator run as in production, but nothing is sent to the manifest's collector (or SVCGEN_COLLECTOR's, or
JetStream) and no span is exported by OTLP, so a test's deliberate failures never reach a team's on-call view.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import os
import threading
from collections.abc import Callable, Coroutine, Mapping, MutableMapping
from concurrent.futures import Future
from types import ModuleType, TracebackType
from typing import Any, Self, TypeVar

import httpx

from svcgen.runtime import Dependencies, HttpApp, MeshHost, Wiring
from svcgen.runtime._mesh.host import MESH_VARIABLES

from ._events import MemoryBroker
from ._owners import FakeOwner, FakeOwners

T = TypeVar("T")
BASE_URL = "http://testserver"
LIFESPAN_TIMEOUT = 30.0


class LifespanError(RuntimeError):
    """The app's startup failed (a wiring hook raised); the message names what the app said."""


class _Overridable(Dependencies):
    """Dependencies where an override set before `wire` runs is not replaced by it."""

    def __init__(self, overrides: Mapping[Any, Any]) -> None:
        super().__init__()
        self._pinned = frozenset(overrides)
        for key, value in overrides.items():
            super().value(key, value)

    def singleton(self, key: Any, factory: Callable[[], Any]) -> None:
        if key not in self._pinned:
            super().singleton(key, factory)

    def scoped(self, key: Any, factory: Callable[[], Any]) -> None:
        if key not in self._pinned:
            super().scoped(key, factory)

    def transient(self, key: Any, factory: Callable[[], Any]) -> None:
        if key not in self._pinned:
            super().transient(key, factory)

    def value(self, key: Any, instance: Any) -> None:
        if key not in self._pinned:
            super().value(key, instance)


class _Package:
    """What the test client needs of a generated package: its service module and, if it produces, its clients."""

    def __init__(self, package: ModuleType | str) -> None:
        name = package if isinstance(package, str) else package.__name__
        self.name = name
        self.service = importlib.import_module(f"{name}.service")
        self.produces = tuple(getattr(self.service, "PRODUCES", ()))
        self.clients: Any = importlib.import_module(f"{name}.clients").Clients if self.produces else None

    def in_process_mesh(self) -> MeshHost | None:
        """The manifest's mesh with its feeds and OTLP export off, whatever the environment says (SVCGEN_COLLECTOR,
        SVCGEN_MESH_NATS, OTEL_EXPORTER_OTLP_*): traces and issues are kept in the process only. None without a
        mesh in the manifest."""
        definition = getattr(self.service, "DEFINITION", None)
        settings = getattr(definition, "mesh", None)
        if definition is None or settings is None:
            return None
        local = dataclasses.replace(settings, collector=None, transport="http", nats=None, otlp=None)
        return MeshHost(definition.identity, local, environ={})


_NOT_JOINED = frozenset({Wiring.NATS_VARIABLE, *MESH_VARIABLES})
"""Left out of the default environ: the NATS server and the collector the shell names are real ones."""


class AsyncTestClient(httpx.AsyncClient):
    """`async with AsyncTestClient(orders_service) as client:` then `await client.post("/orders", json=...)`.

    - `package`: the generated package (module or dotted name).
    - `owners`: produced topic → fake owner (see `FakeOwners`); more with `client.owners.add(...)`.
    - `overrides`: dependency key (a type) → the instance handlers get instead of wiring.py's.
    - `environ`: the settings wiring.py reads (default `os.environ` without SVCGEN_NATS: a test does not join a
      NATS server its shell happens to name, where its stubs would answer real callers; pass it to serve there).
    - `broker`: where the service's events go (default a new `MemoryBroker`: in this process, with the delivery
      rules of JetStream); `client.broker.stored("<service>")` lists what it published.
    - `mesh`: the app's `MeshHost`; default the manifest's mesh kept in the process (traced, issues aggregated,
      nothing sent or exported). Pass one (e.g. `MeshHost(service.identity(), service.MESH)`) to send its feeds.
    - `options`: go to `create_app`.
    """

    def __init__(
        self,
        package: ModuleType | str,
        *,
        owners: Mapping[str, FakeOwner[Any, Any]] | None = None,
        overrides: Mapping[Any, Any] | None = None,
        environ: Mapping[str, str] | None = None,
        broker: MemoryBroker | None = None,
        mesh: MeshHost | None = None,
        **options: Any,
    ) -> None:
        self.package = _Package(package)
        self.owners = FakeOwners(self.package.produces)
        for topic, owner in (owners or {}).items():
            self.owners.add(topic, owner)
        pinned = dict(overrides or {})
        if self.package.clients is not None:
            pinned.setdefault(self.package.clients, self.package.clients(self.owners))
        if environ is None:
            environ = {name: value for name, value in os.environ.items() if name not in _NOT_JOINED}
        self.wiring = Wiring(environ=environ)
        self.wiring.dependencies = _Overridable(pinned)
        self.broker = broker if broker is not None else MemoryBroker()
        self.wiring.event_broker = self.broker
        # A test is hermetic unless it asks: the manifest's collector is a team's real one.
        self.mesh = mesh if mesh is not None else self.package.in_process_mesh()
        self.app: HttpApp = self.package.service.create_app(setup=self.wiring, mesh=self.mesh, **options)
        self._lifespan: _Lifespan | None = None
        super().__init__(transport=httpx.ASGITransport(app=self.app), base_url=BASE_URL)

    @property
    def prefix(self) -> str:
        return self.app.service.prefix

    async def invoke(self, topic: str, payload: Any = None, *, version: str = "", **options: Any) -> httpx.Response:
        """POST the payload (JSON) to the topic's invoke face, `{prefix}/invoke/<topic>[/<version>]`."""
        path = f"{self.prefix}/invoke/{topic}" + (f"/{version}" if version else "")
        return await self.post(path, json=payload if payload is not None else {}, **options)

    async def __aenter__(self) -> Self:
        await super().__aenter__()
        self._lifespan = _Lifespan(self.app)
        try:
            await self._lifespan.startup()
        except BaseException:
            await super().__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc: BaseException | None = None,
        tb: TracebackType | None = None,
    ) -> None:
        try:
            if self._lifespan is not None:
                await self._lifespan.shutdown()
        finally:
            await super().__aexit__(exc_type, exc, tb)


class _Lifespan:
    """Drives the ASGI lifespan protocol of an app, as a server does."""

    def __init__(self, app: HttpApp) -> None:
        self._app = app
        self._to_app: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._from_app: asyncio.Queue[MutableMapping[str, Any]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    async def startup(self) -> None:
        scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": {}}
        self._task = asyncio.create_task(self._app(scope, self._to_app.get, self._from_app.put))
        await self._to_app.put({"type": "lifespan.startup"})
        said = await asyncio.wait_for(self._from_app.get(), LIFESPAN_TIMEOUT)
        if said["type"] != "lifespan.startup.complete":
            await self._task
            raise LifespanError(f"the app failed to start: {said.get('message') or said['type']}")

    async def shutdown(self) -> None:
        if self._task is None or self._task.done():
            return
        await self._to_app.put({"type": "lifespan.shutdown"})
        await asyncio.wait_for(self._from_app.get(), LIFESPAN_TIMEOUT)
        await asyncio.wait_for(self._task, LIFESPAN_TIMEOUT)


class _LoopThread:
    """An event loop on a thread of its own: where the sync client runs the app (and its background tasks)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="svcgen-testclient", daemon=True)
        self._thread.start()

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        future: Future[T] = asyncio.run_coroutine_threadsafe(work, self.loop)
        return future.result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(LIFESPAN_TIMEOUT)
        self.loop.close()


class _ThreadTransport(httpx.BaseTransport):
    """A sync transport handing each request to the async client on the loop thread."""

    def __init__(self, client: AsyncTestClient, loop: _LoopThread) -> None:
        self._client = client
        self._loop = loop

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        content = request.read()

        async def send() -> httpx.Response:
            forwarded = self._client.build_request(request.method, request.url, headers=request.headers,
                                                   content=content)  # fmt: skip
            response = await self._client.send(forwarded)
            await response.aread()
            return response

        answer = self._loop.run(send())
        return httpx.Response(answer.status_code, headers=answer.headers, content=answer.content, request=request)


class TestClient(httpx.Client):
    """`with TestClient(orders_service) as client:` then `client.post("/orders", json=...)`: the sync form of
    `AsyncTestClient` (same arguments), for tests that are plain functions. The app runs on an event loop of
    its own, on a thread, from entering to leaving."""

    __test__ = False  # not a pytest test class, whatever its name says

    def __init__(self, package: ModuleType | str, **options: Any) -> None:
        self._loop = _LoopThread()
        try:
            self.inner: AsyncTestClient = self._loop.run(_make(package, options))
        except BaseException:
            self._loop.close()
            raise
        self.app = self.inner.app
        self.owners = self.inner.owners
        self.wiring = self.inner.wiring
        self.broker = self.inner.broker
        self.mesh = self.inner.mesh
        super().__init__(transport=_ThreadTransport(self.inner, self._loop), base_url=BASE_URL)

    @property
    def prefix(self) -> str:
        return self.inner.prefix

    def invoke(self, topic: str, payload: Any = None, *, version: str = "", **options: Any) -> httpx.Response:
        """POST the payload (JSON) to the topic's invoke face, `{prefix}/invoke/<topic>[/<version>]`."""
        path = f"{self.prefix}/invoke/{topic}" + (f"/{version}" if version else "")
        return self.post(path, json=payload if payload is not None else {}, **options)

    def __enter__(self) -> Self:
        super().__enter__()
        self._loop.run(self.inner.__aenter__())
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc: BaseException | None = None,
        tb: TracebackType | None = None,
    ) -> None:
        try:
            self._loop.run(self.inner.__aexit__(exc_type, exc, tb))
        finally:
            self._loop.close()
            super().__exit__(exc_type, exc, tb)


async def _make(package: ModuleType | str, options: dict[str, Any]) -> AsyncTestClient:
    # Built on the loop thread: whatever create_app() makes that binds to a loop binds to that one.
    return AsyncTestClient(package, **options)
