"""The collector: ingests the mesh feeds and polls, answers the four queries, snapshots and restores itself.

Every ingest answers a `Result` (spec "Collector ingest"): `{accepted: n}` on success. Feeds and queries are read
through the codec of their typed records (`messages`): one that does not fit (a missing `service` on register,
heartbeat or issues, say) is `bad-request` naming each field path; a malformed entry of a traces or issues batch is
skipped and counted in `skipped`, the rest accepted. A heartbeat answer carries `reregister: true`
(feeds.REREGISTER_KEY) while the collector expects the instance to register again.

Nothing accepted is lost (docs/collector.md, Durability): a value the store could not write and read back (a number
that is not finite or outside 64 bits, a document nested too deeply or over its byte limit) is refused with
`bad-request` naming its field path. Every accepted ingest becomes one change, handed to the collector's one
`Backend` (store.py), which persists and applies it atomically before it is answered; a backend that cannot take it
makes the ingest `service-unavailable` and the collector unhealthy (`store_problem`).

The collector itself holds no tables and never asks which backend it has: checks and bounds at ingest run before the
backend sees a change, and each query reads the rows it needs (`Rows`) and computes its answer with queries.py, so
the memory/JSON-file backend and PostgreSQL replicas answer alike.

A traces or issues batch with a `batchId` already seen (the newest `CollectorLimits.batch_ids`) is answered as the first
time and not counted again: a reporter's retry is counted once, across restarts too.

Thread-safe (each backend guards its tables), so the poller may call `record_poll` from another thread.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from typing import Any, Final

import orjson

from ..runtime._codec import DecodeError, codec_for
from ..runtime._mesh.clock import WallClock, rfc3339, wall_clock
from ..runtime._mesh.feeds import REREGISTER_KEY
from ..runtime._mesh.messages import (
    ContractQuery,
    FleetQuery,
    HealthDocument,
    Heartbeat,
    RawIssueBatch,
    RawTraceBatch,
    ServiceDescriptor,
    ServiceQuery,
    TopicQuery,
    TraceQuery,
)
from ..runtime._mesh.reporter import DEFAULT_INTERVAL
from ..runtime._result import Result
from ..runtime._topics import DEFAULT_PREFIX
from . import queries
from .artifacts.windows import compute_windows, from_book
from .buckets import minute_of, parse_window
from .caps import CollectorLimits
from .issuebook import normalize_issue
from .memory import MemoryBackend, SnapshotError
from .snapshot import CounterEntry, Json, Snapshot
from .store import DEFAULT_FLEET_LIMIT, Backend, Rows, Store, StoreUnavailable
from .tracelog import normalize_event
from .wire import Unstorable, stored_size

logger = logging.getLogger("svcgen.mesh.collector")

HEARTBEAT_MISSES: Final = 3
DEFAULT_STALE_AFTER: Final = HEARTBEAT_MISSES * DEFAULT_INTERVAL
"""Seconds after its last heartbeat an instance is `stale` (three heartbeats missed at the reporter's default
interval) and stops counting towards its service's health."""
DEFAULT_RETENTION: Final = 24 * 3600.0
"""Seconds of history the collector keeps: the time buckets' span; an instance silent for longer is not listed."""
DEFAULT_LOG_INTERVAL: Final = 60.0

Answer = Result[dict[str, Any]]

__all__ = ["Answer", "Collector", "SnapshotError", "judged"]


class Collector:
    backend: Backend

    def __init__(
        self,
        store: Store | Backend | None = None,
        *,
        limits: CollectorLimits | None = None,
        clock: WallClock = wall_clock,
        stale_after: float = DEFAULT_STALE_AFTER,
        retention: float = DEFAULT_RETENTION,
        log_interval: float = DEFAULT_LOG_INTERVAL,
    ) -> None:
        """`store`: a `Backend`, or a `Store` (memory, JSON file) kept in a `MemoryBackend`; None keeps the state
        in memory only."""
        self.backend = store if isinstance(store, Backend) else MemoryBackend(store, clock=clock)
        self.limits = limits or CollectorLimits()
        self.clock = clock
        self.stale_after = stale_after
        self.retention = retention
        self.log_interval = log_interval
        self.store_failures = 0
        """Changes the store refused (each answered `service-unavailable`)."""
        self.polls_lost = 0
        """Poll results dropped because the store could not take them (no one resends a poll: the next sweep polls
        again); not counted in `store_failures`, whose feeds are sent again."""
        self._losing_polls = False
        self._lock = threading.Lock()
        self._last_failure_log = -math.inf
        self._last_drop_log = -math.inf
        self._logged_drops = 0
        self.backend.open(self.limits)

    # --- ingest ---------------------------------------------------------------------------------------------

    def register(self, body: Any) -> Answer:
        try:
            _DESCRIPTOR(body)  # checked through its record; kept verbatim
        except DecodeError as error:
            return _malformed("register", error)
        try:
            stored_size(body, "descriptor", max_depth=self.limits.depth, max_bytes=self.limits.descriptor_bytes)
        except Unstorable as exc:
            return self._refuse(f"register: {exc}")
        return self._commit({"op": "register", "at": self._now(), "descriptor": body}, {"accepted": 1})

    def heartbeat(self, body: Any) -> Answer:
        try:
            beat = _HEARTBEAT(body)
        except DecodeError as error:
            return _malformed("heartbeat", error)
        health = _ENCODE_HEALTH(beat.health or HealthDocument())
        try:
            stored_size(health, "health", max_depth=self.limits.depth, max_bytes=self.limits.health_bytes)
        except Unstorable as exc:
            return self._refuse(f"heartbeat: {exc}")
        change: Json = {"op": "heartbeat", "at": self._now(), "service": beat.service, "health": health}
        if beat.instance_id is not None:
            change["instanceId"] = beat.instance_id
        if beat.descriptor_hash is not None:
            change["descriptorHash"] = beat.descriptor_hash
        return self._commit(change, {"accepted": 1})

    def traces(self, body: Any) -> Answer:
        try:
            batch = _TRACE_BATCH(body)
        except DecodeError as error:
            return _malformed("traces", error)
        events, batch_id = batch.events, batch.batch_id
        accepted = [event for event in (normalize_event(raw) for raw in events) if event is not None]
        change: Json = {"op": "traces", "at": self._now(), "events": accepted, "skipped": len(events) - len(accepted)}
        return self._commit_batch(change, batch_id, len(accepted))

    def issues(self, body: Any) -> Answer:
        try:
            batch = _ISSUE_BATCH(body)
        except DecodeError as error:
            return _malformed("issues", error)
        service, entries, batch_id = batch.service, batch.issues, batch.batch_id
        accepted = [issue for issue in (normalize_issue(raw, service) for raw in entries) if issue is not None]
        change: Json = {"op": "issues", "at": self._now(), "service": service, "issues": accepted,
                        "skipped": len(entries) - len(accepted)}  # fmt: skip
        return self._commit_batch(change, batch_id, len(accepted))

    def record_poll(
        self, service: str, base_url: str, *, spec: dict[str, Any] | None, health: dict[str, Any] | None,
        error: str | None, prefix: str = DEFAULT_PREFIX,
    ) -> None:
        """Fold one poll of a fleet member in (its surfaces under `prefix`). `error` None: a successful poll,
        `spec` and `health` are data; otherwise a failed poll, recorded (ok false, failures + 1) and never
        ingested as data. A spec or health over the limits is a failed poll too; a spec equal to the one held
        (the very object the poller handed over last time, or the same hash) is not stored again. A poll the store
        cannot take is dropped (nobody resends it; the next sweep polls again): counted in `polls_lost` and logged
        once per outage."""
        change: Json = {"op": "poll", "at": self._now(), "service": service, "baseUrl": base_url}
        if prefix != DEFAULT_PREFIX:
            change["prefix"] = prefix
        checked_health = _polled_health(health) if error is None else None
        if error is None:
            try:
                if checked_health is not None:
                    stored_size(checked_health, "health", max_depth=self.limits.depth,
                                max_bytes=self.limits.health_bytes)  # fmt: skip
                if isinstance(spec, dict) and self.backend.holds_spec(service, spec):
                    change["specUnchanged"] = True
                elif isinstance(spec, dict):
                    stored_size(spec, "spec", max_depth=self.limits.depth, max_bytes=self.limits.spec_bytes)
                    change["spec"] = spec
            except Unstorable as exc:
                error = str(exc)
                change.pop("spec", None)
                change.pop("specUnchanged", None)
                self._count_refused()
        if error is not None:
            change["error"] = error
        elif checked_health is not None:
            change["health"] = checked_health
        if self._commit(change, {}, unavailable=self._poll_lost).is_successful:
            self._poll_stored()

    # --- queries --------------------------------------------------------------------------------------------

    def query_fleet(self, body: Any = None) -> Answer:
        try:
            asked = _FLEET_QUERY({} if body is None else body)
            window = asked.window
            minutes = None if window is None else parse_window(window)
        except DecodeError as error:
            return _malformed("query fleet", error)
        except ValueError as exc:
            return Result.bad_request(f"query fleet: {exc}")
        limit = asked.limit or DEFAULT_FLEET_LIMIT
        services_after, topics_after = asked.services_after or "", asked.topics_after or ""
        try:
            with self.backend.read(Rows.fleet(limit, services_after, topics_after)) as tables:
                answer = queries.fleet(tables.catalog, tables.feeds, tables.trace_log, tables.issue_book,
                                       self._fresh(), self._retained(), limit=limit, services_after=services_after,
                                       topics_after=topics_after, rows=tables.fleet)  # fmt: skip
                answer["dropped"] = tables.dropped
            if window is not None and minutes is not None:
                with self.backend.read(Rows.buckets(None, minutes, self._minute())) as tables:
                    ranked = queries.ranking(tables.trace_log.buckets, minutes, self._minute())
                    answer["window"] = window
                    answer["ranking"] = ranked[:limit]
                    answer["rankingOmitted"] = max(0, len(ranked) - limit)
        except StoreUnavailable as exc:
            return _unreadable(exc)
        return Result.ok(answer)

    def query_service(self, body: Any) -> Answer:
        try:
            name = _SERVICE_QUERY(body).service
        except DecodeError as error:
            return _malformed("query service", error)
        try:
            with self.backend.read(Rows.service(name)) as tables:
                found = queries.service(tables.catalog, tables.feeds, tables.trace_log, name, self._fresh(),
                                        self._retained())  # fmt: skip
        except StoreUnavailable as exc:
            return _unreadable(exc)
        return Result.ok(found) if found is not None else Result.not_found(f"no service {name}")

    def query_topic(self, body: Any) -> Answer:
        try:
            asked = _TOPIC_QUERY(body)
            name, window = asked.topic, asked.window
            minutes = None if window is None else parse_window(window)
        except DecodeError as error:
            return _malformed("query topic", error)
        except ValueError as exc:
            return Result.bad_request(f"query topic: {exc}")
        try:
            with self.backend.read(Rows.topic(name)) as tables:
                found = queries.topic(tables.catalog, tables.trace_log, name)
            if found is not None and window is not None and minutes is not None:
                with self.backend.read(Rows.buckets(name, minutes, self._minute())) as tables:
                    found["window"] = queries.topic_window(tables.trace_log.buckets, name, window, minutes,
                                                           self._minute())  # fmt: skip
        except StoreUnavailable as exc:
            return _unreadable(exc)
        return Result.ok(found) if found is not None else Result.not_found(f"no topic {name}")

    def query_contract(self, body: Any) -> Answer:
        try:
            asked = _CONTRACT_QUERY(body)
        except DecodeError as error:
            return _malformed("query contract", error)
        try:
            # The service's own entries, then per topic it names the entries of every service naming it and the
            # topic's counters: what a database backend reads by its indexes (memory hands over everything).
            with self.backend.read(Rows.service(asked.service)) as tables:
                entries = {(entry["service"], entry.get("serviceVersion", "")): entry
                           for entry in tables.catalog.entries.values()}  # fmt: skip
            counters: list[CounterEntry] = []
            for topic_id in queries.contract_topics(list(entries.values()), asked.service, list(asked.topics),
                                                   asked.events) or ():
                with self.backend.read(Rows.topic(topic_id)) as tables:
                    entries.update(((entry["service"], entry.get("serviceVersion", "")), entry)
                                   for entry in tables.catalog.entries.values())  # fmt: skip
                    counters += [counter for counter in tables.trace_log.counters.values()
                                 if counter["topic"] == topic_id]  # fmt: skip
            found = queries.contract(list(entries.values()), counters, asked.service, list(asked.topics),
                                     asked.events)
            minutes = asked.window_minutes
            if found is not None and minutes is not None and minutes <= self.limits.bucket_minutes:
                # Counts within the window from the time buckets (exact across replicas sharing a database).
                now_minute = self._minute()
                cells = []
                for topic_id in sorted({item["topic"] for item in found["usage"]}):
                    with self.backend.read(Rows.buckets(topic_id, minutes, now_minute)) as tables:
                        cells += list(queries.contract_window_cells(tables.trace_log.buckets, topic_id, minutes,
                                                                    now_minute))  # fmt: skip
                queries.add_contract_window(found, cells, minutes, now_minute)
        except StoreUnavailable as exc:
            return _unreadable(exc)
        if found is None:
            return Result.not_found(f"no descriptor of service {asked.service} was ever registered")
        return Result.ok(found)

    def query_trace(self, body: Any) -> Answer:
        try:
            trace_id = _TRACE_QUERY(body).trace_id
        except DecodeError as error:
            return _malformed("query trace", error)
        try:
            with self.backend.read(Rows.trace(trace_id)) as tables:
                found = queries.trace(tables.trace_log, trace_id)
        except StoreUnavailable as exc:
            return _unreadable(exc)
        return Result.ok(found) if found is not None else Result.not_found(f"no trace {trace_id} in the window")

    def dropped(self) -> dict[str, int]:
        """What the limits dropped, per table, since the store began; what was refused or answered as a duplicate
        (the fleet query's `dropped`). Raises StoreUnavailable when the store cannot be read."""
        with self.backend.read(Rows.DROPPED) as tables:
            return dict(tables.dropped)

    @property
    def store_problem(self) -> str | None:
        """Why the collector cannot persist right now (its health check fails with it); None while it can."""
        return self.backend.problem

    # --- snapshot and persistence ---------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """Everything the collector knows, bounded by its limits, as plain JSON. Treat it as read-only: raw
        events and documents are shared with the collector. Raises StoreUnavailable when the store cannot be
        read."""
        with self.backend.read(Rows.EVERYTHING) as tables:
            snapshot = tables.snapshot(self._now())
        return judged(snapshot, self.clock(), stale_after=self.stale_after, retention=self.retention)

    def artifact_snapshot(self) -> Snapshot:
        """What the UI artifacts are written from: the snapshot without the trace window's events and the batch
        ids, which no artifact shows (on PostgreSQL read from the aggregate tables, one replica at a time)."""
        with self.backend.read(Rows.ARTIFACTS) as tables:
            snapshot = tables.snapshot(self._now(), buckets=False)
            # The windows computed from the buckets here, not their cells copied: the artifacts show only these.
            book = tables.trace_log.buckets
            snapshot["windows"] = compute_windows(from_book(book), minute_of(self.clock()))
            snapshot["transports"] = sorted([*key[:3], key[4], key[3]] for key in book.topics if key[3])
        judged(snapshot, self.clock(), stale_after=self.stale_after, retention=self.retention)
        snapshot["traces"] = {**snapshot["traces"], "events": []}
        snapshot["batches"] = []
        return snapshot

    def flush(self) -> None:
        """Write out what is pending and stop the backend's background work (at shutdown: a JSON-file store
        compacts, so the next start reads one snapshot)."""
        self.backend.close()

    # --- internals ------------------------------------------------------------------------------------------

    def _refuse(self, why: str) -> Answer:
        self._count_refused()
        return Result.bad_request(why)

    def _count_refused(self) -> None:
        self.backend.count("refused")
        self._log_drops()

    def _commit_batch(self, change: Json, batch_id: str | None, accepted: int) -> Answer:
        if batch_id is not None:
            change["batchId"] = batch_id
        return self._commit(change, {"accepted": accepted})

    def _commit(self, change: Json, answer: dict[str, Any],
                unavailable: Callable[[StoreUnavailable], Answer] | None = None) -> Answer:
        """Hand the change to the backend (persisted, then applied): nothing is acknowledged it does not hold.
        `unavailable` answers a store that cannot take it (`_store_failed`, a feed's, unless given)."""
        try:
            applied = self.backend.apply(change)
        except StoreUnavailable as exc:
            return (unavailable or self._store_failed)(exc)
        except (Unstorable, orjson.JSONEncodeError) as exc:  # e.g. a NUL character: PostgreSQL text cannot hold it
            self._count_refused()
            return Result.bad_request(f"{change['op']}: a value cannot be stored ({exc})")
        if applied.seen is not None:
            return Result.ok({"accepted": applied.seen})
        if applied.skipped:
            answer = {**answer, "accepted": answer["accepted"] - applied.skipped}
        if applied.dropped:
            self._log_drops()
        if applied.reregister:
            return Result.ok({**answer, REREGISTER_KEY: True})
        return Result.ok(answer)

    def _store_failed(self, exc: Exception) -> Answer:
        with self._lock:
            self.store_failures += 1
        why = self.store_problem or str(exc) or type(exc).__name__
        now = self.clock()
        if now - self._last_failure_log >= self.log_interval:
            self._last_failure_log = now
            logger.warning("collector store cannot persist (%s); %d feed(s) refused so far", why,
                           self.store_failures)  # fmt: skip
        return Result.service_unavailable(f"the collector cannot persist this feed now ({why}); send it again later")

    def _poll_lost(self, exc: StoreUnavailable) -> Answer:
        """A poll's result the store could not take is dropped: counted, and said once per outage."""
        with self._lock:
            self.polls_lost += 1
            first, self._losing_polls = not self._losing_polls, True
        why = self.store_problem or str(exc) or type(exc).__name__
        if first:
            logger.warning("collector store cannot persist (%s); poll results are dropped until it can (each target "
                           "is polled again on the next sweep)", why)  # fmt: skip
        return Result.service_unavailable(f"the collector cannot persist this poll now ({why})")

    def _poll_stored(self) -> None:
        with self._lock:
            recovered, self._losing_polls = self._losing_polls, False
        if recovered:
            logger.warning("collector store takes poll results again (%d dropped so far)", self.polls_lost)

    def _log_drops(self) -> None:
        now = self.clock()
        if now - self._last_drop_log < self.log_interval:
            return
        try:
            counts = self.dropped()
        except StoreUnavailable:
            return
        total = sum(counts.values()) - counts["duplicateBatches"]
        if total > self._logged_drops:
            self._last_drop_log = now
            self._logged_drops = total
            listed = ", ".join(f"{name} {count}" for name, count in counts.items() if count)
            logger.warning("collector limits dropped or refused entries (so far: %s)", listed)

    def _now(self) -> str:
        return rfc3339(self.clock())

    def _fresh(self) -> str:
        return rfc3339(self.clock() - self.stale_after)

    def _retained(self) -> str:
        return rfc3339(self.clock() - self.retention)

    def _minute(self) -> int:
        return minute_of(self.clock())


def judged(snapshot: Snapshot, now: float, *, stale_after: float = DEFAULT_STALE_AFTER,
           retention: float = DEFAULT_RETENTION) -> Snapshot:
    """`snapshot` stamped, as of `now` (epoch seconds), with when its instances went stale and when they stopped being
    shown: the artifacts judge each instance by these, and without them every one reads as live however long silent."""
    snapshot["staleSince"] = rfc3339(now - stale_after)
    snapshot["retainedSince"] = rfc3339(now - retention)
    return snapshot


def _unreadable(exc: StoreUnavailable) -> Answer:
    return Result.service_unavailable(f"the collector cannot read its store now ({exc}); ask again later")


_DESCRIPTOR = codec_for(ServiceDescriptor).decode
_HEARTBEAT = codec_for(Heartbeat).decode
_TRACE_BATCH = codec_for(RawTraceBatch).decode
_ISSUE_BATCH = codec_for(RawIssueBatch).decode
_SERVICE_QUERY = codec_for(ServiceQuery).decode
_TOPIC_QUERY = codec_for(TopicQuery).decode
_FLEET_QUERY = codec_for(FleetQuery).decode
_TRACE_QUERY = codec_for(TraceQuery).decode
_CONTRACT_QUERY = codec_for(ContractQuery).decode
_DECODE_HEALTH = codec_for(HealthDocument).decode
_ENCODE_HEALTH: Callable[[HealthDocument], Json] = codec_for(HealthDocument).encode


def _malformed(what: str, error: DecodeError) -> Answer:
    """`bad-request` naming every field path that does not fit (`heartbeat: health.isHealthy: expected boolean`)."""
    return Result.bad_request(f"{what}: {error}")


def _polled_health(value: Any) -> Json | None:
    """A polled health document in its one form (`{isHealthy, healthChecks}`); None when it does not fit."""
    try:
        return _ENCODE_HEALTH(_DECODE_HEALTH(value))
    except DecodeError:
        return None
