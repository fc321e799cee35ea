"""`svcgen serve` as shipped against the same generated app under plain uvicorn with its fast parts
(`--http httptools --loop uvloop --no-access-log`), and under uvicorn's pure-Python h11 parser and asyncio loop
for reference: server CPU per request (/proc/<pid>/stat of the server process) under load from a separate
process (wrk; a Python client process when wrk is missing), the configurations taking turns within each round.

    PYTHONPATH=. python -m bench.serve [--rounds 5] [--seconds 2]
"""

from __future__ import annotations

import argparse
import multiprocessing
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench.harness import Figure, Recorder, run
from bench.http import cpu_seconds, free_port

CONNECTIONS = 16
MANIFEST = """svcgen: 1
service: notes
types:
  Note:
    fields:
      noteId: string
      text: string
      stars: {type: integer, default: 0}
topics:
  - {id: "notes:save", request: Note, response: Note, routes: ["POST /notes/{noteId}"]}
"""
HANDLER = """from svcgen.runtime import Context, Result

from ..models import Note


async def handle(request: Note, context: Context) -> Result[Note]:
    return Result.ok(Note(note_id=request.note_id, text=request.text, stars=request.stars + 1))
"""
PATH = "/notes/n-17"
BODY = b'{"text": "remember the milk", "stars": 4}'
WRK_SCRIPT = f"""wrk.method = "POST"
wrk.body = '{BODY.decode()}'
wrk.headers["Content-Type"] = "application/json"
"""

SHIPPED = "server CPU per request, svcgen serve (as shipped)"
FAST = "server CPU per request, uvicorn --http httptools --loop uvloop --no-access-log"
H11 = "server CPU per request, uvicorn --http h11 --loop asyncio --no-access-log"


def build(scratch: Path, manifest: str = MANIFEST) -> Path:
    """The notes service built into scratch/out, its handler filled in; OUT/PACKAGE."""
    (scratch / "notes.yaml").write_text(manifest)
    subprocess.run([sys.executable, "-m", "svcgen", "build", str(scratch / "notes.yaml"), "-o", str(scratch / "out")],
                   check=True, capture_output=True)
    package = scratch / "out" / "notes_service"
    (package / "handlers" / "notes_save.py").write_text(HANDLER)
    return package


def commands(package: Path, port: int) -> dict[str, list[str]]:
    uvicorn = [sys.executable, "-m", "uvicorn", "notes_service.app:app", "--app-dir", str(package.parent),
               "--host", "127.0.0.1", "--port", str(port), "--no-access-log", "--log-level", "warning"]
    return {
        SHIPPED: [sys.executable, "-m", "svcgen", "serve", str(package), "--port", str(port)],
        FAST: [*uvicorn, "--http", "httptools", "--loop", "uvloop"],
        H11: [*uvicorn, "--http", "h11", "--loop", "asyncio"],
    }


def start(command: list[str], base: str) -> subprocess.Popen[bytes]:
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            answer = httpx.post(base + PATH, content=BODY, timeout=1)
            assert answer.status_code == 200, answer.text
            return server
        except httpx.TransportError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                raise SystemExit(f"{' '.join(command)} did not come up") from None
            time.sleep(0.1)


def load(url: str, seconds: float, script: Path) -> int:
    """Requests answered while loading `url` for `seconds` from another process."""
    if shutil.which("wrk"):
        done = subprocess.run(["wrk", "-t1", f"-c{CONNECTIONS}", f"-d{seconds:g}s", "-s", str(script), url],
                              capture_output=True, text=True, check=True)
        if "Non-2xx" in done.stdout:
            raise SystemExit(f"wrk saw failed requests:\n{done.stdout}")
        found = re.search(r"(\d+) requests in", done.stdout)
        assert found, done.stdout
        return int(found.group(1))
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return int(pool.apply(python_load, (url, seconds)))


def python_load(url: str, seconds: float) -> int:
    """The fallback load: CONNECTIONS keep-alive connections from one httpx process."""
    import asyncio

    async def go() -> int:
        answered = 0
        deadline = time.monotonic() + seconds
        limits = httpx.Limits(max_connections=CONNECTIONS, max_keepalive_connections=CONNECTIONS)
        async with httpx.AsyncClient(limits=limits, timeout=10) as client:

            async def worker() -> None:
                nonlocal answered
                while time.monotonic() < deadline:
                    answer = await client.post(url, content=BODY, headers={"content-type": "application/json"})
                    assert answer.status_code == 200, answer.text
                    answered += 1

            await asyncio.gather(*(worker() for _ in range(CONNECTIONS)))
        return answered

    return asyncio.run(go())


def measure(record: Recorder, args: argparse.Namespace) -> None:
    per_request: dict[str, list[float]] = {SHIPPED: [], FAST: [], H11: []}
    with tempfile.TemporaryDirectory() as scratch_dir:
        scratch = Path(scratch_dir)
        package = build(scratch)
        script = scratch / "post.lua"
        script.write_text(WRK_SCRIPT)
        ports = {name: free_port() for name in per_request}
        servers: dict[str, subprocess.Popen[bytes]] = {}
        try:
            for name, port in ports.items():
                servers[name] = start(commands(package, port)[name], f"http://127.0.0.1:{port}")
            load_tool = "wrk" if shutil.which("wrk") else "a Python client (wrk is missing)"
            print(f"{args.rounds} rounds of {args.seconds:g} s per server, {CONNECTIONS} connections, {load_tool}")
            names = list(per_request)
            for round_number in range(args.rounds):
                # Rotate who goes first, so a slow moment of the machine does not always hit the same server.
                shift = round_number % len(names)
                for name in names[shift:] + names[:shift]:
                    pid = servers[name].pid
                    before = cpu_seconds(pid)
                    answered = load(f"http://127.0.0.1:{ports[name]}{PATH}", args.seconds, script)
                    per_request[name].append((cpu_seconds(pid) - before) / answered * 1e6)
        finally:
            for server in servers.values():
                server.terminate()
                server.wait(timeout=20)
    ratios = [shipped / fast for shipped, fast in zip(per_request[SHIPPED], per_request[FAST], strict=True)]
    h11_ratios = [h11 / fast for h11, fast in zip(per_request[H11], per_request[FAST], strict=True)]
    record(FAST, statistics.median(per_request[FAST]), "µs")
    record(SHIPPED, statistics.median(per_request[SHIPPED]), "µs", baseline=FAST)
    record("  ratio svcgen serve / uvicorn httptools+uvloop", statistics.median(ratios), "x", target=1.1,
           note="(median of the per-round ratios)")
    record(H11, statistics.median(per_request[H11]), "µs", baseline=FAST)
    record("  ratio h11+asyncio / httptools+uvloop", statistics.median(h11_ratios), "x",
           note="(what serving without the fast parts costs)")


def main(argv: list[str] | None = None) -> list[Figure]:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5, help="rounds; each loads every server once")
    parser.add_argument("--seconds", type=float, default=2.0, help="seconds of load per server and round")
    return run("bench/serve.py", measure, argv, parser)


if __name__ == "__main__":
    main()
