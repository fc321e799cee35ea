"""Typed calls to produced topics: the one place a generated client's call goes through.

A generated `clients.py` declares one `ClientCall` per `produces` entry (topic, version, the codecs of its request
and response) and a `Clients(ClientsBase)` whose methods are one line each: `self.call(<its ClientCall>, request,
headers)`. Encoding the request, the version header, sending and decoding the answer happen here, so whatever a
call gains (retries, credentials, deadlines) is added once, for every generated client.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, Final, Generic, TypeVar

import orjson

from ._codec import Codec
from ._http.sender import ClosesOnExit
from ._idempotency import IDEMPOTENCY_KEY_HEADER
from ._mesh.tracecontext import propagation_headers
from ._result import Result
from ._retry import Retry, RetryingSender, has_key
from ._topics import VERSION_ECHO_HEADER
from ._wiring import Sender, open_sender

Req = TypeVar("Req")
Resp = TypeVar("Resp")

_NO_HEADERS: Final[Mapping[str, str]] = {}


class ClientCall(Generic[Req, Resp]):
    """One produced topic as a typed call: its id, its version ("" when unversioned) and the codecs of its
    request and response types."""

    __slots__ = ("idempotent", "request", "response", "topic", "version")

    def __init__(
        self, topic: str, request: Codec[Req], response: Codec[Resp], version: str = "", *, idempotent: bool = False
    ) -> None:
        self.topic = topic
        self.version = version
        self.request = request
        self.response = response
        self.idempotent = idempotent
        """False: every call carries an `Idempotency-Key` (the same on each retry), so the owner runs it once."""

    def __repr__(self) -> str:
        return f"ClientCall({self.topic!r}, version={self.version!r})"


class ClientsBase(ClosesOnExit):
    """The base of a generated `Clients`: one sender, and `call` for every typed method.

    `target` is a target URL (an http(s) invoke base URL, or `nats://host:port/<service>`) or a `Sender` (one
    without encode/decode hooks: `call` encodes and decodes). A sender made here from a URL forwards the current
    trace (so the callee's span joins this invocation's trace), retries as `retry` says (docs/runtime.md,
    "Resilience") and is closed by `aclose()` or by leaving `async with`; a sender passed in stays its owner's to
    close. A call of a topic that is not idempotent carries an `Idempotency-Key` (the caller's own, if set).
    """

    def __init__(self, target: str | Sender, *, retry: Retry | None = None) -> None:
        self._owned: RetryingSender | None = None
        if isinstance(target, str):
            # Retried as `retry` says (default `Retry()`); each call's own key marks the ones that are not idempotent.
            sender = open_sender(target, extra_headers=propagation_headers)
            target = self._owned = RetryingSender(sender, idempotent=None, policy=retry)
        self.sender: Sender = target

    async def call(
        self, call: ClientCall[Req, Resp], request: Req, headers: Mapping[str, str] | None = None
    ) -> Result[Resp]:
        """Send `request` to `call`'s topic and read the answer back as its response type. Never raises: an
        answer that does not fit the response type is `unexpected-error` naming the topic."""
        sent = dict(headers) if headers else {}
        if call.version:
            sent[VERSION_ECHO_HEADER] = call.version
        if not call.idempotent and not has_key(sent):
            sent[IDEMPOTENCY_KEY_HEADER] = uuid.uuid4().hex
        body = orjson.dumps(call.request.encode(request))
        answer: Result[Any] = await self.sender.send(call.topic, body, sent or _NO_HEADERS)
        if not answer.is_successful or answer.payload is None:
            return Result(answer.status, None, answer.detail, answer.headers, answer.successful)
        try:
            payload = call.response.decode(answer.payload)
        except ValueError as error:  # the codec's DecodeError: the answer does not fit the declared type
            detail = f"the response to {call.topic} does not fit its type: {error}"
            return Result.unexpected_error(detail, headers=answer.headers)
        return Result(answer.status, payload, answer.detail, answer.headers, answer.successful)

    async def aclose(self) -> None:
        if self._owned is not None:
            await self._owned.aclose()
