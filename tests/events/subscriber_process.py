"""A subscriber process for the outage tests: `python -m tests.events.subscriber_process URL PUBLISHER SUBSCRIBER LOG`.

Each delivery appends `<orderId> <attempt>` to LOG; the first attempt of an order whose id starts with `hang`
never returns (the test kills the process there)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from svcgen.runtime import Context, Delivery, Result
from svcgen.runtime._nats.connections import open_connection
from tests.events.harness import Placed, subscriber


async def main(url: str, publisher: str, name: str, log: Path) -> None:
    async def handle(event: Placed, context: Context) -> Result[None]:
        assert context.delivery is not None
        with log.open("a") as out:
            out.write(f"{event.order_id} {context.delivery.attempt}\n")
        if event.order_id.startswith("hang") and context.delivery.attempt == 1:
            await asyncio.Event().wait()
        return Result.ok()

    client = await open_connection(url)
    bus, service = subscriber(client, name, publisher, handle, Delivery(max_deliver=5, backoff=(0.1,), ack_wait=2.0))
    await bus.start(service)
    with log.open("a") as out:
        out.write("started\n")
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4])))
