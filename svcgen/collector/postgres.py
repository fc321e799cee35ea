"""The collector's tables in PostgreSQL (`--store postgresql://...`): any number of collector replicas share them.

Every change is one transaction that updates the rows it touches, never the whole state:

- trace events go into `collector_events`, unique by (traceId, spanId) (`INSERT ... ON CONFLICT DO NOTHING
  RETURNING`); counters, edges and feed bookkeeping are updated from the rows actually inserted, in the same
  transaction, so a resent event or batch is never counted twice whichever replica takes it. Edges join a new
  span with its parent or children already in the window (by span id, as in memory); a transaction-scoped
  advisory lock per span id keeps two replicas from each missing the other's half of an edge.
- a traces or issues batch with a batchId inserts `collector_batches` first: a batch already there is answered
  with the accepted count of its first arrival (two replicas taking it at once: the second waits for the first).
- register, heartbeat and poll lock their service (advisory lock), read its catalog rows, apply the catalog's own
  rules and write back the rows that changed.
- every table has the memory collector's cap: past it the least recently updated rows go (by `touched`, one
  sequence for every table), counted in `collector_totals`, which also holds the window's size and the fleet
  query's `dropped` counts. The trace window is pruned oldest first in the transaction that outgrows it.

Locks are always taken in one order (the batch row; advisory locks on spans or the service, then on issue
fingerprints, each kind sorted; rows of events, edges, counters, catalog, issues, feeds; totals last), so
transactions of different replicas wait for each other but never deadlock; a deadlock or serialization failure is
retried anyway. A connection lost with the database is `StoreUnavailable` (the ingest is
answered `service-unavailable`, the reporter sends again, nothing is half-applied); a watcher thread probes the
database, so health reports the loss while no feed arrives, and the pool reconnects once it is back.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import orjson
import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import ConnectionPool, PoolTimeout

from ..runtime._mesh.clock import parse_rfc3339
from ..runtime._status import STATUS_CODES
from ..runtime._topics import DEFAULT_PREFIX
from .buckets import (
    BucketBook,
    Cell,
    MinuteReader,
    count_into,
    is_client_failure,
    is_server_failure,
    minute_of,
    new_cell,
)
from .caps import CollectorLimits
from .catalog import Catalog, ServiceRecords, _entry_size, _json_size, instance_id
from .declarations import declared_events
from .issuebook import IssueBook, mismatch_issue, newest_first
from .mismatches import find_mismatches
from .missingfeeds import FeedLog
from .snapshot import CounterEntry, EdgeEntry, FeedEntry, Json
from .store import Applied, FleetRows, Rows, StoreError, StoreUnavailable, Tables
from .tracelog import OTHER_STATUS, TraceLog, _event_bytes, counted_as, held_topics, is_failure
from .wire import MAX_COUNT, Unstorable, saturated

SCHEMA_VERSION: Final = 2
"""The table layout this module writes; a database holding a newer one is refused, never changed, an older one
migrated on start (`_MIGRATIONS`)."""
DEFAULT_POOL_SIZE: Final = 4
"""Connections for feeds (changes)."""
DEFAULT_QUERY_POOL_SIZE: Final = 2
"""Connections for queries, a pool of their own: however many clients query, feeds keep their connections."""
DEFAULT_TIMEOUT: Final = 5.0
"""Seconds a change waits for a connection before it is answered `service-unavailable`."""
DEFAULT_PROBE_INTERVAL: Final = 1.0
_RETRIES: Final = 3
_SCHEMA_LOCK: Final = 7_432_001
_SPAN_LOCKS: Final = 7_432_002
_SERVICE_LOCKS: Final = 7_432_003
_ISSUE_LOCKS: Final = 7_432_004
_ARTIFACT_LOCK: Final = 7_432_005
_KINDS: Final = ("catalog", "instances", "polls")

_TABLES: Final = f"""
CREATE TABLE IF NOT EXISTS collector_schema (version integer NOT NULL);
CREATE SEQUENCE IF NOT EXISTS collector_touch;
CREATE TABLE IF NOT EXISTS collector_events (
    seq bigserial PRIMARY KEY,
    trace_id text COLLATE "C" NOT NULL,
    span_id text COLLATE "C" NOT NULL,
    parent_span_id text COLLATE "C",
    service text COLLATE "C" NOT NULL,
    bytes integer NOT NULL,
    event json NOT NULL,
    UNIQUE (trace_id, span_id)
);
CREATE INDEX IF NOT EXISTS collector_events_span ON collector_events (span_id);
CREATE INDEX IF NOT EXISTS collector_events_parent ON collector_events (parent_span_id);
CREATE TABLE IF NOT EXISTS collector_counters (
    key bytea PRIMARY KEY,
    service text COLLATE "C" NOT NULL,
    topic text COLLATE "C" NOT NULL,
    version text COLLATE "C" NOT NULL,
    status text COLLATE "C" NOT NULL,
    count bigint NOT NULL,
    total_duration_ms double precision NOT NULL,
    timed_count bigint NOT NULL,
    first_started_at text COLLATE "C",
    last_started_at text COLLATE "C",
    touched bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS collector_counters_touched ON collector_counters (touched);
CREATE INDEX IF NOT EXISTS collector_counters_service ON collector_counters (service);
CREATE INDEX IF NOT EXISTS collector_counters_topic ON collector_counters (topic);
CREATE TABLE IF NOT EXISTS collector_edges (
    client text COLLATE "C" NOT NULL,
    server text COLLATE "C" NOT NULL,
    count bigint NOT NULL,
    errors bigint NOT NULL,
    recent_durations_ms json NOT NULL,
    first_started_at text COLLATE "C",
    last_started_at text COLLATE "C",
    touched bigint NOT NULL,
    PRIMARY KEY (client, server)
);
CREATE INDEX IF NOT EXISTS collector_edges_touched ON collector_edges (touched);
ALTER TABLE collector_edges ADD COLUMN IF NOT EXISTS client_errors bigint NOT NULL DEFAULT 0;
CREATE TABLE IF NOT EXISTS collector_buckets (
    key bytea PRIMARY KEY,
    kind text COLLATE "C" NOT NULL CHECK (kind IN ('t', 'e')),
    a text COLLATE "C" NOT NULL,
    b text COLLATE "C" NOT NULL,
    version text COLLATE "C" NOT NULL,
    transport text COLLATE "C" NOT NULL,
    status text COLLATE "C" NOT NULL,
    minute bigint NOT NULL,
    cell float8[] NOT NULL
);
CREATE INDEX IF NOT EXISTS collector_buckets_minute ON collector_buckets (minute);
CREATE INDEX IF NOT EXISTS collector_buckets_topic ON collector_buckets (b, minute);
CREATE TABLE IF NOT EXISTS collector_catalog (
    kind text COLLATE "C" NOT NULL CHECK (kind IN {_KINDS!r}),
    service text COLLATE "C" NOT NULL,
    key text COLLATE "C" NOT NULL,
    document json NOT NULL,
    bytes integer NOT NULL,
    touched bigint NOT NULL,
    PRIMARY KEY (kind, service, key)
);
CREATE INDEX IF NOT EXISTS collector_catalog_touched ON collector_catalog (kind, touched);
CREATE INDEX IF NOT EXISTS collector_catalog_service ON collector_catalog (service);
CREATE INDEX IF NOT EXISTS collector_catalog_entries ON collector_catalog (service) WHERE kind = 'catalog';
CREATE TABLE IF NOT EXISTS collector_issues (
    fingerprint text COLLATE "C" PRIMARY KEY,
    issue json NOT NULL,
    touched bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS collector_issues_touched ON collector_issues (touched);
CREATE INDEX IF NOT EXISTS collector_issues_newest ON collector_issues (((issue->>'lastSeen') COLLATE "C") DESC,
    fingerprint);
CREATE TABLE IF NOT EXISTS collector_topics (
    topic text COLLATE "C" NOT NULL,
    service text COLLATE "C" NOT NULL,
    PRIMARY KEY (topic, service)
);
CREATE INDEX IF NOT EXISTS collector_topics_service ON collector_topics (service);
CREATE TABLE IF NOT EXISTS collector_feeds (
    service text COLLATE "C" PRIMARY KEY,
    traces boolean NOT NULL,
    issue_batches bigint NOT NULL,
    unexplained_failures bigint NOT NULL,
    touched bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS collector_feeds_touched ON collector_feeds (touched);
CREATE TABLE IF NOT EXISTS collector_batches (
    seq bigserial UNIQUE,
    feed text COLLATE "C" NOT NULL,
    batch_id text COLLATE "C" NOT NULL,
    accepted integer NOT NULL,
    PRIMARY KEY (feed, batch_id)
);
CREATE TABLE IF NOT EXISTS collector_totals (
    name text COLLATE "C" PRIMARY KEY,
    value bigint NOT NULL
);
"""
"""Idempotent: run by every replica on start, under an advisory lock so two starting at once do not collide.

Every key fits its btree index (at most 2,704 bytes a row): a name is at most 256 characters, 1,024 bytes of UTF-8,
and no index holds more than two of them, except a counter's four (service, topic, version, status), which is
keyed by their hash (`_COUNTER_KEY`)."""

_COUNTER_KEY: Final = ("sha256(convert_to(length(service) || ':' || service || length(topic) || ':' || topic || "
                       "length(version) || ':' || version || length(status) || ':' || status, 'UTF8'))")  # fmt: skip
"""A counter's key: the hash of its names, each prefixed by its length, so no two tuples share it."""
_BUCKET_KEY: Final = ("sha256(convert_to(kind || length(a) || ':' || a || length(b) || ':' || b || length(version) || "
                      "':' || version || length(transport) || ':' || transport || length(status) || ':' || status || "
                      "':' || minute, 'UTF8'))")  # fmt: skip
"""A time bucket's key, hashed like a counter's: its four names and a transport would overflow the index."""
_MIGRATIONS: Final = {
    1: "ALTER TABLE collector_counters ADD COLUMN IF NOT EXISTS key bytea; "
       f"UPDATE collector_counters SET key = {_COUNTER_KEY}; "
       "ALTER TABLE collector_counters DROP CONSTRAINT IF EXISTS collector_counters_pkey; "
       "ALTER TABLE collector_counters ADD PRIMARY KEY (key)",
}
"""From version n to n + 1: v2 keys counters by the hash of their names (four long names overflowed the index), and
indexes the services that name each topic (`collector_topics`, filled from the catalog after the statements)."""

_DROPPED: Final = ("traceWindow", "counters", "otherStatuses", "edges", "issues", *_KINDS, "services", "skipped",
                   "refused", "duplicateBatches")
"""The fleet query's `dropped`, in its order; each a row of collector_totals."""
_WINDOW_EVENTS: Final = "window:events"
_WINDOW_BYTES: Final = "window:bytes"
_WINDOW_PRUNED: Final = "window:pruned"
"""The seq of the newest event pruned from the window."""


def _rows_total(table: str) -> str:
    return f"rows:{table}"


def _bytes_total(kind: str) -> str:
    return f"bytes:{kind}"


T = TypeVar("T")
Cursor = psycopg.Cursor[Any]

POOL_LOG_INTERVAL: Final = 60.0
"""Seconds between two warnings of psycopg's pool: while the database is away it warns on every attempt."""


HEARTBEAT_ROWS: Final = (
    "SELECT kind, key, json_strip_nulls(json_build_object('service', service, 'serviceVersion', "
    "document->'serviceVersion', 'descriptorHash', document->'descriptorHash', 'changes', '[]'::json, "
    "'removedTopics', '[]'::json))::text, bytes, touched FROM collector_catalog WHERE kind = 'catalog' AND "
    "service = %s UNION ALL SELECT kind, key, document::text, bytes, touched FROM collector_catalog "
    "WHERE kind = 'instances' AND service = %s AND key = %s ORDER BY touched"
)
"""What a heartbeat reads: its service's descriptor hashes and its own instance row, by two index lookups (one
condition with OR lets the planner scan every row of the service, or every catalog row of the fleet; the partial
index `collector_catalog_entries` keeps a service's many instance rows out of the first lookup's estimate)."""


class PoolWarnings(logging.Filter):
    """Lets one warning of psycopg's pool through per `interval` and says how many it held back meanwhile; the
    collector's own health check and warning say what is wrong, once a minute."""

    def __init__(self, interval: float = POOL_LOG_INTERVAL, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.interval = interval
        self.clock = clock
        self.held_back = 0
        self._last = -math.inf

    def filter(self, record: logging.LogRecord) -> bool:
        now = self.clock()
        if now - self._last < self.interval:
            self.held_back += 1
            return False
        self._last = now
        if self.held_back:
            record.msg = f"{record.msg} ({self.held_back} similar warning(s) of the pool held back since the last)"
            self.held_back = 0
        return True


_POOL_WARNINGS = PoolWarnings()
logging.getLogger("psycopg.pool").addFilter(_POOL_WARNINGS)


@dataclass(frozen=True, slots=True)
class _Bound:
    """A table with a cap in rows: its name, its cap and the `dropped` count its evictions go to; `where` is the
    catalog kind, for collector_catalog (one table, three caps)."""

    table: str
    cap: int
    dropped: str
    where: str = ""


class PostgresStore:
    """The collector's `Backend` on PostgreSQL (see the module docstring). `url` is a libpq connection URL."""

    blocking = True

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = DEFAULT_POOL_SIZE,
        query_pool_size: int = DEFAULT_QUERY_POOL_SIZE,
        timeout: float = DEFAULT_TIMEOUT,
        probe_interval: float = DEFAULT_PROBE_INTERVAL,
        refuse_at_start: bool = False,
    ) -> None:
        """`refuse_at_start`: `open` raises StoreError naming why when it cannot connect or make the tables, instead
        of starting with the database away (`svcgen collector serve`: a URL wrong from the start is refused; a
        database lost later is an outage health reports)."""
        self.url = url
        self.refuse_at_start = refuse_at_start
        self.timeout = timeout
        self.probe_interval = probe_interval
        self.limits = CollectorLimits()
        self._minute = MinuteReader()
        self._pool = ConnectionPool(url, min_size=1, max_size=pool_size, open=False, timeout=timeout,
                                    kwargs={"connect_timeout": max(1, round(timeout))},
                                    name="svcgen-collector")  # fmt: skip
        self._query_pool = ConnectionPool(url, min_size=1, max_size=query_pool_size, open=False, timeout=timeout,
                                          kwargs={"connect_timeout": max(1, round(timeout))},
                                          name="svcgen-collector-queries")  # fmt: skip
        self._problem: str | None = None
        self._mismatch_cache: tuple[tuple[int, int], dict[tuple[str, str], int], list[Json]] | None = None
        """(count and sum of the entries' `touched`, each entry's `touched`, the mismatch issues derived from them)."""
        self._schema_ready = False
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None

    # --- lifecycle ------------------------------------------------------------------------------------------

    def open(self, limits: CollectorLimits) -> None:
        self.limits = limits
        # One connection of our own first: it says at once why it fails, where the pool would wait out its timeout.
        unreachable = self._unreachable() if self.refuse_at_start else None
        if unreachable is not None:
            raise StoreError(unreachable)
        self._pool.open(wait=False)
        self._query_pool.open(wait=False)
        try:
            self._ensure_schema()
        except StoreUnavailable as exc:
            if self.refuse_at_start:
                self.close()
                raise StoreError(str(exc)) from None
        self._stop.clear()
        self._watcher = threading.Thread(target=self._watch, name="svcgen-postgres-watch", daemon=True)
        self._watcher.start()

    def close(self) -> None:
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join()
            self._watcher = None
        self._pool.close()
        self._query_pool.close()

    @property
    def problem(self) -> str | None:
        return self._problem

    def _watch(self) -> None:
        while not self._stop.wait(self.probe_interval):
            try:
                self._transaction(lambda cursor: cursor.execute("SELECT 1"))
            except StoreUnavailable:
                self._find_reason()

    def _find_reason(self) -> None:
        """The pool only says it got no connection in time; one connection of our own says why, so health names the
        reason, not the pool's wait. One that connects leaves the problem as it was (a busy pool, tables of a newer
        version)."""
        self._problem = self._unreachable() or self._problem

    def _unreachable(self) -> str | None:
        """Why one connection of our own fails (refused, no such database, authentication failed); None when it
        connects."""
        try:
            psycopg.connect(self.url, connect_timeout=max(1, round(self.timeout))).close()
        except psycopg.Error as exc:
            return f"the database cannot be reached ({_first_line(exc)})"
        return None

    def _ensure_schema(self) -> None:
        def create(cursor: Cursor) -> None:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            cursor.execute(_TABLES)
            cursor.execute("SELECT max(version) FROM collector_schema")
            row = cursor.fetchone()
            found = row[0] if row else None
            if found is None:
                cursor.execute("INSERT INTO collector_schema (version) VALUES (%s)", (SCHEMA_VERSION,))
            elif found > SCHEMA_VERSION:
                raise StoreError(f"the database holds collector tables of version {found}, newer than this "
                                 f"svcgen's {SCHEMA_VERSION}")  # fmt: skip
            elif found < SCHEMA_VERSION:
                for version in range(found, SCHEMA_VERSION):
                    cursor.execute(_MIGRATIONS[version])
                cursor.execute("SELECT DISTINCT service FROM collector_catalog WHERE kind = 'catalog'")
                for (service,) in cursor.fetchall():  # v2's topic index, for what v1 holds
                    self._index_topics(cursor, service)
                cursor.execute("UPDATE collector_schema SET version = %s", (SCHEMA_VERSION,))
            cursor.execute("INSERT INTO collector_totals (name, value) SELECT unnest(%s::text[]), 0 "
                           "ON CONFLICT DO NOTHING", (list(_TOTAL_NAMES),))  # fmt: skip

        self._transaction(create, schema=False)
        self._schema_ready = True

    # --- transactions ---------------------------------------------------------------------------------------

    def _transaction(self, work: Callable[[Cursor], T], *, schema: bool = True, read_only: bool = False) -> T:
        """Run `work` in one transaction; retried on a deadlock, a serialization failure or a pooled connection the
        server closed meanwhile (a change is idempotent: batches by batchId, events by span); StoreUnavailable
        when the database cannot be used now."""
        for attempt in range(_RETRIES):
            # While the database is known to be away (found by an earlier attempt too), a change fails fast instead
            # of waiting the whole timeout.
            timeout = self.timeout if self._problem is None else min(self.timeout, 0.5)
            try:
                if schema and not self._schema_ready:
                    self._ensure_schema()
                pool = self._query_pool if read_only else self._pool
                try:
                    with pool.connection(timeout=timeout) as connection, connection.transaction(), \
                            connection.cursor() as cursor:  # fmt: skip
                        if read_only:
                            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                        result = work(cursor)
                except (psycopg.Error, UnicodeEncodeError) as exc:
                    if not unstorable(exc):
                        raise
                    # The input, never the database: answered bad-request, health untouched, nothing retried.
                    raise Unstorable(_first_line(exc)) from None
            except (pg_errors.DeadlockDetected, pg_errors.SerializationFailure):
                continue
            except PoolTimeout:  # an OperationalError too, but no connection at all: waiting again would not help
                self._problem = self._problem or f"the database cannot be reached (no connection within {timeout:g} s)"
                raise StoreUnavailable(self._problem) from None
            except psycopg.OperationalError as exc:
                self._problem = f"the database cannot be reached ({_first_line(exc)})"
                pool.check()  # drop the connections the server closed, so a retry gets a live one
                if attempt + 1 < _RETRIES:
                    continue
                raise StoreUnavailable(self._problem) from None
            except psycopg.Error as exc:
                self._problem = f"the database refused a change ({type(exc).__name__}: {_first_line(exc)})"
                raise StoreUnavailable(self._problem) from None
            except StoreError as exc:
                if not schema:
                    raise
                self._problem = str(exc)
                raise StoreUnavailable(self._problem) from None
            self._problem = None
            return result
        raise StoreUnavailable(self._problem or "the database kept aborting the transaction (deadlock)")

    # --- ingest ---------------------------------------------------------------------------------------------

    def apply(self, change: Json) -> Applied:
        op = change["op"]
        if op == "traces":
            return self._transaction(lambda cursor: self._batch(cursor, change, self._traces))
        if op == "issues":
            return self._transaction(lambda cursor: self._batch(cursor, change, self._issues))
        if op in ("register", "heartbeat", "poll"):
            return self._transaction(lambda cursor: self._catalog_change(cursor, change))
        raise ValueError(f"unknown change {op!r}")

    def count(self, name: str, amount: int = 1) -> None:
        with contextlib.suppress(StoreUnavailable, Unstorable):
            self._transaction(lambda cursor: _add_totals(cursor, {name: amount}))

    def _batch(self, cursor: Cursor, change: Json, apply: Callable[[Cursor, Json, dict[str, int]], int]) -> Applied:
        totals: dict[str, int] = defaultdict(int)
        batch_id = change.get("batchId")
        if batch_id is not None:
            cursor.execute("INSERT INTO collector_batches (feed, batch_id, accepted) VALUES (%s, %s, 0) "
                           "ON CONFLICT DO NOTHING RETURNING seq", (change["op"], batch_id))  # fmt: skip
            inserted = cursor.fetchone()
            if inserted is None:
                cursor.execute("SELECT accepted FROM collector_batches WHERE feed = %s AND batch_id = %s",
                               (change["op"], batch_id))  # fmt: skip
                seen = cursor.fetchone()
                _add_totals(cursor, {"duplicateBatches": 1})
                return Applied(seen=int(seen[0]) if seen else 0)
            cursor.execute("DELETE FROM collector_batches WHERE seq <= %s", (inserted[0] - self.limits.batch_ids,))
        entries = len(change["events" if change["op"] == "traces" else "issues"])
        accepted = apply(cursor, change, totals)
        if batch_id is not None:
            cursor.execute("UPDATE collector_batches SET accepted = %s WHERE feed = %s AND batch_id = %s",
                           (accepted, change["op"], batch_id))  # fmt: skip
        totals["skipped"] += int(change["skipped"])
        _add_totals(cursor, totals)
        return Applied(dropped=_dropped_any(totals), skipped=entries - accepted)

    def _each_storable(self, cursor: Cursor, entries: list[Json], totals: dict[str, int],
                       store: Callable[[Cursor, list[Json], dict[str, int]], None]) -> int:
        """`store` the entries in one go; when the database cannot hold one of them (`unstorable`), each on its own
        (a savepoint apiece), skipping and counting those it cannot hold. How many were stored."""
        # Counts go to a copy, kept only when its savepoint is: a rolled-back try leaves `totals` as it was.
        try:
            with cursor.connection.transaction():
                trial: dict[str, int] = defaultdict(int, totals)
                store(cursor, entries, trial)
        except (psycopg.Error, UnicodeEncodeError) as exc:
            if not unstorable(exc):
                raise
        else:
            totals.update(trial)
            return len(entries)
        stored = 0
        for entry in entries:
            try:
                with cursor.connection.transaction():
                    trial = defaultdict(int, totals)
                    store(cursor, [entry], trial)
            except (psycopg.Error, UnicodeEncodeError) as exc:
                if not unstorable(exc):
                    raise
                totals["skipped"] += 1
                continue
            totals.update(trial)
            stored += 1
        return stored

    def _traces(self, cursor: Cursor, change: Json, totals: dict[str, int]) -> int:
        events: list[Json] = change["events"]
        if not events:
            return 0
        arrived = minute_of(parse_rfc3339(change["at"]) or 0.0)
        return self._each_storable(cursor, events, totals,
                                   lambda cursor, events, totals: self._insert_events(cursor, events, totals, arrived))

    def _insert_events(self, cursor: Cursor, events: list[Json], totals: dict[str, int], arrived: int) -> None:
        spans = {event["spanId"] for event in events} | {event["parentSpanId"] for event in events
                                                           if "parentSpanId" in event}  # fmt: skip
        cursor.execute("SELECT pg_advisory_xact_lock(%s, h) FROM (SELECT DISTINCT hashtext(s) AS h "
                       "FROM unnest(%s::text[]) AS s ORDER BY 1) AS k", (_SPAN_LOCKS, sorted(spans)))  # fmt: skip
        cursor.execute(
            "INSERT INTO collector_events (trace_id, span_id, parent_span_id, service, bytes, event) "
            "SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::int[], %s::json[]) "
            "ON CONFLICT (trace_id, span_id) DO NOTHING RETURNING seq, trace_id, span_id",
            (
                [event["traceId"] for event in events],
                [event["spanId"] for event in events],
                [event.get("parentSpanId") for event in events],
                [event["service"] for event in events],
                [_event_bytes(event) for event in events],
                [orjson.dumps(event).decode() for event in events],
            ),
        )
        inserted = sorted(cursor.fetchall())
        if not inserted:
            return
        by_key: dict[tuple[str, str], Json] = {}
        for event in events:
            by_key.setdefault((event["traceId"], event["spanId"]), event)
        inserted_events = [(seq, by_key[(trace_id, span_id)]) for seq, trace_id, span_id in inserted]
        fresh = [event for _, event in inserted_events]
        cells: dict[tuple[str, str, str, str, str, str, int], Cell] = {}
        self._edges(cursor, inserted_events, totals, cells, arrived)
        self._counters(cursor, fresh, totals, cells, arrived)
        self._buckets(cursor, cells, arrived)
        failures: dict[str, int] = {}
        for event in fresh:
            failures[event["service"]] = failures.get(event["service"], 0) + is_failure(event["status"])
        self._traced(cursor, failures, totals)
        self._prune_window(cursor, len(fresh), sum(_event_bytes(event) for event in fresh), totals)

    def _edges(self, cursor: Cursor, fresh: list[tuple[int, Json]], totals: dict[str, int],
               cells: dict[tuple[str, str, str, str, str, str, int], Cell], arrived: int) -> None:
        """Each edge once: a new child with its parent (new or not), a new parent with the children that were
        there before this batch. Two index lookups by span id, so the cost follows the batch, not the window."""
        seqs = [seq for seq, _ in fresh]
        parents = sorted({event["parentSpanId"] for _, event in fresh if "parentSpanId" in event})
        cursor.execute(
            "SELECT seq, span_id, NULL, service, NULL FROM collector_events WHERE span_id = ANY(%s::text[]) "
            "UNION ALL "
            "SELECT seq, span_id, parent_span_id, service, event::text FROM collector_events "
            "WHERE parent_span_id = ANY(%s::text[]) AND NOT seq = ANY(%s::bigint[]) ORDER BY 1",
            (parents, sorted({event["spanId"] for _, event in fresh}), seqs),
        )
        service_of: dict[str, str] = {}
        waiting: list[tuple[int, str, Json]] = []
        for seq, span, parent, service, text in cursor.fetchall():
            if text is None:
                service_of[span] = service  # the newest span of that id wins, as in memory
            else:
                waiting.append((seq, parent, {**orjson.loads(text), "service": service}))
        by_span = {event["spanId"]: (seq, event["service"]) for seq, event in fresh}
        # Ordered by the event that completes the pair (the later of child and parent), as memory links them.
        pairs: list[tuple[int, str, Json]] = [
            (max(seq, by_span.get(event["parentSpanId"], (0, ""))[0]), service_of[event["parentSpanId"]], event)
            for seq, event in fresh if event.get("parentSpanId") in service_of
        ]
        pairs += [(max(seq, by_span[parent][0]), by_span[parent][1], child) for seq, parent, child in waiting]
        calls: dict[tuple[str, str], list[Json]] = {}
        for _, client, child in sorted(pairs, key=lambda pair: pair[0]):
            if client != child["service"]:  # a call inside one service is not an edge
                calls.setdefault((client, child["service"]), []).append(child)
        if not calls:
            return
        keys = sorted(calls)
        cursor.execute(
            "INSERT INTO collector_edges (client, server, count, errors, recent_durations_ms, touched) "
            "SELECT client, server, 0, 0, '[]', 0 FROM unnest(%s::text[], %s::text[]) AS k(client, server) "
            "ORDER BY 1, 2 ON CONFLICT DO NOTHING",
            ([client for client, _ in keys], [server for _, server in keys]),
        )
        totals[_rows_total("collector_edges")] += cursor.rowcount
        cursor.execute(
            "SELECT client, server, count, errors, client_errors, recent_durations_ms::text, first_started_at, "
            "last_started_at FROM collector_edges "
            "WHERE (client, server) IN (SELECT * FROM unnest(%s::text[], %s::text[])) "
            "ORDER BY client, server FOR UPDATE",
            ([client for client, _ in keys], [server for _, server in keys]),
        )
        rows = []
        for client, server, count, errors, client_errors, durations_text, first, last in cursor.fetchall():
            durations = orjson.loads(durations_text)
            for child in calls[(client, server)]:
                count = saturated(count + 1)
                errors = saturated(errors + is_server_failure(child["status"]))
                client_errors = saturated(client_errors + is_client_failure(child["status"]))
                status = child["status"] if child["status"] in STATUS_CODES else OTHER_STATUS
                minute = self._minute(child.get("startedAt"))
                cell_key = ("e", client, server, "", "", status, arrived if minute is None else minute)
                count_into(cells.get(cell_key) or cells.setdefault(cell_key, new_cell()), child.get("durationMs"))
                if "durationMs" in child:
                    durations.append(child["durationMs"])
                started = child.get("startedAt")
                if started is not None:
                    first = started if first is None or started < first else first
                    last = started if last is None or started > last else last
            recent = orjson.dumps(durations[-self.limits.recent_durations :]).decode()
            rows.append((count, errors, client_errors, recent, first, last, client, server))
        cursor.executemany(
            "UPDATE collector_edges SET count = %s, errors = %s, client_errors = %s, recent_durations_ms = %s, "
            "first_started_at = %s, "
            "last_started_at = %s, touched = nextval('collector_touch') WHERE client = %s AND server = %s",
            rows,
        )
        self._bound(cursor, _Bound("collector_edges", self.limits.edges, "edges"), totals)

    def _declared(self, cursor: Cursor, services: list[str]) -> dict[str, frozenset[str] | None]:
        """Per service, what its events are held against (`held_topics`): the topic ids its catalog entries
        declare, or for a service not described yet the topics it is counted under once they reach the limit."""
        cursor.execute("SELECT service, document::text FROM collector_catalog WHERE kind = 'catalog' "
                       "AND service = ANY(%s)", (services,))  # fmt: skip
        entries: dict[str, list[Any]] = {service: [] for service in services}
        for service, text in cursor.fetchall():
            entries[service].append(orjson.loads(text))
        declared = {service: ServiceRecords(entries=held).declared() for service, held in entries.items()}
        undescribed = sorted(service for service, topics in declared.items() if topics is None)
        counted: dict[str, frozenset[str]] = {}
        if undescribed:
            cursor.execute("SELECT service, array_agg(DISTINCT topic) FROM collector_counters WHERE service = "
                           "ANY(%s) GROUP BY service", (undescribed,))  # fmt: skip
            counted = {service: frozenset(topics) for service, topics in cursor.fetchall()}
        return {service: held_topics(topics, counted.get(service, frozenset()), self.limits.undescribed_topics)
                for service, topics in declared.items()}  # fmt: skip

    def _counters(self, cursor: Cursor, events: list[Json], totals: dict[str, int],
                  cells: dict[tuple[str, str, str, str, str, str, int], Cell], arrived: int) -> None:
        sums: dict[tuple[str, str, str, str], list[Any]] = {}
        declared = self._declared(cursor, sorted({event["service"] for event in events}))
        for event in events:
            status = event["status"]
            if status not in STATUS_CODES:
                status = OTHER_STATUS
                totals["otherStatuses"] += 1
            key = (event["service"], *counted_as(event, declared[event["service"]]), status)
            entry = sums.setdefault(key, [0, 0.0, 0, None, None])
            entry[0] += 1
            duration = event.get("durationMs")
            minute = self._minute(event.get("startedAt"))
            cell_key = ("t", key[0], key[1], key[2], event.get("transport", ""), status,
                        arrived if minute is None else minute)  # fmt: skip
            count_into(cells.get(cell_key) or cells.setdefault(cell_key, new_cell()), duration)
            if duration is not None:
                entry[1] += duration
                entry[2] += 1
            started = event.get("startedAt")
            if started is not None:
                entry[3] = started if entry[3] is None or started < entry[3] else entry[3]
                entry[4] = started if entry[4] is None or started > entry[4] else entry[4]
        keys = sorted(sums)
        columns = list(zip(*(key + tuple(sums[key]) for key in keys), strict=True))
        cursor.execute(
            "INSERT INTO collector_counters AS c (key, service, topic, version, status, count, total_duration_ms, "
            "timed_count, first_started_at, last_started_at, touched) "
            f"SELECT {_COUNTER_KEY}, *, nextval('collector_touch') FROM unnest(%s::text[], %s::text[], %s::text[], "
            "%s::text[], %s::bigint[], %s::float8[], %s::bigint[], %s::text[], %s::text[]) "
            "AS k(service, topic, version, status) "
            "ON CONFLICT (key) DO UPDATE SET "
            "count = least(c.count::numeric + excluded.count, %s)::bigint, "
            "total_duration_ms = c.total_duration_ms + excluded.total_duration_ms, "
            "timed_count = least(c.timed_count::numeric + excluded.timed_count, %s)::bigint, "
            "first_started_at = least(c.first_started_at, excluded.first_started_at), "
            "last_started_at = greatest(c.last_started_at, excluded.last_started_at), touched = excluded.touched "
            "RETURNING xmax = 0",
            (*(list(column) for column in columns), MAX_COUNT, MAX_COUNT),
        )
        totals[_rows_total("collector_counters")] += sum(1 for (fresh,) in cursor.fetchall() if fresh)
        self._bound(cursor, _Bound("collector_counters", self.limits.counters, "counters"), totals)

    def _buckets(self, cursor: Cursor, cells: dict[tuple[str, str, str, str, str, str, int], Cell],
                 arrived: int) -> None:
        """Add the newly accepted calls' cells (each sums into its row: replicas add exactly) and drop rows past
        the retention. Rows in key order, as every replica locks them."""
        oldest = arrived - self.limits.bucket_minutes + 1
        rows = [(*key, cell.tolist()) for key, cell in sorted(cells.items()) if key[6] >= oldest]
        if rows:
            cursor.executemany(
                "INSERT INTO collector_buckets AS k (key, kind, a, b, version, transport, status, minute, cell) "
                f"SELECT {_BUCKET_KEY}, * FROM (VALUES (%s, %s, %s, %s, %s, %s, %s::bigint, %s::float8[])) "
                "AS v(kind, a, b, version, transport, status, minute, cell) "
                "ON CONFLICT (key) DO UPDATE SET cell = "
                "(SELECT array_agg(x + y ORDER BY i) FROM unnest(k.cell, excluded.cell) WITH ORDINALITY AS t(x, y, i))",
                rows,
            )
        cursor.execute("DELETE FROM collector_buckets WHERE minute < %s", (oldest,))

    def _traced(self, cursor: Cursor, failures: dict[str, int], totals: dict[str, int]) -> None:
        names = sorted(failures)
        cursor.execute(
            "INSERT INTO collector_feeds AS f (service, traces, issue_batches, unexplained_failures, touched) "
            "SELECT s, true, 0, n, nextval('collector_touch') FROM unnest(%s::text[], %s::bigint[]) AS k(s, n) "
            "ON CONFLICT (service) DO UPDATE SET traces = true, touched = excluded.touched, "
            "unexplained_failures = CASE WHEN f.issue_batches = 0 "
            "THEN least(f.unexplained_failures::numeric + excluded.unexplained_failures, %s)::bigint "
            "ELSE f.unexplained_failures END RETURNING xmax = 0",
            (names, [failures[name] for name in names], MAX_COUNT),
        )
        self._feeds_grew(cursor, totals)

    def _feeds_grew(self, cursor: Cursor, totals: dict[str, int]) -> None:
        totals[_rows_total("collector_feeds")] += sum(1 for (fresh,) in cursor.fetchall() if fresh)
        self._bound(cursor, _Bound("collector_feeds", self.limits.services, "services"), totals)

    def _prune_window(self, cursor: Cursor, added: int, added_bytes: int, totals: dict[str, int]) -> None:
        cursor.execute(
            "UPDATE collector_totals SET value = value + CASE name WHEN %s THEN %s WHEN %s THEN %s ELSE 0 END "
            "WHERE name IN (%s, %s, %s) RETURNING name, value",
            (_WINDOW_EVENTS, added, _WINDOW_BYTES, added_bytes, _WINDOW_EVENTS, _WINDOW_BYTES, _WINDOW_PRUNED),
        )
        size = dict(cursor.fetchall())
        events, size_bytes, pruned = size[_WINDOW_EVENTS], size[_WINDOW_BYTES], size[_WINDOW_PRUNED]
        cap, cap_bytes = self.limits.trace_window, self.limits.trace_window_bytes
        dropped = dropped_bytes = 0
        # Scans start past the last pruned event: the index entries of deleted rows before it would otherwise be
        # walked on every prune until a vacuum removes them.
        last = pruned
        while events - dropped > cap or size_bytes - dropped_bytes > cap_bytes:
            cursor.execute("SELECT seq, bytes FROM collector_events WHERE seq > %s ORDER BY seq LIMIT %s",
                           (last, max(events - dropped - cap, 64)))  # fmt: skip
            oldest = cursor.fetchall()
            if not oldest:
                break
            for seq, size_of in oldest:
                if events - dropped <= cap and size_bytes - dropped_bytes <= cap_bytes:
                    break
                dropped += 1
                dropped_bytes += size_of
                last = seq
        if not dropped:
            return
        cursor.execute("DELETE FROM collector_events WHERE seq > %s AND seq <= %s", (pruned, last))
        totals[_WINDOW_PRUNED] += last - pruned
        totals["traceWindow"] += dropped
        totals[_WINDOW_EVENTS] -= dropped
        totals[_WINDOW_BYTES] -= dropped_bytes

    def _issues(self, cursor: Cursor, change: Json, totals: dict[str, int]) -> int:
        stored = self._each_storable(cursor, change["issues"], totals, self._merge_issues) if change["issues"] else 0
        cursor.execute(
            "INSERT INTO collector_feeds AS f (service, traces, issue_batches, unexplained_failures, touched) "
            "VALUES (%s, false, 1, 0, nextval('collector_touch')) ON CONFLICT (service) DO UPDATE SET "
            "issue_batches = least(f.issue_batches::numeric + 1, %s)::bigint, touched = excluded.touched "
            "RETURNING xmax = 0",
            (change["service"], MAX_COUNT),
        )
        self._feeds_grew(cursor, totals)
        return stored

    def _merge_issues(self, cursor: Cursor, issues: list[Json], totals: dict[str, int]) -> None:
        """Fold issues into their rows with the issue book's own merge."""
        if not issues:
            return
        book = IssueBook(CollectorLimits(issues=MAX_COUNT, exemplars=self.limits.exemplars))
        fingerprints = sorted({issue["fingerprint"] for issue in issues})
        # Locks the fingerprints not held yet too: two replicas filing a new issue at once must not both start
        # it from nothing.
        cursor.execute("SELECT pg_advisory_xact_lock(%s, h) FROM (SELECT DISTINCT hashtext(f) AS h "
                       "FROM unnest(%s::text[]) AS f ORDER BY 1) AS k", (_ISSUE_LOCKS, fingerprints))  # fmt: skip
        cursor.execute("SELECT issue::text FROM collector_issues WHERE fingerprint = ANY(%s) ORDER BY fingerprint "
                       "FOR UPDATE", (fingerprints,))  # fmt: skip
        book.restore([orjson.loads(text) for (text,) in cursor.fetchall()])
        held = set(book.issues)
        for issue in issues:
            book.merge(dict(issue))
        touched = list(dict.fromkeys(issue["fingerprint"] for issue in issues))
        cursor.executemany(
            "INSERT INTO collector_issues (fingerprint, issue, touched) VALUES (%s, %s, nextval('collector_touch')) "
            "ON CONFLICT (fingerprint) DO UPDATE SET issue = excluded.issue, touched = excluded.touched",
            [(fingerprint, orjson.dumps(book.issues[fingerprint]).decode()) for fingerprint in touched],
        )
        totals[_rows_total("collector_issues")] += len(set(touched) - held)
        self._bound(cursor, _Bound("collector_issues", self.limits.issues, "issues"), totals)

    def _catalog_change(self, cursor: Cursor, change: Json) -> Applied:
        op, at = change["op"], change["at"]
        service = change["descriptor"]["service"] if op == "register" else change["service"]
        cursor.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_SERVICE_LOCKS, service))
        if op == "heartbeat":
            # Its own instance row and the service's descriptor hashes, nothing more: a heartbeat costs the same
            # at 10 instances as at 10,000, whatever the descriptors and specs weigh.
            cursor.execute(HEARTBEAT_ROWS, (service, service, instance_id(change)))
        else:
            cursor.execute("SELECT kind, key, document::text, bytes FROM collector_catalog WHERE service = %s "
                           "ORDER BY touched", (service,))  # fmt: skip
        before: dict[tuple[str, str], bytes] = {}
        sizes: dict[tuple[str, str], int] = {}
        held: dict[str, list[Any]] = {kind: [] for kind in _KINDS}
        for kind, key, text, size, *_ in cursor.fetchall():
            before[(kind, key)] = text.encode()
            sizes[(kind, key)] = size
            held[kind].append(orjson.loads(text))
        whole = CollectorLimits(catalog=MAX_COUNT, instances=MAX_COUNT, polls=MAX_COUNT, catalog_bytes=MAX_COUNT,
                       changes=self.limits.changes, removed_topics=self.limits.removed_topics)  # fmt: skip
        catalog = Catalog(whole)
        catalog.restore(held["catalog"], held["instances"], held["polls"])
        totals: dict[str, int] = defaultdict(int)
        applied = Applied()
        if op == "register":
            catalog.register(service, change["descriptor"], at)
        elif op == "heartbeat":
            verdict = catalog.heartbeat(service, change, change["health"], at)
            applied = Applied(reregister=catalog.expects_register(service, change.get("instanceId", "")))
            if verdict.drift:
                drift = IssueBook(self.limits)
                drift.file_drift(service, at)
                self._merge_issues(cursor, list(drift.issues.values()), totals)
        else:
            spec = catalog.held_spec(service) if change.get("specUnchanged") else change.get("spec")
            catalog.poll(service, change["baseUrl"], at, prefix=change.get("prefix", DEFAULT_PREFIX), spec=spec,
                         health=change.get("health"), error=change.get("error"))  # fmt: skip
        entries, instances, polls = catalog.snapshot()
        rows: list[tuple[str, str, str, int]] = []
        documents: Iterable[tuple[str, str, Any, int]] = [
            *(("catalog", entry.get("serviceVersion", ""), entry, _entry_size(entry)) for entry in entries),
            *(("instances", item["instanceId"], item, _json_size(item.get("health"))) for item in instances),
            *(("polls", item["baseUrl"], item, _json_size(item.get("health"))) for item in polls),
        ]
        for kind, key, document, size in documents:
            if op == "heartbeat" and kind != "instances":
                continue  # read as a summary above: only the instance row is the heartbeat's to write
            text = orjson.dumps(document)
            if before.get((kind, key)) != text:
                rows.append((kind, key, text.decode(), size))
        if rows:
            cursor.executemany(
                "INSERT INTO collector_catalog (kind, service, key, document, bytes, touched) "
                "VALUES (%s, %s, %s, %s, %s, nextval('collector_touch')) ON CONFLICT (kind, service, key) DO UPDATE "
                "SET document = excluded.document, bytes = excluded.bytes, touched = excluded.touched",
                [(kind, service, key, text, size) for kind, key, text, size in rows],
            )
            for kind, key, _, size in rows:
                if (kind, key) not in before:
                    totals[_rows_total(kind)] += 1
                totals[_bytes_total(kind)] += size - sizes.get((kind, key), 0)
            if any(kind == "catalog" for kind, *_ in rows):
                self._index_topics(cursor, service)
            for kind, cap in (("catalog", self.limits.catalog), ("instances", self.limits.instances),
                              ("polls", self.limits.polls)):  # fmt: skip
                self._bound(cursor, _Bound("collector_catalog", cap, kind, where=kind), totals)
            self._catalog_budget(cursor, totals)
        _add_totals(cursor, totals)
        return Applied(reregister=applied.reregister, dropped=_dropped_any(totals))

    def _index_topics(self, cursor: Cursor, service: str) -> None:
        """`collector_topics` rows of `service`: every topic id its catalog entries handle, send or once handled,
        so a topic query reads the entries of the services naming it and no others. A row outliving its entry
        (evicted) only makes a topic query read a row it finds gone."""
        cursor.execute("SELECT document::text FROM collector_catalog WHERE kind = 'catalog' AND service = %s",
                       (service,))  # fmt: skip
        records = ServiceRecords(entries=[orjson.loads(text) for (text,) in cursor.fetchall()])
        named = sorted({topic for topic, _ in records.provided() | records.produced() | records.removed()}
                       | {declared.event for entry in records.entries for declared in declared_events(entry)})
        cursor.execute("DELETE FROM collector_topics WHERE service = %s AND NOT topic = ANY(%s)", (service, named))
        cursor.execute("INSERT INTO collector_topics (topic, service) SELECT unnest(%s::text[]), %s "
                       "ON CONFLICT DO NOTHING", (named, service))  # fmt: skip

    def _catalog_budget(self, cursor: Cursor, totals: dict[str, int]) -> None:
        """Past the catalog's byte budget the least recently updated row of the kind holding the most bytes goes,
        as in memory."""
        cursor.execute("SELECT name, value FROM collector_totals WHERE name = ANY(%s)",
                       ([_bytes_total(kind) for kind in _KINDS],))  # fmt: skip
        held = {name: value + totals.get(name, 0) for name, value in cursor.fetchall()}
        while sum(held.values()) > self.limits.catalog_bytes:
            largest = max(_KINDS, key=lambda kind: held.get(_bytes_total(kind), 0))
            cursor.execute("DELETE FROM collector_catalog WHERE ctid = (SELECT ctid FROM collector_catalog "
                           "WHERE kind = %s ORDER BY touched LIMIT 1) RETURNING bytes", (largest,))  # fmt: skip
            evicted = cursor.fetchone()
            if evicted is None:
                break
            held[_bytes_total(largest)] -= evicted[0]
            for name, amount in ((_bytes_total(largest), -evicted[0]), (_rows_total(largest), -1), (largest, 1)):
                totals[name] += amount

    def _bound(self, cursor: Cursor, bound: _Bound, totals: dict[str, int]) -> None:
        """Evict the least recently touched rows of a table past its cap (the rows counted so far in `totals`
        are this transaction's; the held count comes from collector_totals)."""
        name = _rows_total(bound.where or bound.table)
        cursor.execute("SELECT value FROM collector_totals WHERE name = %s", (name,))
        row = cursor.fetchone()
        rows = (row[0] if row else 0) + totals.get(name, 0)
        over = rows - bound.cap
        if over <= 0:
            return
        kind = "kind = %(kind)s AND " if bound.where else ""
        cursor.execute(
            f"DELETE FROM {bound.table} WHERE {kind}touched IN "
            f"(SELECT touched FROM {bound.table} WHERE {kind}true ORDER BY touched LIMIT %(over)s) "
            f"RETURNING {'bytes' if bound.where else '0'}",
            {"kind": bound.where, "over": over},
        )
        freed = [size for (size,) in cursor.fetchall()]
        totals[name] -= len(freed)
        totals[bound.dropped] += len(freed)
        if bound.where:
            totals[_bytes_total(bound.where)] -= sum(freed)

    # --- reading --------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def read(self, rows: Rows) -> Iterator[Tables]:
        yield self._transaction(lambda cursor: self._read(cursor, rows), read_only=True)

    def holds_spec(self, service: str, spec: Json) -> bool:
        return False  # telling would read the spec back: a poll writes it, and an unchanged row is not rewritten

    def _read(self, cursor: Cursor, rows: Rows) -> Tables:
        """The rows `rows` names, each table read by its index: a trace its events, a service its rows, the fleet
        one page (`_fleet_page`): its services' catalog and feed rows and the entries naming its topics."""
        kind, key = rows.kind, rows.key
        if kind == "artifacts":
            # One replica at a time reads the aggregates for its artifacts; the others wait their turn.
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", (_ARTIFACT_LOCK,))
        cursor.execute("SELECT name, value FROM collector_totals WHERE name = ANY(%s)", (list(_DROPPED),))
        totals = dict(cursor.fetchall())
        catalog = Catalog(self.limits)
        held: dict[str, list[Any]] = {kind_: [] for kind_ in _KINDS}
        fleet: FleetRows | None = None
        if kind == "fleet":
            fleet = self._fleet_page(cursor, rows, totals)
            # The page's services' rows, and the entries of every service naming one of the page's topics.
            cursor.execute("SELECT kind, document FROM (SELECT kind, document::text, touched FROM collector_catalog "
                           "WHERE service = ANY(%(services)s) UNION ALL SELECT kind, document::text, touched FROM "
                           "collector_catalog WHERE kind = 'catalog' AND service IN (SELECT service FROM "
                           "collector_topics WHERE topic = ANY(%(topics)s)) AND NOT service = ANY(%(services)s)) AS c "
                           "ORDER BY touched", {"services": fleet.services[: rows.limit],
                                                "topics": fleet.topics[: rows.limit]})  # fmt: skip
        elif kind in ("artifacts", "everything"):
            cursor.execute("SELECT kind, document::text FROM collector_catalog ORDER BY touched")
        elif kind == "topic":
            # The entries of the services that name the topic (`collector_topics`): who handles, sends or once
            # handled it is among them; instances and polls never are.
            cursor.execute("SELECT kind, document::text FROM collector_catalog WHERE kind = 'catalog' AND service "
                           "IN (SELECT service FROM collector_topics WHERE topic = %s) ORDER BY touched",
                           (key,))  # fmt: skip
        elif kind == "service":
            cursor.execute("SELECT kind, document::text FROM collector_catalog WHERE service = %s ORDER BY touched",
                           (key,))  # fmt: skip
        if kind in ("fleet", "topic", "artifacts", "everything", "service"):
            for kind_, text in cursor.fetchall():
                held[kind_].append(orjson.loads(text))
        catalog.restore(held["catalog"], held["instances"], held["polls"])
        for kind_ in _KINDS:
            catalog.evicted[kind_] = totals.get(kind_, 0)
        feeds = FeedLog(self.limits)
        feed_rows: list[tuple[str, bool, int, int]] = []
        if kind in ("artifacts", "everything"):
            cursor.execute("SELECT service, traces, issue_batches, unexplained_failures FROM collector_feeds "
                           "ORDER BY touched")  # fmt: skip
            feed_rows = cursor.fetchall()
        elif fleet is not None:
            cursor.execute("SELECT service, traces, issue_batches, unexplained_failures FROM collector_feeds "
                           "WHERE service = ANY(%s) ORDER BY touched", (fleet.services[: rows.limit],))  # fmt: skip
            feed_rows = cursor.fetchall()
        elif kind == "service":
            cursor.execute("SELECT service, traces, issue_batches, unexplained_failures FROM collector_feeds "
                           "WHERE service = %s", (key,))  # fmt: skip
            feed_rows = cursor.fetchall()
        feeds.restore([FeedEntry(service=service, traces=traces, issueBatches=batches, unexplainedFailures=failed)
                       for service, traces, batches, failed in feed_rows])  # fmt: skip
        feeds.evicted = totals.get("services", 0)
        counters = self._read_counters(cursor, rows)
        edges: list[EdgeEntry] = []
        events: list[Json] = []
        if kind in ("artifacts", "everything"):
            cursor.execute("SELECT client, server, count, errors, client_errors, recent_durations_ms::text, "
                           "first_started_at, last_started_at FROM collector_edges ORDER BY touched")  # fmt: skip
            for client, server, count, errors, client_errors, durations, first, last in cursor.fetchall():
                edge = EdgeEntry(client=client, server=server, count=count, errors=errors, clientErrors=client_errors,
                                 recentDurationsMs=orjson.loads(durations))  # fmt: skip
                if first is not None:
                    edge["firstStartedAt"] = first
                if last is not None:
                    edge["lastStartedAt"] = last
                edges.append(edge)
        if kind == "everything":
            cursor.execute("SELECT event::text FROM collector_events ORDER BY seq")
            events = [orjson.loads(text) for (text,) in cursor.fetchall()]
        elif kind == "trace":
            cursor.execute("SELECT event::text FROM collector_events WHERE trace_id = %s ORDER BY seq", (key,))
            events = [orjson.loads(text) for (text,) in cursor.fetchall()]
        trace_log = TraceLog(self.limits)
        trace_log.restore({"cap": self.limits.trace_window, "dropped": totals.get("traceWindow", 0),
                           "events": events}, counters, edges)  # fmt: skip
        if kind in ("buckets", "artifacts", "everything"):
            self._read_buckets(cursor, rows, trace_log.buckets)
        trace_log.evicted_counters = totals.get("counters", 0)
        trace_log.other_statuses = totals.get("otherStatuses", 0)
        trace_log.evicted_edges = totals.get("edges", 0)
        issue_book = IssueBook(self.limits)
        if kind in ("artifacts", "everything"):
            cursor.execute("SELECT issue::text FROM collector_issues ORDER BY touched")
            issue_book.hold([orjson.loads(text) for (text,) in cursor.fetchall()])
        issue_book.dropped = totals.get("issues", 0)
        batches: list[tuple[str, str, int]] = []
        if kind == "everything":
            cursor.execute("SELECT feed, batch_id, accepted FROM collector_batches ORDER BY seq")
            batches = [(feed, batch_id, accepted) for feed, batch_id, accepted in cursor.fetchall()]
        return Tables(catalog, feeds, trace_log, issue_book, {name: totals.get(name, 0) for name in _DROPPED},
                      totals.get("skipped", 0), batches, fleet)  # fmt: skip

    def _fleet_page(self, cursor: Cursor, rows: Rows, totals: dict[str, int]) -> FleetRows:
        """A fleet page's candidates, each list an ordered merge of index scans stopped after `limit` + 1 names, the
        page's topics' calls, the newest issues (by their index) and the catalog's contract mismatches."""
        more = rows.limit + 1
        # The first `more` names of a union are among the first `more` of each part: each part stops early. A
        # service only polled (never reached, so no feed) or only heard of by an instance is a member as in memory.
        cursor.execute(
            "(SELECT DISTINCT service FROM collector_catalog WHERE kind = 'catalog' AND service > %(after)s ORDER BY 1 "
            "LIMIT %(more)s) UNION (SELECT DISTINCT service FROM collector_catalog WHERE kind = 'polls' AND service > "
            "%(after)s ORDER BY 1 LIMIT %(more)s) UNION (SELECT DISTINCT service FROM collector_catalog WHERE kind = "
            "'instances' AND service > %(after)s ORDER BY 1 LIMIT %(more)s) UNION "
            "(SELECT DISTINCT service FROM collector_feeds WHERE service > %(after)s ORDER BY 1 "
            "LIMIT %(more)s) UNION (SELECT DISTINCT service FROM collector_counters WHERE service > %(after)s "
            "ORDER BY 1 LIMIT %(more)s) ORDER BY 1 LIMIT %(more)s",
            {"after": rows.key, "more": more},
        )
        services = [name for (name,) in cursor.fetchall()]
        cursor.execute(
            "(SELECT DISTINCT topic FROM collector_topics WHERE topic > %(after)s ORDER BY 1 LIMIT %(more)s) UNION "
            "(SELECT DISTINCT topic FROM collector_counters WHERE topic > %(after)s ORDER BY 1 LIMIT %(more)s) "
            "ORDER BY 1 LIMIT %(more)s",
            {"after": rows.after, "more": more},
        )
        topics = [name for (name,) in cursor.fetchall()]
        cursor.execute("SELECT topic, least(sum(count), %s)::bigint FROM collector_counters WHERE topic = ANY(%s) "
                       "GROUP BY topic", (MAX_COUNT, topics[: rows.limit]))  # fmt: skip
        invocations = dict(cursor.fetchall())
        cursor.execute("SELECT issue::text FROM collector_issues ORDER BY (issue->>'lastSeen') COLLATE \"C\" DESC, "
                       "fingerprint LIMIT %s", (rows.limit,))  # fmt: skip
        issues = [orjson.loads(text) for (text,) in cursor.fetchall()]
        cursor.execute("SELECT value FROM collector_totals WHERE name = %s", (_rows_total("collector_issues"),))
        held = cursor.fetchone()
        mismatches = self._mismatches(cursor)
        return FleetRows(services=services, topics=topics, invocations=invocations, issues=issues,
                         issues_held=int(held[0]) if held else len(issues), mismatches=mismatches[: rows.limit],
                         mismatches_held=len(mismatches))  # fmt: skip

    def _mismatches(self, cursor: Cursor) -> list[Json]:
        """The contract-mismatch issues of the whole catalog, newest first (`newest_first`), exactly as a derivation
        from every entry gives them (every replica the same). Each replica keeps its last answer with the `touched`
        of each entry it was derived from: unchanged entries, the same answer; changed or new entries, only the
        topics they name (and the mismatches they were party to) derived again, from the entries naming those
        topics; an entry gone (evicted), everything again."""
        # Any change moves the entries' count or the sum of their `touched` up (a change takes a newer `touched`,
        # an eviction lowers the count, an eviction and a new entry trade an old `touched` for a newer one): while
        # both stand, nothing is read but them (by the (kind, touched) index).
        cursor.execute("SELECT count(*), coalesce(sum(touched), 0) FROM collector_catalog WHERE kind = 'catalog'")
        found = cursor.fetchone()
        summary = (int(found[0]), int(found[1])) if found else (0, 0)
        held = self._mismatch_cache  # one tuple, replaced whole: query threads never see a torn pair
        if held is not None and held[0] == summary:
            return held[2]
        cursor.execute("SELECT service, key, touched FROM collector_catalog WHERE kind = 'catalog'")
        seen: dict[tuple[str, str], int] = {(service, key): touched for service, key, touched in cursor.fetchall()}
        if held is not None and held[1] == seen:
            self._mismatch_cache = (summary, seen, held[2])
            return held[2]
        if held is None or not held[1].keys() <= seen.keys():
            cursor.execute("SELECT document::text FROM collector_catalog WHERE kind = 'catalog'")
            issues = _mismatch_issues([text for (text,) in cursor.fetchall()], None)
        else:
            changed = sorted({key[0] for key, touched in seen.items() if held[1].get(key) != touched})
            cursor.execute("SELECT DISTINCT topic FROM collector_topics WHERE service = ANY(%s)", (changed,))
            affected = {topic for (topic,) in cursor.fetchall()}
            affected.update(issue["topic"] for issue in held[2]
                            if issue["service"] in changed or issue.get("consumer") in changed)  # fmt: skip
            cursor.execute("SELECT document::text FROM collector_catalog WHERE kind = 'catalog' AND (service = "
                           "ANY(%s) OR service IN (SELECT service FROM collector_topics WHERE topic = ANY(%s)))",
                           (changed, sorted(affected)))  # fmt: skip
            kept = [issue for issue in held[2] if issue["topic"] not in affected]
            issues = newest_first([*kept, *_mismatch_issues([text for (text,) in cursor.fetchall()], affected)])
        self._mismatch_cache = (summary, seen, issues)
        return issues

    def _read_buckets(self, cursor: Cursor, rows: Rows, book: BucketBook) -> None:
        """The cells a window needs (a topic's, or every topic's and edge's), or all of them for a snapshot."""
        query = "SELECT kind, a, b, version, transport, status, minute, cell FROM collector_buckets"
        if rows.kind in ("artifacts", "everything"):
            cursor.execute(query + " ORDER BY minute")
        elif rows.key:
            cursor.execute(query + " WHERE kind = 't' AND b = %s AND minute BETWEEN %s AND %s ORDER BY minute",
                           (rows.key, rows.first, rows.last))  # fmt: skip
        else:
            cursor.execute(query + " WHERE minute BETWEEN %s AND %s ORDER BY minute", (rows.first, rows.last))
        for kind, a, b, version, transport, status, minute, cell in cursor.fetchall():
            if kind == "t":
                book.merge_topic((a, b, version, transport, status), minute, cell)
            else:
                book.merge_edge((a, b, status), minute, cell)

    def _read_counters(self, cursor: Cursor, rows: Rows) -> list[CounterEntry]:
        """The counter rows `rows` needs (a fleet page none: its topics' calls are summed in the database, and its
        service entries count no calls)."""
        if rows.kind in ("artifacts", "everything"):
            cursor.execute("SELECT service, topic, version, status, count, total_duration_ms, timed_count, "
                           "first_started_at, last_started_at FROM collector_counters ORDER BY touched")  # fmt: skip
        elif rows.kind in ("service", "topic"):
            cursor.execute(f"SELECT service, topic, version, status, count, total_duration_ms, timed_count, "
                           f"first_started_at, last_started_at FROM collector_counters WHERE {rows.kind} = %s "
                           f"ORDER BY touched", (rows.key,))  # fmt: skip
        else:
            return []
        counters = []
        for service, topic, version, status, count, total, timed, first, last in cursor.fetchall():
            counter = CounterEntry(service=service, topic=topic, version=version, status=status, count=count,
                                   totalDurationMs=total, timedCount=timed)  # fmt: skip
            if first is not None:
                counter["firstStartedAt"] = first
            if last is not None:
                counter["lastStartedAt"] = last
            counters.append(counter)
        return counters


_TOTAL_NAMES: Final = (*_DROPPED, _WINDOW_EVENTS, _WINDOW_BYTES, _WINDOW_PRUNED,
                       *(_rows_total(table) for table in ("collector_counters", "collector_edges", "collector_issues",
                                                          "collector_feeds", *_KINDS)),
                       *(_bytes_total(kind) for kind in _KINDS))  # fmt: skip


def _mismatch_issues(documents: list[str], topics: set[str] | None) -> list[Json]:
    """The contract-mismatch issues of these catalog entries (JSON texts), newest first; only those of `topics`
    when given."""
    catalog = Catalog(CollectorLimits(catalog=MAX_COUNT, catalog_bytes=MAX_COUNT))
    catalog.restore([orjson.loads(text) for text in documents], [], [])
    return newest_first([mismatch_issue(mismatch) for mismatch in find_mismatches(catalog.entries.values())
                         if topics is None or mismatch.topic in topics])  # fmt: skip


def _dropped_any(totals: dict[str, int]) -> bool:
    return any(totals.get(name, 0) > 0 for name in _DROPPED if name != "duplicateBatches")


def _add_totals(cursor: Cursor, totals: dict[str, int]) -> None:
    changed = sorted((name, amount) for name, amount in totals.items() if amount)
    if changed:
        cursor.execute(
            "UPDATE collector_totals AS t SET value = t.value + d.amount "
            "FROM unnest(%s::text[], %s::bigint[]) AS d(name, amount) WHERE t.name = d.name",
            ([name for name, _ in changed], [amount for _, amount in changed]),
        )


def unstorable(exc: BaseException) -> bool:
    """Whether the input itself is what the database cannot hold: SQLSTATE class 22 (data exception: a NUL, a
    value out of range) or 54 (program limit exceeded: a key over its index's row size), or text with no UTF-8
    form. Such input fails on every try, so it is refused or skipped, never reported as an unreachable database."""
    if isinstance(exc, UnicodeEncodeError | psycopg.DataError):  # a NUL is refused by psycopg before it is sent
        return True
    sqlstate = getattr(exc, "sqlstate", None) or ""
    return sqlstate[:2] in ("22", "54")


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
