"""`svcgen serve OUT/PACKAGE --nats URL` as a user runs it: the topics answer over NATS (a plain nats-py request
and the generated client over nats://) beside HTTP in one process; a missing extra or an unreachable server is one
line and exit 1."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import nats
import orjson

from tests.support.broker import ThrowawayNats, unique_name
from tests.support.codegen import imported
from tests.support.processes import wait_for
from tests.support.server import free_port
from tests.support.serving import ECHO, build_echo, serving

HANDLER = """
from svcgen.runtime import Context, Result

from ..models import Note


async def handle(request: Note, context: Context) -> Result[Note]:
    return Result.ok(Note(text=request.text + "!"))
"""


def echo_manifest(service: str) -> str:
    manifest = ECHO.replace("service: echo", f"service: {service}\npackage: echo_service")
    return manifest + 'produces:\n  - {id: "echo:say", request: Note, response: Note}\n'


def test_serve_answers_over_nats_and_http_in_one_process(tmp_path: Path, nats_url: str) -> None:
    service = unique_name("echo")
    package = build_echo(tmp_path, echo_manifest(service))
    (package / "handlers" / "echo_say.py").write_text(HANDLER)

    async def over_nats() -> tuple[dict[str, Any], str, str]:
        connection = await nats.connect(nats_url)
        try:
            reply = await connection.request(f"svc.topic.{service}.echo:say", b'{"text": "hi"}', timeout=5)
        finally:
            await connection.close()
        with imported(package.parent, package.name) as module:
            clients = __import__(f"{module.__name__}.clients", fromlist=["Clients"])
            models = __import__(f"{module.__name__}.models", fromlist=["Note"])
            async with clients.Clients(f"{nats_url}/{service}") as typed:
                answer = await typed.echo_say(models.Note(text="typed"))
        return orjson.loads(reply.data), answer.status, answer.payload.text

    with serving(package, "--nats", nats_url) as (base, _, log):
        envelope, status, text = asyncio.run(over_nats())
        over_http = httpx.post(base + "/say", json={"text": "web"}, timeout=10)
        wait_for(lambda: f"serving {service} over NATS" in log.read_text(), what="the NATS line")
    assert envelope["statusCode"] == "ok" and orjson.loads(envelope["body"]) == {"text": "hi!"}
    assert (status, text) == ("ok", "typed!")
    assert over_http.json() == {"text": "web!"}
    assert "Application shutdown complete" in log.read_text()  # the binding drained, the connection closed


def run_serve(package: Path, *prelude: str, nats_url: str) -> subprocess.CompletedProcess[str]:
    code = "; ".join([*prelude, "from svcgen.cli import main", "main()"])
    command = [sys.executable, "-c", code, "serve", str(package), "--port", "0", "--nats", nats_url]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=package.parent)


def test_without_the_nats_extra_serve_says_how_to_install_it(tmp_path: Path) -> None:
    package = build_echo(tmp_path)
    done = run_serve(package, "import sys", "sys.modules['nats'] = None", nats_url="nats://127.0.0.1:4222")
    assert done.returncode == 1
    assert done.stderr.splitlines() == ["--nats nats://127.0.0.1:4222: NATS needs nats-py: pip install 'svcgen[nats]'"]


def test_an_unreachable_nats_server_is_one_line(tmp_path: Path) -> None:
    package = build_echo(tmp_path)
    done = run_serve(package, nats_url="nats://127.0.0.1:1")
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert line.startswith("--nats nats://127.0.0.1:1: cannot connect to NATS at nats://127.0.0.1:1")


def test_a_password_in_the_nats_url_never_reaches_the_error_line(tmp_path: Path) -> None:
    package = build_echo(tmp_path)
    unreachable = run_serve(package, nats_url="nats://bob:hunter2@127.0.0.1:1")
    malformed = run_serve(package, nats_url="nats://bob:hunter2@127.0.0.1:99999")
    assert unreachable.returncode == malformed.returncode == 1
    assert unreachable.stderr.startswith("--nats nats://127.0.0.1:1: cannot connect to NATS at nats://127.0.0.1:1")
    assert malformed.stderr.startswith("--nats nats://127.0.0.1:99999: 'nats://127.0.0.1:99999' is not a nats://")
    assert "hunter2" not in unreachable.stderr + malformed.stderr and "bob" not in unreachable.stderr + malformed.stderr


def test_a_refused_password_is_said_as_the_server_said_it(tmp_path: Path) -> None:
    port = free_port()
    command = [shutil.which("nats-server") or "/usr/sbin/nats-server", "-a", "127.0.0.1", "-p", str(port),
               "--user", "qa", "--pass", "right"]  # fmt: skip
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: _listening(port), what="nats-server with a password")
        done = run_serve(build_echo(tmp_path), nats_url=f"nats://qa:wrong@127.0.0.1:{port}")
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    # The server's own reason, not the reset of the connection it closed after it.
    assert line == f"--nats nats://127.0.0.1:{port}: cannot connect to NATS at nats://127.0.0.1:{port}: nats: " \
                   "'Authorization Violation'"


def test_a_nats_outage_is_said_once_when_lost_and_once_when_back(tmp_path: Path) -> None:
    service = unique_name("echo")
    package = build_echo(tmp_path, echo_manifest(service))
    (package / "handlers" / "echo_say.py").write_text(HANDLER)
    server = ThrowawayNats()
    server.start()
    try:
        with serving(package, "--nats", server.url) as (_, _, log):
            wait_for(lambda: f"serving {service} over NATS" in log.read_text(), what="the NATS line")
            server.stop()
            wait_for(lambda: "connection lost" in log.read_text(), what="the line saying the connection is lost")
            time.sleep(5)  # a reconnect attempt every 2 s, each refused
            server.start()
            wait_for(lambda: "connected again" in log.read_text(), timeout=15, what="the line saying it is back")
            envelope = asyncio.run(_request(server.url, f"svc.topic.{service}.echo:say"))
        text = log.read_text()
    finally:
        server.remove()
    assert envelope["statusCode"] == "ok"  # the subscriptions came back with the connection
    said = [line for line in text.splitlines() if f"NATS {server.url}" in line]
    assert len(said) == 2, said
    assert "connection lost (nats: unexpected EOF); reconnecting every 2 s" in said[0]
    assert "connected again" in said[1]
    assert "Errno" not in text  # the refused attempts are debug lines


async def _request(url: str, subject: str) -> dict[str, Any]:
    connection = await nats.connect(url)
    try:
        reply = await connection.request(subject, b'{"text": "back"}', timeout=5)
    finally:
        await connection.close()
    return dict(orjson.loads(reply.data))


def _listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
        return True
    return False


def test_an_unreachable_nats_server_set_only_by_svcgen_nats_is_one_line_naming_the_variable(tmp_path: Path) -> None:
    # Without --nats the check was skipped: startup failed later with the binding's traceback and uvicorn's bare
    # "NatsError"; and the URL's credentials must not reach the line.
    package = build_echo(tmp_path)
    command = [sys.executable, "-m", "svcgen", "serve", str(package), "--port", "0"]
    environ = {**os.environ, "SVCGEN_NATS": "nats://qa:s3cret@127.0.0.1:1"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=package.parent, env=environ)
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert line.startswith("SVCGEN_NATS nats://127.0.0.1:1: cannot connect to NATS at nats://127.0.0.1:1"), line
    assert "s3cret" not in line


def test_a_nats_server_unreachable_at_startup_fails_the_lifespan_with_one_line_naming_the_setting() -> None:
    # Served by another ASGI server (no `svcgen serve` check first): the startup failure was "NatsError" alone.
    from svcgen.runtime import HttpApp, Identity, Registry, Service, Wiring

    url = f"nats://127.0.0.1:{free_port()}"
    app = Wiring(environ={"SVCGEN_NATS": url}).attach(HttpApp(Service(Identity("s"), Registry())))

    async def start() -> Any:
        inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        outbox: asyncio.Queue[Any] = asyncio.Queue()
        await inbox.put({"type": "lifespan.startup"})
        await asyncio.wait_for(app({"type": "lifespan", "asgi": {"version": "3.0"}}, inbox.get, outbox.put), 30)
        return await outbox.get()

    answer = asyncio.run(start())
    assert answer["type"] == "lifespan.startup.failed"
    assert answer["message"].startswith(f"SVCGEN_NATS {url}: cannot connect to NATS at {url}: "), answer
    assert "\n" not in answer["message"]
