"""NATS with JetStream for the tests: the server at SVCGEN_TEST_NATS (a nats:// URL) when set, else the local one at
127.0.0.1:4222 when it answers; a test that cannot get either fails with the reason (`make test` starts a throwaway
`nats-server -js` and sets SVCGEN_TEST_NATS when there is none). `ThrowawayNats` is a server a test may stop and
start itself (the machine's shared server is never stopped)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from svcgen.runtime._mesh.jetstream import MeshStream
from tests.support.server import free_port

ENV = "SVCGEN_TEST_NATS"
LOCAL = "nats://127.0.0.1:4222"


def _answers(url: str, timeout: float = 3.0) -> bool:
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 4222), timeout=timeout) as sock:
            sock.settimeout(timeout)
            return sock.recv(4).startswith(b"INFO")
    except OSError:
        return False


def nats_server_url() -> str:
    """The NATS server to test against; fails the test, saying why, when there is none."""
    url = os.environ.get(ENV) or LOCAL
    if not _answers(url):
        where = f"{ENV}={url}" if os.environ.get(ENV) else f"{LOCAL} ({ENV} is not set)"
        pytest.fail(f"no NATS server for the test at {where}; run `make test`, which starts one", pytrace=False)
    return url


@pytest.fixture(scope="session")
def nats_url() -> str:
    return nats_server_url()


def unique_name(prefix: str = "t") -> str:
    """A name no other test run uses: for subjects, services, streams and durable consumers on a shared server."""
    return f"{prefix}{secrets.token_hex(5)}"


class ThrowawayNats:
    """`nats-server -js` of its own on a free port on 127.0.0.1 with its JetStream store in a temporary directory;
    `stop` and `start` keep the store, `remove` deletes it. `jetstream=False`: a plain NATS server, without -js."""

    def __init__(self, *, jetstream: bool = True) -> None:
        binary = shutil.which("nats-server") or "/usr/sbin/nats-server"
        if not Path(binary).exists():
            pytest.fail("nats-server is missing: install Debian's nats-server package (make test does)", pytrace=False)
        self.binary = binary
        self.directory = Path(tempfile.mkdtemp(prefix="svcgen-nats-"))
        self.port = free_port()
        self.url = f"nats://127.0.0.1:{self.port}"
        self._process: subprocess.Popen[bytes] | None = None
        self.jetstream = jetstream

    def start(self, timeout: float = 10.0) -> None:
        command = [self.binary, "-a", "127.0.0.1", "-p", str(self.port)]
        if self.jetstream:
            command += ["-js", "-sd", str(self.directory / "store")]
        log = (self.directory / "nats.log").open("ab")
        self._process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if _answers(self.url, timeout=0.5):
                return
            time.sleep(0.05)
        self.stop()
        raise AssertionError(f"nats-server did not start on {self.url}: see {self.directory / 'nats.log'}")

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=10)
            self._process = None

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)


async def delete_stream(url: str, name: str) -> None:
    """Remove a test's stream (and its consumers) from the shared server; a missing one is fine."""
    import nats
    from nats.js.errors import NotFoundError

    client = await nats.connect(url)
    try:
        with contextlib.suppress(NotFoundError):
            await client.jetstream().delete_stream(name)
    finally:
        await client.close()


@pytest.fixture
def mesh_stream(nats_url: str) -> Iterator[MeshStream]:
    """A mesh stream of the test's own on the shared server (unique name and subjects), deleted afterwards."""
    token = unique_name()
    stream = MeshStream(name=f"MESH_{token}", subject_prefix=f"test.{token}")
    yield stream
    asyncio.run(delete_stream(nats_url, stream.name))
