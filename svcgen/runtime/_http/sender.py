"""`HttpSender`: send a message to another service by HTTP POST and map the answer back to a `Result`.

Spec "Outbound HTTP sender"; the code → status direction is `status_for_code` (docs/wire.md, Statuses), never
restated here. A failed answer whose failure body names a known failure status is that status (a svcgen service's
405, 413 and 431 say `bad-request` there); else the code's.
A send never raises: every failure on the way out or back is a failed `Result`.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Final, Self, TypeAlias
from urllib.parse import quote, urlsplit, urlunsplit

import httpx
import orjson

from .._codec import float_subclass
from .._deadline import DEADLINE_HEADER, Clock, deadline_header, remaining
from .._result import Result
from .._status import (
    FAILURE_CODES,
    NOT_FOUND,
    SERVICE_UNAVAILABLE,
    TIMEOUT,
    UNEXPECTED_ERROR,
    VALIDATION_ERROR,
    is_success,
    status_for_code,
)
from .transport import KeepAliveTransport, direct_transport, goes_direct

Target: TypeAlias = str | Mapping[str, str] | Callable[[str], str]
"""A base URL (the topic is appended as one path segment), a topic → URL map, or a topic → URL function."""

HeaderHook: TypeAlias = Callable[[], Mapping[str, str]]

DEFAULT_TOPIC_HEADER: Final = "topic"
DEFAULT_TIMEOUT: Final = 10.0
URL_CACHE_SIZE: Final = 1024
"""Resolved URLs kept per sender; past this, new topics are resolved on every send instead of cached."""

_JSON_CONTENT_TYPE: Final = b"application/json"
# The sender frames the request itself; a caller's copy of these would contradict the body it sends.
_FRAMING_REQUEST_HEADERS: Final = frozenset(
    {"content-type", "content-length", "transfer-encoding", "host", "connection", "keep-alive", "upgrade", "te"}
)
# These describe the wire body, which the Result no longer carries as bytes (httpx already decoded and
# decompressed it); forwarding them through a handler's Result would mis-frame that handler's response.
_WIRE_RESPONSE_HEADERS: Final = frozenset(
    {"content-type", "content-length", "content-encoding", "transfer-encoding", "connection", "keep-alive", "trailer",
     "date", "server"}  # each server writes its own: a handler answering with this Result would send them twice
)
_Answer: TypeAlias = tuple[int, httpx.Headers, bytes, Callable[[], str]]
"""Status code, headers, body, and how to read the body as text."""
_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# Control characters other than HTAB: CR/LF would split the header; the rest are refused by servers.
_BAD_VALUE_CHARS: Final = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


class ClosesOnExit:
    """`async with sender:` closes it on the way out (`aclose`)."""

    async def aclose(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


class HttpSender(ClosesOnExit):
    """Sends `(topic, payload, headers)` as an HTTP POST and returns the answer as a `Result`.

    - `target`: see `Target`. A topic it cannot resolve to an http(s) URL is `not-found`.
    - `topic_header`: name of the header carrying the topic (default `topic`); it always carries the topic sent.
      An empty topic, or one no header can carry (control characters, beyond latin-1), is `validation-error`.
    - Message headers go out lower-cased; one that cannot be an HTTP header, or that frames the request
      (`content-type`, `content-length`, `host`, ...), is dropped rather than failing the send.
    - `encode`: turns a typed payload into JSON-able wire form before orjson (default: identity). `bytes`/`str`
      payloads are sent as-is (already JSON text); `None` sends an empty body (read as `{}` by a record route).
    - `decode`: turns the JSON payload of a successful answer into a typed object; a failure is `unexpected-error`.
    - `extra_headers`: called on every send; its headers are added only where the caller set none of that
      name (case-insensitive). The seam for trace propagation (`traceparent`); if it raises, it is skipped.
    - `transport` / `client`: the replaceable HTTP call. An injected `client` is used as configured and never
      closed here; otherwise the sender owns an `httpx.AsyncClient` (on `transport`, if given) and closes it.
      With neither, plain-HTTP calls go over a `KeepAliveTransport` of the sender's own (no httpx client layer),
      except to a host the environment's proxy stands before (`http_proxy`/`all_proxy`, unless `no_proxy` names
      it); those and https go through the client.
    - `timeout`: seconds (or an `httpx.Timeout`); default 10 s for an owned client. With an injected client it
      applies per request only when given.
    - Within a deadline (a handler's, or `deadline(...)`), what is left of it goes out as `svc-deadline`
      (milliseconds) and bounds the whole call: past it the send is `timeout`. `clock` measures it.
    """

    def __init__(
        self,
        target: Target,
        *,
        topic_header: str = DEFAULT_TOPIC_HEADER,
        encode: Callable[[Any], Any] | None = None,
        decode: Callable[[Any], Any] | None = None,
        extra_headers: HeaderHook | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        client: httpx.AsyncClient | None = None,
        timeout: float | httpx.Timeout | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        if client is not None and transport is not None:
            raise ValueError("pass either a client or a transport, not both")
        if not _TOKEN.fullmatch(topic_header):
            raise ValueError(f"topic header {topic_header!r} is not a valid HTTP header name")
        self._topic_header = topic_header.lower()
        self._encode = encode
        self._decode = decode
        self._extra_headers = extra_headers
        self._clock = clock
        self._base: tuple[str, str, str, str] | None = None
        self._lookup: Callable[[str], str | None] | None = None
        if isinstance(target, str):
            self._base = _split_base(target)
        elif isinstance(target, Mapping):
            self._lookup = target.get  # bound, not copied: later changes to the map are seen
        else:
            self._lookup = target
        # Base-URL form: topic → URL. Map/function form: URL text → parsed URL (the lookup itself stays live).
        self._by_topic: dict[str, httpx.URL] = {}
        self._by_text: dict[str, httpx.URL] = {}

        self._owns_client = client is None
        self._owns_lean = transport is None and client is None
        """The sender's own transport (`direct_transport`): the client keeps httpx's for https and through a proxy."""
        self._lean: KeepAliveTransport | None = (
            direct_transport() if self._owns_lean else transport if isinstance(transport, KeepAliveTransport) else None
        )
        """Called without httpx's client layer (`KeepAliveTransport.post`) for a plain-HTTP URL."""
        self._direct: dict[str, bool] = {}
        """By host: whether the sender's own transport takes its plain-HTTP calls (`goes_direct`)."""
        self._lean_timeout = _read_timeout(timeout)
        if client is None:
            client = httpx.AsyncClient(transport=transport, timeout=DEFAULT_TIMEOUT if timeout is None else timeout)
            self._request_timeout: Any = httpx.USE_CLIENT_DEFAULT
        else:
            self._request_timeout = httpx.USE_CLIENT_DEFAULT if timeout is None else timeout
        self._client = client
        self._closed = False

    async def send(self, topic: str, payload: Any = None, headers: Mapping[str, str] | None = None) -> Result[Any]:
        """POST the message to the topic's URL; never raises (cancellation aside)."""
        if self._closed:
            return Result.of(UNEXPECTED_ERROR, detail="sender is closed")
        wire_topic = _header_value(topic) if topic else None
        if wire_topic is None or wire_topic != topic.encode("latin-1"):
            # The spec requires the topic header; a topic that cannot be one is refused, not sent without it.
            return Result.of(VALIDATION_ERROR, detail=f"topic {topic!r} cannot be sent as an HTTP header")
        url = self._resolve(topic)
        if url is None:
            return Result.of(NOT_FOUND, detail=f"no URL for topic {topic!r}")
        where = display_url(url)
        try:
            body = payload_bytes(payload, self._encode)
        except Exception as exc:
            return Result.of(UNEXPECTED_ERROR, detail=f"payload could not be encoded as JSON ({type(exc).__name__})")
        left = remaining(self._clock)
        try:
            if left is None:
                answer = await self._post(url, body, self._headers(wire_topic, headers))
            else:
                # Within a deadline (a handler's, or `deadline(...)`): send what is left, wait no longer.
                if left <= 0:
                    return Result.of(TIMEOUT, detail=f"the deadline passed before calling {where}")
                async with asyncio.timeout(left):
                    answer = await self._post(url, body, self._headers(wire_topic, headers, left))
        except TimeoutError:
            return Result.of(TIMEOUT, detail=f"the deadline passed while calling {where}")
        # TimeoutException is a TransportError: it must be matched first.
        except httpx.TimeoutException as exc:
            return Result.of(TIMEOUT, detail=f"timed out calling {where} ({type(exc).__name__})")
        except httpx.TransportError as exc:
            return Result.of(SERVICE_UNAVAILABLE, detail=f"cannot reach {where} ({type(exc).__name__})")
        except Exception as exc:
            return Result.of(UNEXPECTED_ERROR, detail=f"sending to {where} failed ({type(exc).__name__})")
        return self._result(*answer, where)

    async def aclose(self) -> None:
        self._closed = True
        if self._owns_lean and self._lean is not None:
            await self._lean.aclose()
        if self._owns_client:
            await self._client.aclose()

    # -- request ---------------------------------------------------------------------------------------------

    def _resolve(self, topic: str) -> httpx.URL | None:
        if self._base is not None:
            url = self._by_topic.get(topic)
            if url is None:
                url = _parse(_join(self._base, topic))
                if url is not None and len(self._by_topic) < URL_CACHE_SIZE:
                    self._by_topic[topic] = url
            return url
        if self._lookup is None:
            return None
        try:
            text = self._lookup(topic)
        except Exception:
            return None
        if not text or not isinstance(text, str):
            return None
        url = self._by_text.get(text)
        if url is None:
            url = _parse(text)
            if url is not None and len(self._by_text) < URL_CACHE_SIZE:
                self._by_text[text] = url
        return url


    def _headers(
        self, wire_topic: bytes, headers: Mapping[str, str] | None, left: float | None = None
    ) -> list[tuple[bytes, bytes]]:
        merged = outbound_headers(headers, self._extra_headers, left)
        merged.pop(self._topic_header, None)  # the topic header always names the topic being sent
        wire = [(name.encode("ascii"), value) for name, value in merged.items()]
        wire.append((b"content-type", _JSON_CONTENT_TYPE))
        wire.append((self._topic_header.encode("ascii"), wire_topic))
        return wire

    async def _post(self, url: httpx.URL, body: bytes, headers: list[tuple[bytes, bytes]]) -> _Answer:
        if self._lean is not None and url.scheme == "http" and (not self._owns_lean or self._goes_direct(url.host)):
            code, raw, content = await self._lean.post(url, headers, body, self._lean_timeout)
            # The body as text only for an answer that is not JSON: httpx's own reading of its charset.
            return code, httpx.Headers(raw), content, lambda: httpx.Response(code, headers=raw, content=content).text
        response = await self._client.post(url, content=body, headers=headers, timeout=self._request_timeout)
        return response.status_code, response.headers, response.content, lambda: response.text

    def _goes_direct(self, host: str) -> bool:
        direct = self._direct.get(host)
        if direct is None:
            direct = goes_direct(host)
            if len(self._direct) < URL_CACHE_SIZE:
                self._direct[host] = direct
        return direct

    # -- response --------------------------------------------------------------------------------------------

    def _result(
        self, code: int, answer: httpx.Headers, content: bytes, text: Callable[[], str], where: str
    ) -> Result[Any]:
        status = status_for_code(code)
        headers = {name: value for name, value in answer.items() if name not in _WIRE_RESPONSE_HEADERS}
        is_json, payload = _read_body(content, answer.get("content-type"), text)
        if not is_success(status):
            # A svcgen service names the status of a code the table has no word for (405, 413, 431) in its body.
            status = (_failure_status(payload) if is_json else None) or status
            detail = _failure_detail(payload) if is_json else None
            return Result.of(status, detail=detail or f"HTTP {code} from {where}", headers=headers)
        if self._decode is not None and payload is not None:
            if not is_json:
                return Result.of(UNEXPECTED_ERROR, detail=f"HTTP {code} from {where} is not JSON", headers=headers)
            try:
                payload = self._decode(payload)
            except Exception as exc:
                return Result.of(
                    UNEXPECTED_ERROR,
                    detail=_short(f"response from {where} could not be decoded: {exc or type(exc).__name__}"),
                    headers=headers,
                )
        return Result.of(status, payload, headers=headers)


def outbound_headers(
    headers: Mapping[str, str] | None, extra: HeaderHook | None, left: float | None
) -> dict[str, bytes]:
    """The headers a sender puts on the wire: the caller's, then the hook's where the caller set none, then what
    is left of the current deadline (`left` seconds) as `svc-deadline`."""
    merged: dict[str, bytes] = {}
    if headers:
        _merge(merged, headers, override=True)
    if extra is not None:
        # A failing hook (e.g. no current trace) must not cost the send.
        with contextlib.suppress(Exception):
            _merge(merged, extra(), override=False)
    if left is not None:
        merged[DEADLINE_HEADER] = deadline_header(left).encode()
    return merged


def payload_bytes(payload: Any, encode: Callable[[Any], Any] | None = None) -> bytes:
    """The wire body of a payload: `bytes`/`str` as they are (JSON text already), `None` empty, else its JSON
    (after `encode`, which turns a typed payload into JSON-able form)."""
    if payload is None:
        return b""
    if isinstance(payload, bytes | bytearray):
        return bytes(payload)
    if isinstance(payload, str):
        return payload.encode()
    return orjson.dumps(encode(payload) if encode is not None else payload, default=float_subclass)


def _split_base(base: str) -> tuple[str, str, str, str]:
    parts = urlsplit(base)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"base URL {base!r} is not an absolute http(s) URL")
    return parts.scheme, parts.netloc, parts.path.rstrip("/"), parts.query


def _join(base: tuple[str, str, str, str], topic: str) -> str:
    scheme, netloc, path, query = base
    # Dot segments would be collapsed by URL normalisation; their encoded form is the same segment, kept.
    segment = {".": "%2E", "..": "%2E%2E"}.get(topic) or quote(topic, safe=":")
    return urlunsplit((scheme, netloc, f"{path}/{segment}", query, ""))


def _parse(text: str) -> httpx.URL | None:
    try:
        url = httpx.URL(text)
    except Exception:
        return None
    return url if url.scheme in ("http", "https") and url.host else None


def display_url(url: httpx.URL) -> str:
    """The URL for a detail or a log line: no credentials, no query, no fragment."""
    port = f":{url.port}" if url.port is not None else ""
    return f"{url.scheme}://{url.host}{port}{url.path}"


def _merge(into: dict[str, bytes], headers: Mapping[str, str], *, override: bool) -> None:
    """Add the headers that can go on the wire, lower-cased; the rest are dropped, never fatal to the send."""
    for name, value in headers.items():
        wire = header_bytes(name, value, _FRAMING_REQUEST_HEADERS)
        if wire is not None and (override or name.lower() not in into):
            into[name.lower()] = wire


def header_bytes(name: object, value: object, framing: frozenset[str]) -> bytes | None:
    """The value's wire bytes when `name: value` can go on the wire as a header and `name` (any case) is none of
    `framing`, the headers the sender writes itself; else None, and the header is dropped (the one rule of
    requests sent and answers given)."""
    if not isinstance(name, str) or not _TOKEN.fullmatch(name) or name.lower() in framing:
        return None
    return _header_value(value)


def _header_value(value: object) -> bytes | None:
    """Wire bytes of a header value, or `None`; inbound headers arrive latin-1 decoded, so latin-1 round-trips them."""
    if not isinstance(value, str):
        return None
    value = value.strip(" \t")  # surrounding whitespace is not part of a value, and h11 refuses it
    if _BAD_VALUE_CHARS.search(value):
        return None
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError:
        return None


def _read_body(content: bytes, content_type: str | None, text: Callable[[], str]) -> tuple[bool, Any]:
    """`(is_json, payload)`: parsed JSON when the body is JSON, `None` when empty, else the text."""
    if not content:
        return True, None
    if _json_media(content_type):
        try:
            return True, orjson.loads(content)
        except orjson.JSONDecodeError:
            pass
    return False, text()


def _read_timeout(timeout: float | httpx.Timeout | None) -> float:
    """The seconds a lean call waits to connect and then for its answer."""
    if timeout is None:
        return DEFAULT_TIMEOUT
    if isinstance(timeout, httpx.Timeout):
        return max((value for value in (timeout.connect, timeout.read) if value is not None), default=DEFAULT_TIMEOUT)
    return float(timeout)


def _json_media(content_type: str | None) -> bool:
    if not content_type:  # unlabelled bodies are tried as JSON; a JSON service may not label them
        return True
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def _failure_status(body: Any) -> str | None:
    """The `status` of a failure body when it is a known failure status, else `None` (the code says it)."""
    if isinstance(body, dict):
        status = body.get("status")
        if isinstance(status, str) and status in FAILURE_CODES:
            return status
    return None


def _failure_detail(body: Any) -> str | None:
    """The `detail` of a `{status, detail}` failure body, else `None`."""
    if isinstance(body, dict):
        status, detail = body.get("status"), body.get("detail")
        if isinstance(status, str) and isinstance(detail, str) and detail:
            return detail
    return None


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
