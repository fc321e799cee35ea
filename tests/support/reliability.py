"""Shared by the reliability tests: build the example orders service, run it and the collector as real processes
on 127.0.0.1, and report measured figures.

Every subprocess has a deadline and is killed in a `finally`; every server binds 127.0.0.1 on a free port.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.support.processes import stop_process, tail, wait_until_up
from tests.support.server import free_port

REPO = Path(__file__).resolve().parents[2]
ORDERS_MANIFEST = REPO / "examples" / "manifests" / "orders.yaml"
SVCGEN = [sys.executable, "-m", "svcgen"]
SERVE_COUNTED = REPO / "tests" / "reliability" / "serve_counted.py"
HEARTBEAT_SECONDS = "0.5"

PLACE_HANDLER = (REPO / "examples" / "handlers" / "orders_place_v1.py").read_text()
"""orders:place v1 as `make demo` implements it."""

ORDER = {"customerId": "c-42", "items": [{"sku": "apple", "quantity": 3}, {"sku": "pear"}],
         "placedAt": "2026-11-22T10:00:00+01:00"}  # fmt: skip


def report(title: str, **figures: Any) -> str:
    """Print the measured figures (visible with pytest -s) and return them for assertion messages."""
    text = f"[reliability] {title}: " + ", ".join(f"{key}={value}" for key, value in figures.items())
    print(text, flush=True)
    return text


def build_orders(out: Path, handler: str = PLACE_HANDLER) -> Path:
    """examples/manifests/orders.yaml built into `out` with `handler` as orders:place v1; the package dir."""
    built = subprocess.run([*SVCGEN, "build", str(ORDERS_MANIFEST), "-o", str(out)], capture_output=True,
                           text=True, timeout=120)  # fmt: skip
    assert built.returncode == 0, built.stderr
    package = out / "orders_service"
    (package / "handlers" / "orders_place_v1.py").write_text(handler)
    return package


def rss_kib(pid: int) -> int:
    """Resident set size of `pid` in KiB, from /proc/<pid>/status."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


@dataclass
class Served:
    base: str
    process: subprocess.Popen[bytes]
    log: Path
    counts_file: Path
    stop_seconds: float = 0.0
    """SIGTERM to exit: the graceful shutdown, final feed flush included."""

    @property
    def pid(self) -> int:
        return self.process.pid

    def counts(self) -> dict[str, Any]:
        """What the service's mesh host counted (after the process stopped)."""
        assert self.counts_file.is_file(), f"the service wrote no counts; its log:\n{tail(self.log)}"
        (counted,) = json.loads(self.counts_file.read_text())
        assert isinstance(counted, dict)
        return counted


@contextmanager
def served(package: Path, collector: str, workdir: Path, **env: str) -> Iterator[Served]:
    """`svcgen serve package` (through serve_counted.py) reporting to `collector` with a 0.5 s heartbeat; stopped
    with SIGTERM on exit, so its lifespan flushes the feeds once more before the process ends."""
    port = free_port()
    log = workdir / f"service-{port}.log"
    counts = workdir / f"service-{port}.counts.json"
    environment = {**os.environ, "SVCGEN_COLLECTOR": collector, "SVCGEN_HEARTBEAT_SECONDS": HEARTBEAT_SECONDS, **env}
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, str(SERVE_COUNTED), str(counts), str(package), "--host", "127.0.0.1", "--port",
             str(port)],
            env=environment, stdout=subprocess.DEVNULL, stderr=stderr,
        )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    service = Served(base, process, log, counts)
    try:
        wait_until_up(process, base + "/svc/spec", log)
        yield service
    finally:
        stopping = time.monotonic()
        code = stop_process(process)
        service.stop_seconds = time.monotonic() - stopping
    assert code == 0, f"the service exited with {code}; its log:\n{tail(log)}"


@dataclass
class CollectorProcess:
    """`svcgen collector serve --store STORE` on a fixed port, so it can be killed and started again there. STORE
    is a JSON file, or `database` (a PostgreSQL URL) when given."""

    store: Path
    workdir: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0
    database: str | None = None
    nats: str | None = None
    """A NATS URL: the collector also takes the feeds from its JetStream (`--nats`)."""

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.workdir / f"collector-{self.port}-{self.starts}.log"

    def start(self) -> None:
        assert self.process is None or self.process.poll() is not None
        self.starts += 1
        with self.log.open("wb") as output:
            self.process = subprocess.Popen(
                [*SVCGEN, "collector", "serve", "--host", "127.0.0.1", "--port", str(self.port), "--store",
                 self.database or str(self.store), "--artifacts", str(self.workdir / f"artifacts-{self.port}"),
                 *(["--nats", self.nats] if self.nats else [])],
                stdout=output, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )  # fmt: skip
        wait_until_up(self.process, self.base + "/svc/health", self.log)

    def kill(self) -> None:
        """SIGKILL: no shutdown hook runs, nothing is flushed."""
        if self.process is not None:
            stop_process(self.process, graceful=False)

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process)


def invoke(base: str, topic: str, body: Any, timeout: float = 10) -> tuple[str, Any]:
    """(statusCode, decoded body) of one envelope sent to `base`/svc/invoke."""
    answer = httpx.post(f"{base}/svc/invoke", json={"topic": topic, "body": json.dumps(body)}, timeout=timeout)
    assert answer.status_code == 200, answer.text
    envelope = answer.json()
    text = envelope.get("body")
    return envelope["statusCode"], json.loads(text) if text else None


def traceparent(trace_id: str, span_id: str = "1" * 16) -> str:
    return f"00-{trace_id}-{span_id}-01"
