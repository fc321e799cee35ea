"""`svcgen.testing`: a generated package under TestClient (sync and async), fake owners, overrides, lifespan."""

from __future__ import annotations

import asyncio
import importlib
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from svcgen.codegen.ownership import write_package
from svcgen.codegen.render import render_package
from svcgen.manifest import load_manifest
from svcgen.runtime import ApiKey, MeshHost, Result, Wiring, WiringError
from svcgen.testing import AsyncTestClient, LifespanError, MemoryBroker, TestClient
from tests.support.codegen import REPO, build_example, imported
from tests.support.otlpreceiver import OtlpReceiver, otlp_receiver
from tests.support.processes import wait_for

ORDER = {"customerId": "c-1", "items": [{"sku": "s-1", "quantity": 2}], "placedAt": "2026-01-02T03:04:05Z"}

PLACE = """
from __future__ import annotations

from svcgen.runtime import Context, Result

from ..clients import Clients
from ..models import Order, PlaceOrder, payments_CapturePayment, payments_Money
from ..wiring import Ledger


async def handle(request: PlaceOrder, context: Context) -> Result[Order]:
    ledger = context.scope.get(Ledger)
    capture = await context.scope.get(Clients).payments_capture(
        payments_CapturePayment(order_id="o-1", amount=payments_Money(amount_minor=100), idempotency_key="k-1")
    )
    if not capture.is_successful or capture.payload is None:
        return Result.conflict(f"payment failed: {capture.status}")
    ledger.entries.append(capture.payload.capture_id)
    return Result.created(
        Order(order_id="o-1", customer_id=request.customer_id, items=request.items,
              total_items=sum(item.quantity for item in request.items), placed_at=request.placed_at)
    )
"""

WIRING = """
from __future__ import annotations

from svcgen.runtime import Wiring

EVENTS: list[str] = []


class Ledger:
    def __init__(self, name: str) -> None:
        self.name = name
        self.entries: list[str] = []


def wire(wiring: Wiring) -> None:
    wiring.dependencies.value(Ledger, Ledger("real"))

    async def startup() -> None:
        if wiring.environ.get("FAIL_STARTUP"):
            raise RuntimeError("cannot open the ledger")
        EVENTS.append("startup")

    async def shutdown() -> None:
        EVENTS.append("shutdown")

    wiring.on_startup(startup)
    wiring.on_shutdown(shutdown)
"""


@pytest.fixture
def orders(tmp_path: Path) -> Iterator[ModuleType]:
    os.chdir(REPO)
    package_dir = build_example("orders", tmp_path)
    (package_dir / "handlers" / "orders_place_v1.py").write_text(PLACE, encoding="utf-8")
    (package_dir / "wiring.py").write_text(WIRING, encoding="utf-8")
    with imported(tmp_path, "orders_service") as package:
        yield package


def capture(request: Any) -> Result[Any]:
    """The fake payments owner: answers with the build's own `payments_Capture` type."""
    models = importlib.import_module("orders_service.models")
    return Result.created(
        models.payments_Capture(
            capture_id="cap-1", order_id=request.order_id, amount=request.amount, captured_at=ORDER_TIME
        )
    )


ORDER_TIME = datetime(2026, 1, 2, tzinfo=UTC)


def test_the_sync_client_runs_lifespan_wiring_and_a_typed_fake_owner(orders: ModuleType) -> None:
    wiring = importlib.import_module("orders_service.wiring")
    with TestClient(orders, owners={"payments:capture": capture}, environ={}) as client:
        assert wiring.EVENTS == ["startup"]
        response = client.post("/orders", json=ORDER)
        assert response.status_code == 201, response.text
        assert response.json()["totalItems"] == 2
        (sent,) = client.owners.calls["payments:capture"]
        typed = (type(sent).__name__, sent.amount.amount_minor, sent.amount.currency)
        assert typed == ("payments_CapturePayment", 100, "EUR")
    assert wiring.EVENTS == ["startup", "shutdown"]


def test_a_fake_owner_receives_the_caller_s_trace(orders: ModuleType) -> None:
    trace_id = "0af7651916cd43dd8448eb211c80319c"
    with TestClient(orders, owners={"payments:capture": capture}, environ={}) as client:
        response = client.post("/orders", json=ORDER, headers={"traceparent": f"00-{trace_id}-b7ad6b7169203331-01"})
    assert response.status_code == 201, response.text
    (headers,) = client.owners.headers["payments:capture"]
    assert headers["traceparent"].split("-")[1] == trace_id  # as the wiring's sender forwards it to a real owner


def test_a_nats_server_named_by_the_shell_is_not_joined(orders: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    # Joined, the stubs would answer real callers there; unreachable, the start would fail.
    monkeypatch.setenv(Wiring.NATS_VARIABLE, "nats://127.0.0.1:9")
    with TestClient(orders, owners={"payments:capture": capture}) as client:
        assert client.post("/orders", json=ORDER).status_code == 201
    named = TestClient(orders, environ={Wiring.NATS_VARIABLE: "nats://127.0.0.1:9"})
    with pytest.raises(LifespanError), named:  # named on purpose, it is served (and here unreachable)
        pass


def test_the_shell_s_collector_is_not_in_the_default_environ(
    orders: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A test's stubs and deliberate failures stay out of the team's collector, and wiring.py reads no collector.
    monkeypatch.setenv("SVCGEN_COLLECTOR", "http://127.0.0.1:9")
    monkeypatch.setenv("SVCGEN_MESH_NATS", "nats://127.0.0.1:9")
    monkeypatch.setenv("SVCGEN_SOMETHING_ELSE", "kept")
    client = TestClient(orders, environ=None)
    assert "SVCGEN_COLLECTOR" not in client.wiring.environ and "SVCGEN_MESH_NATS" not in client.wiring.environ
    assert client.wiring.environ["SVCGEN_SOMETHING_ELSE"] == "kept"


def test_a_topic_without_a_fake_owner_answers_not_implemented(orders: ModuleType) -> None:
    with TestClient(orders, environ={}) as client:
        response = client.invoke("orders:place", ORDER, version="v1")
    assert response.status_code == 409
    assert response.json()["detail"] == "payment failed: not-implemented"


def test_a_fake_owner_s_answer_of_the_wrong_shape_fails_as_it_would_over_the_wire(orders: ModuleType) -> None:
    # docs/testing.md: an answer of the wrong shape fails as it would over the wire, where the handler's client call
    # answers unexpected-error. Under the test client the fake's answer raised AttributeError inside the handler
    # instead, so the handler's own failure path (here: a 409) was never what the test saw.
    def wrong_shape(request: Any) -> Result[Any]:
        return Result.created({"captureId": "cap-1"})  # a dict, not the payments_Capture the owner answers

    with TestClient(orders, owners={"payments:capture": wrong_shape}, environ={}) as client:
        response = client.post("/orders", json=ORDER)
    assert (response.status_code, response.json()["detail"]) == (409, "payment failed: unexpected-error")
    assert len(client.owners.calls["payments:capture"]) == 1


def test_overrides_win_over_the_wiring_s_dependencies_async(orders: ModuleType) -> None:
    ledger_type = importlib.import_module("orders_service.wiring").Ledger
    fake_ledger = ledger_type("fake")

    async def run() -> int:
        async with AsyncTestClient(orders, overrides={ledger_type: fake_ledger}, environ={}) as client:
            client.owners.add("payments:capture", capture)
            response = await client.post("/orders", json=ORDER)
            return response.status_code

    assert asyncio.run(run()) == 201
    assert fake_ledger.entries == ["cap-1"]


def test_a_failing_startup_is_an_error_naming_it(orders: ModuleType) -> None:
    with (
        pytest.raises(LifespanError, match="the app failed to start: RuntimeError"),
        TestClient(orders, environ={"FAIL_STARTUP": "1"}),
    ):
        pass


def test_a_fake_for_a_topic_the_service_does_not_produce_is_refused(orders: ModuleType) -> None:
    with pytest.raises(KeyError, match="'payments:refund' is not a topic this service produces"):
        TestClient(orders, owners={"payments:refund": capture}, environ={})


def test_a_wiring_the_server_would_refuse_fails_under_the_client_too(
    orders: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    wiring = importlib.import_module("orders_service.wiring")
    real = wiring.wire

    def wire(setup: Wiring) -> None:
        real(setup)
        setup.credentials["payments:captur"] = ApiKey("x-api-key", "k")  # a typo create_app() refuses at start

    monkeypatch.setattr(wiring, "wire", wire)  # what service.create_app() calls
    with pytest.raises(WiringError, match="payments:captur"):
        TestClient(orders, environ={})


def test_the_handler_test_in_docs_testing_md_runs(tmp_path: Path) -> None:
    """The handler the page shows, then its test, as a reader copies them."""
    os.chdir(REPO)
    doc = (REPO / "docs" / "testing.md").read_text(encoding="utf-8")
    handler, test = doc.split("## A handler test in ten lines", 1)[1].split("```python\n")[1:3]
    package_dir = build_example("orders", tmp_path)
    (package_dir / "handlers" / "orders_place_v1.py").write_text(handler.split("```", 1)[0], encoding="utf-8")
    namespace: dict[str, Any] = {}
    with imported(tmp_path, "orders_service"):
        exec(compile(test.split("```", 1)[0], "docs/testing.md", "exec"), namespace)
        namespace["test_placing_an_order_captures_the_payment"]()


BOOK = """
from __future__ import annotations

from svcgen.runtime import Context, Result

from ..events import Events
from ..models import Appointment, AppointmentBooked, BookAppointment


async def handle(request: BookAppointment, context: Context) -> Result[Appointment]:
    published = await context.scope.get(Events).bookings_booked(
        AppointmentBooked(appointment_id="a-1", patient_id=request.patient_id, email=request.email, slot=request.slot)
    )
    if not published.is_successful:
        return Result.service_unavailable(f"not published: {published.status}")
    return Result.created(Appointment(appointment_id="a-1", patient_id=request.patient_id, slot=request.slot))
"""


def test_events_go_through_the_in_memory_broker(tmp_path: Path) -> None:
    os.chdir(REPO)
    package_dir = build_example("bookings", tmp_path)
    (package_dir / "handlers" / "bookings_book.py").write_text(BOOK, encoding="utf-8")
    booking = {"patientId": "p-1", "slot": "2026-01-02T09:00:00Z", "email": "p@example.com"}
    with imported(tmp_path, "bookings_service") as bookings, TestClient(bookings, environ={}) as client:
        response = client.post("/appointments", json=booking)
        stored = client.broker.stored("bookings")
    assert response.status_code == 201, response.text
    assert [event.headers.get("Nats-Msg-Id") for event in stored] == ["bookings:booked::a-1"]  # keyed


ON_BOOKED = """
from __future__ import annotations

import threading

from svcgen.runtime import Context, Result

from ..models import bookings_AppointmentBooked

HANDLED: list[tuple[str, str]] = []


async def handle(event: bookings_AppointmentBooked, context: Context) -> Result[None]:
    HANDLED.append((event.appointment_id, threading.current_thread().name))
    return Result.ok()
"""


def test_sync_clients_sharing_a_broker_deliver_to_each_other_once_per_event(tmp_path: Path) -> None:
    """Each sync client runs its app on a loop of its own: the publisher's events reach the subscriber's loop, and
    two subscriber replicas (two more clients) handle each event once between them."""
    os.chdir(REPO)
    (build_example("bookings", tmp_path) / "handlers" / "bookings_book.py").write_text(
        BOOK.replace('appointment_id="a-1"', 'appointment_id=f"a-{request.patient_id}"'), encoding="utf-8"
    )
    (build_example("notifications", tmp_path) / "handlers" / "on_bookings_booked.py").write_text(
        ON_BOOKED, encoding="utf-8"
    )
    broker = MemoryBroker(backoff_scale=0.0)
    with (
        imported(tmp_path, "bookings_service") as bookings,
        imported(tmp_path, "notifications_service") as notify,
        TestClient(notify, broker=broker, environ={}),
        TestClient(notify, broker=broker, environ={}),
        TestClient(bookings, broker=broker, environ={}) as client,
    ):
        for n in range(8):
            booking = {"patientId": f"p{n}", "slot": "2026-01-02T09:00:00Z", "email": "p@example.com"}
            assert client.post("/appointments", json=booking).status_code == 201
        asyncio.run(broker.settled(deadline=10))
        handled = importlib.import_module("notifications_service.handlers.on_bookings_booked").HANDLED
    assert sorted(event for event, _ in handled) == sorted(f"a-p{n}" for n in range(8))
    assert broker.dead_letters == []


def test_the_broker_test_in_docs_events_md_runs(tmp_path: Path) -> None:
    os.chdir(REPO)
    (build_example("bookings", tmp_path) / "handlers" / "bookings_book.py").write_text(BOOK, encoding="utf-8")
    (build_example("notifications", tmp_path) / "handlers" / "on_bookings_booked.py").write_text(
        ON_BOOKED, encoding="utf-8"
    )
    doc = (REPO / "docs" / "events.md").read_text(encoding="utf-8")
    code = doc.split("## Testing without NATS", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict[str, Any] = {}
    with imported(tmp_path, "bookings_service"), imported(tmp_path, "notifications_service"):
        exec(compile(code, "docs/events.md", "exec"), namespace)  # the example as a reader copies it
        namespace["test_a_booking_is_confirmed"]()
        handled = importlib.import_module("notifications_service.handlers.on_bookings_booked").HANDLED
    assert [event for event, _ in handled] == ["a-1"]


SHOP = """
svcgen: 1
service: shop
package: shop_service
prefix: /svc
mesh:
  collector: {url}
  otlp: {url}
  heartbeatSeconds: 1
types:
  Ping:
    fields:
      name: string
topics:
  - id: shop:ping
    request: Ping
    response: Ping
    routes: ["POST /ping"]
"""


@pytest.fixture
def shop(tmp_path: Path) -> Iterator[tuple[ModuleType, OtlpReceiver]]:
    """A package whose manifest names a collector and an OTLP endpoint: a server on 127.0.0.1 recording any POST."""
    with otlp_receiver() as receiver:
        manifest = tmp_path / "shop.yaml"
        manifest.write_text(SHOP.format(url=receiver.url), encoding="utf-8")
        out = tmp_path / "out"
        write_package(render_package(load_manifest(str(manifest)), out), out / "shop_service")
        with imported(out, "shop_service") as package:
            yield package, receiver


def test_a_test_sends_no_feeds_and_exports_no_spans_but_traces_in_process(
    shop: tuple[ModuleType, OtlpReceiver], monkeypatch: pytest.MonkeyPatch
) -> None:
    package, receiver = shop
    monkeypatch.setenv("SVCGEN_COLLECTOR", receiver.url)  # what a developer's shell may have set
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    generated = importlib.import_module("shop_service.tests.test_service")
    for name in dir(generated):
        if name.startswith("test_"):
            getattr(generated, name)()  # the package's own generated tests
    with TestClient(package) as client:  # a handler test as docs/testing.md shows
        response = client.post("/ping", json={"name": "n"})
        assert response.status_code == 501, response.text  # the stub: a deliberate failure
        assert client.mesh is not None
        (event,) = client.mesh.queue.events  # traced in the process
        assert event.topic == "shop:ping"
        assert len(client.mesh.issues or ()) == 1  # and aggregated as an issue
    time.sleep(0.2)
    assert receiver.requests == []


def test_a_test_that_passes_its_own_mesh_sends_the_feeds(shop: tuple[ModuleType, OtlpReceiver]) -> None:
    package, receiver = shop
    service = importlib.import_module("shop_service.service")
    mesh = MeshHost(service.identity(), service.MESH, environ={})
    with TestClient(package, environ={}, mesh=mesh) as client:
        assert client.mesh is mesh
        assert client.post("/ping", json={"name": "n"}).status_code == 501
    wait_for(lambda: ("/svc/invoke", "application/json") in receiver.requests, 10, "a feed at the collector")
    wait_for(lambda: any(path == "/v1/traces" for path, _ in receiver.requests), 10, "spans at the OTLP endpoint")
