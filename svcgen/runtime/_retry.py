"""Client retries: a produced topic's call tried again when the failure is one a later try may not meet.

`RetryingSender` wraps any `Sender` (HTTP, NATS, or one routing topics to both). A call is tried again when its
answer is `service-unavailable` (a connection error, 502, 503), `timeout` (504, a read timeout) or
`too-many-requests` (429), after a jittered exponential backoff, or after the owner's `Retry-After` when it
gives one. A topic that is not idempotent is sent with an `Idempotency-Key` (one per call, the same on every
try), so the owner runs it once however often it arrives; a 409 answer saying the first try is still in flight
(it carries `Retry-After`) is waited out like a 503. No try starts past the current deadline, and no backoff
sleeps past it.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import os
import random
import time
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any, Final, Protocol

from . import _status as st
from ._deadline import Clock, current_deadline
from ._idempotency import IDEMPOTENCY_KEY_HEADER, RETRY_AFTER_HEADER
from ._result import Result

logger = logging.getLogger("svcgen.retry")

Sleep = Callable[[float], Awaitable[None]]
RETRIED_STATUSES: Final = frozenset({st.SERVICE_UNAVAILABLE, st.TIMEOUT, st.TOO_MANY_REQUESTS})


@dataclass(frozen=True, slots=True)
class Retry:
    """How one target's calls are tried again (wiring.py: `wiring.retry`, or per topic `wiring.retries[topic]`).

    - `retries`: tries after the first (0: never again).
    - `backoff`: seconds before the first retry, doubling each time up to `max_backoff`; each wait is jittered
      to between half and all of it, so callers that failed together do not come back together.
    - `max_retry_after`: the longest `Retry-After` waited for; an owner asking for more gets its answer back.
    - `statuses`: the answers tried again.
    """

    retries: int = 2
    backoff: float = 0.5
    max_backoff: float = 8.0
    max_retry_after: float = 60.0
    statuses: frozenset[str] = field(default=RETRIED_STATUSES)

    def __post_init__(self) -> None:
        if self.retries < 0 or self.backoff < 0 or self.max_backoff < 0 or self.max_retry_after < 0:
            raise ValueError("retry settings must not be negative")

    def delay(self, attempt: int, jitter: float) -> float:
        """Seconds before retry number `attempt` (1-based), `jitter` in [0, 1)."""
        base = min(self.max_backoff, self.backoff * 2.0 ** (attempt - 1))
        return base * (0.5 + jitter / 2)


NO_RETRY: Final = Retry(retries=0)


class _Sends(Protocol):
    async def send(self, topic: str, payload: Any = None, headers: Mapping[str, str] | None = None) -> Result[Any]:
        ...


class RetryingSender:
    """Sends through `sender`, trying again as `policy` (or `policies[topic]`) says.

    `idempotent` names the topics the owner may run twice; every other topic is sent with an `Idempotency-Key`
    (the caller's own, when it set one). With `idempotent=None` no key is added: a call is keyed when its
    caller sent one (what generated clients do for every topic that is not idempotent).

    `sleep`, `clock` (monotonic seconds, for the deadline), `jitter` (a float in [0, 1)), `new_key` and
    `wall_clock` (epoch seconds, for a `Retry-After` date) are injectable."""

    def __init__(
        self,
        sender: _Sends,
        *,
        idempotent: Collection[str] | None = (),
        policy: Retry | None = None,
        policies: Mapping[str, Retry] | None = None,
        sleep: Sleep = asyncio.sleep,
        clock: Clock = time.monotonic,
        jitter: Callable[[], float] = random.random,
        new_key: Callable[[], str] = lambda: os.urandom(16).hex(),
        wall_clock: Clock = time.time,
    ) -> None:
        self.sender = sender
        self.idempotent = None if idempotent is None else frozenset(idempotent)
        self.policy = policy if policy is not None else Retry()
        self.policies = dict(policies or {})
        self._sleep = sleep
        self._clock = clock
        self._jitter = jitter
        self._new_key = new_key
        self._wall_clock = wall_clock
        self.retried = 0
        """Tries after a first one, over this sender's life."""

    async def send(self, topic: str, payload: Any = None, headers: Mapping[str, str] | None = None) -> Result[Any]:
        keyed = has_key(headers)
        if not keyed and self.idempotent is not None and topic not in self.idempotent:
            headers = {**headers, IDEMPOTENCY_KEY_HEADER: self._new_key()} if headers else {
                IDEMPOTENCY_KEY_HEADER: self._new_key()}  # fmt: skip
            keyed = True
        answer = await self.sender.send(topic, payload, headers)
        if answer.is_successful:
            return answer
        policy = self.policies.get(topic, self.policy)
        attempt = 0
        while attempt < policy.retries:
            wait = self._wait(policy, answer, attempt + 1, keyed)
            if wait is None:
                return answer
            attempt += 1
            self.retried += 1
            logger.info("retrying %s in %.2f s (try %d of %d): %s", topic, wait, attempt + 1, policy.retries + 1,
                        answer.status)  # fmt: skip
            await self._sleep(wait)
            answer = await self.sender.send(topic, payload, headers)
            if answer.is_successful:
                return answer
        return answer

    def _wait(self, policy: Retry, answer: Result[Any], attempt: int, keyed: bool) -> float | None:
        """Seconds to wait before trying again, or None when this answer is final."""
        retry_after = _retry_after(answer.headers, self._wall_clock)
        in_flight = keyed and answer.status == st.CONFLICT and retry_after is not None
        if answer.status not in policy.statuses and not in_flight:
            return None
        if retry_after is not None:
            if retry_after > policy.max_retry_after:
                return None
            wait = retry_after
        else:
            wait = policy.delay(attempt, self._jitter())
        deadline = current_deadline()
        if deadline is not None and self._clock() + wait >= deadline:
            return None  # the caller stops waiting before the next try could answer
        return wait

    async def aclose(self) -> None:
        closer = getattr(self.sender, "aclose", None)
        if closer is not None:
            await closer()


def has_key(headers: Mapping[str, str] | None) -> bool:
    """Whether the headers carry an `Idempotency-Key` (any case)."""
    return bool(headers) and any(name.lower() == IDEMPOTENCY_KEY_HEADER for name in headers or ())


def _retry_after(headers: Mapping[str, str], wall_clock: Clock) -> float | None:
    """Seconds a `Retry-After` asks for (delta-seconds or an HTTP date), or None when there is none that parses."""
    text = headers.get(RETRY_AFTER_HEADER) if headers else None
    if text is None:
        return None
    text = text.strip()
    if text.isascii() and text.isdigit():  # isdigit alone takes "²", which float refuses
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - wall_clock())
