"""Call an ASGI app with raw scope values, bypassing any client's validation; run its lifespan without a server."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any


async def raw_request(
    app: Any, method: str, raw_path: bytes, query: bytes, headers: list[tuple[bytes, bytes]], body: bytes
) -> tuple[int, dict[bytes, bytes], bytes]:
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": raw_path.decode("latin-1"),
        "raw_path": raw_path,
        "query_string": query,
        "headers": headers,
        "server": ("127.0.0.1", 80),
        "client": ("127.0.0.1", 5000),
    }
    chunks = [body[i : i + 65536] for i in range(0, len(body), 65536)] or [b""]
    incoming = [
        {"type": "http.request", "body": chunk, "more_body": index < len(chunks) - 1}
        for index, chunk in enumerate(chunks)
    ]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if incoming:
            return incoming.pop(0)
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await asyncio.wait_for(app(scope, receive, send), timeout=10)
    start = sent[0]
    assert start["type"] == "http.response.start"
    body_out = b"".join(m.get("body", b"") for m in sent[1:])
    return start["status"], dict(start["headers"]), body_out


@contextlib.asynccontextmanager
async def lifespan(app: Any, timeout: float = 20.0) -> AsyncIterator[None]:
    """Runs `app`'s lifespan startup, then its shutdown on exit, in the running loop (no server)."""
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    task = asyncio.create_task(app({"type": "lifespan", "asgi": {"version": "3.0"}}, inbox.get, outbox.put))
    await inbox.put({"type": "lifespan.startup"})
    started = await asyncio.wait_for(outbox.get(), timeout)
    assert started["type"] == "lifespan.startup.complete", started
    try:
        yield
    finally:
        await inbox.put({"type": "lifespan.shutdown"})
        stopped = await asyncio.wait_for(outbox.get(), timeout)
        assert stopped["type"] == "lifespan.shutdown.complete", stopped
        await asyncio.wait_for(task, timeout)
