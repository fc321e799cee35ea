"""Drive an ASGI app in-process with a real httpx client."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from svcgen.runtime import HttpApp


def call(app: HttpApp, method: str, url: str, **kwargs: Any) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            return await client.request(method, url, **kwargs)

    return asyncio.run(go())
