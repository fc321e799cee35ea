"""The JetStream feeds sender against a real NATS server: the stream made when missing, each batch published
with its batch id as `Nats-Msg-Id` and acknowledged by JetStream, a failed publish kept by the reporter and resent
with the same id."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest

from svcgen.codegen.ownership import write_package
from svcgen.codegen.render import render_package
from svcgen.manifest import load_manifest
from svcgen.runtime import Identity, MeshHost, MeshSettings, WiringError
from svcgen.runtime._descriptor import build_descriptor
from svcgen.runtime._mesh.feeds import FeedSender
from svcgen.runtime._mesh.jetstream import MESH_NATS_ENV, JetStreamSender, MeshStream
from svcgen.runtime._mesh.reporter import Reporter
from tests.support import feeds as documents
from tests.support.broker import ThrowawayNats, mesh_stream, nats_url
from tests.support.codegen import imported

__all__ = ["mesh_stream", "nats_url"]


async def stored(url: str, stream: MeshStream) -> list[tuple[str, dict[str, str], dict[str, Any]]]:
    """(subject, headers, envelope) of every message the stream holds, oldest first."""
    client = await nats.connect(url)
    try:
        js = client.jetstream()
        info = await js.stream_info(stream.name)
        found = []
        for sequence in range(info.state.first_seq, info.state.last_seq + 1):
            message = await js.get_msg(stream.name, sequence)
            found.append((message.subject or "", dict(message.headers or {}), json.loads(message.data or b"")))
        return found
    finally:
        await client.close()


async def stream_config(url: str, stream: MeshStream) -> Any:
    client = await nats.connect(url)
    try:
        return (await client.jetstream().stream_info(stream.name)).config
    finally:
        await client.close()


def test_feeds_are_published_to_the_stream_it_creates_each_batch_with_its_id(
    nats_url: str, mesh_stream: MeshStream
) -> None:
    async def run() -> list[Any]:
        sender = JetStreamSender(nats_url, mesh_stream)
        feeds = FeedSender(sender)
        try:
            return [
                await feeds.register(documents.descriptor()),
                await feeds.traces([documents.event(1), documents.event(2)], "batch-1"),
                await feeds.traces([documents.event(1), documents.event(2)], "batch-1"),  # a resend
                await feeds.issues({"service": "orders", "issues": [documents.issue()], "batchId": "batch-2"}),
                await sender.send("svc:mesh:query:fleet", {}),
            ]
        finally:
            await sender.aclose()

    register, traces, resent, issues, query = asyncio.run(run())
    assert [answer.status for answer in (register, traces, resent, issues)] == ["ok"] * 4
    assert (traces.payload["duplicate"], resent.payload["duplicate"]) == (False, True)
    assert resent.payload["seq"] == traces.payload["seq"]
    assert query.status == "bad-request"
    messages = asyncio.run(stored(nats_url, mesh_stream))
    prefix = mesh_stream.subject_prefix
    assert [(subject, headers.get("Nats-Msg-Id")) for subject, headers, _ in messages] == [
        (f"{prefix}.register", None), (f"{prefix}.traces", "batch-1"), (f"{prefix}.issues", "batch-2")
    ]
    _, _, envelope = messages[1]
    assert envelope["topic"] == "svc:mesh:traces"
    assert json.loads(envelope["body"]) == {"events": [documents.event(1), documents.event(2)], "batchId": "batch-1"}
    config = asyncio.run(stream_config(nats_url, mesh_stream))
    assert (config.subjects, config.max_age, config.max_bytes, config.duplicate_window) == (
        [f"{prefix}.>"], mesh_stream.max_age, mesh_stream.max_bytes, mesh_stream.duplicate_window)


@pytest.fixture
def stopped_nats() -> Iterator[ThrowawayNats]:
    server = ThrowawayNats()
    try:
        yield server
    finally:
        server.remove()


def test_a_batch_jetstream_did_not_take_is_kept_and_resent_with_its_id(stopped_nats: ThrowawayNats) -> None:
    """The server is down: register and the trace batch fail and are kept (nothing raised); the server starts: the
    next flush delivers the same batch, under the same id, once."""
    stream = MeshStream()
    ids = iter(["b-1", "b-2", "b-3", "b-4"])

    async def run() -> tuple[int, int, int]:
        sender = JetStreamSender(stopped_nats.url, stream, timeout=1.0)
        events = [documents.event(n) for n in range(3)]
        reporter = Reporter(FeedSender(sender), build_descriptor(Identity("orders"), None), service="orders",
                            traces=lambda n: [events.pop()] if events else [], batch_ids=lambda: next(ids),
                            batch_size=1)  # fmt: skip
        try:
            await reporter.flush_traces()
            kept = reporter.pending_trace_events
            await asyncio.to_thread(stopped_nats.start)
            await reporter.flush_traces(until_empty=True)
            return kept, reporter.pending_trace_events, reporter.trace_batches_sent
        finally:
            await sender.aclose()

    kept, pending, sent = asyncio.run(run())
    assert (kept, pending, sent) == (1, 0, 3)
    messages = asyncio.run(stored(stopped_nats.url, stream))
    assert [headers["Nats-Msg-Id"] for _, headers, _ in messages] == ["b-1", "b-2", "b-3"]
    assert [json.loads(envelope["body"])["events"][0]["spanId"] for _, _, envelope in messages] == [
        documents.event(2)["spanId"], documents.event(1)["spanId"], documents.event(0)["spanId"]]


def test_the_mesh_host_publishes_to_jetstream_when_told_so_by_its_settings_or_environment() -> None:
    identity = Identity("orders")
    by_manifest = MeshHost(identity, MeshSettings(None, transport="nats", nats="nats://127.0.0.1:4222"), environ={})
    by_environment = MeshHost(identity, MeshSettings("http://127.0.0.1:8700"), environ={MESH_NATS_ENV: "nats://n:4222"})
    plain = MeshHost(identity, MeshSettings("http://127.0.0.1:8700"), environ={})
    assert isinstance(by_manifest._feed_sender(), JetStreamSender)
    assert (by_environment.settings.transport, by_environment.settings.nats) == ("nats", "nats://n:4222")
    assert isinstance(by_environment._feed_sender(), JetStreamSender)
    assert not isinstance(plain._feed_sender(), JetStreamSender)


def test_without_nats_py_the_mesh_host_fails_at_start_with_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "nats", None)  # as if svcgen[nats] were not installed
    with pytest.raises(WiringError, match=r"^mesh feeds over NATS need nats-py: pip install 'svcgen\[nats\]'$"):
        MeshHost(Identity("orders"), MeshSettings(None, transport="nats", nats="nats://127.0.0.1:4222"), environ={})


def test_a_service_built_with_mesh_transport_nats_publishes_to_jetstream(tmp_path: Path) -> None:
    manifest = tmp_path / "books.yaml"
    manifest.write_text(BOOKS)
    write_package(render_package(load_manifest(str(manifest)), tmp_path), tmp_path / "books_service")
    with imported(tmp_path, "books_service.service") as service:
        settings = service.MESH
        host = MeshHost(service.identity(), settings, environ={})
    assert settings == MeshSettings(None, 0.5, True, transport="nats", nats="nats://127.0.0.1:4222")
    assert isinstance(host._feed_sender(), JetStreamSender)


BOOKS = """svcgen: 1
service: books
mesh: {transport: nats, nats: "nats://127.0.0.1:4222", heartbeatSeconds: 0.5}
types:
  GetBook:
    fields:
      bookId: string
topics:
  - id: books:get
    request: GetBook
    response: GetBook
"""


def test_mesh_settings_with_an_unknown_transport_or_no_nats_url_refuse_to_start() -> None:
    with pytest.raises(WiringError, match=r"needs a NATS URL: set mesh\.nats or SVCGEN_MESH_NATS"):
        MeshHost(Identity("orders"), MeshSettings(None, transport="nats"), environ={})
    with pytest.raises(WiringError, match="mesh transport 'kafka': expected http or nats"):
        MeshHost(Identity("orders"), MeshSettings("http://c", transport="kafka"), environ={})


def test_a_password_in_the_mesh_nats_url_stays_out_of_the_log(caplog: pytest.LogCaptureFixture) -> None:
    from tests.support.server import free_port

    sender = JetStreamSender(f"nats://bob:hunter2@127.0.0.1:{free_port()}", timeout=1.0)  # nothing listens there

    async def send() -> Any:
        try:
            return await sender.send("svc:mesh:traces", {"events": [], "batchId": "b-1"})
        finally:
            await sender.aclose()

    with caplog.at_level(logging.DEBUG, "svcgen.mesh.jetstream"):
        answer = asyncio.run(send())
    assert answer.status == "service-unavailable"
    logged = [record.getMessage() for record in caplog.records]
    assert logged and not any("hunter2" in line for line in logged), logged
    assert "hunter2" not in (answer.detail or "")


def test_a_register_jetstream_did_not_take_says_why_and_where_without_the_password(
    stopped_nats: ThrowawayNats, caplog: pytest.LogCaptureFixture
) -> None:
    url = stopped_nats.url.replace("nats://", "nats://bob:hunter2@")
    sender = JetStreamSender(url, timeout=1.0)
    reporter = Reporter(FeedSender(sender), build_descriptor(Identity("orders"), None), service="orders")

    async def beats() -> None:
        try:
            for _ in range(2):
                await reporter.beat()
        finally:
            await sender.aclose()

    with caplog.at_level(logging.INFO, "svcgen.mesh.reporter"):
        asyncio.run(beats())
    said = [record.getMessage() for record in caplog.records if "register" in record.getMessage()]
    assert said == [f"register not accepted (service-unavailable: JetStream at {stopped_nats.url} did not take "
                    "svc:mesh:register (TimeoutError)); retrying on every beat until it is"]  # fmt: skip
