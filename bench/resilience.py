"""Resilience costs: the idempotency check per request, and a client call with retries configured but unused.

Both are CPU time of the calling thread (`time.thread_time`), not wall time, so other work on a shared machine
does not count.

- Idempotency: `Service.invoke` of a typed non-idempotent topic with a fresh `Idempotency-Key` per call (claim,
  run, keep the answer in the default memory store, which is at its 10 000-key cap after the first rounds and
  evicting) against the same calls without a key, rounds alternating in one process; the added cost is the median
  of the per-round differences. The replay of a kept answer is timed too.
- Retries: one `HttpSender` call at a time to a constant-answer ASGI app under uvicorn in another process, plain
  against the same sender wrapped in `RetryingSender` (default policy, never triggered: every answer is 200), for
  an idempotent topic; the variants take turns call by call, the overhead is the median of the per-round ratios.
  The non-idempotent case (which also mints an Idempotency-Key per call) is shown beside it, and the wrapper's own
  cost over a sender that answers at once.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import httpx

from bench.harness import REPEATS, Figure, Recorder, awaited_us, run
from svcgen.runtime import Context, HttpSender, Identity, Registry, Result, RetryingSender, Service
from svcgen.runtime._invocation import Invocation
from svcgen.runtime._result import Outcome

ROUNDS = max(REPEATS, 7)


async def cpu_us(make: Callable[[], Awaitable[Any]], calls: int) -> float:
    """Mean CPU µs of this thread per call (`time.thread_time`): in-process costs, not the waits for a core that
    a machine shared with other work adds to wall time."""
    started = time.thread_time()
    for _ in range(calls):
        await make()
    return (time.thread_time() - started) / calls * 1e6


@dataclasses.dataclass
class Order:
    order_id: str
    customer_id: str
    quantity: int


async def place(request: Order, context: Context) -> Result[Order]:
    return Result.created(request)


BODY = b'{"orderId": "o-1", "customerId": "c-1", "quantity": 3}'


def idempotency(record: Recorder) -> None:
    registry = Registry()
    registry.add("orders:place", place, success=["created"])
    service = Service(Identity("orders"), registry)
    calls = 5000

    async def rounds() -> tuple[list[float], list[float], float]:
        plain_us, keyed_us = [], []
        for _ in range(ROUNDS):
            keys = iter([uuid.uuid4().hex for _ in range(calls)])

            def keyed(keys: Iterator[str] = keys) -> Awaitable[Outcome]:
                return service.invoke(Invocation("orders:place", {"idempotency-key": next(keys)}, BODY))

            plain_us.append(await cpu_us(lambda: service.invoke(Invocation("orders:place", body=BODY)), calls))
            keyed_us.append(await cpu_us(keyed, calls))
        replay = {"idempotency-key": "replayed"}
        await service.invoke(Invocation("orders:place", replay, BODY))
        replay_us = statistics.median(
            [await cpu_us(lambda: service.invoke(Invocation("orders:place", replay, BODY)), calls) for _ in "abc"]
        )
        return plain_us, keyed_us, replay_us

    plain_us, keyed_us, replay_us = asyncio.run(rounds())
    plain = statistics.median(plain_us)
    record(PLAIN_INVOKE, plain, "µs")
    keyed = statistics.median(keyed_us)
    record("invoke with a fresh Idempotency-Key (memory store)", keyed, "µs", baseline=PLAIN_INVOKE)
    added = statistics.median([keyed - base for keyed, base in zip(keyed_us, plain_us, strict=True)])
    record("  added by the idempotency check", added, "µs", target=10)
    record("invoke replaying a kept answer", replay_us, "µs", baseline=PLAIN_INVOKE)


SERVER = """
import sys, uvicorn
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": b'{"ok":true}'})
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
"""


def retries(record: Recorder) -> None:
    from tests.support.server import free_port  # one free-port helper for the repository

    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(port)])
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the bench server did not start") from None
                time.sleep(0.05)
        asyncio.run(_retries(record, f"http://127.0.0.1:{port}/svc/invoke"))
    finally:
        server.terminate()
        server.wait(10)


async def _retries(record: Recorder, url: str) -> None:
    calls = 1000
    async with HttpSender(url) as sender:
        retrying = RetryingSender(sender, idempotent={"orders:get"})
        payload = {"orderId": "o-1"}

        def call(via: Any, topic: str) -> Callable[[], Awaitable[Any]]:
            return lambda: via.send(topic, payload)

        await awaited_us(call(sender, "orders:get"), 200)  # warm the connection pool
        plain_us, unused_us, keyed_us = [], [], []
        variants = (call(sender, "orders:get"), call(retrying, "orders:get"), call(retrying, "orders:place"))
        for _ in range(ROUNDS):
            # Call by call in turn, so drift in the machine's load falls on the three alike.
            spent = [0.0, 0.0, 0.0]
            for _ in range(calls):
                for index, make in enumerate(variants):
                    started = time.thread_time()
                    await make()
                    spent[index] += time.thread_time() - started
            plain, unused, keyed = (total / calls * 1e6 for total in spent)
            plain_us.append(plain)
            unused_us.append(unused)
            keyed_us.append(keyed)
        assert retrying.retried == 0, "the bench server answered something a retry follows"
    record(PLAIN_CALL, statistics.median(plain_us), "µs")
    record("same call through RetryingSender, retries unused", statistics.median(unused_us), "µs", baseline=PLAIN_CALL)
    ratios = [unused / plain for unused, plain in zip(unused_us, plain_us, strict=True)]
    record("  overhead of configured retries (median of round ratios)", (statistics.median(ratios) - 1) * 100, "%",
           target=3)  # fmt: skip
    keyed = [keyed / plain for keyed, plain in zip(keyed_us, plain_us, strict=True)]
    record("  a non-idempotent topic (plus a fresh Idempotency-Key)", (statistics.median(keyed) - 1) * 100, "%")


class Answering:
    """A sender that answers at once: what is left of a call through `RetryingSender` is the wrapper's own cost."""

    ok: Result[Any] = Result.ok({})

    async def send(self, topic: str, payload: Any = None, headers: Any = None) -> Result[Any]:
        return self.ok


def wrapper_cost(record: Recorder) -> None:
    inner = Answering()
    retrying = RetryingSender(inner, idempotent={"orders:get"})
    calls = 20_000

    async def rounds() -> tuple[list[float], list[float]]:
        plain, wrapped = [], []
        for _ in range(ROUNDS):
            plain.append(await cpu_us(lambda: inner.send("orders:get", b"{}"), calls))
            wrapped.append(await cpu_us(lambda: retrying.send("orders:get", b"{}"), calls))
        return plain, wrapped

    plain, wrapped = asyncio.run(rounds())
    added = statistics.median([w - p for w, p in zip(wrapped, plain, strict=True)])
    record("RetryingSender's own cost per call, retries unused", added, "µs")


PLAIN_INVOKE = "invoke without a key"
PLAIN_CALL = "HttpSender call to uvicorn, one at a time (client CPU)"


def measure(record: Recorder, args: argparse.Namespace) -> None:
    idempotency(record)
    print()
    retries(record)
    wrapper_cost(record)


def main(argv: list[str] | None = None) -> list[Figure]:
    return run("bench/resilience.py", measure, argv)


if __name__ == "__main__":
    main()
