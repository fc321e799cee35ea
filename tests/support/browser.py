"""Drives the static mesh dashboard in headless Chromium: a local static server, a `--dump-dom` run, a DOM reader.

The server serves one directory on 127.0.0.1 (free port, background thread, a hard deadline after which it
shuts itself down) and records every request it receives. Chromium loads the dashboard from it with its
background traffic disabled and every host name other than 127.0.0.1 unresolvable, lets the page run for a
bounded amount of virtual time and prints the final DOM, which `parse_dom` turns into a small tree.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import re
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

from svcgen.collector.artifacts.filenames import service_file_names
from svcgen.collector.artifacts.writer import SERVICES_DIR

CHROMIUM_CANDIDATES = ("chromium", "chromium-browser")
CHROMIUM_TIMEOUT_SECONDS = 90
VIRTUAL_TIME_BUDGET_MS = 15_000
SERVER_DEADLINE_SECONDS = 180.0

# The artifact files the dashboard fetches besides one detail file per service.
ARTIFACT_FILES = ("manifest.json", "topics.json", "topology.json", "usage.json", "annotations.json", "issues.json",
                  "windows.json")


def dashboard_source() -> str:
    """The packaged dashboard, read the way an installed svcgen finds it."""
    return resources.files("svcgen.collector.artifacts").joinpath("dashboard.html").read_text(encoding="utf-8")


def inline_script_hashes(source: str) -> list[str]:
    """The CSP source expression (`'sha256-…'`) of every inline script in `source`."""
    return [
        "'sha256-" + base64.b64encode(hashlib.sha256(body.encode("utf-8")).digest()).decode("ascii") + "'"
        for body in re.findall(r"<script>(.*?)</script>", source, re.DOTALL)
    ]


def service_detail_files(names: Iterable[str]) -> dict[str, str]:
    """Service name → its detail file relative to the artifact root, by the artifact writer's rule.

    The dashboard's `serviceDetailPaths` re-implements this rule in JavaScript; the tests check that the
    files it fetches are exactly these.
    """
    return {name: f"{SERVICES_DIR}/{file_name}" for name, file_name in service_file_names(names).items()}


def find_chromium() -> str:
    for candidate in CHROMIUM_CANDIDATES:
        found = shutil.which(candidate)
        if found:
            return found
    pytest.fail(
        "chromium is not installed, so the dashboard cannot be tested: run `make test`, which installs it "
        "(or `apt-get install -y chromium`)",
        pytrace=False,
    )


# ---- Static server ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    method: str
    target: str
    """The request target exactly as sent (an absolute URL if a client used us as a proxy)."""
    host: str | None
    status: int | None = None

    @property
    def path(self) -> str:
        """The decoded path without query, relative to the served directory."""
        return unquote(urlsplit(self.target).path).lstrip("/")


@dataclass
class StaticServer:
    root: Path
    host: str = "127.0.0.1"
    port: int = 0
    requests: list[Request] = field(default_factory=list)

    @property
    def origin(self) -> str:
        return f"http://{self.host}:{self.port}"

    def url(self, path: str) -> str:
        return f"{self.origin}/{path}"


@contextlib.contextmanager
def serve_directory(root: Path, deadline_seconds: float = SERVER_DEADLINE_SECONDS) -> Iterator[StaticServer]:
    """Serve `root` on 127.0.0.1 on a free port until the block ends (or the deadline passes), logging requests."""
    state = StaticServer(root=root)
    lock = threading.Lock()

    class Handler(SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(root), **kwargs)

        def send_response(self, code: int, message: str | None = None) -> None:
            with lock:
                headers = getattr(self, "headers", None)
                host = headers.get("Host") if headers is not None else None
                state.requests.append(Request(getattr(self, "command", ""), getattr(self, "path", ""), host, code))
            super().send_response(code, message)

        def end_headers(self) -> None:
            self.send_header("Cache-Control", "no-store")
            super().end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer((state.host, 0), Handler)
    server.daemon_threads = True
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    backstop = threading.Timer(deadline_seconds, server.shutdown)
    backstop.daemon = True
    thread.start()
    backstop.start()
    try:
        yield state
    finally:
        backstop.cancel()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


# ---- Chromium ---------------------------------------------------------------------------------------------


def chromium_dump_dom(url: str, profile_dir: Path, screenshot: Path | None = None) -> str:
    """Load `url` in headless Chromium and return the DOM after the virtual time budget has run out; with
    `screenshot`, a second run saves what the page looks like there (PNG, 1280 px wide, the full first 2,400 px)."""
    dom = _chromium(url, profile_dir, ["--dump-dom"]).stdout
    if screenshot is not None:
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        _chromium(url, profile_dir, [f"--screenshot={screenshot}", "--window-size=1280,2400", "--hide-scrollbars"])
        assert screenshot.is_file() and screenshot.stat().st_size > 0, f"chromium wrote no screenshot of {url}"
    return dom


def _chromium(url: str, profile_dir: Path, mode: list[str]) -> subprocess.CompletedProcess[str]:
    command = [
        find_chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--disable-default-apps",
        # Nothing may leave the machine, not even Chromium's own housekeeping traffic.
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
        f"--user-data-dir={profile_dir}",
        f"--virtual-time-budget={VIRTUAL_TIME_BUDGET_MS}",
        *mode,
        url,
    ]
    try:
        completed = subprocess.run(command, capture_output=True, text=True, timeout=CHROMIUM_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        pytest.fail(
            f"chromium did not finish within {CHROMIUM_TIMEOUT_SECONDS}s loading {url} "
            "(an open alert/confirm dialog blocks --dump-dom: did markup from the artifacts run?)",
            pytrace=False,
        )
    if completed.returncode != 0 or ("--dump-dom" in mode and not completed.stdout.strip()):
        stderr_tail = "\n".join(completed.stderr.splitlines()[-20:])
        pytest.fail(f"chromium failed (exit {completed.returncode}) loading {url}:\n{stderr_tail}", pytrace=False)
    return completed


# ---- DOM --------------------------------------------------------------------------------------------------

VOID_ELEMENTS = frozenset(
    ["area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source", "track", "wbr"]
)


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    children: list[Element | str] = field(default_factory=list)

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def text(self) -> str:
        return "".join(child if isinstance(child, str) else child.text() for child in self.children)

    def iter(self) -> Iterator[Element]:
        yield self
        for child in self.children:
            if isinstance(child, Element):
                yield from child.iter()

    def find_all(self, predicate: Callable[[Element], bool]) -> list[Element]:
        return [element for element in self.iter() if predicate(element)]

    def by_class(self, name: str) -> list[Element]:
        return self.find_all(lambda element: name in element.classes)

    def by_id(self, element_id: str) -> Element:
        found = self.find_all(lambda element: element.attrs.get("id") == element_id)
        assert len(found) == 1, f"expected one #{element_id}, found {len(found)}"
        return found[0]


class _TreeBuilder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {name: value or "" for name, value in attrs})
        self.stack[-1].children.append(element)
        if tag not in VOID_ELEMENTS:
            self.stack.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack[-1].children.append(Element(tag, {name: value or "" for name, value in attrs}))

    def handle_endtag(self, tag: str) -> None:
        for depth in range(len(self.stack) - 1, 0, -1):
            if self.stack[depth].tag == tag:
                del self.stack[depth:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def parse_dom(markup: str) -> Element:
    builder = _TreeBuilder()
    builder.feed(markup)
    builder.close()
    return builder.root
