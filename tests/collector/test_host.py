"""The collector host as a user runs it: `svcgen collector serve` and `svcgen artifacts`."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import psycopg
import pytest

from svcgen.collector import Collector, JsonFileStore
from svcgen.collector.artifacts import write_artifacts
from svcgen.collector.host import CollectorHost, CollectorSettings
from svcgen.collector.memory import MemoryBackend
from svcgen.collector.store import Rows, StoreUnavailable, Tables
from svcgen.runtime import (
    HealthCheck,
    HealthChecks,
    HttpApp,
    Identity,
    MeshHost,
    MeshSettings,
    Registry,
    Result,
    Service,
)
from svcgen.serving import CUT_SHORT
from tests.support.databases import with_database
from tests.support.feeds import descriptor, heartbeat
from tests.support.processes import stop_process, wait_for, wait_until_up
from tests.support.server import free_port, running, second_ctrl_c_with_a_request_pending

SVCGEN = [sys.executable, "-m", "svcgen"]


def invoke(base: str, topic: str, body: Any) -> dict[str, Any]:
    answer = httpx.post(f"{base}/svc/invoke", json={"topic": topic, "body": json.dumps(body)}, timeout=10)
    assert answer.status_code == 200, answer.text
    envelope = answer.json()
    return {"statusCode": envelope["statusCode"], "body": json.loads(envelope["body"])}


def polled_fleet(request: httpx.Request) -> httpx.Response:
    if request.url.path == "/svc/spec":
        return httpx.Response(200, json={"service": "stock", "topics": [{"id": "stock:get", "requestSchema": {},
                                                                          "responseSchema": {}}]})
    return httpx.Response(200, json={"isHealthy": True, "healthChecks": {}})


def test_the_host_serves_the_collector_dashboard_and_fresh_artifacts(tmp_path: Path) -> None:
    settings = CollectorSettings(fleet=[("stock", "http://stock.test")], poll_interval=0.1, artifacts_interval=0.1)
    host = CollectorHost(settings, transport=httpx.MockTransport(polled_fleet))
    artifacts = host.artifacts
    with running(host.app) as base:
        assert invoke(base, "svc:mesh:register", descriptor("orders"))["body"] == {"accepted": 1}
        page = httpx.get(base + "/", timeout=5)
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert b"manifest.json" in page.content

        def estate() -> set[str]:
            answer = httpx.get(base + "/manifest.json", timeout=5)
            return {s["name"] for s in answer.json()["services"]} if answer.status_code == 200 else set()

        wait_for(lambda: estate() == {"orders", "stock"})  # one pushed, one polled
        assert httpx.get(base + "/services/orders.json", timeout=5).json()["name"] == "orders"
        assert httpx.get(base + "/services/..%2F..%2Fetc%2Fpasswd", timeout=5).status_code == 404
        assert httpx.get(base + "/services/nobody.json", timeout=5).status_code == 404
        fleet = invoke(base, "svc:mesh:query:fleet", {})["body"]
        assert {s["service"] for s in fleet["services"]} == {"orders", "stock"}
        assert httpx.get(base + "/svc/health", timeout=5).json()["isHealthy"] is True
    assert host.artifact_writes >= 2
    assert not artifacts.exists()  # a temporary artifacts directory goes with the host


@contextmanager
def collector_process(tmp_path: Path, *args: str) -> Iterator[str]:
    port = free_port()
    log = tmp_path / f"collector-{port}.log"
    with log.open("wb") as output:
        process = subprocess.Popen([*SVCGEN, "collector", "serve", "--port", str(port), *args],
                                   stdout=output, stderr=subprocess.STDOUT)  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(process, base + "/svc/health", log)
        yield base
    finally:
        stop_process(process)


def test_svcgen_collector_serve_restarts_on_its_store_with_the_same_answers(tmp_path: Path) -> None:
    store = tmp_path / "collector.json"
    artifacts = tmp_path / "artifacts"
    questions = [("svc:mesh:query:fleet", {}), ("svc:mesh:query:service", {"service": "orders"}),
                 ("svc:mesh:query:topic", {"topic": "orders:get"})]  # fmt: skip
    with collector_process(tmp_path, "--store", str(store), "--artifacts", str(artifacts)) as base:
        invoke(base, "svc:mesh:register", descriptor("orders"))
        event = {"traceId": "a" * 32, "spanId": "b" * 16, "service": "orders", "topic": "orders:get",
                 "status": "ok", "durationMs": 2.5}  # fmt: skip
        assert invoke(base, "svc:mesh:traces", {"events": [event]})["body"] == {"accepted": 1}
        before = [invoke(base, topic, body) for topic, body in questions]
    assert store.is_file()
    assert json.loads((artifacts / "manifest.json").read_text())["services"][0]["name"] == "orders"
    with collector_process(tmp_path, "--store", str(store)) as base:
        after = [invoke(base, topic, body) for topic, body in questions]
    assert after == before
    assert before[2]["body"]["invocations"] == 1


def test_svcgen_collector_serve_removes_its_temporary_artifacts_even_on_a_forced_exit(tmp_path: Path) -> None:
    port = free_port()
    environ = {**os.environ, "TMPDIR": str(tmp_path)}  # where its temporary directory goes
    log = tmp_path / "collector.log"
    with log.open("wb") as output:
        process = subprocess.Popen([*SVCGEN, "collector", "serve", "--port", str(port)], env=environ, stdout=output,
                                   stderr=subprocess.STDOUT)  # fmt: skip
    try:
        wait_until_up(process, f"http://127.0.0.1:{port}/svc/health", log)
        (made,) = tmp_path.glob("svcgen-artifacts-*")
        process.send_signal(signal.SIGINT)
        time.sleep(0.02)
        process.send_signal(signal.SIGINT)  # a second Ctrl-C: the server exits without the lifespan's shutdown
        assert process.wait(timeout=30) == 0
    finally:
        stop_process(process)
    assert not made.exists()


def test_a_second_ctrl_c_still_writes_the_store_out(tmp_path: Path) -> None:
    """uvicorn skips the app's shutdown on a second Ctrl-C (meant to stop waiting for open requests): the store was
    never written out (no snapshot, no last fsync). Now the collector writes it out before it exits, and says so."""
    store, artifacts = tmp_path / "mesh.json", tmp_path / "site"
    port = free_port()
    log = tmp_path / "collector.log"
    with log.open("wb") as output:
        process = subprocess.Popen([*SVCGEN, "collector", "serve", "--port", str(port), "--store", str(store),
                                    "--artifacts", str(artifacts), "--artifacts-interval", "3600"],
                                   stdout=output, stderr=subprocess.STDOUT)  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(process, base + "/svc/health", log)
        assert invoke(base, "svc:mesh:register", descriptor("orders"))["body"] == {"accepted": 1}
        # A request still arriving: the server waits for it after the first Ctrl-C, until the second.
        second_ctrl_c_with_a_request_pending(process, port, b"POST /svc/invoke HTTP/1.1")
    finally:
        stop_process(process)
    said = log.read_text()
    assert "writing out the store" in said, said
    # The request it cut short is one line, where uvicorn printed a CancelledError traceback.
    assert "Traceback" not in said and "Exception in ASGI application" not in said, said
    assert f"WARNING uvicorn.error: {CUT_SHORT}" in said, said
    assert [entry["service"] for entry in json.loads(store.read_text())["catalog"]] == ["orders"]
    assert not list(tmp_path.glob("mesh.json.*.log"))  # all in the snapshot
    assert json.loads((artifacts / "manifest.json").read_text())["services"][0]["name"] == "orders"


def test_a_host_removes_only_the_artifacts_directory_it_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where its temporary directories go
    given = tmp_path / "site"
    kept = CollectorHost(CollectorSettings(artifacts=given))
    temporary = CollectorHost(CollectorSettings())
    made = temporary.artifacts

    def failing_flush() -> None:
        raise OSError("disk full")

    temporary.collector.flush = failing_flush  # type: ignore[method-assign]
    with pytest.raises(OSError, match="disk full"):
        asyncio.run(temporary.stop())  # a stop that fails half-way still removes it
    assert not made.exists()
    asyncio.run(kept.stop())
    assert (given / "manifest.json").is_file()
    never_started = CollectorHost(CollectorSettings()).artifacts
    gc.collect()  # a host never started: its directory goes with it
    assert not never_started.exists()


def test_no_artifact_write_outlives_the_stop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    calls: list[float] = []

    def slow_first_write(snapshot: Any, target: Path, **options: Any) -> list[Path]:
        calls.append(time.monotonic())
        if len(calls) == 1:
            time.sleep(0.5)  # the periodic write, still under way when the stop comes
        return write_artifacts(snapshot, target, **options)

    monkeypatch.setattr("svcgen.collector.host.write_artifacts", slow_first_write)
    host = CollectorHost(CollectorSettings(artifacts_interval=60))

    async def start_and_stop() -> None:
        await host.start()
        await asyncio.sleep(0.1)
        await host.stop()

    asyncio.run(start_and_stop())
    time.sleep(0.6)  # what a write left running in its thread would have done by now
    assert not host.artifacts.exists()


class AwayBackend(MemoryBackend):
    """A memory backend whose reads fail with `away` (the reason) while it is set, as a database's do."""

    away: str | None = None

    @contextlib.contextmanager
    def read(self, rows: Rows) -> Iterator[Tables]:
        if self.away is not None:
            raise StoreUnavailable(self.away)
        with super().read(rows) as tables:
            yield tables


def test_a_store_away_is_said_once_by_the_artifact_writer_and_once_when_it_writes_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A store away for an hour logged "writing the UI artifacts ... failed" on every retry; now once when writes
    start failing (with the reason) and once when one succeeds again."""
    backend = AwayBackend()
    host = CollectorHost(CollectorSettings(artifacts=tmp_path / "site"), collector=Collector(backend))

    async def writes(count: int) -> None:
        for _ in range(count):
            await host.write_artifacts()

    with caplog.at_level(logging.INFO, logger="svcgen.mesh"):
        asyncio.run(writes(1))
        backend.away = "the database cannot be reached (connection refused)"
        asyncio.run(writes(50))
        backend.away = None
        asyncio.run(writes(3))
        backend.away = "the database cannot be reached (again)"
        asyncio.run(writes(2))
    lines = [record.getMessage() for record in caplog.records]
    site = tmp_path / "site"
    assert lines == [
        f"writing the UI artifacts to {site} failed (StoreUnavailable: the database cannot be reached (connection "
        "refused)); retrying every 10 s",
        f"writing the UI artifacts to {site} again (50 write(s) failed so far)",
        f"writing the UI artifacts to {site} failed (StoreUnavailable: the database cannot be reached (again)); "
        "retrying every 10 s",
    ]
    assert (host.artifact_writes, host.artifact_failures) == (4, 52)
    assert (site / "manifest.json").is_file()


def test_svcgen_collector_serve_refuses_a_bad_poll_target() -> None:
    result = subprocess.run([*SVCGEN, "collector", "serve", "--poll", "orders"], capture_output=True, text=True,
                            timeout=30)  # fmt: skip
    assert result.returncode == 1
    assert "expected NAME=URL" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("option", ["--poll-interval", "--artifacts-interval", "--heartbeat-seconds"])
def test_svcgen_collector_serve_refuses_an_interval_that_is_not_a_finite_number(option: str) -> None:
    # nan passed FloatRange(min=0.1): the collector started, then its timers failed (or polled "every nan s").
    result = subprocess.run([*SVCGEN, "collector", "serve", "--port", str(free_port()), option, "nan"],
                            capture_output=True, text=True, timeout=30)  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert option in result.stderr and "finite" in result.stderr and "Traceback" not in result.stderr


def test_svcgen_artifacts_writes_the_estate_and_the_dashboard_from_a_store(tmp_path: Path) -> None:
    store = tmp_path / "collector.json"
    Collector(JsonFileStore(store)).register(descriptor("orders"))
    out = tmp_path / "site"
    result = subprocess.run([*SVCGEN, "artifacts", "--store", str(store), "-o", str(out)], capture_output=True,
                            text=True, timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "wrote" in result.stdout
    names = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    assert names == {"manifest.json", "topology.json", "topics.json", "usage.json", "asyncapi.json",
                     "annotations.json", "issues.json", "windows.json", "services/orders.json",
                     "dashboard.html"}  # fmt: skip


def test_svcgen_artifacts_judges_silent_instances_as_the_collector_does(tmp_path: Path) -> None:
    # It wrote every instance as live: a service whose only instance stopped heartbeating minutes ago was "healthy"
    # in manifest.json, and one silent for days was still listed, where the collector says stale and drops it.
    store = tmp_path / "collector.json"
    now = time.time()
    for service, silent_for in (("orders", 0.0), ("stock", 300.0), ("ledger", 2 * 24 * 3600.0)):
        last_heard = now - silent_for
        collector = Collector(JsonFileStore(store), clock=lambda: last_heard)  # noqa: B023 (used at once)
        collector.register(descriptor(service, instance=f"{service}-1"))
        collector.heartbeat(heartbeat(service, instance=f"{service}-1", digest=f"sha256:{service}--1"))
        collector.flush()

    def written(*options: str) -> tuple[dict[str, str], dict[str, Any]]:
        out = tmp_path / f"site{len(options)}"
        result = subprocess.run([*SVCGEN, "artifacts", "--store", str(store), "-o", str(out), *options],
                                capture_output=True, text=True, timeout=60)  # fmt: skip
        assert result.returncode == 0, result.stderr
        manifest = json.loads((out / "manifest.json").read_text())
        files = {name: json.loads((out / "services" / f"{name}.json").read_text()) for name in ("stock", "ledger")}
        return {s["name"]: s["status"] for s in manifest["services"]}, files

    statuses, files = written()
    assert statuses == {"orders": "healthy", "stock": "unreachable", "ledger": "unreachable"}
    assert [(i["instanceId"], i["stale"]) for i in files["stock"]["instances"]] == [("stock-1", True)]
    assert files["stock"]["staleInstances"] == 1
    assert files["ledger"]["instances"] == []  # silent past the retention: no longer shown
    # Told the mesh's slower beat, as `svcgen collector serve --heartbeat-seconds` is, five minutes is not three misses.
    statuses, _ = written("--heartbeat-seconds", "120")
    assert statuses["stock"] == "healthy"


def test_svcgen_artifacts_refuses_a_missing_or_corrupt_store(tmp_path: Path) -> None:
    missing = subprocess.run([*SVCGEN, "artifacts", "--store", str(tmp_path / "none.json"), "-o", str(tmp_path)],
                             capture_output=True, text=True, timeout=60)  # fmt: skip
    assert missing.returncode == 1 and "no such store file" in missing.stderr
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text('{"format": 1, "catalog": [')
    result = subprocess.run([*SVCGEN, "artifacts", "--store", str(corrupt), "-o", str(tmp_path / "out")],
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 1 and "the snapshot is not valid JSON" in result.stderr
    assert "Traceback" not in result.stderr


def test_svcgen_artifacts_given_a_database_url_says_so_without_its_password(tmp_path: Path) -> None:
    url = "postgresql://collector:s3cret@127.0.0.1:5432/mesh"
    result = subprocess.run([*SVCGEN, "artifacts", "--store", url, "-o", str(tmp_path / "site")],
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 1
    assert "s3cret" not in result.stderr and "no such store file" not in result.stderr
    assert "postgresql://collector:***@127.0.0.1:5432/mesh" in result.stderr
    assert "--artifacts" in result.stderr  # where a database's artifacts come from
    assert not (tmp_path / "site").exists()


def test_a_service_under_its_own_prefix_reports_to_the_collector_under_the_default_one() -> None:
    async def stock(request: dict[str, Any], context: Any) -> Result[dict[str, Any]]:
        return Result.ok({"onHand": 3})

    registry = Registry()
    registry.add("stock:get", stock, request=dict[str, Any], response=dict[str, Any])
    host = CollectorHost(CollectorSettings(artifacts_interval=60))
    with running(host.app) as collector:
        mesh = MeshHost(Identity("stock"), MeshSettings(collector, heartbeat_seconds=0.1), environ={})
        health = HealthChecks([HealthCheck("db", lambda: True)])
        service = Service(Identity("stock"), registry, middleware=mesh.middleware, health=health, prefix="/ops")
        with running(mesh.attach(HttpApp(service))):

            wait_for(lambda: invoke(collector, "svc:mesh:query:service", {"service": "stock"})["statusCode"] == "ok")
            assert invoke(collector, "svc:mesh:query:service", {"service": "stock"})["body"]["health"] == "healthy"


def test_a_polled_service_under_its_own_prefix_is_polled_there_and_linked_there(tmp_path: Path) -> None:
    def fleet(request: httpx.Request) -> httpx.Response:
        if request.url.host == "stock.test" and request.url.path == "/ops/spec":
            return httpx.Response(200, json={"service": "stock", "topics": []})
        if request.url.host == "stock.test" and request.url.path == "/ops/health":
            return httpx.Response(200, json={"isHealthy": True, "healthChecks": {}})
        return polled_fleet(request) if request.url.host == "orders.test" else httpx.Response(404)

    targets: list[tuple[str, str] | tuple[str, str, str]] = [
        ("stock", "http://stock.test", "/ops"),
        ("orders", "http://orders.test"),
    ]
    settings = CollectorSettings(fleet=targets, poll_interval=60, artifacts=tmp_path / "site", artifacts_interval=0.1)
    host = CollectorHost(settings, transport=httpx.MockTransport(fleet))
    with running(host.app):

        def links() -> dict[str, Any]:
            path = tmp_path / "site" / "manifest.json"
            services = json.loads(path.read_text())["services"] if path.is_file() else []
            return {s["name"]: (s["status"], s["specUrl"], s["healthUrl"]) for s in services}

        wait_for(lambda: len(links()) == 2)
    assert links() == {
        "stock": ("healthy", "http://stock.test/ops/spec", "http://stock.test/ops/health"),
        "orders": ("healthy", "http://orders.test/svc/spec", "http://orders.test/svc/health"),
    }


def test_svcgen_collector_serve_refuses_a_directory_as_its_store(tmp_path: Path) -> None:
    # `--store /tmp` once moved the whole directory aside as a "corrupt store" and started empty.
    directory = tmp_path / "var"
    directory.mkdir()
    (directory / "someone-elses.txt").write_text("kept")
    result = subprocess.run([*SVCGEN, "collector", "serve", "--port", str(free_port()), "--store", str(directory)],
                            capture_output=True, text=True, timeout=30)  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert "is a directory" in result.stderr and "Traceback" not in result.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["var"]
    assert (directory / "someone-elses.txt").read_text() == "kept"


def test_svcgen_collector_serve_refuses_a_database_it_cannot_use_at_start(postgres_url: str) -> None:
    """A wrong database name, a port nothing listens on or tables it cannot make: the collector served 503 for ever;
    now the start is refused in one line naming why, the URL without its password, and exit 1 (a database lost
    after the start stays an outage health reports)."""
    parts = urlsplit(with_database(postgres_url, "svcgen_test_no_such_database"))
    netloc = f"{parts.username or 'postgres'}:s3cret@{parts.hostname}:{parts.port or 5432}"
    with psycopg.connect(postgres_url, autocommit=True) as connection:  # someone else's table by a collector name
        connection.execute("CREATE TABLE collector_events (id integer)")
    cases = [
        (parts._replace(netloc=netloc).geturl(), 'database "svcgen_test_no_such_database" does not exist'),
        (f"postgresql://postgres:s3cret@127.0.0.1:{free_port()}/mesh", "Connection refused"),
        (urlsplit(postgres_url)._replace(netloc=netloc).geturl(), 'column "span_id" does not exist'),
    ]
    for url, reason in cases:
        result = subprocess.run([*SVCGEN, "collector", "serve", "--port", str(free_port()), "--store", url],
                                capture_output=True, text=True, timeout=30)  # fmt: skip
        assert result.returncode == 1, result.stdout + result.stderr
        (line,) = result.stderr.splitlines()
        assert line.startswith(url.replace("s3cret", "***") + ": the database "), line
        assert reason in line and "s3cret" not in result.stdout + result.stderr
