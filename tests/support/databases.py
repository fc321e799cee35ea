"""PostgreSQL for the tests: the server at SVCGEN_TEST_POSTGRES (a postgresql:// URL) when set, else the local one at
127.0.0.1:5432 when it answers; a test that cannot get either fails with the reason (`make test` starts a
throwaway cluster and sets SVCGEN_TEST_POSTGRES when there is none). Each test session works in a database of its
own, dropped at the end; `ThrowawayCluster` is a server a test may stop and start itself."""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest

from tests.support.server import free_port

ENV = "SVCGEN_TEST_POSTGRES"
LOCAL = "postgresql://postgres@127.0.0.1:5432/postgres"


def server_url() -> str:
    """The server to test against; fails the test, saying why, when there is none."""
    url = os.environ.get(ENV) or LOCAL
    try:
        with psycopg.connect(url, connect_timeout=3):
            return url
    except psycopg.Error as exc:
        where = f"{ENV}={url}" if os.environ.get(ENV) else f"{LOCAL} ({ENV} is not set)"
        pytest.fail(f"no PostgreSQL for the collector tests at {where}: {exc}; run `make test`, which starts one",
                    pytrace=False)


def with_database(url: str, name: str) -> str:
    """The URL `url` with the database `name`."""
    return urlsplit(url)._replace(path=f"/{name}").geturl()


def create_database(url: str) -> str:
    """A new empty database on the server at `url`; its URL."""
    name = f"svcgen_test_{secrets.token_hex(6)}"
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    return with_database(url, name)


def drop_database(url: str) -> None:
    name = urlsplit(url).path.lstrip("/")
    with psycopg.connect(with_database(url, "postgres"), autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def empty_database(url: str) -> None:
    """Drop everything a collector created in the database."""
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")


@pytest.fixture(scope="session")
def postgres_session_url() -> Iterator[str]:
    url = create_database(server_url())
    try:
        yield url
    finally:
        drop_database(url)


@pytest.fixture
def postgres_url(postgres_session_url: str) -> str:
    """A database of this session's, emptied for this test."""
    empty_database(postgres_session_url)
    return postgres_session_url


def postgres_bin(tool: str) -> str:
    """A PostgreSQL server tool from Debian's postgresql package (not on PATH there), else from PATH."""
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{tool}")) or [shutil.which(tool) or ""]
    if not found[-1]:
        pytest.fail(f"{tool} is missing: install Debian's postgresql package (make test does)", pytrace=False)
    return found[-1]


class ThrowawayCluster:
    """A PostgreSQL cluster of its own on a free port on 127.0.0.1, started and stopped by the test (so the
    machine's shared server is never stopped); trust authentication. PostgreSQL refuses to run as root, so as root
    the cluster belongs to the `postgres` user. `remove` deletes it."""

    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="svcgen-pg-"))
        self.data = self.directory / "data"
        self.port = free_port()
        self.log = self.directory / "postgres.log"
        self._as: list[str] = []
        user = os.environ.get("USER") or "postgres"
        if os.geteuid() == 0:
            user = "postgres"
            self._as = ["runuser", "-u", user, "--"]
            shutil.chown(self.directory, user)
        self._run(postgres_bin("initdb"), "-D", str(self.data), "-A", "trust", "-U", user)
        self.url = f"postgresql://{user}@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.directory} -c fsync=off"
        self._run(postgres_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "-t",
                  "60", "start")  # fmt: skip

    def stop(self) -> None:
        self._run(postgres_bin("pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "-t", "60", "stop", check=False)

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)

    def _run(self, *command: str, check: bool = True) -> None:
        done = subprocess.run([*self._as, *command], capture_output=True, text=True, timeout=120)
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(command)} failed: {done.stderr.strip() or done.stdout.strip()}")
