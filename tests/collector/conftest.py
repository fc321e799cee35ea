"""`any_store`: a test using it runs once per store kind (memory, JSON file, PostgreSQL), so every query must
answer the same from each."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from svcgen.collector import JsonFileStore, MemoryStore, Store
from svcgen.collector.postgres import PostgresStore
from svcgen.collector.store import Backend
from tests.support import feeds as helpers
from tests.support.databases import postgres_session_url, postgres_url

__all__ = ["any_store", "postgres_session_url", "postgres_url"]


@pytest.fixture(params=["memory", "json-file", "postgresql"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    made: list[Store | Backend] = []

    def make() -> Store | Backend:
        store: Store | Backend
        if request.param == "memory":
            store = MemoryStore()
        elif request.param == "json-file":
            store = JsonFileStore(tmp_path / f"state{len(made)}.json")
        else:
            store = PostgresStore(request.getfixturevalue("postgres_url") if not made else made_url[0])
        made.append(store)
        return store

    made_url: list[str] = []
    if request.param == "postgresql":
        made_url.append(request.getfixturevalue("postgres_url"))
    monkeypatch.setattr(helpers, "default_store", make)
    yield request.param
    for store in made:
        store.close()
