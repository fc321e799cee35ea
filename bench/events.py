"""Events over JetStream: publish → handle throughput and latency, svcgen against FastStream on the same JetStream
server in the same run, with the same payload and the same ack policy.

Each system publishes N events (at most `--window` publishes awaiting their JetStream acknowledgement at once) to
a stream of its own and handles them with a durable pull consumer that decodes the typed payload (svcgen's codec,
FastStream's pydantic model) and acknowledges after the handler returned, up to 64 handlers at once. Throughput is
N over the time from the first publish to the last handling; latency is handling minus publish start, per event.
The systems take turns within every round (who goes first alternates); figures are medians over the rounds.
Target: svcgen's throughput at least FastStream's (the ratio FastStream / svcgen time ≤ 1).

    PYTHONPATH=. python -m bench.events [--rounds 3] [--events 2000] [--window 64]

NATS at SVCGEN_BENCH_NATS (a nats:// URL), else 127.0.0.1:4222 when it answers, else a `nats-server -js` of its
own.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass

import nats
from pydantic import BaseModel

from bench.harness import Recorder, run
from bench.http import free_port
from bench.nats import answers
from svcgen.runtime import (
    Context,
    Delivery,
    EventBus,
    EventSpec,
    Identity,
    JetStreamBroker,
    Registry,
    Result,
    Service,
    Subscriptions,
)

IN_FLIGHT = 64
SVC_RATE = "svcgen events handled per second"
FS_RATE = "FastStream events handled per second"
RATIO = "ratio svcgen / FastStream time for the same events"
SVC_P50, SVC_P99 = "svcgen publish→handle latency, p50", "svcgen publish→handle latency, p99"
FS_P50, FS_P99 = "FastStream publish→handle latency, p50", "FastStream publish→handle latency, p99"


@dataclass
class Placed:
    order_id: str
    customer_id: str
    total_minor: int
    lines: list[str]


class PlacedModel(BaseModel):
    orderId: str  # the wire names, as svcgen's codec writes them
    customerId: str
    totalMinor: int
    lines: list[str]


def event(number: int) -> Placed:
    return Placed(f"o-{number}", f"c-{number % 97}", 1000 + number, ["sku-1", "sku-2", "sku-3"])


@contextlib.contextmanager
def jetstream_server() -> Iterator[str]:
    url = os.environ.get("SVCGEN_BENCH_NATS") or "nats://127.0.0.1:4222"
    if answers(url):
        yield url
        return
    binary = shutil.which("nats-server") or "/usr/sbin/nats-server"
    port = free_port()
    with tempfile.TemporaryDirectory() as store:
        server = subprocess.Popen([binary, "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", store],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
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


async def drive(count: int, window: int, publish: Callable[[int], Awaitable[None]], handled: dict[int, float],
                done: asyncio.Event) -> tuple[float, list[float]]:  # fmt: skip
    """(seconds from the first publish to the last handling, latencies in µs)."""
    started: dict[int, float] = {}
    slots = asyncio.Semaphore(window)

    async def one(number: int) -> None:
        async with slots:
            started[number] = time.perf_counter()
            await publish(number)

    begin = time.perf_counter()
    await asyncio.gather(*(one(number) for number in range(count)))
    await asyncio.wait_for(done.wait(), 120)
    elapsed = max(handled.values()) - begin
    return elapsed, [(handled[number] - started[number]) * 1e6 for number in range(count)]


async def svcgen_round(url: str, tag: str, count: int, window: int) -> tuple[float, list[float]]:
    handled: dict[int, float] = {}
    done = asyncio.Event()

    async def handle(placed: Placed, context: Context) -> Result[None]:
        handled[int(placed.order_id[2:])] = time.perf_counter()
        if len(handled) == count:
            done.set()
        return Result.ok()

    publisher, subscriber = f"bench{tag}", f"benchsub{tag}"
    pub_client, sub_client = await nats.connect(url), await nats.connect(url)
    sender = EventBus(publisher, [EventSpec("orders:placed", Placed, key="orderId")], Subscriptions(),
                      JetStreamBroker(pub_client))  # fmt: skip
    await sender.start(None)  # type: ignore[arg-type]  # a publisher alone needs no service
    subscriptions = Subscriptions()
    subscriptions.add("orders:placed", handle, publisher=publisher, payload=Placed, delivery=Delivery())
    bus = EventBus(subscriber, [], subscriptions, JetStreamBroker(sub_client, max_in_flight=IN_FLIGHT))
    await bus.start(Service(Identity(subscriber), Registry()))

    async def publish(number: int) -> None:
        result = await sender.publish("orders:placed", event(number))
        assert result.status == "accepted", result

    try:
        return await drive(count, window, publish, handled, done)
    finally:
        await bus.stop()
        with contextlib.suppress(Exception):
            await pub_client.jetstream().delete_stream(f"SVC_EVENTS_{publisher.upper()}")
        await pub_client.close()
        await sub_client.close()


async def faststream_round(url: str, tag: str, count: int, window: int) -> tuple[float, list[float]]:
    from faststream.nats import JStream, NatsBroker, PullSub

    handled: dict[int, float] = {}
    done = asyncio.Event()
    stream = JStream(f"FSBENCH{tag}", subjects=[f"fsbench.{tag}.>"])
    subject = f"fsbench.{tag}.orders_placed"
    broker = NatsBroker(url, logger=None)  # no log line per message: svcgen logs none either

    @broker.subscriber(subject, stream=stream, durable=f"fsbenchsub{tag}",
                       pull_sub=PullSub(batch_size=IN_FLIGHT))  # fmt: skip
    async def handle(placed: PlacedModel) -> None:
        handled[int(placed.orderId[2:])] = time.perf_counter()
        if len(handled) == count:
            done.set()

    await broker.start()

    async def publish(number: int) -> None:
        placed = event(number)
        model = PlacedModel(orderId=placed.order_id, customerId=placed.customer_id, totalMinor=placed.total_minor,
                            lines=placed.lines)  # fmt: skip
        await broker.publish(model, subject, stream=stream.name,
                             headers={"Nats-Msg-Id": f"orders:placed::{placed.order_id}"})  # as svcgen keys it

    try:
        return await drive(count, window, publish, handled, done)
    finally:
        await broker.stop()
        client = await nats.connect(url)
        with contextlib.suppress(Exception):
            await client.jetstream().delete_stream(stream.name)
        await client.close()


def measure(record: Recorder, args: argparse.Namespace) -> None:
    figures: dict[str, list[float]] = {name: [] for name in (SVC_RATE, FS_RATE, RATIO, SVC_P50, SVC_P99, FS_P50,
                                                             FS_P99)}  # fmt: skip
    with jetstream_server() as url:
        print(f"{args.rounds} rounds of {args.events} events per system, {args.window} publishes in flight, "
              f"JetStream at {url}")  # fmt: skip
        for number in range(args.rounds + 1):  # round 0 warms both up and is not counted
            tag = f"{os.getpid()}r{number}"
            systems = [("svcgen", svcgen_round), ("faststream", faststream_round)]
            if number % 2:
                systems.reverse()
            results = {name: asyncio.run(go(url, tag, args.events, args.window)) for name, go in systems}
            if number == 0:
                continue
            (svc_time, svc_lat), (fs_time, fs_lat) = results["svcgen"], results["faststream"]
            figures[SVC_RATE].append(args.events / svc_time)
            figures[FS_RATE].append(args.events / fs_time)
            figures[RATIO].append(svc_time / fs_time)
            for name, samples in ((SVC_P50, svc_lat), (FS_P50, fs_lat)):
                figures[name].append(statistics.median(samples))
            for name, samples in ((SVC_P99, svc_lat), (FS_P99, fs_lat)):
                figures[name].append(statistics.quantiles(samples, n=100)[98])
    median = {name: statistics.median(values) for name, values in figures.items()}
    record(FS_RATE, median[FS_RATE], "/s")
    record(SVC_RATE, median[SVC_RATE], "/s")
    record(RATIO, median[RATIO], "x", target=1.0, note="(median of the per-round ratios; ≤ 1: at least as fast)")
    record(FS_P50, median[FS_P50] / 1000, "ms")
    record(SVC_P50, median[SVC_P50] / 1000, "ms", baseline=FS_P50)
    record(FS_P99, median[FS_P99] / 1000, "ms")
    record(SVC_P99, median[SVC_P99] / 1000, "ms", baseline=FS_P99)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--window", type=int, default=64, help="publishes awaiting their acknowledgement at once")
    run("Events over JetStream against FastStream", measure, parser=parser)


if __name__ == "__main__":
    main()
