"""`NatsSender`: send a produced topic over NATS request/reply and read the response envelope back as a `Result`.

A target is `nats://host:port/<service>`: the message goes to `svc.topic.<service>.<topic>` with its headers as
NATS headers (the version as `svc-version`, the trace as `traceparent`), and the reply is the callee's response
envelope, whose statusCode is the result's status. Like `HttpSender`, a send never raises: no responders is
`service-unavailable` at once, no reply within the timeout `timeout`, anything else on the way a failed `Result`.
Each message carries how long its sender still waits (`svc-deadline`, milliseconds: its timeout, or what is left of
the current deadline when that is sooner), so a callee does not start work nobody waits for any more.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urlsplit

import orjson

from .._deadline import Clock, remaining
from .._http.sender import ClosesOnExit, HeaderHook, _failure_detail, outbound_headers, payload_bytes
from .._logging import shown
from .._result import Result
from .._status import NOT_FOUND, SERVICE_UNAVAILABLE, TIMEOUT, UNEXPECTED_ERROR, is_success
from .connections import NatsConnections, NatsError, server_of
from .subjects import topic_subject

DEFAULT_TIMEOUT: Final = 10.0
"""Seconds a send waits for its reply, as `HttpSender`."""
_ENVELOPE_ONLY: Final = frozenset({"content-type"})


def nats_target(url: str) -> tuple[str, str]:
    """(server, service) of a target `nats://host:port/<service>`; NatsError naming the expected form."""
    server = server_of(url)
    service = urlsplit(url.strip()).path.strip("/")
    if not service or any(char in service for char in "./*> \t"):
        raise NatsError(f"{shown(url)!r}: a NATS target names the receiving service: nats://host:port/<service>")
    return server, service


class NatsSender(ClosesOnExit):
    """Sends `(topic, payload, headers)` to the service a NATS target names and returns its answer as a `Result`.

    - `target`: one target URL for every topic, or a topic → target URL map (a topic it lacks is `not-found`).
    - `connections`: the process's NATS connections (shared, closed by their owner); without it the sender opens
      its own and closes them in `aclose`.
    - `extra_headers`: as `HttpSender`'s, e.g. `propagation_headers`, so the callee joins the caller's trace.
    - Payloads are sent as `HttpSender` sends them: `bytes`/`str` as JSON text, `None` empty, else as JSON.
    - The wait (`timeout`, or what is left of the current deadline when sooner) goes out as `svc-deadline`;
      `clock` (monotonic) measures the deadline.
    """

    def __init__(
        self,
        target: str | Mapping[str, str],
        *,
        connections: NatsConnections | None = None,
        extra_headers: HeaderHook | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        clock: Clock = time.monotonic,
    ) -> None:
        urls = {"": target} if isinstance(target, str) else dict(target)
        self._targets = {topic: nats_target(url) for topic, url in urls.items()}
        self._default = self._targets.get("") if isinstance(target, str) else None
        self._owns_connections = connections is None
        self.connections = connections or NatsConnections()
        self._extra_headers = extra_headers
        self.timeout = timeout
        self._clock = clock
        self._closed = False

    async def send(self, topic: str, payload: Any = None, headers: Mapping[str, str] | None = None) -> Result[Any]:
        """Request/reply on the topic's subject; never raises (cancellation aside)."""
        if self._closed:
            return Result.of(UNEXPECTED_ERROR, detail="sender is closed")
        target = self._default or self._targets.get(topic)
        if target is None or not topic:
            return Result.of(NOT_FOUND, detail=f"no NATS target for topic {topic!r}")
        server, service = target
        subject = topic_subject(service, topic)
        where = f"{shown(server)} {subject}"
        try:
            body = payload_bytes(payload)
        except Exception as exc:
            return Result.of(UNEXPECTED_ERROR, detail=f"payload could not be encoded as JSON ({type(exc).__name__})")
        try:
            connection = await self.connections.get(server)
        except NatsError as exc:
            return Result.of(SERVICE_UNAVAILABLE, detail=str(exc))
        from nats import errors  # importable: a connection is open

        wait = self.timeout
        left = remaining(self._clock)
        if left is not None:
            if left <= 0:
                return Result.of(TIMEOUT, detail=f"the deadline passed before calling {where}")
            wait = min(wait, left)
        try:
            # The wait goes out as the callee's deadline: past it nobody reads the answer.
            reply = await connection.request(subject, body, timeout=wait, headers=self._headers(headers, wait))
        except errors.NoRespondersError:
            return Result.of(SERVICE_UNAVAILABLE, detail=f"no service answers on {where}")
        except errors.TimeoutError:
            return Result.of(TIMEOUT, detail=f"no answer from {where} within {wait:g} s")
        except errors.MaxPayloadError:
            limit = connection.max_payload
            return Result.of(UNEXPECTED_ERROR, detail=f"the message exceeds the NATS server's limit of {limit} bytes")
        except Exception as exc:
            return Result.of(SERVICE_UNAVAILABLE, detail=f"cannot reach {where} ({type(exc).__name__})")
        return answer_of(reply.data, where)

    def _headers(self, headers: Mapping[str, str] | None, left: float) -> dict[str, str]:
        merged = outbound_headers(headers, self._extra_headers, left)
        return {name: value.decode("latin-1") for name, value in merged.items()}

    async def aclose(self) -> None:
        self._closed = True
        if self._owns_connections:
            await self.connections.aclose()


def answer_of(data: bytes, where: str) -> Result[Any]:
    """The `Result` a response envelope says; `unexpected-error` when the reply is no response envelope."""
    try:
        envelope = orjson.loads(data)
        status, successful, headers, body = (
            envelope["statusCode"], envelope.get("isSuccessful"), envelope.get("headers") or {}, envelope.get("body")
        )
        if not isinstance(status, str) or not isinstance(headers, dict) or not isinstance(body, str | None):
            raise ValueError("not a response envelope")
        kept = {name: value for name, value in headers.items() if name not in _ENVELOPE_ONLY and isinstance(value, str)}
        payload = orjson.loads(body) if body else None
    except (ValueError, KeyError, TypeError):
        return Result.of(UNEXPECTED_ERROR, detail=f"the reply from {where} is not a response envelope")
    failed = successful is False if isinstance(successful, bool) else not is_success(status)
    if failed:
        return Result.of(status, detail=_failure_detail(payload) or f"{status} from {where}", headers=kept,
                         successful=False)
    return Result.of(status, payload, headers=kept, successful=True)
