"""Writing an ASGI HTTP response."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import orjson

from .._result import JSON_CONTENT_TYPE, Outcome
from .._status import NO_BODY_CODES
from .requests import Message, Send
from .sender import header_bytes

RawHeaders = list[tuple[bytes, bytes]]

_JSON_HEADERS: RawHeaders = [(b"content-type", JSON_CONTENT_TYPE.encode())]
_PLAIN_HEADERS: dict[tuple[str, tuple[tuple[str, str], ...]], RawHeaders] = {}
"""Encoded headers of an outcome whose result sets none, by version and the registration's own headers (both the
registrations' own, so few)."""
# The binding frames the answer itself; a handler's copy of these would contradict the body it sends.
_FRAMING_RESPONSE_HEADERS: Final = frozenset(
    {"content-length", "transfer-encoding", "connection", "keep-alive", "upgrade", "te", "trailer"}
)


async def send_response(send: Send, code: int, body: bytes, headers: Mapping[str, str] | None = None) -> None:
    start, answer = _messages(code, body, _encoded(headers) if headers else _JSON_HEADERS)
    await send(start)
    await send(answer)


def outcome_messages(outcome: Outcome) -> tuple[Message, Message]:
    """The two ASGI messages that answer with `outcome`: its status and headers, then its body."""
    result = outcome.result
    if result.headers:
        headers = _wire_headers(outcome.headers())
    else:
        key = (outcome.version, outcome.fixed)
        headers = _PLAIN_HEADERS.get(key) or _PLAIN_HEADERS.setdefault(key, _encoded(outcome.headers()))
    return _messages(result.http_code, outcome.body, headers)


def _messages(code: int, body: bytes, headers: RawHeaders) -> tuple[Message, Message]:
    """The start message (with a new header list) and the body message: the one place an answer drops its body, as
    HTTP's 204 and 304 carry none."""
    if code in NO_BODY_CODES:
        sent, body = headers.copy(), b""
    else:
        sent = [*headers, (b"content-length", str(len(body)).encode())]
    start = {"type": "http.response.start", "status": code, "headers": sent}
    return start, {"type": "http.response.body", "body": body}


def _encoded(headers: Mapping[str, str]) -> RawHeaders:
    return [(name.encode("latin-1", "replace"), value.encode("latin-1", "replace")) for name, value in headers.items()]


def _wire_headers(headers: Mapping[str, str]) -> RawHeaders:
    """Encoded headers of an answer carrying a handler's own: one that cannot be an HTTP header (a name that is no
    token, a value with control characters or beyond latin-1) or that frames the answer is dropped, since the
    server would refuse the whole answer or send it mis-framed."""
    wire: RawHeaders = []
    for name, value in headers.items():
        encoded = header_bytes(name, value, _FRAMING_RESPONSE_HEADERS)
        if encoded is not None:
            wire.append((name.encode("latin-1"), encoded))
    return wire


async def send_failure(
    send: Send, code: int, status: str, detail: str, headers: Mapping[str, str] | None = None
) -> None:
    """A transport-level error with the failure body `{status, detail}` (and `headers` beside its content type)."""
    body = orjson.dumps({"status": status, "detail": detail})
    await send_response(send, code, body, {"content-type": JSON_CONTENT_TYPE, **headers} if headers else None)
