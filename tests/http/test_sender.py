"""`HttpSender` against `httpx.MockTransport`: no network."""

from __future__ import annotations

import asyncio
import importlib.abc
import re
import sys
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

import httpx
import orjson
import pytest

from svcgen.runtime import HttpSender, Limits, Result
from svcgen.runtime._http.sender import URL_CACHE_SIZE
from tests.support.server import running

from .test_app import make_app

T = TypeVar("T")
Handler = Callable[[httpx.Request], httpx.Response]


def run(awaitable: Awaitable[T]) -> T:
    async def main() -> T:
        return await awaitable

    return asyncio.run(main())


class Recorder:
    """A mock transport handler that records every request and answers with a fixed response."""

    def __init__(
        self, code: int = 200, body: bytes | None = None, headers: Mapping[str, str] | None = None, json: Any = None
    ) -> None:
        self.requests: list[httpx.Request] = []
        self.code, self.body, self.headers, self.json = code, body, headers, json

    def __call__(self, request: httpx.Request) -> httpx.Response:
        request.read()
        self.requests.append(request)
        if self.json is not None:
            return httpx.Response(self.code, json=self.json, headers=self.headers)
        return httpx.Response(self.code, content=self.body or b"", headers=self.headers)

    @property
    def last(self) -> httpx.Request:
        return self.requests[-1]


def send(
    handler: Handler, topic: str = "orders", payload: Any = None, headers: Mapping[str, str] | None = None, **kw: Any
) -> Result[Any]:
    target = kw.pop("target", "http://svc.test/invoke")

    async def go() -> Result[Any]:
        async with HttpSender(target, transport=httpx.MockTransport(handler), **kw) as sender:
            return await sender.send(topic, payload, headers)

    return run(go())


# -- target forms ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("base", "topic", "expected"),
    [
        ("http://svc.test", "orders", "http://svc.test/orders"),
        ("http://svc.test/invoke", "orders", "http://svc.test/invoke/orders"),
        ("http://svc.test/invoke/", "orders", "http://svc.test/invoke/orders"),
        ("https://svc.test:8443/a/b", "svc:mesh:issues", "https://svc.test:8443/a/b/svc:mesh:issues"),
        ("http://svc.test", "a/b c?d#e", "http://svc.test/a%2Fb%20c%3Fd%23e"),
        ("http://svc.test", "stock-a.b_c~d", "http://svc.test/stock-a.b_c~d"),
        ("http://svc.test", "..", "http://svc.test/%2E%2E"),
        ("http://svc.test/invoke?key=1", "orders", "http://svc.test/invoke/orders?key=1"),
        ("http://svc.test", "ordré", "http://svc.test/ordr%C3%A9"),
    ],
)
def test_base_url_appends_the_topic_as_one_segment(base: str, topic: str, expected: str) -> None:
    rec = Recorder()
    assert send(rec, topic, target=base).status == "ok"
    assert str(rec.last.url) == expected
    assert rec.last.method == "POST"


def test_base_url_resolution_is_cached_per_topic_and_bounded() -> None:
    rec = Recorder()

    async def go() -> HttpSender:
        async with HttpSender("http://svc.test", transport=httpx.MockTransport(rec)) as sender:
            for _ in range(3):
                await sender.send("orders")
            for i in range(URL_CACHE_SIZE + 10):
                await sender.send(f"t{i}")
            return sender

    sender = run(go())
    assert len(sender._by_topic) == URL_CACHE_SIZE
    assert str(rec.last.url) == f"http://svc.test/t{URL_CACHE_SIZE + 9}"


def test_mapping_target_is_looked_up_live() -> None:
    rec = Recorder()
    routes = {"orders": "http://orders.test/in"}

    async def go() -> tuple[Result[Any], Result[Any]]:
        async with HttpSender(routes, transport=httpx.MockTransport(rec)) as sender:
            first = await sender.send("orders")
            routes["stock"] = "http://stock.test/x"
            return first, await sender.send("stock")

    first, second = run(go())
    assert first.status == second.status == "ok"
    assert [str(r.url) for r in rec.requests] == ["http://orders.test/in", "http://stock.test/x"]


def test_function_target() -> None:
    rec = Recorder()
    assert send(rec, "orders", target=lambda t: f"http://{t}.test/invoke").status == "ok"
    assert str(rec.last.url) == "http://orders.test/invoke"


def _raises(topic: str) -> str:
    raise KeyError(topic)


@pytest.mark.parametrize(
    ("target", "topic"),
    [
        ({"orders": "http://orders.test"}, "stock"),
        ({"orders": ""}, "orders"),
        ({"orders": "not a url"}, "orders"),
        ({"orders": "ftp://orders.test/x"}, "orders"),
        (_raises, "orders"),
        (lambda t: "", "orders"),
        (lambda t: None, "orders"),
    ],
)
def test_unresolvable_topic_is_not_found(target: Any, topic: str) -> None:
    rec = Recorder()
    result = send(rec, topic, target=target)
    assert result.status == "not-found"
    assert repr(topic) in (result.detail or "")
    assert rec.requests == []


@pytest.mark.parametrize("topic", ["", "订单", "a\r\nx-evil: 1", " padded", "tab\x01"])
def test_topic_that_cannot_be_a_header_is_validation_error(topic: str) -> None:
    rec = Recorder()
    result = send(rec, topic)
    assert result.status == "validation-error"
    assert rec.requests == []


@pytest.mark.parametrize("base", ["svc.test/invoke", "ftp://svc.test", "/invoke", ""])
def test_bad_base_url_is_rejected_at_construction(base: str) -> None:
    with pytest.raises(ValueError):
        HttpSender(base, transport=httpx.MockTransport(Recorder()))


def test_client_and_transport_together_are_rejected() -> None:
    async def go() -> None:
        async with httpx.AsyncClient() as client:
            HttpSender("http://svc.test", client=client, transport=httpx.MockTransport(Recorder()))

    with pytest.raises(ValueError):
        run(go())


# -- headers --------------------------------------------------------------------------------------------------


def test_topic_header_default_and_content_type() -> None:
    rec = Recorder()
    send(rec, "svc:mesh:issues", {"a": 1})
    assert rec.last.headers["topic"] == "svc:mesh:issues"
    assert rec.last.headers["content-type"] == "application/json"


def test_custom_topic_header_name() -> None:
    rec = Recorder()
    send(rec, "orders", topic_header="X-Svc-Topic")
    assert rec.last.headers["x-svc-topic"] == "orders"
    assert "topic" not in rec.last.headers


def test_invalid_topic_header_name_is_rejected() -> None:
    with pytest.raises(ValueError):
        HttpSender("http://svc.test", topic_header="bad header")


def test_message_headers_are_forwarded() -> None:
    rec = Recorder()
    send(rec, headers={"X-Correlation-Id": "c-1", "traceparent": "00-abc-def-01", "x-latin": "café"})
    assert rec.last.headers["x-correlation-id"] == "c-1"
    assert rec.last.headers["traceparent"] == "00-abc-def-01"
    assert rec.last.headers.raw[[k for k, _ in rec.last.headers.raw].index(b"x-latin")][1] == "café".encode("latin-1")


def test_caller_cannot_override_topic_or_framing_headers() -> None:
    rec = Recorder()
    send(
        rec,
        "orders",
        b'{"a":1}',
        headers={"Topic": "spoofed", "Content-Type": "text/plain", "Content-Length": "999", "Host": "evil.test"},
    )
    assert rec.last.headers.get_list("topic") == ["orders"]
    assert rec.last.headers.get_list("content-type") == ["application/json"]
    assert rec.last.headers.get_list("content-length") == ["7"]
    assert rec.last.headers.get_list("host") == ["svc.test"]


def test_unsendable_headers_are_dropped_not_fatal() -> None:
    rec = Recorder()
    hostile: Any = {
        "x-ok": "1",
        "x-padded": "  v  ",
        "bad name": "v",
        "x-crlf": "a\r\nx-evil: 1",
        "x-ctl": "a\x01b",
        "x-emoji": "🙂",
        "x-int": 5,
        7: "seven",
    }
    result = send(rec, headers=hostile)
    assert result.status == "ok"
    assert rec.last.headers["x-ok"] == "1"
    assert rec.last.headers["x-padded"] == "v"
    for name in ("bad name", "x-crlf", "x-evil", "x-ctl", "x-emoji", "x-int", "7"):
        assert name not in rec.last.headers


def test_extra_headers_hook_fills_in_only_missing_headers() -> None:
    rec = Recorder()
    calls: list[int] = []

    def hook() -> Mapping[str, str]:
        calls.append(1)
        return {"traceparent": "00-from-hook-01", "X-Extra": "e"}

    send(rec, headers={"Traceparent": "00-from-caller-01"}, extra_headers=hook)
    assert rec.last.headers.get_list("traceparent") == ["00-from-caller-01"]
    assert rec.last.headers["x-extra"] == "e"
    send(rec, extra_headers=hook)
    assert rec.last.headers["traceparent"] == "00-from-hook-01"
    assert len(calls) == 2


@pytest.mark.parametrize("broken", [LookupError("no current trace"), None])
def test_failing_extra_headers_hook_does_not_cost_the_send(broken: Exception | None) -> None:
    def hook() -> Any:
        if broken is not None:
            raise broken
        return 42  # not a mapping

    rec = Recorder()
    assert send(rec, headers={"x-a": "1"}, extra_headers=hook).status == "ok"
    assert rec.last.headers["x-a"] == "1"


# -- request body ---------------------------------------------------------------------------------------------


@dataclass
class Order:
    order_id: str
    qty: int


@pytest.mark.parametrize(
    ("payload", "body"),
    [
        (b'{"raw":true}', b'{"raw":true}'),
        (bytearray(b"[1]"), b"[1]"),
        ('{"text":"é"}', '{"text":"é"}'.encode()),
        ({"a": [1, 2.5, None, "x"]}, b'{"a":[1,2.5,null,"x"]}'),
        ([1, 2], b"[1,2]"),
        (3, b"3"),
        (None, b""),
    ],
)
def test_body_forms(payload: Any, body: bytes) -> None:
    rec = Recorder()
    send(rec, payload=payload)
    assert rec.last.content == body


def test_encode_hook_turns_typed_payload_into_wire_form() -> None:
    rec = Recorder()

    def encode(value: Any) -> Any:
        return {"orderId": value.order_id, "qty": value.qty}

    send(rec, payload=Order("o-1", 2), encode=encode)
    assert orjson.loads(rec.last.content) == {"orderId": "o-1", "qty": 2}


def test_unencodable_payload_is_unexpected_error() -> None:
    rec = Recorder()
    result = send(rec, payload={"when": object()})
    assert result.status == "unexpected-error"
    assert "encoded" in (result.detail or "")
    assert rec.requests == []


# -- response mapping -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (200, "ok"),
        (201, "created"),
        (202, "accepted"),
        (299, "ok"),
        (400, "bad-request"),
        (401, "unauthorized"),
        (403, "forbidden"),
        (404, "not-found"),
        (408, "timeout"),
        (409, "conflict"),
        (418, "unexpected-error"),
        (422, "validation-error"),
        (429, "too-many-requests"),
        (500, "unexpected-error"),
        (501, "not-implemented"),
        (502, "service-unavailable"),
        (503, "service-unavailable"),
        (504, "timeout"),
        (301, "unexpected-error"),
    ],
)
def test_code_maps_to_status(code: int, status: str) -> None:
    result = send(Recorder(code, json={"n": 1}))
    assert result.status == status
    if result.is_successful:
        assert result.payload == {"n": 1}
        assert result.detail is None
    else:
        assert result.payload is None
        assert result.detail == f"HTTP {code} from http://svc.test/invoke/orders"


def test_204_is_deleted_with_no_payload() -> None:
    result = send(Recorder(204))
    assert result.status == "deleted"
    assert result.payload is None
    assert result.is_successful


@pytest.mark.parametrize(
    ("body", "content_type", "payload"),
    [
        (b'{"a":1}', "application/json", {"a": 1}),
        (b'{"a":1}', "application/json; charset=utf-8", {"a": 1}),
        (b'{"a":1}', "application/problem+json", {"a": 1}),
        (b"[1,2]", None, [1, 2]),
        (b'"s"', "application/json", "s"),
        (b"", "application/json", None),
        (b"plain words", "text/plain", "plain words"),
        (b"42", "text/plain", "42"),
        (b"not json {", "application/json", "not json {"),
        (b"<html>hi</html>", "text/html; charset=utf-8", "<html>hi</html>"),
    ],
)
def test_response_body_becomes_payload(body: bytes, content_type: str | None, payload: Any) -> None:
    headers = {"content-type": content_type} if content_type else None
    assert send(Recorder(200, body, headers)).payload == payload


def test_failure_body_detail_is_extracted() -> None:
    result = send(Recorder(422, json={"status": "validation-error", "detail": "qty: must be positive"}))
    assert result.status == "validation-error"
    assert result.detail == "qty: must be positive"
    assert result.payload is None


@pytest.mark.parametrize(
    ("code", "body", "status"),
    [
        (405, {"status": "bad-request", "detail": "d"}, "bad-request"),
        (418, {"status": "conflict", "detail": "d"}, "conflict"),
        (500, {"status": "timeout", "detail": "d"}, "timeout"),
        (405, {"status": "no-such-status", "detail": "d"}, "unexpected-error"),
        (500, {"status": "ok", "detail": "d"}, "unexpected-error"),  # a failed call is never read as a success
        (503, {"status": "created", "detail": "d"}, "service-unavailable"),
    ],
)
def test_a_failure_bodys_known_failure_status_is_the_status_else_the_code_says(
    code: int, body: dict[str, str], status: str
) -> None:
    result = send(Recorder(code, json=body))
    assert (result.status, result.is_successful, result.detail) == (status, False, "d")


def test_a_svcgen_services_refusals_with_codes_outside_the_table_keep_their_status() -> None:
    # 405, 413 and 431 have no word in the status table: a svcgen service says which status they are in the
    # failure body, and the sender read them by the code alone, as unexpected-error.
    limits = Limits(max_body_bytes=1000, max_headers=20)

    async def go(base: str) -> list[Result[Any]]:
        targets = {"get": f"{base}/orders/o-1", "place": f"{base}/orders"}
        async with HttpSender(targets) as sender:
            return [
                await sender.send("get", {}),
                await sender.send("place", {"customerId": "c" * 2000}),
                await sender.send("place", {}, {f"x-h{index}": "1" for index in range(30)}),
            ]

    with running(make_app(limits=limits)) as base:
        results = run(go(base))
    assert [(result.status, result.is_successful) for result in results] == [("bad-request", False)] * 3
    # The service's details, kept (the header count is the sender's own framing headers and the 30 given).
    assert results[0].detail == "POST is not allowed on /orders/o-1; allowed: GET, HEAD, DELETE, OPTIONS"
    assert results[1].detail == "body exceeds 1000 bytes"
    assert re.fullmatch(r"request has 3[0-9] headers; at most 20 allowed", results[2].detail or "")


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b'{"detail": "no status key"}', "application/json"),
        (b'{"status": "x", "detail": 5}', "application/json"),
        (b'{"status": "x", "detail": ""}', "application/json"),
        (b'["status", "detail"]', "application/json"),
        (b'{"status": "x", "detail": "in text"}', "text/plain"),
        (b"<html>Bad Gateway</html>", "text/html"),
        (b"", None),
    ],
)
def test_failure_without_failure_body_names_code_and_url(body: bytes, content_type: str | None) -> None:
    headers = {"content-type": content_type} if content_type else None
    result = send(Recorder(502, body, headers), target={"orders": "http://user:pw@gw.test:8080/p?token=s#f"})
    assert result.status == "service-unavailable"
    assert result.detail == "HTTP 502 from http://gw.test:8080/p"
    assert result.payload is None


def test_response_headers_become_result_headers_lower_cased() -> None:
    rec = Recorder(201, b'{"id":"o-1"}', {"Content-Type": "application/json", "X-Request-Id": "r-1", "ETag": '"v1"',
                                          "Date": "Fri, 27 Nov 2026 08:00:00 GMT", "Server": "uvicorn"})
    result = send(rec)
    assert result.status == "created"
    assert result.headers["x-request-id"] == "r-1"
    assert result.headers["etag"] == '"v1"'
    # Wire framing describes bytes the Result no longer carries.
    assert "content-type" not in result.headers
    assert "content-length" not in result.headers
    # Each server writes its own: a handler answering with this Result would send them twice.
    assert "date" not in result.headers and "server" not in result.headers


def test_failure_keeps_response_headers() -> None:
    result = send(
        Recorder(429, json={"status": "too-many-requests", "detail": "slow down"}, headers={"Retry-After": "3"})
    )
    assert result.status == "too-many-requests"
    assert result.headers["retry-after"] == "3"


# -- decode hook ----------------------------------------------------------------------------------------------


def _decode_order(value: Any) -> Order:
    if not isinstance(value, dict) or not isinstance(value.get("qty"), int):
        raise ValueError("qty: expected an integer")
    return Order(value["orderId"], value["qty"])


def test_decode_hook_types_a_successful_payload() -> None:
    result = send(Recorder(200, json={"orderId": "o-1", "qty": 2}), decode=_decode_order)
    assert result.status == "ok"
    assert result.payload == Order("o-1", 2)


def test_decode_failure_is_unexpected_error() -> None:
    result = send(Recorder(200, json={"orderId": "o-1", "qty": "two"}), decode=_decode_order)
    assert result.status == "unexpected-error"
    assert result.payload is None
    assert "qty: expected an integer" in (result.detail or "")


def test_decode_of_non_json_success_is_unexpected_error() -> None:
    result = send(Recorder(200, b"hello", {"content-type": "text/plain"}), decode=_decode_order)
    assert result.status == "unexpected-error"
    assert "not JSON" in (result.detail or "")


def test_decode_is_not_applied_to_failures_or_empty_bodies() -> None:
    calls: list[Any] = []

    def decode(value: Any) -> Any:
        calls.append(value)
        return value

    assert send(Recorder(204), decode=decode).status == "deleted"
    failed = send(Recorder(404, json={"status": "not-found", "detail": "no order"}), decode=decode)
    assert failed.detail == "no order"
    assert calls == []


# -- transport failures ---------------------------------------------------------------------------------------


def _raising(exc: Exception) -> Handler:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc

    return handler


@pytest.mark.parametrize(
    "exc",
    [
        httpx.ConnectError("connection refused to 10.0.0.1"),
        httpx.ReadError("reset"),
        httpx.RemoteProtocolError("bad framing"),
        httpx.ProxyError("proxy down"),
    ],
)
def test_transport_error_is_service_unavailable(exc: httpx.TransportError) -> None:
    result = send(_raising(exc))
    assert result.status == "service-unavailable"
    assert result.detail == f"cannot reach http://svc.test/invoke/orders ({type(exc).__name__})"


@pytest.mark.parametrize(
    "exc", [httpx.ReadTimeout("slow"), httpx.ConnectTimeout("slow"), httpx.WriteTimeout("w"), httpx.PoolTimeout("p")]
)
def test_timeout_is_timeout(exc: httpx.TimeoutException) -> None:
    result = send(_raising(exc))
    assert result.status == "timeout"
    assert result.detail == f"timed out calling http://svc.test/invoke/orders ({type(exc).__name__})"


def test_anything_else_is_unexpected_error_without_exception_text() -> None:
    result = send(_raising(RuntimeError("secret internals")))
    assert result.status == "unexpected-error"
    assert "secret" not in (result.detail or "")
    assert "RuntimeError" in (result.detail or "")


def test_cancellation_is_not_swallowed() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(10)
        return httpx.Response(200)

    async def go() -> None:
        async with HttpSender("http://svc.test", transport=httpx.MockTransport(handler)) as sender:
            task = asyncio.create_task(sender.send("orders"))
            await asyncio.sleep(0)
            task.cancel()
            await task

    with pytest.raises(asyncio.CancelledError):
        run(go())


def test_never_raises_for_a_hostile_response() -> None:
    class Boom(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            return httpx.Response(200, stream=BrokenStream())

    class BrokenStream(httpx.AsyncByteStream):
        async def __aiter__(self) -> Any:
            raise httpx.ReadError("connection dropped mid-body")
            yield b""  # pragma: no cover

    async def go() -> Result[Any]:
        async with HttpSender("http://svc.test", transport=Boom()) as sender:
            return await sender.send("orders")

    assert run(go()).status == "service-unavailable"


# -- client ownership -----------------------------------------------------------------------------------------


def test_injected_client_is_used_and_not_closed() -> None:
    rec = Recorder()

    async def go() -> httpx.AsyncClient:
        client = httpx.AsyncClient(transport=httpx.MockTransport(rec))
        async with HttpSender("http://svc.test", client=client) as sender:
            assert (await sender.send("orders")).status == "ok"
        assert not client.is_closed
        response = await client.get("http://svc.test/still-open")
        assert response.status_code == 200
        await client.aclose()
        return client

    run(go())
    assert len(rec.requests) == 2


def test_owned_client_is_closed_and_a_closed_sender_does_not_raise() -> None:
    rec = Recorder()

    async def go() -> tuple[HttpSender, Result[Any]]:
        sender = HttpSender("http://svc.test", transport=httpx.MockTransport(rec))
        await sender.aclose()
        return sender, await sender.send("orders")

    sender, result = run(go())
    assert sender._client.is_closed
    assert result.status == "unexpected-error"
    assert rec.requests == []


def test_one_client_for_many_sends() -> None:
    rec = Recorder()

    async def go() -> list[Result[Any]]:
        async with HttpSender("http://svc.test", transport=httpx.MockTransport(rec)) as sender:
            client = sender._client
            results = await asyncio.gather(*(sender.send(f"t{i}", {"i": i}) for i in range(20)))
            assert sender._client is client
            return list(results)

    assert all(r.status == "ok" for r in run(go()))
    assert sorted(orjson.loads(r.content)["i"] for r in rec.requests) == list(range(20))


def test_timeout_default_and_override() -> None:
    async def go() -> None:
        owned = HttpSender("http://svc.test", transport=httpx.MockTransport(Recorder()))
        assert owned._client.timeout == httpx.Timeout(10.0)
        await owned.aclose()
        custom = HttpSender("http://svc.test", transport=httpx.MockTransport(Recorder()), timeout=2.5)
        assert custom._client.timeout == httpx.Timeout(2.5)
        await custom.aclose()

    run(go())


def test_dataclass_payload_without_encode_hook_uses_orjson_field_names() -> None:
    rec = Recorder()
    send(rec, payload=Order("o-1", 2))
    assert orjson.loads(rec.last.content) == asdict(Order("o-1", 2))


def test_a_send_over_a_real_connection_looks_for_no_module() -> None:
    """httpcore imports sniffio on every request: without it installed, each send searched sys.path for it again
    (~0.2 ms of CPU a call, on every feed batch and outbound call). svcgen depends on sniffio; nothing is looked up."""

    async def answer(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": b"{}"})

    sending = threading.get_ident()
    looked_up: list[str] = []

    class Watcher(importlib.abc.MetaPathFinder):
        def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
            if threading.get_ident() == sending:
                looked_up.append(name)

    async def sends(url: str) -> None:
        sender = HttpSender(url)
        try:
            for _ in range(3):  # the first sends may import what they use once
                assert (await sender.send("orders:get", {})).is_successful
            watcher = Watcher()
            sys.meta_path.insert(0, watcher)
            try:
                for _ in range(5):
                    assert (await sender.send("orders:get", {})).is_successful
            finally:
                sys.meta_path.remove(watcher)
        finally:
            await sender.aclose()

    with running(answer) as url:
        asyncio.run(sends(url))
    assert looked_up == []
