"""Security on the request path: the same GET route through the ASGI app, public and behind an RS256 JWT scheme
(the key already loaded: no JWKS fetch on the path), measured in the same run, the variants taking turns.

- `public`: the route without security (the baseline).
- `RS256 verified every request`: the token's signature checked on each request (`remember_tokens=False`).
- `RS256 repeated token`: the default, where a verified token is remembered until it expires, so a client that
  calls again with the same token costs a lookup.

The figures are the added µs per request over the baseline (median of the rounds); the target is ≤ 15 µs.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import statistics
import tempfile
import time
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from bench.harness import REPEATS, Recorder, run
from svcgen.runtime import Context, Identity, Registry, Result, Service
from svcgen.runtime._http.app import HttpApp
from svcgen.runtime._http.routing import Route
from svcgen.runtime._security import Guard, JwtScheme, Security

CALLS = 2000
TARGET_US = 15.0


@dataclasses.dataclass
class Query:
    patient_id: str


@dataclasses.dataclass
class Patient:
    patient_id: str
    name: str


async def handle(request: Query, context: Context) -> Result[Patient]:
    return Result.ok(Patient(request.patient_id, "Ada"))


def app(guard: Guard | None) -> HttpApp:
    registry = Registry()
    registry.add("patients:get", handle, request=Query, response=Patient)
    service = Service(Identity("clinic"), registry, security=guard)
    return HttpApp(service, [Route.parse("GET /p/{patientId}", "patients:get")])


async def per_request_us(served: HttpApp, headers: list[tuple[bytes, bytes]], calls: int) -> float:
    scope = {"type": "http", "method": "GET", "path": "/p/p-1", "raw_path": b"/p/p-1", "query_string": b"",
             "headers": headers}
    message = {"type": "http.request", "body": b"", "more_body": False}

    async def receive() -> dict[str, Any]:
        return message

    async def send(sent: MutableMapping[str, Any]) -> None:
        return None

    started = time.perf_counter()
    for _ in range(calls):
        await served(dict(scope), receive, send)
    return (time.perf_counter() - started) / calls * 1e6


def measure(record: Recorder, args: argparse.Namespace) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "staff.pem"
        path.write_bytes(pem)
        scheme = JwtScheme("staff", "https://id.example/", ["clinic"], ["RS256"], key=str(path))
        security = Security.declare([scheme], default=["staff"])
        every = Guard(security, remember_tokens=False).load()
        remembered = Guard(security).load()
    token = jwt.encode({"iss": "https://id.example/", "aud": "clinic", "sub": "dr", "exp": time.time() + 3600,
                        "scope": "patients:read"}, key, algorithm="RS256")
    bearer = [(b"authorization", f"Bearer {token}".encode())]
    variants = {"public": (app(None), []), "every": (app(every), bearer), "remembered": (app(remembered), bearer)}

    async def rounds() -> dict[str, list[float]]:
        samples: dict[str, list[float]] = {name: [] for name in variants}
        for served, headers in variants.values():  # warm up: codecs compiled, the token remembered once
            await per_request_us(served, headers, 50)
        for _ in range(max(REPEATS, 5)):
            for name, (served, headers) in variants.items():
                samples[name].append(await per_request_us(served, headers, args.calls))
        return samples

    samples = asyncio.run(rounds())
    public = statistics.median(samples["public"])
    record("public route", public, "µs/request")
    every_us = statistics.median(samples["every"])
    record("RS256 verified every request", every_us, "µs/request", baseline="public route")
    remembered_us = statistics.median(samples["remembered"])
    record("RS256 repeated token (default)", remembered_us, "µs/request", baseline="public route")
    added_every = statistics.median(e - p for e, p in zip(samples["every"], samples["public"], strict=True))
    added_remembered = statistics.median(r - p for r, p in zip(samples["remembered"], samples["public"], strict=True))
    record("added: RS256 verified every request", added_every, "µs/request", TARGET_US,
           note="PyJWT + cryptography signature check")
    record("added: RS256 repeated token (default)", added_remembered, "µs/request", TARGET_US,
           note="verified-token cache lookup")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=CALLS, help="requests per round and variant")
    run("Security on the request path", measure, argv, parser)


if __name__ == "__main__":
    main()
