"""Idempotency keys: a retried call of a non-idempotent topic runs its handler once.

A call that carries `Idempotency-Key` claims the key (per service and topic) with a fingerprint of its request.
The first claim runs the handler and keeps its answer (status, headers, body); a later call with the same key
and the same request gets that answer again, marked `idempotent-replayed: true`. The same key with another
request is `validation-error` (422); a key whose first call is still running is `conflict` (409, with
`retry-after`). An answer a client would retry anyway (`service-unavailable`, `timeout`, `too-many-requests`) is
not kept: the key is released, so the retry runs the handler again.

Stores: `MemoryIdempotencyStore` (the default: one process, bounded in entries and bytes) and
`PostgresIdempotencyStore` (any number of replicas on one database, exact through `INSERT ... ON CONFLICT` on a
row that is `in-flight` or `done`).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, Literal, Protocol

import orjson

from . import _status as st
from ._codec import TextFields
from ._deadline import Clock
from ._result import Outcome, Result

logger = logging.getLogger("svcgen.idempotency")

IDEMPOTENCY_KEY_HEADER: Final = "idempotency-key"
REPLAYED_HEADER: Final = "idempotent-replayed"
RETRY_AFTER_HEADER: Final = "retry-after"
MAX_KEY_LENGTH: Final = 255
DEFAULT_TTL: Final = 24 * 3600.0
"""Seconds an answer is kept for replay."""
DEFAULT_LEASE: Final = 300.0
"""Seconds a claim stays in flight at most: a claim whose process died is taken over after this."""
IN_FLIGHT_RETRY_AFTER: Final = "1"
RELEASED_STATUSES: Final = frozenset({st.SERVICE_UNAVAILABLE, st.TIMEOUT, st.TOO_MANY_REQUESTS})
"""Answers a client retries: not kept, so the retry runs the handler again."""

ClaimKind = Literal["run", "replay", "in-flight", "mismatch"]


# Not frozen (a frozen dataclass sets each field through object.__setattr__): one is built per keyed call.
@dataclass(slots=True)
class StoredAnswer:
    """The first answer to a key, as every transport frames it again."""

    status: str
    detail: str | None
    successful: bool | None
    headers: Mapping[str, str]
    body: bytes
    version: str
    size: int = 0
    """Bytes it is counted as against a store's bounds (set by `of`)."""

    @classmethod
    def of(cls, outcome: Outcome) -> StoredAnswer:
        result = outcome.result
        headers = result.headers  # a read-only mapping already: kept as it is
        size = len(outcome.body) + 64
        if headers:
            size += sum(len(name) + len(value) for name, value in headers.items())
        return cls(result.status, result.detail, result.successful, headers, outcome.body, outcome.version, size)

    def replayed(self) -> Outcome:
        headers = MappingProxyType({**self.headers, REPLAYED_HEADER: "true"})
        return Outcome(Result(self.status, None, self.detail, headers, self.successful), self.body, self.version)


@dataclass(frozen=True, slots=True)
class Claim:
    kind: ClaimKind
    answer: StoredAnswer | None = None
    """The kept answer, for `replay`."""


RUN: Final = Claim("run")
IN_FLIGHT: Final = Claim("in-flight")
MISMATCH: Final = Claim("mismatch")


class IdempotencyStore(Protocol):
    """Where claims and answers live. `scope` names the service and topic, `key` the caller's key."""

    async def claim(self, scope: str, key: str, fingerprint: str) -> Claim:
        """`run` when this call now holds the key; else what the key's holder left."""
        ...

    async def complete(self, scope: str, key: str, fingerprint: str, answer: StoredAnswer) -> None:
        """Keep the answer of the call that holds the key."""
        ...

    async def release(self, scope: str, key: str, fingerprint: str) -> None:
        """Give the key up without an answer (one that is retried anyway, or a call cancelled on the way)."""
        ...


def fingerprint(topic: str, version: str | None, fields: TextFields | None, body: str | bytes | None) -> str:
    """What makes two calls the same request: topic, version asked for, path and query fields, body bytes."""
    parts = [topic.encode(), (version or "").encode(), body.encode() if isinstance(body, str) else body or b""]
    if fields:
        parts.append(orjson.dumps(fields, option=orjson.OPT_SORT_KEYS))
    return hashlib.blake2b(b"\0".join(parts), digest_size=16).hexdigest()


async def run_once(
    store: IdempotencyStore, scope: str, key: str, request: str, run: Callable[[], Awaitable[Outcome]]
) -> Outcome:
    """The answer to a call carrying `key`: run now (and kept), replayed, or refused."""
    if not key or len(key) > MAX_KEY_LENGTH or not key.isprintable() or not key.isascii():
        return _refused(Result.bad_request(f"Idempotency-Key must be 1 to {MAX_KEY_LENGTH} printable ASCII characters"))
    try:
        claim = await store.claim(scope, key, request)
    except Exception as exc:
        logger.error("idempotency store failed to claim a key (%s)", type(exc).__name__, exc_info=exc)
        return _refused(Result.service_unavailable("the idempotency store is unavailable; retry later"))
    if claim.kind == "replay" and claim.answer is not None:
        return claim.answer.replayed()
    if claim.kind == "mismatch":
        return _refused(Result.validation_error("this Idempotency-Key was used with a different request"))
    if claim.kind == "in-flight":
        detail = "a request with this Idempotency-Key is still in flight; retry later"
        return _refused(Result.conflict(detail, headers={RETRY_AFTER_HEADER: IN_FLIGHT_RETRY_AFTER}))
    kept = False
    try:
        outcome = await run()
        if outcome.result.status not in RELEASED_STATUSES:
            kept = True  # from here the key is the answer's: a failed write leaves it in flight until its lease ends
            try:
                await store.complete(scope, key, request, StoredAnswer.of(outcome))
            except Exception as exc:  # the handler ran: its answer still goes back to this caller
                logger.error("idempotency store failed to keep an answer (%s)", type(exc).__name__, exc_info=exc)
        return outcome
    finally:
        if not kept:
            try:
                await store.release(scope, key, request)
            except Exception as exc:  # the claim expires with its lease
                logger.error("idempotency store failed to release a key (%s)", type(exc).__name__)


def _refused(result: Result[Any]) -> Outcome:
    return Outcome(result, orjson.dumps(result.failure_body()))


@dataclass(slots=True)
class _Entry:
    fingerprint: str
    expires: float
    answer: StoredAnswer | None = None
    """None while in flight."""


class MemoryIdempotencyStore:
    """Claims and answers in this process: at most `max_entries` keys and `max_bytes` of answers, each kept `ttl`
    seconds; past a bound the oldest keys go first (counted in `evicted`). An answer larger than `max_answer_bytes`
    is not kept (counted in `too_large`): its key is released."""

    def __init__(
        self,
        *,
        max_entries: int = 10_000,
        max_bytes: int = 64 * 1024 * 1024,
        max_answer_bytes: int = 1024 * 1024,
        ttl: float = DEFAULT_TTL,
        lease: float = DEFAULT_LEASE,
        clock: Clock = time.monotonic,
    ) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.max_answer_bytes = min(max_answer_bytes, max_bytes)
        self.ttl = ttl
        self.lease = lease
        self._clock = clock
        self._entries: OrderedDict[tuple[str, str], _Entry] = OrderedDict()
        self._bytes = 0
        self.evicted = 0
        self.too_large = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def bytes(self) -> int:
        return self._bytes

    async def claim(self, scope: str, key: str, fingerprint: str) -> Claim:
        now = self._clock()
        entry = self._entries.get((scope, key))
        if entry is not None and entry.expires > now:
            if entry.fingerprint != fingerprint:
                return MISMATCH
            return IN_FLIGHT if entry.answer is None else Claim("replay", entry.answer)
        if entry is not None:
            self._drop((scope, key))
        self._entries[(scope, key)] = _Entry(fingerprint, now + self.lease)
        if len(self._entries) > self.max_entries:
            self._bound()
        return RUN

    async def complete(self, scope: str, key: str, fingerprint: str, answer: StoredAnswer) -> None:
        entry = self._entries.get((scope, key))
        if entry is None or entry.fingerprint != fingerprint or entry.answer is not None:
            return  # evicted or taken over meanwhile: nothing to keep it for
        if answer.size > self.max_answer_bytes:
            self.too_large += 1
            self._drop((scope, key))
            return
        entry.answer = answer
        entry.expires = self._clock() + self.ttl
        self._bytes += answer.size
        self._entries.move_to_end((scope, key))
        if self._bytes > self.max_bytes:
            self._bound()

    async def release(self, scope: str, key: str, fingerprint: str) -> None:
        entry = self._entries.get((scope, key))
        if entry is not None and entry.fingerprint == fingerprint and entry.answer is None:
            self._drop((scope, key))

    def _drop(self, where: tuple[str, str]) -> None:
        entry = self._entries.pop(where)
        if entry.answer is not None:
            self._bytes -= entry.answer.size

    def _bound(self) -> None:
        now = self._clock()
        while self._entries and (len(self._entries) > self.max_entries or self._bytes > self.max_bytes):
            oldest = next(iter(self._entries))
            if self._entries[oldest].expires > now:
                self.evicted += 1
                if self.evicted == 1 or self.evicted % 100_000 == 0:
                    logger.warning("idempotency store full: %d key(s) dropped before they expired", self.evicted)
            self._drop(oldest)


_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS {table} (
    scope text NOT NULL,
    key text NOT NULL,
    fingerprint text NOT NULL,
    state text NOT NULL,
    status text,
    detail text,
    successful boolean,
    headers jsonb,
    body bytea,
    version text,
    locked_until timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (scope, key)
)
"""
_CLAIM: Final = """
INSERT INTO {table} AS kept (scope, key, fingerprint, state, locked_until, expires_at)
VALUES (%(scope)s, %(key)s, %(fingerprint)s, 'in-flight', now() + %(lease)s * interval '1 second',
        now() + %(lease)s * interval '1 second')
ON CONFLICT (scope, key) DO UPDATE SET
    fingerprint = EXCLUDED.fingerprint, state = 'in-flight', status = NULL, detail = NULL, successful = NULL,
    headers = NULL, body = NULL, version = NULL, locked_until = EXCLUDED.locked_until, expires_at = EXCLUDED.expires_at
WHERE kept.expires_at < now() OR (kept.state = 'in-flight' AND kept.locked_until < now())
RETURNING 1
"""
_READ: Final = """
SELECT fingerprint, state, status, detail, successful, headers, body, version FROM {table}
WHERE scope = %(scope)s AND key = %(key)s
"""
_COMPLETE: Final = """
UPDATE {table} SET state = 'done', status = %(status)s, detail = %(detail)s, successful = %(successful)s,
    headers = %(headers)s, body = %(body)s, version = %(version)s, expires_at = now() + %(ttl)s * interval '1 second'
WHERE scope = %(scope)s AND key = %(key)s AND fingerprint = %(fingerprint)s AND state = 'in-flight'
"""
_RELEASE: Final = """
DELETE FROM {table} WHERE scope = %(scope)s AND key = %(key)s AND fingerprint = %(fingerprint)s AND state = 'in-flight'
"""
_PURGE: Final = "DELETE FROM {table} WHERE expires_at < now()"
PURGE_EVERY: Final = 1000
"""Claims between two purges of expired rows (one also runs at `open`)."""


class PostgresIdempotencyStore:
    """Claims and answers in PostgreSQL (`pip install 'svcgen[postgres]'`), shared by every replica on the
    database: the row of a key is claimed by one `INSERT ... ON CONFLICT` and is `in-flight` until its answer
    makes it `done`. Expired rows are purged as claims go by; an answer larger than `max_answer_bytes` is not kept.
    `open` (a startup hook) creates the table; `aclose` (a shutdown hook) closes the pool."""

    def __init__(
        self,
        url: str,
        *,
        table: str = "svcgen_idempotency",
        ttl: float = DEFAULT_TTL,
        lease: float = DEFAULT_LEASE,
        max_answer_bytes: int = 1024 * 1024,
        pool_size: int = 4,
    ) -> None:
        if not table.isidentifier():
            raise ValueError(f"table {table!r} must be a plain SQL identifier")
        self.url = url
        self.table = table
        self.ttl = ttl
        self.lease = lease
        self.max_answer_bytes = max_answer_bytes
        self.too_large = 0
        self._pool_size = pool_size
        self._pool: Any = None
        self._claims = 0
        from psycopg import sql  # here, not at import: only a service that uses this store needs psycopg

        def compose(template: str) -> Any:
            return sql.SQL(template.replace("{table}", "{}")).format(sql.Identifier(table))

        self._schema, self._claim, self._read, self._complete, self._release, self._purge = (
            compose(text) for text in (_SCHEMA, _CLAIM, _READ, _COMPLETE, _RELEASE, _PURGE)
        )

    async def open(self) -> None:
        from psycopg_pool import AsyncConnectionPool

        pool = AsyncConnectionPool(self.url, min_size=1, max_size=self._pool_size, open=False,
                                   kwargs={"autocommit": True})  # fmt: skip
        await pool.open(wait=True)
        self._pool = pool
        async with pool.connection() as connection:
            await connection.execute(self._schema)
            await connection.execute(self._purge)

    async def aclose(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    async def claim(self, scope: str, key: str, fingerprint: str) -> Claim:
        pool = self._opened()
        values = {"scope": scope, "key": key, "fingerprint": fingerprint, "lease": self.lease}
        self._claims += 1
        async with pool.connection() as connection:
            if self._claims % PURGE_EVERY == 0:
                await connection.execute(self._purge)
            for _ in range(3):  # a row released between the insert and the read is claimed again
                cursor = await connection.execute(self._claim, values)
                if await cursor.fetchone() is not None:
                    return RUN
                cursor = await connection.execute(self._read, values)
                row = await cursor.fetchone()
                if row is None:
                    continue
                kept, state, status, detail, successful, headers, body, version = row
                if kept != fingerprint:
                    return MISMATCH
                if state != "done":
                    return IN_FLIGHT
                answer = StoredAnswer(status, detail, successful, headers or {}, bytes(body or b""), version or "")
                return Claim("replay", answer)
        return IN_FLIGHT

    async def complete(self, scope: str, key: str, fingerprint: str, answer: StoredAnswer) -> None:
        if answer.size > self.max_answer_bytes:
            self.too_large += 1
            await self.release(scope, key, fingerprint)
            return
        from psycopg.types.json import Jsonb

        values = {
            "scope": scope, "key": key, "fingerprint": fingerprint, "status": answer.status, "detail": answer.detail,
            "successful": answer.successful, "headers": Jsonb(dict(answer.headers)), "body": answer.body,
            "version": answer.version, "ttl": self.ttl,
        }  # fmt: skip
        async with self._opened().connection() as connection:
            await connection.execute(self._complete, values)

    async def release(self, scope: str, key: str, fingerprint: str) -> None:
        async with self._opened().connection() as connection:
            await connection.execute(self._release, {"scope": scope, "key": key, "fingerprint": fingerprint})

    def _opened(self) -> Any:
        if self._pool is None:
            raise RuntimeError("the idempotency store is not open; wiring.py opens it at startup")
        return self._pool
