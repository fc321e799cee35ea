"""A real locked mesh on 127.0.0.1: `svcgen collector serve --token-file` and generated services given the token
through SVCGEN_COLLECTOR_TOKEN, each a process bounded in time; shared by the lock, dashboard and contract-mismatch
tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.support.processes import stop_process, wait_until_up
from tests.support.server import free_port

SVCGEN = [sys.executable, "-m", "svcgen"]
TOKEN = "s3cret-token-for-tests"

BOOKS = """svcgen: 1
service: books
serviceVersion: 2.1.0
mesh: {collector: "http://127.0.0.1:9", heartbeatSeconds: 0.2}
types:
  GetBook:
    fields:
      bookId: string
  Book:
    fields:
      bookId: string
      title: string
topics:
  - id: books:get
    request: GetBook
    response: Book
    routes: ["GET /books/{bookId}"]
"""
BOOKS_HANDLER = '''
from svcgen.runtime import Context, Result

from ..models import Book, GetBook


async def handle(request: GetBook, context: Context) -> Result[Book]:
    if request.book_id == "boom":
        raise LookupError("the shelf collapsed")
    if request.book_id != "dune":
        return Result.not_found(f"no book {request.book_id}")
    return Result.ok(Book(book_id="dune", title="Dune"))
'''


@dataclass(frozen=True)
class MeshService:
    """A service of a test mesh: its manifest and the handler modules that replace the generated stubs."""

    name: str
    manifest: str
    handlers: Mapping[str, str] = field(default_factory=dict)
    """Handler file name (in the package's handlers/) → its source."""


BOOKS_SERVICE = MeshService("books", BOOKS, {"books_get.py": BOOKS_HANDLER})


@dataclass(frozen=True)
class LockedMesh:
    collector: str
    services: dict[str, str]
    """Service name → its base URL."""
    token: str

    @property
    def books(self) -> str:
        return self.services["books"]

    def headers(self, token: str | None = TOKEN) -> dict[str, str]:
        return {"authorization": f"Bearer {token}"} if token else {}

    def invoke(self, topic: str, body: Any, token: str | None = TOKEN) -> httpx.Response:
        return httpx.post(f"{self.collector}/svc/invoke", json={"topic": topic, "body": json.dumps(body)},
                          headers=self.headers(token), timeout=10)

    def query(self, topic: str, body: Any) -> Any:
        answer = self.invoke(topic, body)
        assert answer.status_code == 200, answer.text
        envelope = answer.json()
        assert envelope["statusCode"] == "ok", envelope
        return json.loads(envelope["body"])


@contextmanager
def process(command: list[str], url: str, log: Path, env: dict[str, str]) -> Iterator[None]:
    with log.open("wb") as output:
        running = subprocess.Popen(command, env={**os.environ, **env}, stdout=output, stderr=subprocess.STDOUT)
        try:
            wait_until_up(running, url, log)
            yield
        finally:
            stop_process(running)


@contextmanager
def locked_mesh(
    tmp_path: Path, services: Sequence[MeshService] = (BOOKS_SERVICE,), collector_args: Sequence[str] = ()
) -> Iterator[LockedMesh]:
    """A locked collector (artifacts rewritten every 0.2 s, `collector_args` added) and the services (the books
    service by default), built and reporting to it."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    for service in services:
        manifest = tmp_path / f"{service.name}.yaml"
        manifest.write_text(service.manifest)
        subprocess.run([*SVCGEN, "build", str(manifest), "-o", str(tmp_path)], check=True, capture_output=True,
                       timeout=120)
        for file_name, source in service.handlers.items():
            (tmp_path / f"{service.name}_service" / "handlers" / file_name).write_text(source)
    token_file = tmp_path / "collector.token"
    token_file.write_text(TOKEN + "\n")
    collector_port = free_port()
    collector = f"http://127.0.0.1:{collector_port}"
    ports = {service.name: free_port() for service in services}
    urls = {name: f"http://127.0.0.1:{port}" for name, port in ports.items()}
    clean = {"SVCGEN_COLLECTOR_TOKEN": ""}  # the collector's token comes from its file only
    with ExitStack() as running:
        running.enter_context(process(
            [*SVCGEN, "collector", "serve", "--port", str(collector_port), "--token-file", str(token_file),
             "--artifacts-interval", "0.2", *collector_args], collector + "/", tmp_path / "collector.log", clean))
        for service in services:
            running.enter_context(process(
                [*SVCGEN, "serve", str(tmp_path / f"{service.name}_service"), "--port", str(ports[service.name])],
                urls[service.name] + "/svc/spec", tmp_path / f"{service.name}.log",
                {"SVCGEN_COLLECTOR": collector, "SVCGEN_COLLECTOR_TOKEN": TOKEN}))
        yield LockedMesh(collector, urls, TOKEN)
