"""The collector: ingests the mesh feeds and polls, answers the four queries, snapshots and restores itself.

Every ingest answers a `Result` (spec "Collector ingest"): `{accepted: n}` on success. Feeds and queries are read
through the codec of their typed records (`messages`): one that does not fit (a missing `service` on register,
heartbeat or issues, say) is `bad-request` naming each field path; a malformed entry of a traces or issues batch is
skipped and counted in `skipped`, the rest accepted. A heartbeat answer carries `reregister: true`
(feeds.REREGISTER_KEY) while the collector expects the instance to register again.

Nothing accepted is lost (docs/collector.md, Durability): a value the store could not write and read back (a number
that is not finite or outside 64 bits, a document nested too deeply or over its byte limit) is refused with
`bad-request` naming its field path. Every accepted ingest becomes one change, appended to the store before it is
applied and answered; a store that cannot take it makes the ingest `service-unavailable` and the collector unhealthy
(`store_problem`). The state is rebuilt on start from the store's snapshot plus the changes logged after it.

On a shared store (`SharedStore`, PostgreSQL) the collector keeps no tables of its own: each change is applied in
the store in one transaction (batch dedupe, uniqueness of trace events, counters and edges from what was inserted)
and every query reads the tables back, so replicas on one store answer alike. Checks and bounds at ingest are the
same for every store: they run before the store sees the change.

A traces or issues batch with a `batchId` already seen (the newest `CollectorLimits.batch_ids`) is answered as the first
time and not counted again: a reporter's retry is counted once, across restarts too.

Thread-safe: one lock around every read and write, so the poller may call `record_poll` from another thread.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final, cast

import orjson

from ..runtime._codec import DecodeError, codec_for
from ..runtime._mesh.clock import WallClock, rfc3339, wall_clock
from ..runtime._mesh.feeds import REREGISTER_KEY
from ..runtime._mesh.messages import (
    ContractQuery,
    HealthDocument,
    Heartbeat,
    RawIssueBatch,
    RawTraceBatch,
    ServiceDescriptor,
    ServiceQuery,
    TopicQuery,
    TraceQuery,
)
from ..runtime._result import Result
from ..runtime._topics import DEFAULT_PREFIX
from . import queries
from .caps import CollectorLimits
from .catalog import Catalog
from .issuebook import IssueBook, normalize_issue
from .missingfeeds import FeedLog
from .snapshot import SNAPSHOT_FORMAT, BatchEntry, Json, Snapshot
from .store import Applied, MemoryStore, SharedStore, Store, Stored, StoreError, StoreUnavailable, Tables
from .tracelog import TraceLog, is_failure, normalize_event
from .wire import Unstorable, put_bounded, stored_size

logger = logging.getLogger("svcgen.mesh.collector")

DEFAULT_STALE_AFTER: Final = 600.0
"""Seconds after its last heartbeat an instance stops counting towards its service's health."""
DEFAULT_LOG_INTERVAL: Final = 60.0

Answer = Result[dict[str, Any]]


class SnapshotError(ValueError):
    """A snapshot that does not have the collector snapshot's shape."""


class Collector:
    catalog: Catalog
    feeds: FeedLog
    trace_log: TraceLog
    issue_book: IssueBook
    batches: OrderedDict[tuple[str, str], int]
    """(feed, batchId) → the accepted count answered, newest last."""
    skipped: int
    """Malformed trace or issue entries skipped."""
    refused: int
    """Feeds refused because a value could not be stored or was over a limit, since this process started."""
    duplicates: int
    """Batches answered from `batches` without being counted again, since this process started."""

    def __init__(
        self,
        store: Store | SharedStore | None = None,
        *,
        limits: CollectorLimits | None = None,
        clock: WallClock = wall_clock,
        stale_after: float = DEFAULT_STALE_AFTER,
        log_interval: float = DEFAULT_LOG_INTERVAL,
    ) -> None:
        self.shared: SharedStore | None = store if isinstance(store, SharedStore) else None
        self.store: Store = MemoryStore() if store is None or self.shared is not None else cast(Store, store)
        self.limits = limits or CollectorLimits()
        self.clock = clock
        self.stale_after = stale_after
        self.log_interval = log_interval
        self.store_failures = 0
        """Changes the store refused (each answered `service-unavailable`)."""
        self._lock = threading.RLock()
        self._last_failure_log = -math.inf
        self._last_drop_log = -math.inf
        self._logged_drops = 0
        self._reset()
        self._load()

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
        service = beat.service
        health = _ENCODE_HEALTH(beat.health or HealthDocument())
        try:
            stored_size(health, "health", max_depth=self.limits.depth, max_bytes=self.limits.health_bytes)
        except Unstorable as exc:
            return self._refuse(f"heartbeat: {exc}")
        change: Json = {"op": "heartbeat", "at": self._now(), "service": service, "health": health}
        if beat.instance_id is not None:
            change["instanceId"] = beat.instance_id
        if beat.descriptor_hash is not None:
            change["descriptorHash"] = beat.descriptor_hash
        if self.shared is not None:
            return self._commit_shared(change, {"accepted": 1})
        with self._lock:
            answer = self._commit(change, {"accepted": 1})
            if answer.is_successful and self.catalog.expects_register(service, change.get("instanceId", "")):
                answer = Result.ok({"accepted": 1, REREGISTER_KEY: True})
        return answer

    def traces(self, body: Any) -> Answer:
        try:
            batch = _TRACE_BATCH(body)
        except DecodeError as error:
            return _malformed("traces", error)
        events, batch_id = batch.events, batch.batch_id
        accepted: list[Json] = []
        try:
            for index, raw in enumerate(events):
                event = normalize_event(raw, f"events[{index}]")
                if event is not None:
                    accepted.append(event)
        except Unstorable as exc:
            return self._refuse(f"traces: {exc}")
        change: Json = {"op": "traces", "at": self._now(), "events": accepted, "skipped": len(events) - len(accepted)}
        return self._commit_batch(change, batch_id, len(accepted))

    def issues(self, body: Any) -> Answer:
        try:
            batch = _ISSUE_BATCH(body)
        except DecodeError as error:
            return _malformed("issues", error)
        service, entries, batch_id = batch.service, batch.issues, batch.batch_id
        accepted: list[Json] = []
        try:
            for index, raw in enumerate(entries):
                issue = normalize_issue(raw, service, f"issues[{index}]")
                if issue is not None:
                    accepted.append(issue)
        except Unstorable as exc:
            return self._refuse(f"issues: {exc}")
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
        (the very object the poller handed over last time, or the same hash) is not stored again."""
        change: Json = {"op": "poll", "at": self._now(), "service": service, "baseUrl": base_url}
        if prefix != DEFAULT_PREFIX:
            change["prefix"] = prefix
        checked_health = _polled_health(health) if error is None else None
        if error is None:
            try:
                if checked_health is not None:
                    stored_size(checked_health, "health", max_depth=self.limits.depth,
                                max_bytes=self.limits.health_bytes)  # fmt: skip
                if isinstance(spec, dict) and (self.shared is not None or not self.catalog.holds_spec(service, spec)):
                    stored_size(spec, "spec", max_depth=self.limits.depth, max_bytes=self.limits.spec_bytes)
                    change["spec"] = spec
                elif isinstance(spec, dict):
                    change["specUnchanged"] = True
            except Unstorable as exc:
                error = str(exc)
                change.pop("spec", None)
                change.pop("specUnchanged", None)
                self._count_refused()
        if error is not None:
            change["error"] = error
        elif checked_health is not None:
            change["health"] = checked_health
        if self.shared is not None:
            self._commit_shared(change, {})
            return
        with self._lock:
            if self._commit(change, {}).is_successful and change.get("specUnchanged") and isinstance(spec, dict):
                self.catalog.adopt_spec(service, spec)

    # --- queries --------------------------------------------------------------------------------------------

    def query_fleet(self, body: Any = None) -> Answer:
        try:
            with self._tables() as tables:
                answer = queries.fleet(tables.catalog, tables.feeds, tables.trace_log, tables.issue_book,
                                       self._fresh())  # fmt: skip
                answer["dropped"] = tables.dropped
        except StoreUnavailable as exc:
            return _unreadable(exc)
        return Result.ok(answer)

    def query_service(self, body: Any) -> Answer:
        try:
            name = _SERVICE_QUERY(body).service
        except DecodeError as error:
            return _malformed("query service", error)
        try:
            with self._tables() as tables:
                found = queries.service(tables.catalog, tables.feeds, tables.trace_log, name, self._fresh())
        except StoreUnavailable as exc:
            return _unreadable(exc)
        return Result.ok(found) if found is not None else Result.not_found(f"no service {name}")

    def query_topic(self, body: Any) -> Answer:
        try:
            name = _TOPIC_QUERY(body).topic
        except DecodeError as error:
            return _malformed("query topic", error)
        try:
            with self._tables() as tables:
                found = queries.topic(tables.catalog, tables.trace_log, name)
        except StoreUnavailable as exc:
            return _unreadable(exc)
        return Result.ok(found) if found is not None else Result.not_found(f"no topic {name}")

    def query_contract(self, body: Any) -> Answer:
        try:
            asked = _CONTRACT_QUERY(body)
        except DecodeError as error:
            return _malformed("query contract", error)
        try:
            with self._tables() as tables:
                found = queries.contract(tables.catalog, tables.trace_log, asked.service, list(asked.topics))
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
            with self._tables(trace_id=trace_id) as tables:
                found = queries.trace(tables.trace_log, trace_id)
        except StoreUnavailable as exc:
            return _unreadable(exc)
        return Result.ok(found) if found is not None else Result.not_found(f"no trace {trace_id} in the window")

    def dropped(self) -> dict[str, int]:
        """What the limits dropped, per table, since the store began; what was refused or answered as a duplicate
        since this process started, or on a shared store since the store began (the fleet query's `dropped`).
        Raises StoreUnavailable when a shared store cannot be read."""
        if self.shared is not None:
            return self.shared.tables().dropped
        with self._lock:
            return {
                "traceWindow": self.trace_log.dropped,
                "counters": self.trace_log.evicted_counters,
                "otherStatuses": self.trace_log.other_statuses,
                "edges": self.trace_log.evicted_edges,
                "issues": self.issue_book.dropped,
                **self.catalog.evicted,
                "services": self.feeds.evicted,
                "skipped": self.skipped,
                "refused": self.refused,
                "duplicateBatches": self.duplicates,
            }

    @property
    def store_problem(self) -> str | None:
        """Why the collector cannot persist right now (its health check fails with it); None while it can."""
        return self.shared.problem if self.shared is not None else self.store.problem

    # --- snapshot and persistence ---------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """Everything the collector knows, bounded by its limits, as plain JSON. Treat it as read-only: raw
        events and documents are shared with the collector. Raises StoreUnavailable when a shared store cannot be
        read."""
        with self._tables(everything=True) as tables:
            catalog, instances, polls = tables.catalog.snapshot()
            return Snapshot(
                format=SNAPSHOT_FORMAT,
                savedAt=self._now(),
                catalog=catalog,
                instances=instances,
                polls=polls,
                feeds=tables.feeds.snapshot(),
                issues=tables.issue_book.snapshot(),
                counters=tables.trace_log.counter_snapshot(),
                edges=tables.trace_log.edge_snapshot(),
                traces=tables.trace_log.window_snapshot(),
                skipped=tables.skipped,
                batches=[BatchEntry(feed=feed, batchId=batch_id, accepted=accepted)
                         for feed, batch_id, accepted in tables.batches],
                dropped=tables.dropped,
            )

    def restore(self, snapshot: Snapshot, changes: Sequence[Json] = ()) -> None:
        """Replace the whole state with `snapshot`'s, then apply `changes` logged after it. Raises SnapshotError,
        leaving the state untouched, when it is not a collector snapshot or a change is malformed."""
        if not isinstance(snapshot, dict) or snapshot.get("format") != SNAPSHOT_FORMAT:
            raise SnapshotError(f"not a collector snapshot of format {SNAPSHOT_FORMAT}")
        with self._lock:
            saved = self._state()
            self._reset()
            try:
                self.catalog.restore(snapshot["catalog"], snapshot["instances"], snapshot["polls"])
                self.feeds.restore(snapshot["feeds"])
                self.trace_log.restore(snapshot["traces"], snapshot["counters"], snapshot["edges"])
                self.issue_book.restore(snapshot["issues"])
                self.skipped = int(snapshot["skipped"])
                for entry in snapshot.get("batches", []):
                    put_bounded(self.batches, (str(entry["feed"]), str(entry["batchId"])), int(entry["accepted"]),
                                self.limits.batch_ids)  # fmt: skip
                self._restore_dropped(snapshot.get("dropped", {}))
                self._replay(changes)
            except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
                self._set_state(saved)
                raise SnapshotError(f"malformed collector snapshot ({type(exc).__name__}: {exc})") from exc

    def restore_stored(self, stored: Stored) -> None:
        """Replace the whole state with what a store's `load` read (SnapshotError when it is malformed)."""
        if stored.snapshot is not None:
            self.restore(stored.snapshot, stored.changes)
            return
        with self._lock:
            saved = self._state()
            self._reset()
            try:
                self._replay(stored.changes)
            except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
                self._set_state(saved)
                raise SnapshotError(f"malformed change in the store's log ({type(exc).__name__}: {exc})") from exc

    def flush(self) -> None:
        """Compact the store and stop its background work (at shutdown: the next start reads one snapshot)."""
        if self.shared is not None:
            self.shared.close()  # every change is in the store already
            return
        with self._lock:
            try:
                self.store.compact(self.snapshot())
            finally:
                self.store.close()

    # --- internals ------------------------------------------------------------------------------------------

    def _reset(self) -> None:
        self.catalog = Catalog(self.limits)
        self.feeds = FeedLog(self.limits)
        self.trace_log = TraceLog(self.limits)
        self.issue_book = IssueBook(self.limits)
        self.batches = OrderedDict()
        self.skipped = 0
        self.refused = 0
        self.duplicates = 0

    def _state(self) -> tuple[Any, ...]:
        return (self.catalog, self.feeds, self.trace_log, self.issue_book, self.batches, self.skipped, self.refused,
                self.duplicates)  # fmt: skip

    def _set_state(self, state: tuple[Any, ...]) -> None:
        (self.catalog, self.feeds, self.trace_log, self.issue_book, self.batches, self.skipped, self.refused,
         self.duplicates) = state  # fmt: skip

    def _restore_dropped(self, dropped: dict[str, int]) -> None:
        self.trace_log.evicted_counters = int(dropped.get("counters", 0))
        self.trace_log.other_statuses = int(dropped.get("otherStatuses", 0))
        self.trace_log.evicted_edges = int(dropped.get("edges", 0))
        self.issue_book.dropped = int(dropped.get("issues", self.issue_book.dropped))
        self.feeds.evicted = int(dropped.get("services", 0))
        for table in self.catalog.evicted:
            self.catalog.evicted[table] = int(dropped.get(table, 0))

    @contextlib.contextmanager
    def _tables(self, *, trace_id: str | None = None, everything: bool = False) -> Iterator[Tables]:
        """The tables to answer from: a shared store's, read back now; else this collector's own, under its lock."""
        if self.shared is not None:
            yield self.shared.tables(trace_id=trace_id, everything=everything)
            return
        with self._lock:
            batches: list[tuple[str, str, int]] = []
            if everything:  # only a snapshot reads the batch ids (up to `limits.batch_ids`); a query does not copy them
                batches = [(feed, batch_id, accepted) for (feed, batch_id), accepted in self.batches.items()]
            yield Tables(self.catalog, self.feeds, self.trace_log, self.issue_book, self.dropped(), self.skipped,
                         batches)

    def _load(self) -> None:
        if self.shared is not None:
            self.shared.open(self.limits)
            return
        stored: Stored | None
        try:
            stored = self.store.load()
            self.restore_stored(stored)
        except (StoreError, SnapshotError) as exc:
            moved = self.store.set_aside()
            where = ", ".join(moved) if moved else "nothing to move"
            logger.warning("collector store is unreadable (%s); moved aside: %s; starting empty", exc, where)
            self._reset()
            stored = None
        self.store.open()
        if stored is not None and stored.changes:
            self.store.compact(self.snapshot())  # one snapshot again, so the next start replays little

    def _replay(self, changes: Sequence[Json]) -> None:
        for change in changes:
            self._apply(change)

    def _refuse(self, why: str) -> Answer:
        self._count_refused()
        return Result.bad_request(why)

    def _count_refused(self) -> None:
        with self._lock:
            self.refused += 1
        if self.shared is not None:
            self.shared.count("refused")

    def _commit_batch(self, change: Json, batch_id: str | None, accepted: int) -> Answer:
        if self.shared is not None:
            if batch_id is not None:
                change["batchId"] = batch_id
            return self._commit_shared(change, {"accepted": accepted})
        with self._lock:
            if batch_id is not None:
                seen = self.batches.get((change["op"], batch_id))
                if seen is not None:
                    self.duplicates += 1
                    return Result.ok({"accepted": seen})
                change["batchId"] = batch_id
            return self._commit(change, {"accepted": accepted})

    def _commit(self, change: Json, answer: dict[str, Any]) -> Answer:
        """Persist the change, then apply it: never acknowledged without being in the store."""
        if self.shared is not None:
            return self._commit_shared(change, answer)
        with self._lock:
            try:
                self.store.append(change)
            except orjson.JSONEncodeError as exc:  # e.g. a lone surrogate in a string: JSON cannot carry it
                self.refused += 1
                return Result.bad_request(f"{change['op']}: a value cannot be written as JSON ({exc})")
            except OSError as exc:
                return self._store_failed(exc)
            self._apply(change)
            if self.store.wants_compaction():
                self.store.compact(self.snapshot())
            self._log_drops()
        return Result.ok(answer)

    def _commit_shared(self, change: Json, answer: dict[str, Any]) -> Answer:
        """Apply the change in the shared store (one transaction); nothing is acknowledged that it does not hold."""
        assert self.shared is not None
        try:
            applied: Applied = self.shared.apply(change)
        except StoreUnavailable as exc:
            return self._store_failed(exc)
        except (Unstorable, orjson.JSONEncodeError) as exc:  # e.g. a NUL character: PostgreSQL text cannot hold it
            self._count_refused()
            return Result.bad_request(f"{change['op']}: a value cannot be stored ({exc})")
        if applied.seen is not None:
            with self._lock:
                self.duplicates += 1
            return Result.ok({"accepted": applied.seen})
        if applied.dropped:
            self._log_drops()
        if applied.reregister:
            return Result.ok({**answer, REREGISTER_KEY: True})
        return Result.ok(answer)

    def _apply(self, change: Json) -> None:
        op, at = change["op"], change["at"]
        if op == "register":
            self.catalog.register(change["descriptor"]["service"], change["descriptor"], at)
        elif op == "heartbeat":
            if self.catalog.heartbeat(change["service"], change, change["health"], at).drift:
                self.issue_book.file_drift(change["service"], at)
        elif op == "traces":
            failures: defaultdict[str, int] = defaultdict(int)
            for event in change["events"]:
                if self.trace_log.add(event):
                    failures[event["service"]] += is_failure(event["status"])
            for service, failed in failures.items():
                self.feeds.traced(service, failed)
            self._batch_done(change, len(change["events"]))
        elif op == "issues":
            for issue in change["issues"]:
                self.issue_book.merge(dict(issue))
            self.feeds.issue_batch(change["service"])
            self._batch_done(change, len(change["issues"]))
        elif op == "poll":
            spec = self.catalog.held_spec(change["service"]) if change.get("specUnchanged") else change.get("spec")
            self.catalog.poll(change["service"], change["baseUrl"], at, prefix=change.get("prefix", DEFAULT_PREFIX),
                              spec=spec, health=change.get("health"), error=change.get("error"))  # fmt: skip
        else:
            raise ValueError(f"unknown change {op!r}")

    def _batch_done(self, change: Json, accepted: int) -> None:
        self.skipped += int(change["skipped"])
        batch_id = change.get("batchId")
        if batch_id is not None:
            put_bounded(self.batches, (change["op"], batch_id), accepted, self.limits.batch_ids)

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


def _unreadable(exc: StoreUnavailable) -> Answer:
    return Result.service_unavailable(f"the collector cannot read its store now ({exc}); ask again later")


_DESCRIPTOR = codec_for(ServiceDescriptor).decode
_HEARTBEAT = codec_for(Heartbeat).decode
_TRACE_BATCH = codec_for(RawTraceBatch).decode
_ISSUE_BATCH = codec_for(RawIssueBatch).decode
_SERVICE_QUERY = codec_for(ServiceQuery).decode
_TOPIC_QUERY = codec_for(TopicQuery).decode
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
