"""Generated publisher and subscriber packages over the real JetStream server: the typed publish method answers
`accepted`, the subscriber's handler (bound with its type) gets the event in the same trace as the publishing
handler, and a dead letter is an issue classified `dead-letter`."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import orjson
import pytest

from svcgen.codegen.ownership import write_package
from svcgen.codegen.render import render_package
from svcgen.collector import Collector
from svcgen.collector.artifacts import build_topology
from svcgen.manifest import load_manifest
from svcgen.runtime import HandlerBindingError, MeshHost, MeshSettings, Result, Wiring, WiringError
from svcgen.runtime._descriptor import UNHASHED_KEYS
from svcgen.runtime._jsontext import document_hash
from tests.events.harness import cleanup, wait_for
from tests.support.asgi import lifespan
from tests.support.broker import unique_name
from tests.support.codegen import imported

PUBLISHER = """svcgen: 1
service: PUB
mesh: {collector: "http://127.0.0.1:9", heartbeatSeconds: 3600}
types:
  Book: {fields: {patientId: string}}
  Booked: {fields: {appointmentId: string, patientId: string}}
topics:
  - {id: "bookings:book", request: Book, response: Booked, success: [created], routes: ["POST /book"]}
events:
  - {id: "bookings:booked", payload: Booked, key: appointmentId}
"""
SUBSCRIBER = """svcgen: 1
service: SUB
mesh: {collector: "http://127.0.0.1:9", heartbeatSeconds: 3600}
subscribes:
  - id: "bookings:booked"
    from: pub.yaml
    delivery: {maxDeliver: 2, backoff: [50ms], ackWait: 5s}
"""
BOOK = """
from svcgen.runtime import Context, Result

from ..events import Events
from ..models import Book, Booked


async def handle(request: Book, context: Context) -> Result[Booked]:
    booked = Booked(appointment_id="a-" + request.patient_id, patient_id=request.patient_id)
    published = await context.scope.get(Events).bookings_booked(booked)
    if not published.is_successful:
        return Result.of(published.status, detail=published.detail)
    return Result.created(booked)
"""
ON_BOOKED = """
from svcgen.runtime import Context, Result

from ..models import Booked

SEEN: list[tuple[str, int]] = []


async def handle(event: Booked, context: Context) -> Result[None]:
    assert context.delivery is not None
    SEEN.append((event.patient_id, context.delivery.attempt))
    if event.patient_id == "p-poison":
        return Result.service_unavailable("the mail server refuses this one")
    return Result.ok()
"""
MISTYPED = """
from svcgen.runtime import Context, Result


async def handle(event: int, context: Context) -> Result[None]:
    return Result.ok()
"""


class Recorder:
    """Keeps what the reporters send, and hands it to a real collector too."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.issues: list[dict[str, Any]] = []
        self.collector = Collector()

    async def send(self, topic: str, payload: Any = None, headers: Any = None) -> Result[Any]:
        if topic == "svc:mesh:traces":
            self.events.extend(payload["events"])
        if topic == "svc:mesh:issues":
            self.issues.extend(payload["issues"])
        feeds = {"svc:mesh:register": self.collector.register, "svc:mesh:heartbeat": self.collector.heartbeat,
                 "svc:mesh:traces": self.collector.traces, "svc:mesh:issues": self.collector.issues}  # fmt: skip
        return feeds[topic](payload)


def build(tmp_path: Path, pub: str, sub: str) -> tuple[str, str]:
    (tmp_path / "pub.yaml").write_text(PUBLISHER.replace("PUB", pub))
    (tmp_path / "sub.yaml").write_text(SUBSCRIBER.replace("SUB", sub))
    packages = []
    for name in ("pub", "sub"):
        model = load_manifest(tmp_path / f"{name}.yaml")
        write_package(render_package(model, tmp_path), tmp_path / model.package)
        packages.append(model.package)
    (tmp_path / packages[0] / "handlers" / "bookings_book.py").write_text(BOOK)
    # The subscriber reaches the publisher's Booked under the publisher's namespace (its service name).
    namespaced = f"from ..models import {pub.replace('-', '_')}_Booked as Booked"
    (tmp_path / packages[1] / "handlers" / "on_bookings_booked.py").write_text(
        ON_BOOKED.replace("from ..models import Booked", namespaced)
    )
    return packages[0], packages[1]


def app_of(package: ModuleType, setup: Wiring, recorder: Recorder) -> tuple[Any, MeshHost]:
    service = importlib.import_module(f"{package.__name__}.service")
    mesh = MeshHost(service.identity(), MeshSettings("http://127.0.0.1:9", heartbeat_seconds=3600),
                    sender=recorder, environ={})  # fmt: skip
    return service.create_app(setup=setup, mesh=mesh), mesh


def test_a_generated_publisher_and_subscriber_over_jetstream(tmp_path: Path, nats_url: str) -> None:
    pub, sub = unique_name("pub"), unique_name("sub")
    pub_package, sub_package = build(tmp_path, pub, sub)
    recorder = Recorder()

    async def scenario(pub_module: ModuleType, sub_module: ModuleType) -> list[int]:
        handler = importlib.import_module(f"{sub_module.__name__}.handlers.on_bookings_booked")
        front, _ = app_of(pub_module, Wiring(environ={"SVCGEN_NATS": nats_url}), recorder)
        back, back_mesh = app_of(sub_module, Wiring(environ={"SVCGEN_NATS": nats_url}), recorder)
        codes = []
        async with contextlib.AsyncExitStack() as stack:
            await stack.enter_async_context(lifespan(front))
            await stack.enter_async_context(lifespan(back))
            transport = httpx.ASGITransport(app=front)
            async with httpx.AsyncClient(transport=transport, base_url="http://pub") as client:
                for patient in ("p-1", "p-1", "p-poison"):
                    codes.append((await client.post("/book", json={"patientId": patient})).status_code)
            await wait_for(lambda: len(handler.SEEN) == 3, "p-1 once and p-poison twice")
            issues = back_mesh.issues
            assert issues is not None
            await wait_for(lambda: len(issues) > 0, "the dead letter's issue")
        assert sorted(handler.SEEN) == [("p-1", 1), ("p-poison", 1), ("p-poison", 2)]
        return codes

    try:
        with imported(tmp_path, pub_package) as pub_module, imported(tmp_path, sub_package) as sub_module:
            codes = asyncio.run(scenario(pub_module, sub_module))
    finally:
        asyncio.run(cleanup(nats_url, pub, sub))
    assert codes == [201, 201, 201]
    # One trace across the hop: the publish is a span of its own (transport `event`), a child of the publishing
    # handler's, and each delivery attempt is a trace event whose parent is the publish.
    books = [event for event in recorder.events if event["service"] == pub and event.get("transport") != "event"]
    publishes = [event for event in recorder.events if event["service"] == pub and event.get("transport") == "event"]
    deliveries = [event for event in recorder.events if event["service"] == sub]
    assert len(books) == 3 and len(publishes) == 3 and len(deliveries) == 3
    assert {event["topic"] for event in deliveries} == {"bookings:booked"}
    assert {(event["topic"], event["status"]) for event in publishes} == {("bookings:booked", "accepted")}
    book_span = {event["traceId"]: event["spanId"] for event in books}
    publish_span = {event["traceId"]: event["spanId"] for event in publishes}
    assert len(book_span) == len(publish_span) == 3
    for publish in publishes:
        assert publish["parentSpanId"] == book_span[publish["traceId"]]
    for delivery in deliveries:
        assert delivery["parentSpanId"] == publish_span[delivery["traceId"]]
        assert delivery["parentSpanId"] != book_span[delivery["traceId"]]
    [issue] = [issue for issue in recorder.issues if issue["classification"] == "dead-letter"]
    assert issue["topic"] == "bookings:booked" and issue["service"] == sub and issue["count"] == 1
    # The collector draws the hop as a publisher → subscriber edge of its topology.
    edges = build_topology(recorder.collector.artifact_snapshot(), generated_at="2026-11-26T00:00:00Z")["edges"]
    assert [(edge["client"], edge["server"]) for edge in edges] == [(pub, sub)]


def test_a_subscriber_without_nats_refuses_to_start_with_one_line(tmp_path: Path) -> None:
    _, sub_package = build(tmp_path, unique_name("pub"), unique_name("sub"))
    with imported(tmp_path, sub_package) as module:
        service = importlib.import_module(f"{module.__name__}.service")
        with pytest.raises(WiringError, match="no NATS server for them"):
            service.create_app(setup=Wiring(environ={}))


def test_the_wiring_stub_says_nats_is_required_for_events_and_serves_the_topics_as_well(tmp_path: Path) -> None:
    # The app refuses to start without NATS when it has events: the stub must not call it optional.
    pub_package, sub_package = build(tmp_path, unique_name("pub"), unique_name("sub"))
    for package in (pub_package, sub_package):  # a subscriber does not start without NATS either
        wiring = (tmp_path / package / "wiring.py").read_text()
        assert ("    SVCGEN_NATS: NATS_URL below\n        a NATS server (nats://host:port), required for its events; "
                "the topics are served on it as well\n") in wiring
        assert ('NATS_URL = ""\n"""A NATS server (nats://host:port) unless SVCGEN_NATS says otherwise: required for '
                "this service's events (it does\nnot start without one), and its topics are served on it as well."
                '"""\n') in wiring
    (tmp_path / "plain.yaml").write_text("svcgen: 1\nservice: plain\ntypes: {T: {fields: {x: string}}}\n"
                                         "topics: [{id: 'plain:do', request: T, response: T}]\n")
    model = load_manifest(tmp_path / "plain.yaml")
    plain = next(f for f in render_package(model, tmp_path) if f.relpath == "wiring.py").text
    assert "a NATS server (nats://host:port) to serve the topics on as well\n" in plain
    assert "required" not in plain


def test_a_mistyped_event_handler_stops_the_service_naming_its_file(tmp_path: Path) -> None:
    _, sub_package = build(tmp_path, unique_name("pub"), unique_name("sub"))
    (tmp_path / sub_package / "handlers" / "on_bookings_booked.py").write_text(MISTYPED)
    with imported(tmp_path, sub_package) as module:
        service = importlib.import_module(f"{module.__name__}.service")
        with pytest.raises(HandlerBindingError, match=r"handlers/on_bookings_booked\.py"):
            service.create_app(setup=Wiring(environ={"SVCGEN_NATS": "nats://127.0.0.1:4222"}))


def test_the_descriptor_declares_the_events_published_and_subscribed_with_their_payload_schemas(
    tmp_path: Path,
) -> None:
    pub, sub = unique_name("pub"), unique_name("sub")
    pub_package, sub_package = build(tmp_path, pub, sub)
    with imported(tmp_path, pub_package) as pub_module, imported(tmp_path, sub_package) as sub_module:
        front = importlib.import_module(f"{pub_module.__name__}.service").build_service()
        back = importlib.import_module(f"{sub_module.__name__}.service").build_service()
        committed = orjson.loads((tmp_path / sub_package / "contracts" / "descriptor.json").read_bytes())
    [published] = front.descriptor.document["events"]["publishes"]
    assert (published["id"], published["version"]) == ("bookings:booked", "")
    assert front.descriptor.document["events"]["subscribes"] == []
    [subscribed] = back.descriptor.document["events"]["subscribes"]
    assert (subscribed["id"], subscribed["publisher"]) == ("bookings:booked", pub)
    assert subscribed["payloadSchema"] == published["payloadSchema"]
    assert published["payloadSchema"]["properties"]  # the payload's own schema, not the open one
    # What the running service registers is what its contracts commit, and the hash covers the events.
    assert committed["events"] == back.descriptor.document["events"]
    assert committed["descriptorHash"] == back.descriptor.hash
    without = {k: v for k, v in back.descriptor.document.items() if k not in ("events", "descriptorHash")}
    assert document_hash({k: v for k, v in without.items() if k not in UNHASHED_KEYS}) != back.descriptor.hash
