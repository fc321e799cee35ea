"""Retries, idempotency keys and deadlines end to end: generated services on real uvicorn servers (127.0.0.1, free
ports), a real PostgreSQL store, a proxy that drops a connection. No timing is asserted: each test waits for
events with a generous deadline."""

from __future__ import annotations

import asyncio
import importlib
import os
import threading
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from svcgen.runtime import (
    Context,
    HttpApp,
    HttpSender,
    Identity,
    PostgresIdempotencyStore,
    Registry,
    Result,
    Route,
    Service,
    Wiring,
)
from tests.support.codegen import REPO, build_example, imported
from tests.support.server import free_port, running

WAIT = 20.0
"""Seconds any awaited event may take: generous, never a measure."""
QUIET = {"SVCGEN_COLLECTOR": "http://127.0.0.1:9", "SVCGEN_TARGET_LEDGER_RECORD": "http://127.0.0.1:9/svc/invoke"}
"""Feeds and the ledger go nowhere: these tests are about the payments call."""

CAPTURE_HANDLER = '''
from __future__ import annotations

import threading
from datetime import UTC, datetime

from svcgen.runtime import Context, Result

from ..models import Capture, CapturePayment

RUNS: list[dict[str, str]] = []
"""Headers of every run of this handler, whichever replica ran it."""
FAIL_FIRST = [0]
"""How many runs answer 503 + Retry-After before one succeeds."""
GATE: list[threading.Event] = []
"""When set, a run waits for the event before it answers."""
ENTERED = threading.Event()


async def handle(request: CapturePayment, context: Context) -> Result[Capture]:
    RUNS.append(dict(context.headers))
    ENTERED.set()
    if GATE:
        import asyncio

        await asyncio.to_thread(GATE[0].wait, 20)
    if FAIL_FIRST[0] > 0:
        FAIL_FIRST[0] -= 1
        return Result.service_unavailable("warming up", headers={"retry-after": "1"})
    return Result.created(
        Capture(capture_id=f"cap-{len(RUNS)}", order_id=request.order_id, amount=request.amount,
                captured_at=datetime(2026, 1, 2, tzinfo=UTC))
    )
'''

PLACE_HANDLER = '''
from __future__ import annotations

from svcgen.runtime import Context, Result

from ..clients import Clients
from ..models import Order, PlaceOrder, payments_CapturePayment, payments_Money


async def handle(request: PlaceOrder, context: Context) -> Result[Order]:
    capture = await context.scope.get(Clients).payments_capture(
        payments_CapturePayment(order_id="o-1", amount=payments_Money(amount_minor=100), idempotency_key="pay-1")
    )
    if not capture.is_successful:
        return Result.conflict(f"payment failed: {capture.status}: {capture.detail}")
    return Result.created(
        Order(order_id="o-1", customer_id=request.customer_id, items=request.items, total_items=1,
              placed_at=request.placed_at)
    )
'''

ORDER = {"customerId": "c-1", "items": [{"sku": "s-1"}], "placedAt": "2026-01-02T03:04:05Z"}
CAPTURE = {"orderId": "o-1", "amount": {"amountMinor": 100}, "idempotencyKey": "pay-1"}


@dataclass
class Built:
    orders: ModuleType
    payments: ModuleType

    def module(self, name: str) -> Any:
        return importlib.import_module(name)

    def capture_module(self) -> Any:
        return self.module("payments_service.handlers.payments_capture")


@pytest.fixture
def built(tmp_path: Path) -> Iterator[Built]:
    os.chdir(REPO)
    orders_dir = build_example("orders", tmp_path)
    payments_dir = build_example("payments", tmp_path)
    (orders_dir / "handlers" / "orders_place_v1.py").write_text(PLACE_HANDLER, encoding="utf-8")
    (payments_dir / "handlers" / "payments_capture.py").write_text(CAPTURE_HANDLER, encoding="utf-8")
    with imported(tmp_path, "orders_service") as orders, imported(tmp_path, "payments_service") as payments:
        yield Built(orders, payments)


def payments_app(built: Built, store: PostgresIdempotencyStore | None = None) -> HttpApp:
    setup = Wiring(environ=QUIET)
    setup.idempotency = store
    app: HttpApp = built.module("payments_service.service").create_app(setup=setup)
    return app


def test_a_producer_s_call_succeeds_on_the_third_try_after_two_503s_with_retry_after(built: Built) -> None:
    capture = built.capture_module()
    capture.FAIL_FIRST[0] = 2
    with running(payments_app(built)) as payments:
        environ = {**QUIET, "SVCGEN_TARGET_PAYMENTS_CAPTURE": f"{payments}/svc/invoke"}
        orders_app = built.module("orders_service.service").create_app(setup=Wiring(environ=environ))
        with running(orders_app) as orders:
            response = httpx.post(f"{orders}/orders", json=ORDER, timeout=WAIT)
    assert response.status_code == 201, response.text
    assert len(capture.RUNS) == 3
    # payments:capture is not idempotent: every try carried the same key, and the 503s were not kept for it.
    keys = {run["idempotency-key"] for run in capture.RUNS}
    assert len(keys) == 1 and keys != {""}


class DroppingProxy:
    """A TCP proxy in front of an HTTP server that, for the first `drops` requests, passes the request on, reads
    the whole answer, and closes the client's connection instead of answering: the call ran, its answer was lost."""

    def __init__(self, upstream_port: int, drops: int) -> None:
        self.upstream_port = upstream_port
        self.drops = drops
        self.port = free_port()
        self.dropped = 0

    async def serve(self) -> asyncio.Server:
        return await asyncio.start_server(self._connection, "127.0.0.1", self.port)

    async def _connection(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        try:
            while True:
                request = await _message(client_reader)
                if request is None:
                    return
                upstream_writer.write(request)
                await upstream_writer.drain()
                answer = await _message(upstream_reader)
                if answer is None:
                    return
                if self.dropped < self.drops:
                    self.dropped += 1
                    return  # the answer is thrown away with the connection
                client_writer.write(answer)
                await client_writer.drain()
        finally:
            client_writer.close()
            upstream_writer.close()


async def _message(reader: asyncio.StreamReader) -> bytes | None:
    """One HTTP/1.1 message with a Content-Length body (what httpx and uvicorn send here), or None at EOF."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return head + (await reader.readexactly(length) if length else b"")


def test_a_post_retried_after_a_dropped_connection_runs_its_handler_once(built: Built) -> None:
    capture = built.capture_module()
    produces = built.module("orders_service.service").PRODUCES
    clients_type = built.module("orders_service.clients").Clients
    models = built.module("orders_service.models")

    async def call(payments_port: int) -> Result[Any]:
        proxy = DroppingProxy(payments_port, drops=1)
        server = await proxy.serve()
        try:
            wiring = Wiring(environ={"SVCGEN_TARGET_PAYMENTS_CAPTURE": f"http://127.0.0.1:{proxy.port}/svc/invoke"})
            clients = clients_type(wiring.sender(produces))
            request = models.payments_CapturePayment(
                order_id="o-1", amount=models.payments_Money(amount_minor=100), idempotency_key="x"
            )
            result: Result[Any] = await clients.payments_capture(request)
            for hook in wiring.shutdown:
                await hook()
            assert proxy.dropped == 1
            return result
        finally:
            server.close()

    with running(payments_app(built)) as payments:
        result = asyncio.run(asyncio.wait_for(call(int(payments.rsplit(":", 1)[1])), WAIT))
    assert result.status == "created", result.detail
    assert result.headers["idempotent-replayed"] == "true"
    assert len(capture.RUNS) == 1
    assert result.payload is not None and result.payload.capture_id == "cap-1"


def test_two_replicas_on_one_postgres_store_replay_each_other_s_answers(built: Built, postgres_url: str) -> None:
    capture = built.capture_module()
    path = "/captures"
    with ExitStack() as stack:
        first, second = (
            stack.enter_context(running(payments_app(built, PostgresIdempotencyStore(postgres_url)))) for _ in "ab"
        )
        with httpx.Client(timeout=WAIT) as client:
            created = client.post(first + path, json=CAPTURE, headers={"idempotency-key": "k-1"})
            replayed = client.post(second + path, json=CAPTURE, headers={"idempotency-key": "k-1"})
            other = client.post(second + path, json={**CAPTURE, "orderId": "o-2"}, headers={"idempotency-key": "k-1"})
            assert (created.status_code, replayed.status_code, other.status_code) == (201, 201, 422)
            assert replayed.content == created.content
            assert replayed.headers["idempotent-replayed"] == "true"
            assert len(capture.RUNS) == 1

            # A key still running on one replica is in flight for the other.
            gate = threading.Event()
            capture.GATE.append(gate)
            capture.ENTERED.clear()
            answers: list[httpx.Response] = []
            k2 = {"idempotency-key": "k-2"}
            slow = threading.Thread(target=lambda: answers.append(client.post(first + path, json=CAPTURE, headers=k2)))
            slow.start()
            assert capture.ENTERED.wait(WAIT)
            in_flight = client.post(second + path, json=CAPTURE, headers={"idempotency-key": "k-2"})
            gate.set()
            slow.join(WAIT)
    assert (in_flight.status_code, in_flight.headers["retry-after"]) == (409, "1")
    assert answers[0].status_code == 201
    assert len(capture.RUNS) == 2


@dataclass
class Hop:
    calls: list[float | None]
    """The deadline each run of the handler saw."""


def test_the_first_caller_s_300_ms_deadline_stops_the_third_service_starting_late_work() -> None:
    late_work: list[str] = []
    cancelled = threading.Event()
    never = threading.Event()  # the slow dependency of the third service: it never answers in time
    third_hop, second_hop = Hop([]), Hop([])

    async def third(request: dict[str, Any], context: Context) -> Result[dict[str, Any]]:
        third_hop.calls.append(context.deadline)
        try:
            await asyncio.to_thread(never.wait, WAIT)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        late_work.append("committed")  # what must not happen once the caller has gone
        return Result.ok({})

    def forwarding(hop: Hop, sender: HttpSender, topic: str) -> Any:
        async def handle(request: dict[str, Any], context: Context) -> Result[dict[str, Any]]:
            hop.calls.append(context.deadline)
            answer = await sender.send(topic, {})
            return Result.of(answer.status, answer.payload, answer.detail)

        return handle

    def app(name: str, topic: str, handler: Any) -> HttpApp:
        registry = Registry()
        registry.add(topic, handler, request=dict[str, Any], response=dict[str, Any])
        return HttpApp(Service(Identity(name), registry), [Route.parse(f"POST /{name}", topic)])

    with ExitStack() as stack:
        c_url = stack.enter_context(running(app("c", "c:work", third)))
        to_c = HttpSender(f"{c_url}/svc/invoke")
        b_url = stack.enter_context(running(app("b", "b:work", forwarding(second_hop, to_c, "c:work"))))
        to_b = HttpSender(f"{b_url}/svc/invoke")
        a_url = stack.enter_context(running(app("a", "a:work", forwarding(Hop([]), to_b, "b:work"))))
        response = httpx.post(f"{a_url}/a", json={}, headers={"svc-deadline": "300"}, timeout=WAIT)
        # The third service's handler was cancelled at the deadline it inherited, before its slow step ended.
        assert cancelled.wait(WAIT)
        never.set()
    assert response.status_code == 504
    assert late_work == []
    assert len(third_hop.calls) == 1 and third_hop.calls[0] is not None
