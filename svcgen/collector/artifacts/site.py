"""The dashboard over HTTP: `GET /` is dashboard.html, the artifacts are served beside it by relative path,
and every other request goes to the wrapped ASGI app (the collector's binding).

Only artifact names are served (`manifest.json`, ..., `services/<file>.json` with a sanitised file name),
read from the artifacts directory and never outside it.
"""

from __future__ import annotations

import html
import re
from importlib import resources
from pathlib import Path
from typing import Final

from ...runtime import _status as st
from ...runtime._http.app import HttpApp
from ...runtime._http.requests import AsgiScope, Receive, Send
from ...runtime._http.responses import send_failure, send_response
from ...runtime._topics import DEFAULT_PREFIX, normalize_prefix
from .writer import SERVICES_DIR

DASHBOARD: Final = "dashboard.html"
TOP_LEVEL: Final = frozenset(
    {"manifest.json", "topology.json", "topics.json", "usage.json", "asyncapi.json", "annotations.json",
     "issues.json", "windows.json"}
)
_SERVICE_FILE: Final = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,120}\.json")
_INVOKE_META: Final = b'content="svc/invoke"'
_LOCK_META: Final = b'<meta name="svcgen-lock" content="unknown">'
_HTML: Final = {"content-type": "text/html; charset=utf-8", "cache-control": "no-cache"}
_JSON: Final = {"content-type": "application/json", "cache-control": "no-cache"}


def dashboard_html() -> bytes:
    return resources.files(__package__).joinpath(DASHBOARD).read_bytes()


class ArtifactSite:
    def __init__(self, directory: Path, app: HttpApp, *, prefix: str = DEFAULT_PREFIX, locked: bool = False) -> None:
        self.directory = directory.resolve()
        self.app = app
        # The page finds the collector's invoke surface (for the trace query) in a meta tag, relative to itself.
        relative = (normalize_prefix(prefix) + "/invoke").lstrip("/")
        invoke = f'content="{html.escape(relative)}"'.encode()
        self._dashboard = dashboard_html().replace(_INVOKE_META, invoke, 1)
        # The page says so when anyone who reaches the collector may read and write it.
        lock = b'<meta name="svcgen-lock" content="' + (b"locked" if locked else b"open") + b'">'
        self._dashboard = self._dashboard.replace(_LOCK_META, lock, 1)

    async def __call__(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in ("GET", "HEAD"):
            path: str = scope["path"]
            if path in ("/", f"/{DASHBOARD}"):
                await send_response(send, 200, self._dashboard, _HTML)
                return
            artifact = self._artifact(path)
            if artifact is not None:
                await self._send_file(send, artifact)
                return
        await self.app(scope, receive, send)

    def _artifact(self, path: str) -> Path | None:
        name = path.lstrip("/")
        if name in TOP_LEVEL:
            return self.directory / name
        folder, _, file_name = name.partition("/")
        if folder == SERVICES_DIR and _SERVICE_FILE.fullmatch(file_name):
            return self.directory / SERVICES_DIR / file_name
        return None

    async def _send_file(self, send: Send, path: Path) -> None:
        try:
            body = path.read_bytes()
        except FileNotFoundError:
            await send_failure(send, 404, st.NOT_FOUND, f"{path.name} has not been written yet")
            return
        except OSError as exc:
            await send_failure(send, 503, st.SERVICE_UNAVAILABLE, f"{path.name} cannot be read ({type(exc).__name__})")
            return
        await send_response(send, 200, body, _JSON)
