"""A real OTLP/HTTP receiver on 127.0.0.1 and a free port: takes `POST /v1/traces` protobuf bodies, decodes each
`ExportTraceServiceRequest` with opentelemetry-proto and keeps the spans with their resource, for the OTLP tests
and the bench. Runs in a thread, stops itself."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tests.support.processes import wait_for

TRACES_PATH = "/v1/traces"


@dataclass(frozen=True)
class ReceivedSpan:
    span: Span
    resource: dict[str, str]

    @property
    def attributes(self) -> dict[str, str]:
        return string_attributes(self.span.attributes)

    @property
    def trace_id(self) -> str:
        return self.span.trace_id.hex()

    @property
    def span_id(self) -> str:
        return self.span.span_id.hex()

    @property
    def parent_span_id(self) -> str:
        return self.span.parent_span_id.hex()


def string_attributes(pairs: Any) -> dict[str, str]:
    return {pair.key: pair.value.string_value for pair in pairs}


def decode(body: bytes) -> list[ReceivedSpan]:
    """Every span of one request body, with its resource's attributes."""
    request = ExportTraceServiceRequest.FromString(body)
    return [
        ReceivedSpan(span, string_attributes(resource_spans.resource.attributes))
        for resource_spans in request.resource_spans
        for scope_spans in resource_spans.scope_spans
        for span in scope_spans.spans
    ]


class OtlpReceiver:
    def __init__(self, *, rejected: int = 0, status: int = 200) -> None:
        self.rejected = rejected
        """Spans each answer says it rejected (`partial_success`)."""
        self.status = status
        self.spans: list[ReceivedSpan] = []
        self.requests: list[tuple[str, str]] = []
        """(path, content type) of every request."""
        self._lock = threading.Lock()
        self.url = ""

    def received(self, path: str, content_type: str, body: bytes) -> bytes:
        spans = decode(body) if path == TRACES_PATH else []
        with self._lock:
            self.requests.append((path, content_type))
            self.spans.extend(spans)
        answer = ExportTraceServiceResponse()
        if self.rejected:
            answer.partial_success.rejected_spans = self.rejected
        return bytes(answer.SerializeToString())

    def wait_for_spans(self, count: int, timeout: float = 10.0) -> list[ReceivedSpan]:
        wait_for(lambda: len(self.spans) >= count, timeout, f"{count} span(s) at the OTLP receiver")
        with self._lock:
            return list(self.spans)


@contextlib.contextmanager
def otlp_receiver(**options: Any) -> Iterator[OtlpReceiver]:
    """Yields a receiving `OtlpReceiver` whose `url` is its base URL (append `/v1/traces`)."""
    receiver = OtlpReceiver(**options)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            answer = receiver.received(self.path, self.headers.get("content-type", ""), self.rfile.read(length))
            self.send_response(receiver.status)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
