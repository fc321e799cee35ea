"""What a served request costs in instructions, not µs: each app under uvicorn (1 worker, httptools + uvloop) run
by valgrind's callgrind with its cache simulation, one keep-alive connection sending bench/http.py's `POST
/orders/{orderId}` one request at a time; the counters are zeroed after a warm-up and dumped after `--requests`
more, so start-up cancels out. Userspace only (the kernel's share is not counted), and independent of the
machine's load: a figure to compare code versions by when timings are too noisy to.

A target is `name=module:app`, or `name=DIR@module:app` to serve the app from another checkout (a git worktree),
ahead of the installed tree. Run by hand (valgrind slows the server some 50 times; about a minute an app):

    PYTHONPATH=. python -m bench.instructions [--requests 1000] floor=bench.layers:floor typed=bench.layers:typed
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench.harness import Recorder, run
from bench.http import BODY, PATH, ROOT, free_port, stop_server

EVENTS = {
    "Ir": "instructions",
    "I1mr": "L1 instruction-cache misses",
    "D1mr": "L1 data-cache read misses",
    "D1mw": "L1 data-cache write misses",
}
WARM_UP = 300


def served_counts(target: str, requests: int, scratch: Path) -> dict[str, float]:
    """Callgrind's events per request for one `[DIR@]module:app` served under uvicorn."""
    directory, _, app = target.rpartition("@")
    directory = directory or str(ROOT)
    port = free_port()
    out = scratch / f"callgrind-{port}.out"
    server = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--cache-sim=yes", f"--callgrind-out-file={out}",
         sys.executable, "-m", "uvicorn", app, "--app-dir", directory, "--host", "127.0.0.1", "--port", str(port),
         "--http", "httptools", "--loop", "uvloop", "--log-level", "warning", "--no-access-log"],
        cwd=directory, env={**os.environ, "PYTHONPATH": directory},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}{PATH}"
        headers = {"content-type": "application/json"}
        with httpx.Client(timeout=30) as client:
            deadline = time.monotonic() + 180
            while True:
                try:
                    client.post(url, content=BODY, headers=headers)
                    break
                except httpx.TransportError:
                    if server.poll() is not None or time.monotonic() > deadline:
                        raise SystemExit(f"{target} did not come up under valgrind") from None
                    time.sleep(0.5)
            for _ in range(WARM_UP):
                client.post(url, content=BODY, headers=headers)
            subprocess.run(["callgrind_control", "--zero", str(server.pid)], check=True, capture_output=True)
            for _ in range(requests):
                answer = client.post(url, content=BODY, headers=headers)
                if answer.status_code != 200:
                    raise SystemExit(f"{target} answered {answer.status_code} {answer.text}")
            subprocess.run(["callgrind_control", "--dump", str(server.pid)], check=True, capture_output=True)
    finally:
        stop_server(server)
    dumps = sorted(scratch.glob(f"{out.name}.*"), key=lambda path: path.stat().st_mtime)
    text = dumps[-1].read_text()
    names = _line(text, "events").split()
    totals = [int(value) for value in _line(text, "summary").split()]
    return {name: total / requests for name, total in zip(names, totals, strict=True)}


def _line(text: str, key: str) -> str:
    found = re.search(rf"^{key}: (.*)$", text, re.MULTILINE)
    if found is None:
        raise SystemExit(f"callgrind's dump has no {key!r} line")
    return found.group(1)


def measure(record: Recorder, args: argparse.Namespace) -> None:
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        raise SystemExit("valgrind is missing: install it as root (apt-get install -y valgrind)")
    targets = dict(spec.split("=", 1) for spec in args.targets)
    first = next(iter(targets))
    with tempfile.TemporaryDirectory() as scratch:
        counts = {name: served_counts(target, args.requests, Path(scratch)) for name, target in targets.items()}
    for name, per_request in counts.items():
        for event, meaning in EVENTS.items():
            record(f"{meaning} per request, {name}", per_request[event], "")
        if name != first:
            record(f"  instructions, {name} / {first}", per_request["Ir"] / counts[first]["Ir"], "x")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=1000, help="requests counted per app, after the warm-up")
    parser.add_argument("targets", nargs="+", help="name=module:app or name=DIR@module:app; the first is the baseline")
    run("bench/instructions.py", measure, argv, parser)


if __name__ == "__main__":
    main()
