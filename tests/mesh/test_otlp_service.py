"""OTLP export from a real generated service process (`svcgen serve`) built with `mesh: {otlp: URL}` and no
collector: a real receiver gets one span per request with the right ids, parent, status and attributes; with the
receiver down the requests still succeed and the lost spans are counted in the service's log."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from tests.support.meshrun import BOOKS, BOOKS_HANDLER, SVCGEN, process
from tests.support.otlpreceiver import otlp_receiver
from tests.support.processes import tail
from tests.support.server import free_port

DEAD = "http://127.0.0.1:9"
"""The manifest's receiver: nothing answers there, so a span that arrives came by the environment's endpoint."""
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


@pytest.fixture(scope="module")
def books(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The books service built with only an OTLP receiver in its mesh block."""
    out = tmp_path_factory.mktemp("otlp-books")
    manifest = out / "books.yaml"
    manifest.write_text(BOOKS.replace('mesh: {collector: "http://127.0.0.1:9", heartbeatSeconds: 0.2}',
                                      f'mesh: {{otlp: "{DEAD}"}}'))
    subprocess.run([*SVCGEN, "build", str(manifest), "-o", str(out)], check=True, capture_output=True, timeout=120)
    (out / "books_service" / "handlers" / "books_get.py").write_text(BOOKS_HANDLER)
    return out / "books_service"


def get(base: str, book: str, headers: dict[str, str] | None = None) -> int:
    return httpx.get(f"{base}/books/{book}", headers=headers, timeout=10).status_code


def test_a_served_service_sends_one_span_per_request_to_the_receiver(books: Path, tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with otlp_receiver() as receiver:
        with process([*SVCGEN, "serve", str(books), "--port", str(port)], base + "/svc/spec", tmp_path / "books.log",
                     {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "",
                      "OTEL_BSP_SCHEDULE_DELAY": "100"}):
            statuses = [get(base, "dune", {"traceparent": f"00-{TRACE}-{PARENT}-01", "x-correlation-id": "c-7"}),
                        get(base, "nope"), get(base, "boom")]
            spans = receiver.wait_for_spans(3)
        assert len(receiver.spans) == 3, "one span per request, none for the surfaces (spec) or twice"
    assert statuses == [200, 404, 503]
    by_status = {span.attributes["svc.status"]: span for span in spans}
    assert sorted(by_status) == ["not-found", "ok", "service-unavailable"]
    found = by_status["ok"]
    assert (found.trace_id, found.parent_span_id) == (TRACE, PARENT)
    assert len(found.span_id) == 16 and found.span_id != PARENT
    assert found.span.kind == Span.SPAN_KIND_SERVER and found.span.status.code == Status.STATUS_CODE_UNSET
    assert found.attributes == {"rpc.system": "svcgen", "rpc.service": "books", "rpc.method": "books:get",
                                "svc.topic": "books:get", "svc.status": "ok", "svc.correlation_id": "c-7"}
    assert 0 < found.span.end_time_unix_nano - found.span.start_time_unix_nano < 10 * 10**9
    for failed in (by_status["not-found"], by_status["service-unavailable"]):
        assert failed.parent_span_id == "" and failed.trace_id != TRACE
        assert failed.span.status.code == Status.STATUS_CODE_ERROR
    assert by_status["service-unavailable"].attributes["error.type"] == "LookupError"
    resource = found.resource
    assert (resource["service.name"], resource["service.version"]) == ("books", "2.1.0")
    assert len({span.resource["service.instance.id"] for span in spans}) == 1


def test_with_the_receiver_down_requests_succeed_and_the_lost_spans_are_counted(books: Path, tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    down = f"http://127.0.0.1:{free_port()}/v1/traces"
    log = tmp_path / "books.log"
    with process([*SVCGEN, "serve", str(books), "--port", str(port)], base + "/svc/spec", log,
                 {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": down}):
        statuses = [get(base, "dune") for _ in range(5)]
    assert statuses == [200] * 5
    text = log.read_text(errors="replace")
    assert f"5 span(s) never reached the OTLP receiver {down} (0 dropped by the full queue)" in text, tail(log)
