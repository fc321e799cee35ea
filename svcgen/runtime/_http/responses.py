"""Writing an ASGI HTTP response."""

from __future__ import annotations

from collections.abc import Mapping

import orjson

from .._outcome import JSON_CONTENT_TYPE
from .._status import NO_BODY_CODES
from .requests import Send

_JSON_HEADERS = [(b"content-type", JSON_CONTENT_TYPE.encode())]


async def send_response(send: Send, code: int, body: bytes, headers: Mapping[str, str] | None = None) -> None:
    if code in NO_BODY_CODES:
        body = b""
    raw_headers = (
        [(name.encode("latin-1", "replace"), value.encode("latin-1", "replace")) for name, value in headers.items()]
        if headers
        else list(_JSON_HEADERS)
    )
    if code not in NO_BODY_CODES:
        raw_headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": code, "headers": raw_headers})
    await send({"type": "http.response.body", "body": body})


async def send_failure(send: Send, code: int, status: str, detail: str) -> None:
    """A transport-level error with the failure body `{status, detail}`."""
    await send_response(send, code, orjson.dumps({"status": status, "detail": detail}))
