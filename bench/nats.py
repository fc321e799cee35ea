"""Request/reply over NATS against HTTP for the same generated typed handler, served by one `svcgen serve
--nats` process: the round trip a client sees, one request at a time, with the clients generated code uses
(keep-alive HTTP with httpx's client, as `HttpSender` sends https and through a proxy; a NATS request with nats-py
on the per-topic subject, as `NatsSender`), plus HTTP from a raw keep-alive socket (the transport without client
library cost, close to what `HttpSender` sends plain HTTP over by default); and the
server's CPU per request (/proc/<pid>/stat). The transports take turns within each round. Target: the NATS round
trip is no longer than the HTTP one through httpx.

    PYTHONPATH=. python -m bench.nats [--rounds 5] [--calls 300]

NATS at SVCGEN_BENCH_NATS (a nats:// URL), else 127.0.0.1:4222 when it answers, else a `nats-server` of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import nats

from bench import serve
from bench.harness import Recorder, run
from bench.http import cpu_seconds, free_port
from bench.serve import BODY, MANIFEST, PATH

HTTP_TRIP = "HTTP round trip (httpx, keep-alive), p50"
RAW_TRIP = "HTTP round trip (raw keep-alive socket), p50"
NATS_TRIP = "NATS round trip (nats-py request), p50"
RATIO = "ratio NATS / HTTP round trip (httpx)"
RAW_RATIO = "ratio NATS / HTTP round trip (raw socket)"
HTTP_CPU = "server CPU per request, HTTP"
NATS_CPU = "server CPU per request, NATS"
NATS_BODY = b'{"noteId": "n-17", "text": "remember the milk", "stars": 4}'


def build(scratch: Path, service: str) -> Path:
    """The notes service of bench/serve.py under a name of this run (the NATS server may be shared)."""
    return serve.build(scratch, MANIFEST.replace("service: notes", f"service: {service}\npackage: notes_service"))


def answers(url: str) -> bool:
    host, _, port = url.removeprefix("nats://").partition(":")
    try:
        with socket.create_connection((host, int(port or 4222)), timeout=2) as sock:
            return sock.recv(4).startswith(b"INFO")
    except OSError:
        return False


@contextmanager
def nats_server() -> Iterator[str]:
    url = os.environ.get("SVCGEN_BENCH_NATS") or "nats://127.0.0.1:4222"
    if answers(url):
        yield url
        return
    binary = shutil.which("nats-server") or "/usr/sbin/nats-server"
    if not Path(binary).exists():
        raise SystemExit(f"no NATS server at {url} and no nats-server binary to start one")
    port = free_port()
    server = subprocess.Popen([binary, "-a", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        url = f"nats://127.0.0.1:{port}"
        deadline = time.monotonic() + 10
        while not answers(url):
            if time.monotonic() > deadline:
                raise SystemExit("nats-server did not start")
            time.sleep(0.05)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=10)


async def timed(call: Callable[[], Awaitable[None]], calls: int) -> list[float]:
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - started) * 1e6)
    return samples


async def rounds(base: str, url: str, subject: str, pid: int, args: argparse.Namespace) -> dict[str, list[float]]:
    figures: dict[str, list[float]] = {
        name: [] for name in (HTTP_TRIP, RAW_TRIP, NATS_TRIP, RATIO, RAW_RATIO, HTTP_CPU, NATS_CPU)
    }
    headers = {"content-type": "application/json"}
    connection = await nats.connect(url)
    port = int(base.rsplit(":", 1)[1])
    raw: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    raw_request = (f"POST {PATH} HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json\r\n"
                   f"content-length: {len(BODY)}\r\n\r\n").encode() + BODY
    async with httpx.AsyncClient(base_url=base, timeout=10) as client:

        async def over_raw_http() -> None:
            if not raw:  # a connection per turn: the server closes one idle for 5 s (docs/wire.md, Timeouts)
                raw.append(await asyncio.open_connection("127.0.0.1", port))
            reader, writer = raw[0]
            writer.write(raw_request)
            head = await reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200"), head
            length = next(line for line in head.lower().split(b"\r\n") if line.startswith(b"content-length:"))
            await reader.readexactly(int(length.split(b":")[1]))

        async def over_http() -> None:
            answer = await client.post(PATH, content=BODY, headers=headers)
            assert answer.status_code == 200, answer.text

        async def over_nats() -> None:
            reply = await connection.request(subject, NATS_BODY, timeout=10)
            assert reply.data.startswith(b'{"statusCode":"ok"'), reply.data

        trips = {HTTP_TRIP: (over_http, HTTP_CPU), RAW_TRIP: (over_raw_http, None), NATS_TRIP: (over_nats, NATS_CPU)}
        for call, _ in trips.values():  # warm every path up
            await timed(call, 50)
        order = list(trips)
        for number in range(args.rounds):
            p50: dict[str, float] = {}
            shift = number % len(order)  # who goes first rotates, so a slow moment hits each alike
            for name in order[shift:] + order[:shift]:
                call, cpu_name = trips[name]
                before = cpu_seconds(pid)
                if raw:
                    raw.pop()[1].close()
                if name == RAW_TRIP:
                    await over_raw_http()  # opens the turn's connection, untimed
                samples = await timed(call, args.calls)
                if cpu_name is not None:
                    figures[cpu_name].append((cpu_seconds(pid) - before) / args.calls * 1e6)
                p50[name] = statistics.median(samples)
                figures[name].append(p50[name])
            figures[RATIO].append(p50[NATS_TRIP] / p50[HTTP_TRIP])
            figures[RAW_RATIO].append(p50[NATS_TRIP] / p50[RAW_TRIP])
    if raw:
        raw.pop()[1].close()
    await connection.close()
    return figures


def measure(record: Recorder, args: argparse.Namespace) -> None:
    service = f"notes{os.getpid()}"
    with tempfile.TemporaryDirectory() as scratch, nats_server() as url:
        package = build(Path(scratch), service)
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        server = subprocess.Popen(
            [sys.executable, "-m", "svcgen", "serve", str(package), "--port", str(port), "--nats", url],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    httpx.get(base + "/svc/spec", timeout=1)
                    break
                except httpx.TransportError:
                    if server.poll() is not None or time.monotonic() > deadline:
                        raise SystemExit("svcgen serve --nats did not come up") from None
                    time.sleep(0.1)
            print(f"{args.rounds} rounds of {args.calls} calls per transport, one at a time, NATS at {url}")
            subject = f"svc.topic.{service}.notes:save"
            figures = asyncio.run(rounds(base, url, subject, server.pid, args))
        finally:
            server.terminate()
            server.wait(timeout=20)
    median = {name: statistics.median(values) for name, values in figures.items()}
    record(HTTP_TRIP, median[HTTP_TRIP], "µs")
    record(RAW_TRIP, median[RAW_TRIP], "µs")
    record(NATS_TRIP, median[NATS_TRIP], "µs", baseline=HTTP_TRIP)
    record(RATIO, median[RATIO], "x", target=1.0, note="(median of the per-round ratios)")
    record(RAW_RATIO, median[RAW_RATIO], "x", note="(for information: HTTP without a client library)")
    record(HTTP_CPU, median[HTTP_CPU], "µs")
    record(NATS_CPU, median[NATS_CPU], "µs", baseline=HTTP_CPU)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=500, help="round trips per transport per round")
    run("NATS binding against HTTP", measure, parser=parser)


if __name__ == "__main__":
    main()
