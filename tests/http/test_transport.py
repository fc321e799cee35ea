"""`KeepAliveTransport` under `HttpSender` against a real uvicorn server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import Any, TypeVar

import httpx
import orjson
import pytest

from svcgen.runtime import HttpSender
from svcgen.runtime._http.transport import KeepAliveTransport, lean_transport
from svcgen.runtime._status import OK, SERVICE_UNAVAILABLE, TIMEOUT
from tests.support.server import free_port, running

T = TypeVar("T")


class Echo:
    """Answers each POST with what it saw: the client's port (which connection), the body's size and the topic
    header. `/chunked` answers in two pieces without a length, `/close` asks to close, `/slow` waits 2 s."""

    def __init__(self) -> None:
        self.ports: list[int] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.ports.append(scope["client"][1])
        headers = dict(scope["headers"])
        answer = orjson.dumps({"size": len(body), "topic": headers.get(b"topic", b"").decode(), "sum": sum(body)})
        path = scope["path"]
        if path == "/slow":
            await asyncio.sleep(2)
        extra = [(b"connection", b"close")] if path == "/close" else []
        if path == "/chunked":
            json_type = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 200, "headers": json_type})
            await send({"type": "http.response.body", "body": answer[:5], "more_body": True})
            await send({"type": "http.response.body", "body": answer[5:]})
            return
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(answer)).encode()), *extra]})
        await send({"type": "http.response.body", "body": answer})


def run(awaitable: Awaitable[T]) -> T:
    async def main() -> T:
        return await awaitable

    return asyncio.run(main())


def test_calls_go_on_one_kept_connection_and_answers_arrive_whole() -> None:
    echo = Echo()
    big = bytes(range(256)) * 800  # 200 KiB: more than one socket write

    async def calls(url: str) -> list[Any]:
        async with HttpSender(url, transport=KeepAliveTransport(), timeout=5) as sender:
            answers = [await sender.send("orders:get", {"n": n}) for n in range(5)]
            answers.append(await sender.send("orders:big", big))
            answers.append(await sender.send("orders:chunked"))
            return answers

    with running(echo) as url:
        answers = run(calls(url))
    assert all(answer.status == OK for answer in answers)
    assert [answer.payload["topic"] for answer in answers[:5]] == ["orders:get"] * 5
    assert answers[5].payload == {"size": len(big), "topic": "orders:big", "sum": sum(big)}
    assert len(set(echo.ports)) == 1, "every call should reuse the first connection"


def test_a_chunked_answer_without_a_length_is_read_whole() -> None:
    async def call(url: str) -> Any:
        async with HttpSender(lambda _topic: f"{url}/chunked", transport=KeepAliveTransport(), timeout=5) as sender:
            return await sender.send("orders:get", {"n": 1})

    with running(Echo()) as url:
        answer = run(call(url))
    assert answer.status == OK and answer.payload["topic"] == "orders:get"


def test_a_connection_the_server_let_go_is_replaced_without_failing_the_call() -> None:
    echo = Echo()

    async def calls(url: str) -> list[Any]:
        async with HttpSender(url, transport=KeepAliveTransport(), timeout=5) as sender:
            first = await sender.send("orders:get", {})
            await asyncio.sleep(0.6)  # past the server's keep-alive: it closes the idle connection
            second = await sender.send("orders:get", {})
            return [first, second]

    with running(echo, timeout_keep_alive=0.2) as url:
        answers = run(calls(url))
    assert [answer.status for answer in answers] == [OK, OK]
    assert len(set(echo.ports)) == 2


def test_an_answer_asking_to_close_is_not_kept() -> None:
    echo = Echo()

    async def calls(url: str) -> list[Any]:
        target = f"{url}/close"
        async with HttpSender(lambda _topic: target, transport=KeepAliveTransport(), timeout=5) as sender:
            return [await sender.send("orders:get", {}) for _ in range(3)]

    with running(echo) as url:
        answers = run(calls(url))
    assert [answer.status for answer in answers] == [OK] * 3
    assert len(set(echo.ports)) == 3


def test_concurrent_calls_open_connections_and_keep_at_most_max_idle() -> None:
    echo = Echo()
    transport = KeepAliveTransport(max_idle=2)

    async def calls(url: str) -> list[Any]:
        async with HttpSender(url, transport=transport, timeout=5) as sender:
            answers = await asyncio.gather(*(sender.send("orders:get", {"n": n}) for n in range(6)))
            assert sum(len(idle) for idle in transport._idle.values()) <= 2
            return list(answers)

    with running(echo) as url:
        answers = run(calls(url))
    assert [answer.status for answer in answers] == [OK] * 6
    assert sorted(answer.payload["size"] for answer in answers) == sorted(len(orjson.dumps({"n": n})) for n in range(6))


def test_refused_and_slow_servers_are_failed_results_not_exceptions() -> None:
    async def refused() -> Any:
        async with HttpSender(f"http://127.0.0.1:{free_port()}", transport=KeepAliveTransport(), timeout=2) as sender:
            return await sender.send("orders:get", {})

    async def slow(url: str) -> Any:
        async with HttpSender(lambda _topic: f"{url}/slow", transport=KeepAliveTransport(), timeout=0.3) as sender:
            return await sender.send("orders:get", {})

    assert run(refused()).status == SERVICE_UNAVAILABLE
    with running(Echo()) as url:
        assert run(slow(url)).status == TIMEOUT


def test_only_plain_http_straight_to_its_host_gets_the_lean_transport(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert isinstance(lean_transport("http://collector:8700/svc/invoke"), KeepAliveTransport)
    assert lean_transport("https://collector:8700/svc/invoke") is None
    # A proxy in the environment: httpx's transport, which goes through it, as an httpx client would.
    monkeypatch.setenv("http_proxy", "http://proxy.internal:3128")
    assert lean_transport("http://collector:8700/svc/invoke") is None
    monkeypatch.setenv("no_proxy", "collector,localhost")
    assert isinstance(lean_transport("http://collector:8700/svc/invoke"), KeepAliveTransport)
    assert lean_transport("http://elsewhere:8700/svc/invoke") is None


def test_a_kept_connection_closed_before_answering_is_retried_once_on_a_new_one() -> None:
    """The race a kept connection can lose: the server closes it just as the next request goes out."""
    answer = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"
    connections: list[int] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(len(connections))
        first = len(connections) == 1
        await reader.readuntil(b"\r\n\r\n")
        await reader.readexactly(2)
        writer.write(answer)
        await writer.drain()
        if first:  # answer one request, then drop the connection as the next one arrives
            await reader.read(1)
            writer.close()
            return
        while True:
            head = await reader.readuntil(b"\r\n\r\n") if not reader.at_eof() else b""
            if not head:
                return
            await reader.readexactly(2)
            writer.write(answer)
            await writer.drain()

    async def calls() -> list[str]:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server, HttpSender(f"http://127.0.0.1:{port}", transport=KeepAliveTransport(), timeout=5) as sender:
            return [(await sender.send("orders:get", {})).status for _ in range(3)]

    assert run(calls()) == [OK, OK, OK]
    assert len(connections) == 2


def test_a_text_answer_is_read_in_its_charset_and_an_httpx_client_can_use_the_transport() -> None:
    async def latin(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await receive()
        body = "héllo".encode("latin-1")
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"text/plain; charset=latin-1"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    async def calls(url: str) -> tuple[Any, str, int]:
        async with HttpSender(url, transport=KeepAliveTransport(), timeout=5) as sender:
            answer = await sender.send("orders:get", {})
        async with httpx.AsyncClient(transport=KeepAliveTransport(), timeout=5) as client:
            response = await client.post(f"{url}/x", content=b"{}")
        return answer, response.text, response.status_code

    with running(latin) as url:
        answer, text, code = run(calls(url))
    assert answer.status == OK and answer.payload == "héllo"
    assert (code, text) == (200, "héllo")


class Agents(Echo):
    """Echo, noting the user agent of each request: httpx's client names itself, the lean transport sends none."""

    def __init__(self) -> None:
        super().__init__()
        self.agents: list[str] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.agents.append(dict(scope["headers"]).get(b"user-agent", b"").decode())
        await super().__call__(scope, receive, send)


def _no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)


def test_a_sender_built_without_a_transport_sends_plain_http_over_its_own_kept_connections(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _no_proxies(monkeypatch)
    server = Agents()

    async def calls(url: str) -> list[Any]:
        async with HttpSender(url) as sender:
            return [await sender.send("orders:get", {"n": n}) for n in range(3)]

    with running(server) as url:
        answers = run(calls(url))
    assert [answer.status for answer in answers] == [OK] * 3
    assert [answer.payload["topic"] for answer in answers] == ["orders:get"] * 3
    assert server.agents == ["", "", ""]  # not httpx's client
    assert len(set(server.ports)) == 1  # one connection, kept


def test_a_sender_in_an_environment_with_a_proxy_keeps_httpx_which_goes_through_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _no_proxies(monkeypatch)
    with running(Agents()) as url:
        monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{free_port()}")  # nobody listens there
        monkeypatch.setenv("no_proxy", "")

        async def call() -> Any:
            async with HttpSender(url, timeout=2) as sender:
                return await sender.send("orders:get", {})

        assert run(call()).status == SERVICE_UNAVAILABLE  # the proxy was tried, not the server


def test_a_host_no_proxy_names_is_called_straight_over_the_senders_own_connections(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _no_proxies(monkeypatch)
    server = Agents()
    with running(server) as url:
        monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{free_port()}")  # nobody listens there
        monkeypatch.setenv("no_proxy", "127.0.0.1")

        async def call() -> Any:
            async with HttpSender(url, timeout=2) as sender:
                return await sender.send("orders:get", {})

        assert run(call()).status == OK
    assert server.agents == [""]  # the sender's own transport, not httpx's client


def test_an_injected_transport_or_client_is_used_as_given(monkeypatch: pytest.MonkeyPatch) -> None:
    _no_proxies(monkeypatch)
    server = Agents()

    async def calls(url: str) -> None:
        async with HttpSender(url, transport=httpx.AsyncHTTPTransport()) as sender:
            await sender.send("orders:get", {})
        async with httpx.AsyncClient() as client, HttpSender(url, client=client) as sender:
            await sender.send("orders:get", {})

    with running(server) as url:
        run(calls(url))
    assert [agent.startswith("python-httpx/") for agent in server.agents] == [True, True]


class Held:
    """Holds each request 0.2 s, counting how many are in at once."""

    def __init__(self) -> None:
        self.inside = 0
        self.most = 0
        self.ports: set[int] = set()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        self.ports.add(scope["client"][1])
        self.inside += 1
        self.most = max(self.most, self.inside)
        await asyncio.sleep(0.2)
        self.inside -= 1
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b"{}"})


def test_calls_past_max_connections_wait_for_one_to_come_free() -> None:
    server = Held()

    async def calls(url: str) -> list[Any]:
        transport = KeepAliveTransport(max_connections=2)
        async with HttpSender(url, transport=transport) as sender:
            return list(await asyncio.gather(*(sender.send("orders:get", {"n": n}) for n in range(6))))

    with running(server) as url:
        answers = run(calls(url))
    assert [answer.status for answer in answers] == [OK] * 6
    assert server.most <= 2
    assert len(server.ports) <= 2  # the waiting calls took the freed connections


def test_a_call_that_finds_every_connection_busy_past_its_timeout_is_a_timeout() -> None:
    async def calls(url: str) -> tuple[Any, Any, float]:
        transport = KeepAliveTransport(max_connections=1)
        async with HttpSender(lambda _topic: f"{url}/slow", transport=transport, timeout=5) as busy, \
                HttpSender(url, transport=transport, timeout=0.3) as waiting:  # fmt: skip
            first = asyncio.create_task(busy.send("orders:get", {}))
            await asyncio.sleep(0.2)  # the one connection is taken
            started = time.monotonic()
            second = await waiting.send("orders:get", {})
            waited = time.monotonic() - started
            return await first, second, waited

    with running(Echo()) as url:
        first, second, waited = run(calls(url))
    assert first.status == OK
    assert second.status == TIMEOUT and "PoolTimeout" in (second.detail or "")
    assert waited < 1.9  # not the 2 s the busy call took


def test_max_connections_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_connections"):
        KeepAliveTransport(max_connections=0)
