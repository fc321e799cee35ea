"""Reading an ASGI HTTP request: headers, query fields and a size-bounded body."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qsl

AsgiScope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class BodyTooLarge(Exception):
    pass


class ClientDisconnected(Exception):
    pass


def request_headers(scope: AsgiScope) -> dict[str, str]:
    """Lower-cased headers; repeated headers are joined with `, ` as HTTP allows."""
    # One loop in this frame, not a comprehension (its own function call before Python 3.12): every request.
    headers: dict[str, str] = {}
    for raw_name, raw_value in scope.get("headers") or ():
        name = raw_name.decode("latin-1").lower()
        value = raw_value.decode("latin-1")
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return headers


class QueryNotUtf8(ValueError):
    """A query string whose bytes, raw or percent-encoded, are not UTF-8: refused, never silently replaced."""


def query_fields(scope: AsgiScope) -> dict[str, str | tuple[str, ...]]:
    """Query-string fields; a name given more than once holds every value, in order, for the request type to
    take (a list field) or refuse, never one picked. Raises `QueryNotUtf8`."""
    raw = scope.get("query_string") or b""
    if not raw:
        return {}
    try:
        pairs = parse_qsl(raw.decode("utf-8"), keep_blank_values=True, errors="strict")
    except UnicodeDecodeError:
        raise QueryNotUtf8("query is not valid UTF-8") from None
    fields: dict[str, str | tuple[str, ...]] = dict(pairs)
    if len(fields) == len(pairs):  # no name repeats: the usual query
        return fields
    every: dict[str, list[str]] = {}
    for name, value in pairs:
        every.setdefault(name, []).append(value)
    return {name: values[0] if len(values) == 1 else tuple(values) for name, values in every.items()}


def whole_body(message: Message, limit: int) -> bytes | None:
    """The body when the request's first message carries all of it (most requests), at most `limit` bytes
    (`BodyTooLarge` past it); None when more is to come (`read_body` with this message then reads the rest)."""
    if message.get("type") == "http.disconnect":
        raise ClientDisconnected
    if message.get("more_body"):
        return None
    body: bytes = message.get("body") or b""
    if len(body) > limit:
        raise BodyTooLarge
    return body


async def read_body(receive: Receive, limit: int, first: Message | None = None) -> bytes:
    """The whole body, at most `limit` bytes (`BodyTooLarge` past it); `first`: the request's first message, when
    the caller has received it already."""
    message = first if first is not None else await receive()
    body = whole_body(message, limit)
    if body is not None:
        return body
    chunks: list[bytes] = []
    size = 0
    while True:
        if message.get("type") == "http.disconnect":
            raise ClientDisconnected
        chunk = message.get("body") or b""
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        if chunk:
            chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)
        message = await receive()
