"""Security basics: a service name is never a path, a handler's exception text never leaves the service, and the
collector talks to nobody but 127.0.0.1.

The dashboard's own half of "no external requests" (no external URL in dashboard.html, a CSP of
`default-src 'none'` and `connect-src 'self'`) is tests/dashboard/test_dashboard.py::
test_dashboard_has_no_external_references; it is not repeated here.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from svcgen.collector.artifacts import write_artifacts
from svcgen.collector.artifacts.filenames import service_file_names
from svcgen.collector.host import CollectorHost, CollectorSettings
from tests.support.processes import wait_for
from tests.support.reliability import ORDER, SVCGEN, build_orders, invoke, report, served, traceparent
from tests.support.server import running

HOSTILE_NAMES = [
    "../../escape", "/abs/path", "..", "a/../../b", ".", "../", "/", "~/x", "C:\\evil\\x", "x\ty",
    "services/../../../z", "./.hidden", "../" * 80 + "deep", "orders", "Orders", "ORDERS",
]  # fmt: skip
TOP_LEVEL = {"manifest.json", "topology.json", "topics.json", "usage.json", "asyncapi.json", "annotations.json",
             "issues.json", "windows.json"}


def files_under(root: Path) -> list[Path]:
    return sorted(path for path in root.rglob("*") if path.is_file() or path.is_symlink())


def feed(base: str, name: str, number: int) -> None:
    descriptor = {"service": name, "serviceVersion": "1.0.0", "instanceId": f"../{name}",
                  "topics": [{"id": f"{name}:get", "requestSchema": {}, "responseSchema": {}}],
                  "descriptorHash": f"sha256:{number:064x}"}  # fmt: skip
    heartbeat = {"service": name, "instanceId": f"../{name}", "descriptorHash": descriptor["descriptorHash"]}
    event = {"traceId": f"{number + 1:032x}", "spanId": f"{number + 1:016x}", "service": name,
             "topic": f"../{name}", "status": "ok", "durationMs": 1.0}  # fmt: skip
    for topic, body in [("svc:mesh:register", descriptor), ("svc:mesh:heartbeat", heartbeat),
                        ("svc:mesh:traces", {"events": [event]}), ("svc:mesh:issues", {"service": name, "issues": []})]:
        status, answer = invoke(base, topic, body)
        assert status == "ok" and answer["accepted"] == (0 if topic == "svc:mesh:issues" else 1), (topic, answer)


def test_no_artifact_or_store_file_escapes_its_directory_whatever_a_service_calls_itself(tmp_path: Path) -> None:
    """Feeds a real collector (CollectorHost on uvicorn, JSON-file store, artifacts rewritten every 0.1 s)
    register, heartbeat, traces and issues from 16 services named like paths (`../../escape`, `/abs/path`,
    `..`, `a/../../b`, `x\\ty` (a NUL is refused at ingest: tests/collector), 80 x `../` + `deep`,
    `orders`/`Orders`/`ORDERS`, ...), after planting a symlink
    where `../../escape`'s file goes, pointing outside. Then writes the artifacts again with write_artifacts and
    with `svcgen artifacts --store ... -o ...` (run from an empty working directory in the tree). Measures: every
    file in the tmp tree. Asserts: each is inside the store's directory or one of the three artifact
    directories, the working directory stays empty, no path a name would naively make exists, the planted
    symlink's target is untouched, and every name has its own services/ file (no two share one)."""
    jail = tmp_path / "jail"
    state, artifacts, direct, cli = jail / "state", jail / "artifacts", jail / "direct", jail / "cli"
    workdir, outside = tmp_path / "cwd", tmp_path / "outside.txt"
    for directory in (state, workdir, artifacts / "services"):
        directory.mkdir(parents=True)
    outside.write_text("untouched")
    planted = artifacts / "services" / service_file_names(HOSTILE_NAMES)["../../escape"]
    planted.symlink_to(outside)
    store = state / "collector.json"
    host = CollectorHost(CollectorSettings(store=store, artifacts=artifacts, artifacts_interval=0.1))

    def listed() -> set[str]:
        try:
            return {entry["name"] for entry in json.loads((artifacts / "manifest.json").read_text())["services"]}
        except (OSError, ValueError):
            return set()

    with running(host.app) as base:
        for number, name in enumerate(HOSTILE_NAMES):
            feed(base, name, number)
        wait_for(lambda: listed() == set(HOSTILE_NAMES), 15, "every name in manifest.json")
    write_artifacts(host.collector.snapshot(), direct)
    written = subprocess.run([*SVCGEN, "artifacts", "--store", str(store), "-o", str(cli)], cwd=workdir,
                             capture_output=True, text=True, timeout=120)  # fmt: skip
    assert written.returncode == 0, written.stderr

    allowed = [state, artifacts, direct, cli]
    everything = files_under(tmp_path)
    strays = [path for path in everything if path != outside and not any(path.is_relative_to(a) for a in allowed)]
    naive = {
        (directory / sub / f"{name}.json").resolve()
        for directory in (artifacts, direct, cli, workdir, Path.cwd())
        for sub in ("services", ".")
        for name in HOSTILE_NAMES
        if "\x00" not in name
    }
    escaped = [path for path in naive if path.exists() and not any(path.is_relative_to(a) for a in allowed)]
    per_directory, wrong = {}, []
    for directory in (artifacts, direct, cli):
        services = files_under(directory / "services")
        per_directory[directory.name] = len(services)
        wrong += [str(path) for path in services if path.parent != directory / "services" or path.is_symlink()]
        names = {path.name: json.loads(path.read_text())["name"] for path in services}
        # Each name's file by the writer's rule (how a dashboard finds it) holds that name. The host's directory
        # was rewritten while names kept arriving, so it may also keep files of earlier assignments
        # (`Orders_2.json` before `ORDERS` came): never deleted, by design, and inside the directory all the same.
        wrong += [f"{directory.name}/{file}: {names.get(file)!r} is not {name!r}"
                  for name, file in service_file_names(HOSTILE_NAMES).items() if names.get(file) != name]  # fmt: skip
        if directory != artifacts and sorted(names.values()) != sorted(HOSTILE_NAMES):
            wrong.append(f"{directory.name}: files for {sorted(names.values())}")
        top = {path.name for path in directory.iterdir() if path.is_file()}
        if top - {"dashboard.html"} != TOP_LEVEL:
            wrong.append(f"{directory.name}: top level {sorted(top)}")
    figures = report("path confinement", names=len(HOSTILE_NAMES), files_in_tree=len(everything),
                     strays=[str(p) for p in strays], escaped=[str(p) for p in escaped],
                     service_files=per_directory, wrong=wrong, outside=outside.read_text())  # fmt: skip
    assert strays == [] and escaped == [] and wrong == [], figures
    assert outside.read_text() == "untouched", figures
    assert list(workdir.iterdir()) == [], figures


SECRET = f"hunter2-{uuid.uuid4().hex}"
RAISING_HANDLER = f'''"""Handler of orders:place (version v1) that fails with a secret in its exception text."""

from __future__ import annotations

from svcgen.runtime import Context, Result

from ..models import Order, PlaceOrder


async def handle(request: PlaceOrder, context: Context) -> Result[Order]:
    raise RuntimeError("connecting to postgres://admin:{SECRET}@db failed")
'''


def leaks(text: str | bytes) -> list[str]:
    data = text if isinstance(text, str) else text.decode("utf-8", "replace")
    return [marker for marker in (SECRET, "Traceback", "postgres://", 'File "') if marker in data]


def fleet_issues(host: CollectorHost) -> list[Any]:
    answer = host.collector.query_fleet({}).payload
    return list(answer["issues"]) if answer else []


def raw(answer: httpx.Response) -> str:
    return "\n".join(f"{k}: {v}" for k, v in answer.headers.items()) + "\n" + answer.text


def test_a_handler_exception_reaches_no_client_and_no_collector_answer(tmp_path: Path) -> None:
    """Builds the orders service with an orders:place v1 handler raising RuntimeError whose message holds a
    secret, serves it with `svcgen serve` reporting every 0.5 s to a CollectorHost on uvicorn, and calls it
    through the route (POST /orders, POST /v1/orders), the envelope (POST /svc/invoke) and the topic path
    (POST /svc/invoke/orders:place/v1). Then reads from the collector the trace query of each traced call, the
    fleet query (issues), the service query, its whole snapshot and the UI artifacts written from it.
    Measures: each answer's status, whether the trace and the issue carry the exception type. Asserts: the
    calls fail as `service-unavailable` (503), the exception type reaches the trace and the issue feed, and not
    one answer, header, snapshot or artifact holds the secret, the URL around it, "Traceback" or a stack frame."""
    package = build_orders(tmp_path / "build", RAISING_HANDLER)
    host = CollectorHost(CollectorSettings(artifacts=tmp_path / "artifacts", artifacts_interval=3600.0))
    traces = [f"{n:032x}" for n in range(0xA1, 0xA5)]
    # The envelope carries the message's own headers: its trace context goes there, not on the HTTP request.
    envelope = {"topic": "orders:place", "headers": {"svc-version": "v1", "traceparent": traceparent(traces[2])},
                "body": json.dumps(ORDER)}  # fmt: skip
    with running(host.app) as collector, served(package, collector, tmp_path) as service:
        calls = [
            ("route", "/orders", ORDER),
            ("versioned route", "/v1/orders", ORDER),
            ("invoke", "/svc/invoke", envelope),
            ("invoke topic", "/svc/invoke/orders:place/v1", ORDER),
        ]
        answers = {label: httpx.post(service.base + path, json=body, timeout=10,
                                     headers={"traceparent": traceparent(trace)})
                   for (label, path, body), trace in zip(calls, traces, strict=True)}  # fmt: skip

        def traced() -> list[Any]:
            found = [host.collector.query_trace({"traceId": trace}).payload for trace in traces]
            return found if all(found) else []

        trace_answers = wait_for(traced, 15, "the four traces at the collector")
        fleet = wait_for(lambda: fleet_issues(host), 15, "the issue at the collector")
        fleet_answer = invoke(collector, "svc:mesh:query:fleet", {})
        service_answer = invoke(collector, "svc:mesh:query:service", {"service": "orders"})
        trace_envelopes = [invoke(collector, "svc:mesh:query:trace", {"traceId": trace}) for trace in traces]
        snapshot = orjson.dumps(host.collector.snapshot())
        written = write_artifacts(host.collector.snapshot(), tmp_path / "artifacts-now")

    events = [event for answer in trace_answers for event in answer["events"]]
    figures = report(
        "handler exception",
        answers={label: answer.status_code for label, answer in answers.items()},
        envelope_status=answers["invoke"].json().get("statusCode"),
        trace_statuses=sorted({event["status"] for event in events}),
        trace_exception_types=sorted({event.get("exceptionType", "-") for event in events}),
        issues=[(issue["classification"], issue.get("exceptionType")) for issue in fleet],
        artifacts_checked=len(written),
    )
    assert {label: answer.status_code for label, answer in answers.items()} == {
        "route": 503, "versioned route": 503, "invoke": 200, "invoke topic": 503}, figures  # fmt: skip
    assert answers["invoke"].json()["statusCode"] == "service-unavailable", figures
    assert [event["status"] for event in events] == ["service-unavailable"] * 4, figures
    assert [event.get("exceptionType") for event in events] == ["RuntimeError"] * 4, figures
    assert [(i["classification"], i.get("exceptionType")) for i in fleet] == [("exception", "RuntimeError")], figures
    leaked = {label: leaks(raw(answer)) for label, answer in answers.items()}
    leaked |= {"fleet query": leaks(json.dumps(fleet_answer)), "service query": leaks(json.dumps(service_answer)),
               "trace queries": leaks(json.dumps(trace_envelopes)), "snapshot": leaks(snapshot)}  # fmt: skip
    leaked |= {path.name: leaks(path.read_bytes()) for path in written}
    assert {where: found for where, found in leaked.items() if found} == {}, figures


def ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return ipaddress.ip_address(host.split("%", 1)[0])


def literal(host: str) -> bool:
    """An IP address, whose lookup needs no resolver."""
    try:
        ip(host)
    except ValueError:
        return False
    return True


@contextmanager
def outbound_guard(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Records the destination of every socket connect and every name lookup in this process; a destination
    other than loopback is refused (ConnectionRefusedError) as well as recorded, so nothing leaves the host."""
    seen: list[str] = []
    connect, connect_ex, getaddrinfo = socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo

    def destination(sock: socket.socket, address: Any) -> str:
        if sock.family == socket.AF_UNIX:
            return f"unix:{address!r}"
        host = str(address[0])
        seen.append(host)
        return host

    def loopback(host: str) -> bool:
        return host == "localhost" or host.startswith("unix:") or (literal(host) and ip(host).is_loopback)

    def guarded_connect(sock: socket.socket, address: Any) -> None:
        if not loopback(destination(sock, address)):
            raise ConnectionRefusedError(f"outbound guard: {address!r}")
        connect(sock, address)

    def guarded_connect_ex(sock: socket.socket, address: Any) -> int:
        if not loopback(destination(sock, address)):
            raise ConnectionRefusedError(f"outbound guard: {address!r}")
        return connect_ex(sock, address)

    def guarded_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else str(host)
        seen.append(name)
        if not loopback(name) and not literal(name):
            raise socket.gaierror(f"outbound guard: {name}")
        return getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", guarded_connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", guarded_getaddrinfo)
    yield seen


def test_the_collector_makes_no_external_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With every socket connect and name lookup of this process recorded (and any non-loopback one refused),
    runs CollectorHost with its defaults (no fleet, a temporary artifacts directory) on uvicorn: startup,
    register + heartbeat + traces + issues over HTTP, two artifact rewrites, the dashboard page, the queries,
    and shutdown. A control connect to 203.0.113.7 (TEST-NET-3) first proves the guard sees connects. Measures:
    every destination. Asserts: the control was seen and refused; every other destination is loopback."""
    with outbound_guard(monkeypatch) as seen:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("203.0.113.7", 80), timeout=1)
        with pytest.raises(socket.gaierror):
            socket.getaddrinfo("example.com", 443)
        control = list(seen)
        assert "203.0.113.7" in control and "example.com" in control, control
        seen.clear()
        host = CollectorHost(CollectorSettings(artifacts_interval=0.1))
        with running(host.app) as base:
            feed(base, "orders", 1)
            wait_for(lambda: host.artifact_writes >= 2, 15, "two artifact rewrites")
            page = httpx.get(base + "/", timeout=10)
            manifest = httpx.get(base + "/manifest.json", timeout=10)
            _, fleet = invoke(base, "svc:mesh:query:fleet", {})
            time.sleep(0.3)  # a few more artifact rewrites and idle ticks
        destinations = sorted(set(seen))
    figures = report("outbound requests", control=control, destinations=destinations, lookups_and_connects=len(seen),
                     artifact_writes=host.artifact_writes)  # fmt: skip
    assert page.status_code == 200 and manifest.status_code == 200 and fleet["services"], figures
    assert destinations and all(d == "localhost" or (literal(d) and ip(d).is_loopback) for d in destinations), figures
