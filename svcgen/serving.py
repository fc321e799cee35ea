"""`svcgen serve`: a built package under uvicorn (httptools, uvloop), and the `--reload` dev loop.

The package is imported in the serving process before uvicorn starts, so a user error raised at import (a
runtime of the wrong API level, a handler bound with the wrong types, a bad route) is one line and exit 1
instead of a traceback from inside the server.

With `--reload` a supervisor keeps the listening socket and runs the server in a child process. It rebuilds
the package when the manifest, a JSON Schema file it names or the manifest of an owner it takes types from
(wherever they are) changes, restarts the child when a Python file of the package changes, and prints one
line per reload. An invalid manifest prints the build's diagnostics
and the last good build keeps serving. A child that fails to start (or exits) is reported, and until the next change
a stand-in on the same socket answers every request 503 at once, saying why, so clients are not left waiting on a
port nothing serves.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import logging
import multiprocessing
import signal
import socket
import sys
import threading
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

from .codegen.files import manifest_of
from .manifest import ManifestError
from .runtime import RegistryError, RuntimeMismatch, WiringError
from .runtime._http.limits import server_options
from .runtime._http.routing import RouteError

STOP_TIMEOUT = 10.0
"""Seconds a server child gets to finish its lifespan shutdown before it is killed."""

USER_ERRORS: tuple[type[Exception], ...] = (RuntimeMismatch, RegistryError, RouteError, WiringError)
"""Raised while importing a package for a reason its owner can fix: shown as their one-line message."""


SVCGEN_SOURCE = Path(__file__).resolve().parent
"""svcgen's own source: an error raised in it keeps its traceback."""


class ServeError(Exception):
    """A user error that stops `svcgen serve`; its text is the line to print."""


@dataclass(frozen=True)
class Package:
    """A built package: OUT/PACKAGE, imported as PACKAGE with OUT on the import path."""

    directory: Path
    name: str
    parent: Path

    @classmethod
    def at(cls, directory: Path) -> Package:
        if not (directory / "app.py").is_file():
            raise ServeError(
                f"{directory.as_posix()}: no generated package here (no app.py); build one: svcgen build M -o OUT"
            )
        resolved = directory.resolve()
        if not resolved.name.isidentifier():
            raise ServeError(f"{directory.as_posix()}: {resolved.name!r} is not an importable package name")
        return cls(resolved, resolved.name, resolved.parent)

    @property
    def app_path(self) -> str:
        return f"{self.name}.app:app"

    def load_app(self) -> Any:
        """Import PACKAGE.app and return its `app`; a user error raised on import becomes a ServeError."""
        if str(self.parent) not in sys.path:
            sys.path.insert(0, str(self.parent))
        try:
            module = importlib.import_module(f"{self.name}.app")
        except USER_ERRORS as error:
            raise ServeError(f"{self.directory.name}: {error}") from None
        except (ImportError, SyntaxError) as error:
            # A kept handler importing a type the manifest renamed, a typo in wiring.py: the user's own file
            # and line say it all; anything raised outside the package keeps its traceback.
            where = self._position_of(error)
            if where is None:
                raise
            message = error.msg if isinstance(error, SyntaxError) else str(error)
            raise ServeError(f"{self.directory.name}: {where}: {type(error).__name__}: {message}") from None
        except Exception as error:
            # Raised by a line of the package itself (wire() reading a setting the environment lacks, a handler
            # module without `handle`): that line says it all. Raised inside svcgen or a library: a traceback.
            where = self._raised_at(error)
            if where is None:
                raise
            raise ServeError(f"{self.directory.name}: {where}: {type(error).__name__}: {error}") from None
        return module.app

    def _raised_at(self, error: Exception) -> str | None:
        """`path:line` of the package's file the error was raised in, or the package module an AttributeError
        found without the attribute (relative to the package); None when it was raised elsewhere."""
        if isinstance(error, AttributeError) and isinstance(error.obj, ModuleType):
            relative = self._relative(error.obj.__file__ or "")
            if relative is not None:
                return relative
        found = None
        for frame, line in traceback.walk_tb(error.__traceback__):  # the innermost frame of the package wins
            filename = frame.f_code.co_filename
            relative = self._relative(filename)
            if relative is not None:
                found = f"{relative}:{line}"
            elif found is not None and Path(filename).is_relative_to(SVCGEN_SOURCE):
                found = None  # svcgen's own code raised it below the package's line: keep its traceback
        return found

    def _position_of(self, error: ImportError | SyntaxError) -> str | None:
        """`path:line[:col]` of the package's file the error arose in (relative to the package), if any."""
        if isinstance(error, SyntaxError) and error.filename:
            relative = self._relative(error.filename)
            if relative is not None:
                return f"{relative}:{error.lineno}" + (f":{error.offset}" if error.offset else "")
        found = None
        for frame, line in traceback.walk_tb(error.__traceback__):  # innermost frame of the package wins
            relative = self._relative(frame.f_code.co_filename)
            if relative is not None:
                found = f"{relative}:{line}"
        return found

    def _relative(self, filename: str) -> str | None:
        path = Path(filename)
        return path.relative_to(self.directory).as_posix() if path.is_relative_to(self.directory) else None

    def manifest(self) -> Path:
        """The manifest named by the generated header of __init__.py (a path relative to OUT)."""
        path, init = manifest_of(self.directory), self.directory / "__init__.py"
        if path is None:
            raise ServeError(f"{init}: no svcgen header naming the manifest; pass --manifest M")
        if not path.is_file():
            raise ServeError(f"{init}: names the manifest {path}, which does not exist; pass --manifest M")
        return path


def serve_over_nats(url: str, setting: str = "--nats") -> None:
    """`--nats URL` (or SVCGEN_NATS alone, `setting` naming it): check that the server answers, then set
    SVCGEN_NATS, which the generated `create_app()` of this process and of its workers reads (its `Wiring`), so each
    serves the topics over NATS too."""
    import asyncio
    import os

    from .runtime._logging import shown
    from .runtime._nats.connections import NATS_MISSING, NatsError, nats_installed, open_connection, server_of
    from .runtime._wiring import NATS_ENV

    where = f"{setting} {shown(url.strip())}"  # never the URL's credentials
    if not nats_installed():
        raise ServeError(f"{where}: {NATS_MISSING}")

    async def reach() -> None:
        connection = await open_connection(server_of(url))
        await connection.close()

    try:
        asyncio.run(reach())
    except NatsError as error:
        raise ServeError(f"{where}: {error}") from None
    os.environ[NATS_ENV] = url


def serve(package: Package, host: str, port: int, workers: int, access_log: bool) -> None:
    import uvicorn

    # uvicorn binds only after the app's startup (wiring hooks, the mesh registering this instance) and then
    # logs the failure among its lines; a port already taken is refused first, in one line, as --reload does.
    _listen(host, port).close()
    app = package.load_app()
    target = package.app_path if workers > 1 else app  # worker processes import it themselves
    uvicorn.run(target, host=host, port=port, workers=workers, app_dir=str(package.parent),
                **uvicorn_options(access_log))


def uvicorn_options(access_log: bool = False) -> dict[str, Any]:
    """`server_options` for a server run from the command line (`svcgen serve`, `svcgen collector serve`): a
    request a forced stop cuts short (a second Ctrl-C) is one line, not a traceback (see `CutShort`)."""
    options = server_options(access_log=access_log)
    config = options["log_config"]
    config["filters"]["cut-short"] = {"()": f"{__name__}.CutShort"}
    config["loggers"]["uvicorn.error"]["filters"] = ["cut-short"]
    return options


class CutShort(logging.Filter):
    """uvicorn's lines about the tasks a forced stop (a second Ctrl-C) cancels, said for what they are: a request
    in progress is one WARNING line, CUT_SHORT, instead of "Exception in ASGI application" and a CancelledError
    traceback, and the lifespan's cancelled wait is not reported as "ASGI 'lifespan' protocol appears unsupported".
    Only a task that was itself cancelled counts: a CancelledError the app's own code lets out keeps its traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not _cancelled():
            return True
        if record.msg == "Exception in ASGI application\n" and record.exc_info and \
                isinstance(record.exc_info[1], asyncio.CancelledError):
            record.msg, record.args, record.exc_info, record.exc_text = CUT_SHORT, (), None, None
            record.levelno, record.levelname = logging.WARNING, logging.getLevelName(logging.WARNING)
            return True
        return record.msg not in ("ASGI 'lifespan' protocol appears unsupported.", "Exception in 'lifespan' protocol\n")


CUT_SHORT = "a request in progress was cut short: the server was stopped without waiting for it"


def _cancelled() -> bool:
    """Whether the task running now (if any) has been asked to cancel."""
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no event loop running
        return False
    return task is not None and task.cancelling() > 0


def _serve_child(package: Package, sock: socket.socket, access_log: bool, why: Connection) -> None:
    """A dev-loop server process: the supervisor's socket, uvicorn's own start and stop lines left out. When it
    cannot start it sends the supervisor the reason on `why` (for the stand-in's answers) and exits non-zero."""
    import uvicorn

    try:
        app = package.load_app()
    except ServeError as error:
        print(error, file=sys.stderr)
        why.send(str(error))
        raise SystemExit(1) from None
    server = uvicorn.Server(uvicorn.Config(app, **_child_options(access_log)))
    try:
        server.run(sockets=[sock])
    finally:
        if not server.started:  # the app's startup failed: logged, and uvicorn exits
            why.send("the app's startup failed; its error is on the svcgen serve terminal")


def _stand_in(sock: socket.socket, detail: str) -> None:
    """A dev-loop process holding the supervisor's socket while the server cannot start: every request is answered
    503 `{status: service-unavailable, detail}` at once, instead of waiting on a port nothing serves."""
    import uvicorn

    from .runtime import _status as st
    from .runtime._http.requests import AsgiScope, Receive, Send
    from .runtime._http.responses import send_failure

    async def app(scope: AsgiScope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await send_failure(send, 503, st.SERVICE_UNAVAILABLE, detail)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1013})  # try again later

    uvicorn.Server(uvicorn.Config(app, lifespan="off", **_child_options(False))).run(sockets=[sock])


def _child_options(access_log: bool) -> dict[str, Any]:
    options = uvicorn_options(access_log)
    options["log_config"]["loggers"]["uvicorn.error"]["level"] = "WARNING"
    return options


Rebuild = Callable[[], list[str]]
"""Builds the package from the manifest; returns the build's diagnostics, none when it succeeded."""


class Reloader:
    """The `--reload` supervisor: owns the socket and the watch, runs the server in a child process."""

    def __init__(self, package: Package, manifest: Path, rebuild: Rebuild, inputs: Callable[[], Iterable[Path]],
                 echo: Callable[[str], None], access_log: bool = False) -> None:
        self.package = package
        self.manifest = manifest.resolve()
        self.rebuild = rebuild
        self.inputs = inputs
        """Files besides the manifest that a build of the manifest as it is now reads (its JSON Schema files, its
        owners' manifests); raises ManifestError when the manifest cannot say (the build then reports why)."""
        self.echo = echo
        self.access_log = access_log
        self._watched_inputs: set[Path] = {self.manifest}
        self._built_from: dict[Path, str | None] = {}
        """Digests of the inputs as the last build read them (taken before it ran): an edit the watch could not
        see, made while it was not armed yet, shows as a difference."""
        self._sock: socket.socket | None = None
        self._child: BaseProcess | None = None
        """The process on the socket: the server, or the stand-in while the server cannot start."""
        self._standing_in = False
        self._why: Connection | None = None
        """Where the server child sends why it could not start."""
        self._started_with: dict[Path, str] = {}
        self._stop = threading.Event()

    def run(self, host: str, port: int) -> None:
        import watchfiles

        self._sock = sock = _listen(host, port)
        bound = sock.getsockname()
        self._install_signal_handlers()
        self._build("starting")
        self._start()
        self.echo(f"serving {self.package.name} on http://{bound[0]}:{bound[1]}; reloading on changes to "
                  f"{self.manifest.name} and {self.package.directory.name}/ (Ctrl-C stops)")
        try:
            while not self._stop.is_set():
                # A rebuild may name an input in a directory not watched yet (a new imports: owner): watch again.
                roots, armed = self._roots(), False
                for changes in watchfiles.watch(*roots, watch_filter=self._relevant, stop_event=self._stop,
                                                rust_timeout=500, yield_on_timeout=True, raise_interrupt=False):
                    paths = {Path(path) for _, path in changes}
                    if not armed:  # the watch sees every edit from now on: an edit made before it is found by bytes
                        armed = True
                        paths |= self._unseen_changes()
                    self._on_changes(paths)
                    if self._roots() != roots:
                        break
        finally:
            self._stop_child()
            sock.close()

    def stop(self) -> None:
        self._stop.set()

    def _install_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return

        def handle(signum: int, frame: FrameType | None) -> None:
            self.stop()

        signal.signal(signal.SIGTERM, handle)
        signal.signal(signal.SIGINT, handle)

    def _roots(self) -> list[Path]:
        """The package's directory and each input's: an owner's manifest or a JSON Schema file may live outside
        the manifest's directory. A directory inside another one is watched through it."""
        folders = {self.package.directory, *(path.parent for path in self._watched_inputs)}
        return sorted(folder for folder in folders
                      if not any(folder != other and folder.is_relative_to(other) for other in folders))

    def _relevant(self, change: Any, path: str) -> bool:
        candidate = Path(path)
        if candidate in self._watched_inputs:
            return True
        return candidate.suffix == ".py" and "__pycache__" not in candidate.parts \
            and candidate.is_relative_to(self.package.directory)

    def _on_changes(self, paths: set[Path]) -> None:
        self._check_child()
        if not paths:
            return
        inputs = ", ".join(sorted(path.name for path in paths if path in self._watched_inputs))
        if inputs and not self._build(f"{inputs} changed"):
            return
        modules = self._changed_modules()
        if not modules and not self._standing_in and self._child is not None and self._child.is_alive():
            if inputs:
                self.echo(f"reload: {inputs} changed; rebuilt, no module changed, server kept")
            return
        self._restart()
        shown = ", ".join(path.relative_to(self.package.directory).as_posix() for path in modules[:4])
        shown += f" and {len(modules) - 4} more" if len(modules) > 4 else ""
        if inputs:
            cause = f"{inputs} changed; rebuilt" + (f" {shown}" if shown else "")
        else:
            cause = f"{shown or 'a watched file'} changed"
        self.echo(f"reload: {cause}; server restarted")

    def _build(self, why: str) -> bool:
        try:
            reads = {self.manifest, *(path.resolve() for path in self.inputs())}
        except ManifestError:
            reads = None  # the build fails on it too, and its diagnostics say why
        # Digested before the build reads them: an edit made while it runs differs from these afterwards.
        self._built_from = {path: _digest(path) for path in {*self._watched_inputs, *(reads or ())}}
        diagnostics = self.rebuild()
        if diagnostics:
            self.echo(f"reload: {why}; the build failed, still serving the last good build:")
            for line in diagnostics:
                self.echo(f"  {line}")
            return False
        if reads is not None:
            self._watched_inputs = reads
        return True

    def _unseen_changes(self) -> set[Path]:
        """The inputs and the package's modules whose bytes differ from those last built and started with."""
        inputs = {path for path in self._watched_inputs if _digest(path) != self._built_from.get(path)}
        return inputs | set(self._changed_modules())

    def _changed_modules(self) -> list[Path]:
        """The package's Python files whose bytes differ from those the running server started with."""
        now = _module_digests(self.package.directory)
        return sorted(path for path in now.keys() | self._started_with.keys()
                      if now.get(path) != self._started_with.get(path))

    def _start(self) -> None:
        assert self._sock is not None
        self._started_with = _module_digests(self.package.directory)
        context = multiprocessing.get_context("spawn")
        self._why, why = context.Pipe(duplex=False)
        self._child = context.Process(target=_serve_child, args=(self.package, self._sock, self.access_log, why),
                                      name=f"svcgen serve {self.package.name}")
        self._child.start()
        why.close()  # the child's end: once the child is gone, reading ours ends instead of waiting
        self._standing_in = False

    def _restart(self) -> None:
        self._stop_child()
        self._start()

    def _stop_child(self) -> None:
        if self._why is not None:
            self._why.close()
            self._why = None
        child, self._child = self._child, None
        if child is None or not child.is_alive():
            return
        child.terminate()  # SIGTERM: uvicorn runs the lifespan shutdown (the last feed flush)
        child.join(STOP_TIMEOUT)
        if child.is_alive():
            child.kill()
            child.join(STOP_TIMEOUT)

    def _check_child(self) -> None:
        """A server child gone (it could not start, or exited): said once, and the stand-in answers until the next
        change starts the server again."""
        child = self._child
        if child is None or child.is_alive() or self._stop.is_set():
            return
        if self._standing_in:  # killed from outside: nothing of ours answers any more
            self._child = None
            self.echo(f"reload: the stand-in exited with status {child.exitcode}; the server starts on the next change")
            return
        reason = self._reason()
        self.echo(f"reload: the server exited with status {child.exitcode}; answering 503 until it restarts on the "
                  "next change")
        assert self._sock is not None
        down = f"the server cannot start ({reason})" if reason else \
            f"the server exited with status {child.exitcode} (its error is on the svcgen serve terminal)"
        detail = f"{down}; svcgen serve --reload starts it again when a watched file changes"
        context = multiprocessing.get_context("spawn")
        self._child = context.Process(target=_stand_in, args=(self._sock, detail),
                                      name=f"svcgen serve {self.package.name} (stand-in)")
        self._child.start()
        self._standing_in = True

    def _reason(self) -> str | None:
        """What the server child sent on its way out, if anything."""
        why, self._why = self._why, None
        if why is None:
            return None
        try:
            return str(why.recv()) if why.poll() else None
        except (EOFError, OSError):
            return None
        finally:
            why.close()


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise ServeError(f"cannot listen on {host}:{port}: {error.strerror or error}") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _module_digests(directory: Path) -> dict[Path, str]:
    digests = {path: _digest(path) for path in directory.rglob("*.py") if "__pycache__" not in path.parts}
    return {path: digest for path, digest in digests.items() if digest is not None}


def _digest(path: Path) -> str | None:
    """The file's SHA-256, None when it cannot be read (gone)."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None
