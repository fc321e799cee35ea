"""`svcgen events dead-letters list|replay|drop`: what subscribers gave up on, in the stream SVC_DEAD_LETTERS.

A dead letter is the original payload with headers saying where it came from (`Svc-Original-Subject`, its
stream), for whom (`Svc-Subscriber`, `Svc-Event`) and why (`Svc-Attempts`, `Svc-Last-Status`, `Svc-Reason`).
Replay republishes the payload to the original subject under a new message id (so the stream's duplicate window
cannot swallow it), then removes the dead letter; drop removes it. Nothing is removed before it was replayed.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .runtime._eventnames import DEAD_LETTER_STREAM, DEAD_SUBJECT_ROOT, dead_letter_subject
from .runtime._events import (
    DL_ATTEMPTS,
    DL_EVENT,
    DL_REASON,
    DL_STATUS,
    DL_STREAM,
    DL_SUBJECT,
    DL_SUBSCRIBER,
    DL_VERSION,
    MSG_ID,
)
from .runtime._naming import slug

if TYPE_CHECKING:
    from nats.aio.client import Client

FETCH_WAIT = 1.0


@dataclass(frozen=True)
class DeadLetter:
    sequence: int
    subject: str
    subscriber: str
    event: str
    version: str
    attempts: str
    status: str
    reason: str
    original_subject: str
    original_stream: str
    data: bytes
    headers: dict[str, str]

    def line(self) -> str:
        """One line for a person: which, for whom, why, and the payload."""
        event = f"{self.event}@{self.version}" if self.version else self.event
        payload = self.data.decode("utf-8", "backslashreplace")
        if len(payload) > 400:
            payload = payload[:400] + f"... ({len(self.data)} bytes)"
        return (f"#{self.sequence} {self.subscriber} {event} attempts={self.attempts} status={self.status} "
                f"reason={self.reason!r} payload={payload}")  # fmt: skip


def filter_subject(subscriber: str | None, event: str | None) -> str:
    """The dead-letter subjects of `subscriber` (None: every) and `event` (None: every)."""
    if subscriber is None:
        return f"{DEAD_SUBJECT_ROOT}.>"
    if event is None:
        return f"{DEAD_SUBJECT_ROOT}.{subscriber}.>"
    return f"{DEAD_SUBJECT_ROOT}.{subscriber}.{slug(event)}.>"


async def dead_letters(
    client: Client, *, subscriber: str | None = None, event: str | None = None
) -> AsyncIterator[DeadLetter]:
    """Every dead letter kept, oldest first, filtered by subscriber and event (id, every version of it; or
    `id@version`, that version)."""
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
    from nats.js.errors import NotFoundError

    js = client.jetstream()
    try:
        info = await js.stream_info(DEAD_LETTER_STREAM)
    except NotFoundError:
        return
    if info.state.messages == 0:
        return
    # Only what is there now: a replayed message that dead-letters again meanwhile is for the next run, else a
    # poison message would be replayed round and round for ever.
    last = info.state.last_seq
    subjects = [filter_subject(subscriber, event)]
    if subscriber is not None and event is not None:
        subjects.append(f"{DEAD_SUBJECT_ROOT}.{subscriber}.{slug(event)}")  # the unversioned event
        topic, at, version = event.rpartition("@")
        if at and topic and version:  # `orders:placed@v2`, as `line()` names a versioned event: that version only
            subjects.append(dead_letter_subject(subscriber, topic, version))
    seen: set[int] = set()
    for subject in subjects:
        # An ephemeral consumer of our own: reading does not disturb anything else.
        config = ConsumerConfig(ack_policy=AckPolicy.NONE, deliver_policy=DeliverPolicy.ALL, filter_subject=subject,
                                inactive_threshold=30.0)  # fmt: skip
        pull = await js.pull_subscribe(subject, stream=DEAD_LETTER_STREAM, config=config)
        try:
            while True:
                try:
                    batch = await pull.fetch(256, timeout=FETCH_WAIT)
                except TimeoutError:
                    break
                past = False
                for msg in batch:
                    letter = _letter(msg)
                    past = past or letter.sequence > last
                    if letter.sequence not in seen and not past:
                        seen.add(letter.sequence)
                        yield letter
                if not batch or past:
                    break
        finally:
            await pull.unsubscribe()


def _letter(msg: Any) -> DeadLetter:
    headers = dict(msg.headers or {})
    return DeadLetter(
        sequence=msg.metadata.sequence.stream,
        subject=msg.subject,
        subscriber=headers.get(DL_SUBSCRIBER, ""),
        event=headers.get(DL_EVENT, ""),
        version=headers.get(DL_VERSION, ""),
        attempts=headers.get(DL_ATTEMPTS, ""),
        status=headers.get(DL_STATUS, ""),
        reason=headers.get(DL_REASON, ""),
        original_subject=headers.get(DL_SUBJECT, ""),
        original_stream=headers.get(DL_STREAM, ""),
        data=bytes(msg.data),
        headers=headers,
    )


async def replay(client: Client, letter: DeadLetter, *, new_id: Callable[[], str] | None = None) -> int:
    """Republish `letter` to its original subject under a new message id, then remove it; the stream sequence of
    the republished message."""
    js = client.jetstream()
    kept = {name: value for name, value in letter.headers.items()
            if not name.startswith("Svc-") and name != MSG_ID}  # fmt: skip
    kept[MSG_ID] = (new_id or _new_id)()
    ack = await js.publish(letter.original_subject, letter.data, stream=letter.original_stream or None,
                           headers=kept, timeout=5.0)  # fmt: skip
    await js.delete_msg(DEAD_LETTER_STREAM, letter.sequence)
    return int(ack.seq)


async def drop(client: Client, letter: DeadLetter) -> None:
    await client.jetstream().delete_msg(DEAD_LETTER_STREAM, letter.sequence)


def _new_id() -> str:
    return f"replay:{uuid.uuid4()}"


async def run(action: str, url: str, subscriber: str | None, event: str | None,
              echo: Callable[[str], None]) -> int:  # fmt: skip
    """The CLI's work: list, replay or drop the matching dead letters, one line each; the count handled."""
    from .runtime._nats.connections import open_connection

    client = await open_connection(url)
    try:
        count = 0
        async for letter in dead_letters(client, subscriber=subscriber, event=event):
            if action == "replay":
                sequence = await replay(client, letter)
                echo(f"replayed #{letter.sequence} to {letter.original_subject} (stream sequence {sequence})")
            elif action == "drop":
                await drop(client, letter)
                echo(f"dropped #{letter.sequence} ({letter.subscriber} {letter.event})")
            else:
                echo(letter.line())
            count += 1
        return count
    finally:
        await client.close()

