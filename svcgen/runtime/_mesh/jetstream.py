"""Mesh feeds over NATS JetStream (`mesh: {transport: nats, nats: URL}`): reporters send register, heartbeat,
traces and issues to the stream `SVC_MESH` (subjects `svc.mesh.<feed>`), each trace or issue batch with its batch
id as `Nats-Msg-Id`; a collector pulls them with a durable consumer and acknowledges a message only once its store
has committed it. A collector that is down loses nothing within the stream's retention.

A message is the same envelope the HTTP feed posts to `{collector}/svc/invoke`; the collector hands it to the same
invocation path (same checks, same batch-id deduplication), so a redelivered batch is counted once.

nats-py is an extra (`svcgen[nats]`): imported only when a sender or consumer is made.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import orjson

from .._logging import shown
from .._result import Result
from .._topics import HEARTBEAT_TOPIC, ISSUES_TOPIC, REGISTER_TOPIC, TRACES_TOPIC
from .._wiring import WiringError
from .feeds import DEFAULT_FEED_TIMEOUT, feed_envelope

if TYPE_CHECKING:
    from nats.aio.client import Client
    from nats.js.client import JetStreamContext

logger = logging.getLogger("svcgen.mesh.jetstream")

MESH_NATS_ENV: Final = "SVCGEN_MESH_NATS"
"""Where a service runs: publish its feeds to this NATS server's JetStream (overrides the manifest's mesh)."""
DEFAULT_STREAM: Final = "SVC_MESH"
DEFAULT_SUBJECT_PREFIX: Final = "svc.mesh"
DEFAULT_DURABLE: Final = "svc-collector"
"""The collector's durable consumer: replicas given the same name share its messages."""
DEFAULT_MAX_AGE: Final = 7 * 24 * 3600.0
DEFAULT_MAX_BYTES: Final = 1 << 30
DEFAULT_DUPLICATE_WINDOW: Final = 600.0
"""Seconds JetStream remembers a `Nats-Msg-Id`: a batch resent within it is stored once (the collector's batch ids
cover any later resend)."""
CONNECT_TIMEOUT: Final = 5.0
MISSING_NATS: Final = "mesh feeds over NATS need nats-py: pip install 'svcgen[nats]'"

FEED_SUBJECTS: Final[Mapping[str, str]] = {
    REGISTER_TOPIC: "register",
    HEARTBEAT_TOPIC: "heartbeat",
    TRACES_TOPIC: "traces",
    ISSUES_TOPIC: "issues",
}
"""Feed topic → the last token of its subject; nothing else is published to or taken from the stream."""

Connect = Callable[[str], Awaitable["Client"]]
"""Opens a NATS connection to a URL (injectable; the default is nats-py's with quiet, endless reconnects)."""


def require_nats() -> None:
    """Raises WiringError (one line, what to install) when nats-py is missing."""
    try:
        import nats  # noqa: F401
    except ImportError:
        raise WiringError(MISSING_NATS) from None


@dataclass(frozen=True)
class MeshStream:
    """The stream the feeds go through; created by whichever side finds it missing, with these limits (an existing
    stream is used as it is). Past `max_age` or `max_bytes` the oldest messages go first."""

    name: str = DEFAULT_STREAM
    subject_prefix: str = DEFAULT_SUBJECT_PREFIX
    max_age: float = DEFAULT_MAX_AGE
    max_bytes: int = DEFAULT_MAX_BYTES
    duplicate_window: float = DEFAULT_DUPLICATE_WINDOW

    def subject(self, topic: str) -> str | None:
        feed = FEED_SUBJECTS.get(topic)
        return f"{self.subject_prefix}.{feed}" if feed is not None else None

    @property
    def subjects(self) -> str:
        return f"{self.subject_prefix}.>"

    async def ensure(self, js: JetStreamContext) -> None:
        from nats.js.errors import BadRequestError, NotFoundError

        try:
            await js.stream_info(self.name)
            return
        except NotFoundError:
            pass
        try:
            await js.add_stream(name=self.name, subjects=[self.subjects], max_age=self.max_age,
                                max_bytes=self.max_bytes, duplicate_window=self.duplicate_window)  # fmt: skip
        except BadRequestError:
            await js.stream_info(self.name)  # created meanwhile by another reporter or collector; else raise
        logger.info("created the JetStream stream %s (%s)", self.name, self.subjects)


async def connect_nats(url: str) -> Client:
    import nats

    async def quiet(error: Exception) -> None:  # nats-py logs every failed reconnect otherwise
        logger.debug("nats %s: %s", shown(url), error)  # the URL may carry a password

    return await nats.connect(url, error_cb=quiet, connect_timeout=2, reconnect_time_wait=0.5,
                              max_reconnect_attempts=-1)  # fmt: skip


class MeshConnection:
    """One lazily opened connection and JetStream context, the stream ensured; dropped after a failure so the
    next use opens it again."""

    def __init__(self, url: str, stream: MeshStream, connect: Connect, timeout: float = CONNECT_TIMEOUT) -> None:
        self.url = url
        self.stream = stream
        self.timeout = timeout
        self._connect = connect
        self._client: Client | None = None
        self._js: JetStreamContext | None = None
        self._lock = asyncio.Lock()

    async def jetstream(self) -> JetStreamContext:
        async with self._lock:
            if self._js is None:
                # nats-py retries a first connection for ever: bounded here, so an unreachable server is reported.
                client = await asyncio.wait_for(self._connect(self.url), self.timeout)
                try:
                    js = client.jetstream()
                    await self.stream.ensure(js)
                except BaseException:
                    with contextlib.suppress(Exception):
                        await client.close()
                    raise
                self._client, self._js = client, js
            return self._js

    @property
    def connected(self) -> bool:
        """Whether the connection is open and up (nats-py reconnecting a lost one quietly is not)."""
        return self._client is not None and self._client.is_connected

    async def close(self) -> None:
        client, self._client, self._js = self._client, None, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()


class JetStreamSender:
    """A feeds `Sender`: each feed envelope is published to `<subject_prefix>.<feed>` and succeeds once JetStream
    acknowledged it (stored), within `timeout`; anything else is a failed send the reporter keeps and resends. A
    body with a `batchId` is published with it as `Nats-Msg-Id`."""

    def __init__(
        self,
        url: str,
        stream: MeshStream | None = None,
        *,
        timeout: float = DEFAULT_FEED_TIMEOUT,
        connect: Connect = connect_nats,
    ) -> None:
        require_nats()
        self.stream = stream or MeshStream()
        self.timeout = timeout
        self._connection = MeshConnection(url, self.stream, connect)

    async def send(self, topic: str, payload: Any = None, headers: Mapping[str, str] | None = None) -> Result[Any]:
        subject = self.stream.subject(topic)
        if subject is None:
            return Result.bad_request(f"{topic} is not a mesh feed")
        data = orjson.dumps(feed_envelope(topic, payload, headers))
        batch_id = payload.get("batchId") if isinstance(payload, Mapping) else None
        message_headers = {"Nats-Msg-Id": batch_id} if isinstance(batch_id, str) and batch_id else None
        try:
            js = await asyncio.wait_for(self._connection.jetstream(), self.timeout)
            ack = await js.publish(subject, data, timeout=self.timeout, stream=self.stream.name,
                                   headers=message_headers)  # fmt: skip
        except Exception as exc:
            if not isinstance(exc, TimeoutError):
                await self._connection.close()  # e.g. the stream was deleted: ensure it again on the next send
            where = shown(self._connection.url)  # the URL may carry a password
            return Result.service_unavailable(f"JetStream at {where} did not take {topic} ({failure_reason(exc)})")
        return Result.ok({"stream": ack.stream, "seq": ack.seq, "duplicate": bool(ack.duplicate)})

    async def aclose(self) -> None:
        await self._connection.close()


def failure_reason(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
