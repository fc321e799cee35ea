"""Collector feeds: register, heartbeat, traces and issues sent as envelopes through any sender.

A feed reports the outbound `Result` and never raises: a failed feed must not touch service traffic.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final, cast

import orjson

from .._codec import codec_for
from .._health import HealthReport
from .._http.sender import HttpSender
from .._http.transport import lean_transport
from .._result import Result
from .._shapes import RecordShape, shape_of
from .._topics import DEFAULT_PREFIX, HEARTBEAT_TOPIC, ISSUES_TOPIC, REGISTER_TOPIC, TRACES_TOPIC, normalize_prefix
from .._wiring import Sender
from .messages import CheckResult, HealthDocument, Heartbeat, RawTraceBatch

logger = logging.getLogger("svcgen.mesh.feeds")
_ENCODE_HEARTBEAT: Final = codec_for(Heartbeat).encode
_ENCODE_TRACE_BATCH: Final = codec_for(RawTraceBatch).encode
_EVENTS_KEY: Final = next(f.wire for f in cast(RecordShape, shape_of(RawTraceBatch)).fields if f.attr == "events")
"""The wire name of a batch's entries."""

DEFAULT_FEED_TIMEOUT = 2.0
TOKEN_ENV = "SVCGEN_COLLECTOR_TOKEN"
"""The token of a locked collector: the collector's own (`svcgen collector serve`) and its reporters' setting."""
MAX_TRACE_BATCH_BYTES: Final = 896 * 1024
"""A trace batch's envelope stays under this, below a collector's default 1 MiB body limit (past it, halves)."""
ENVELOPE_ALLOWANCE: Final = 4096
"""Bytes the envelope adds around a batch: its topic, headers and keys."""
REREGISTER_KEY = "reregister"
"""Set true in a heartbeat answer when the collector wants the service to register again."""




def bearer(token: str | None) -> dict[str, str]:
    """The `authorization` header a locked collector wants, or none without a token."""
    return {"authorization": f"Bearer {token}"} if token else {}


class WrittenBody(dict[str, Any]):
    """A feed body that carries its JSON text, written once (a trace batch is weighed in it before it goes): any
    sender reads it as the dict it is, the feeds' own senders put `json` in the envelope as it is."""

    __slots__ = ("json",)

    def __init__(self, body: Mapping[str, Any]) -> None:
        super().__init__(body)
        self.json = orjson.dumps(body)


def feed_envelope(topic: str, payload: Any = None, headers: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The message envelope a feed travels in, over any transport: its body is the payload's JSON text."""
    text = payload.json if isinstance(payload, WrittenBody) else orjson.dumps(payload)
    return {"topic": topic, "headers": dict(headers or {}), "body": text.decode()}


class EnvelopeSender:
    """Sends by HTTP POST of the message envelope to `{collector}{prefix}/invoke`, with `authorization: Bearer
    <token>` when given the collector's token; over `KeepAliveTransport` for a plain-HTTP collector (a feed
    repeats one call all day), unless a `sender`, `client` or `transport` is given."""

    def __init__(
        self,
        collector_url: str,
        prefix: str = DEFAULT_PREFIX,
        *,
        sender: HttpSender | None = None,
        timeout: float = DEFAULT_FEED_TIMEOUT,
        token: str | None = None,
        **sender_options: Any,
    ) -> None:
        self.url = collector_url.rstrip("/") + normalize_prefix(prefix) + "/invoke"
        if sender is None and "client" not in sender_options and "transport" not in sender_options:
            sender_options["transport"] = lean_transport(self.url)
        self._sender = sender or HttpSender(lambda _topic: self.url, timeout=timeout, **sender_options)
        self._headers = bearer(token)

    async def send(self, topic: str, payload: Any = None, headers: Mapping[str, str] | None = None) -> Result[Any]:
        answer = await self._sender.send(topic, feed_envelope(topic, payload, headers), self._headers)
        if not answer.is_successful:
            return answer
        return _unwrap(answer.payload)

    async def aclose(self) -> None:
        await self._sender.aclose()


def _unwrap(answer: Any) -> Result[Any]:
    """The response envelope's domain outcome as a Result."""
    if not (isinstance(answer, dict) and isinstance(answer.get("statusCode"), str)):
        return Result.unexpected_error("the collector did not answer with a response envelope")
    status = answer["statusCode"]
    text = answer.get("body")
    try:
        body = orjson.loads(text) if isinstance(text, str) and text else None
    except orjson.JSONDecodeError:
        body = text
    result = Result.of(status)
    if result.is_successful:
        return Result.of(status, body)
    detail = body.get("detail") if isinstance(body, dict) else None
    return Result.of(status, detail=detail if isinstance(detail, str) else status)


class FeedSender:
    def __init__(self, sender: Sender, *, max_trace_batch_bytes: int = MAX_TRACE_BATCH_BYTES) -> None:
        self.sender = sender
        self.max_trace_batch_bytes = max_trace_batch_bytes

    async def register(self, descriptor: Mapping[str, Any]) -> Result[Any]:
        return await self._send(REGISTER_TOPIC, descriptor)

    async def heartbeat(self, heartbeat: Mapping[str, Any]) -> Result[Any]:
        return await self._send(HEARTBEAT_TOPIC, heartbeat)

    async def traces(self, events: Sequence[Mapping[str, Any]], batch_id: str) -> Result[Any]:
        """`{events, batchId}` of entries in wire form (as `TraceEntry`'s codec writes them): the same id on every
        resend of a batch, so the collector can count it once.

        A batch whose envelope could pass the collector's body limit (`MAX_TRACE_BATCH_BYTES`: long texts in
        every entry) goes in halves, `<batchId>-1` and `<batchId>-2`, split alike on every resend; a refused
        oversized body would otherwise be resent forever. The first failed part is the answer."""
        batch = WrittenBody(trace_batch(events, batch_id))
        if len(events) < 2 or _fits_envelope(batch.json, self.max_trace_batch_bytes):
            return await self._send(TRACES_TOPIC, batch)
        half = len(events) // 2
        accepted = 0
        for number, part in enumerate((events[:half], events[half:]), start=1):
            sent = await self.traces(part, f"{batch_id}-{number}")
            if not sent.is_successful:
                return sent
            if isinstance(sent.payload, Mapping) and isinstance(sent.payload.get("accepted"), int):
                accepted += sent.payload["accepted"]
        return Result.ok({"accepted": accepted})

    async def issues(self, batch: Mapping[str, Any]) -> Result[Any]:
        """`{service, issues, batchId}`, the id set by the reporter and kept on every resend."""
        return await self._send(ISSUES_TOPIC, batch)

    async def _send(self, topic: str, body: Any) -> Result[Any]:
        try:
            return await self.sender.send(topic, body)
        except Exception as exc:
            logger.warning("feed %s failed: %s", topic, type(exc).__name__)
            return Result.unexpected_error(f"feed {topic} failed ({type(exc).__name__})")


def _fits_envelope(text: bytes, limit: int) -> bool:
    """Whether a batch of JSON `text` stays within `limit` inside its envelope, where it is a string: each `"` and
    `\\` escaped. They are counted only when the bound of every byte escaped does not settle it (two passes over
    every batch otherwise)."""
    if 2 * len(text) + ENVELOPE_ALLOWANCE <= limit:
        return True
    return len(text) + text.count(b'"') + text.count(b"\\") + ENVELOPE_ALLOWANCE <= limit


def trace_batch(events: Sequence[Mapping[str, Any]], batch_id: str) -> dict[str, Any]:
    """The traces feed's `{events, batchId}` around entries already in wire form."""
    batch: dict[str, Any] = _ENCODE_TRACE_BATCH(RawTraceBatch([], batch_id))
    batch[_EVENTS_KEY] = list(events)  # already written: the codec would walk every value again
    return batch


def heartbeat_document(
    service: str,
    sent_at: float,
    report: HealthReport | None = None,
    *,
    instance_id: str | None = None,
    descriptor_hash: str | None = None,
) -> dict[str, Any]:
    """`{service, sentAt, instanceId?, descriptorHash?, health}`, encoded through the heartbeat's record; `sent_at` in
    epoch seconds; health defaults to healthy with no checks."""
    health = (
        HealthDocument()
        if report is None
        else HealthDocument(
            report.is_healthy,
            {name: CheckResult(result.status, result.detail or None) for name, result in report.checks.items()},
        )
    )
    document: dict[str, Any] = _ENCODE_HEARTBEAT(
        Heartbeat(service, datetime.fromtimestamp(sent_at, UTC), instance_id or None, descriptor_hash or None, health)
    )
    return document
