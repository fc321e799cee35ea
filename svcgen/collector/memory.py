"""The collector's tables in this process (the `Backend` of the memory and JSON-file stores).

The tables (catalog, feeds, trace log, issue book, batch ids) live in memory, guarded by one lock; a `Store`
(nothing at all, or the JSON-file log) keeps them between runs. `apply` appends the change to the store before
it applies it: nothing is acknowledged that the store does not hold. On `open` the state is rebuilt from the
store's snapshot plus the changes logged after it; a store that cannot be read is moved aside, never overwritten,
and the collector starts empty.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Iterator, Sequence
from typing import Any

import orjson

from ..runtime._mesh.clock import WallClock, rfc3339, wall_clock
from ..runtime._topics import DEFAULT_PREFIX
from .caps import CollectorLimits
from .catalog import Catalog
from .issuebook import IssueBook
from .missingfeeds import FeedLog
from .snapshot import SNAPSHOT_FORMAT, Json, Snapshot
from .store import Applied, MemoryStore, Rows, Store, Stored, StoreError, StoreUnavailable, Tables
from .tracelog import TraceLog, held_topics, is_failure
from .wire import Unstorable, put_bounded

logger = logging.getLogger("svcgen.mesh.collector")


class SnapshotError(ValueError):
    """A snapshot that does not have the collector snapshot's shape."""


class MemoryBackend:
    """The collector's tables in memory, persisted through `store` (a `MemoryStore` when None)."""

    blocking = False
    """Every call takes microseconds: the host runs it on the event loop."""

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

    def __init__(self, store: Store | None = None, *, clock: WallClock = wall_clock) -> None:
        self.store: Store = store if store is not None else MemoryStore()
        self.clock = clock
        self.limits = CollectorLimits()
        self._lock = threading.RLock()
        self._reset()

    # --- Backend --------------------------------------------------------------------------------------------

    def open(self, limits: CollectorLimits) -> None:
        """Claim the store (StoreInUse when another collector holds it), load it, start writing."""
        self.limits = limits
        self.store.claim()
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
        if stored is not None and stored.damage is not None:
            moved = self.store.set_aside_damaged()
            logger.warning("collector log is damaged (%s): replayed the %d change(s) before the damage; the log from "
                           "there on is kept aside as %s; run `svcgen collector repair` to replay what it still "
                           "holds", stored.damage, len(stored.changes), ", ".join(moved) or "nothing")  # fmt: skip
        self.store.open()
        if stored is not None and (stored.changes or stored.damage is not None):
            self.store.compact(self.snapshot())  # one snapshot again, so the next start replays little

    def apply(self, change: Json) -> Applied:
        with self._lock:
            batch_id = change.get("batchId")
            if batch_id is not None:
                seen = self.batches.get((change["op"], batch_id))
                if seen is not None:
                    self.duplicates += 1
                    return Applied(seen=seen)
            try:
                self.store.append(change)
            except orjson.JSONEncodeError as exc:  # e.g. a lone surrogate in a string: JSON cannot carry it
                raise Unstorable(f"a value cannot be written as JSON ({exc})") from None
            except OSError as exc:
                raise StoreUnavailable(self.store.problem or str(exc) or type(exc).__name__) from exc
            before = self._dropped_total()
            self._apply(change)
            if self.store.wants_compaction():
                self.store.compact(self.snapshot())
            reregister = change["op"] == "heartbeat" and self.catalog.expects_register(
                change["service"], change.get("instanceId", "")
            )
            return Applied(reregister=reregister, dropped=self._dropped_total() > before)

    @contextlib.contextmanager
    def read(self, rows: Rows) -> Iterator[Tables]:
        """Every table as it is, whatever `rows` asks for (the queries pick theirs), under the lock."""
        with self._lock:
            batches: list[tuple[str, str, int]] = []
            if rows.kind == "everything":  # only a snapshot copies the batch ids (up to `limits.batch_ids`)
                batches = [(feed, batch_id, accepted) for (feed, batch_id), accepted in self.batches.items()]
            yield Tables(self.catalog, self.feeds, self.trace_log, self.issue_book, self.dropped(), self.skipped,
                         batches)  # fmt: skip

    def count(self, name: str, amount: int = 1) -> None:
        if name != "refused":
            raise ValueError(f"no shared count {name!r} in memory")
        with self._lock:
            self.refused += amount

    def holds_spec(self, service: str, spec: Json) -> bool:
        with self._lock:
            if not self.catalog.holds_spec(service, spec):
                return False
            self.catalog.adopt_spec(service, spec)  # the same document: next time the identity check answers
            return True

    def close(self) -> None:
        with self._lock:
            try:
                self.store.compact(self.snapshot())
            finally:
                self.store.close()

    @property
    def problem(self) -> str | None:
        return self.store.problem

    # --- the tables -----------------------------------------------------------------------------------------

    def dropped(self) -> dict[str, int]:
        """The fleet query's `dropped`: what the limits dropped since the store began, what was refused or
        answered as a duplicate since this process started."""
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

    def snapshot(self) -> Snapshot:
        """Everything held, bounded by the limits, as plain JSON (shares raw events and documents: read-only)."""
        with self.read(Rows.EVERYTHING) as tables:
            return tables.snapshot(rfc3339(self.clock()))

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
                self.trace_log.buckets.restore(snapshot.get("buckets", []))
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

    def replay_readable(self, changes: Sequence[Json]) -> tuple[int, int]:
        """Apply each change that applies, skipping the rest (a damaged log's leftovers, for `svcgen collector
        repair`); (applied, skipped). Not logged: `close` writes them into the snapshot."""
        applied = skipped = 0
        with self._lock:
            for change in changes:
                try:
                    self._apply(change)
                except (KeyError, TypeError, ValueError, AttributeError, IndexError):
                    skipped += 1
                    continue
                applied += 1
        return applied, skipped

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

    def _dropped_total(self) -> int:
        return (self.trace_log.dropped + self.trace_log.evicted_counters + self.trace_log.other_statuses
                + self.trace_log.evicted_edges + self.issue_book.dropped + sum(self.catalog.evicted.values())
                + self.feeds.evicted + self.skipped)  # fmt: skip

    def _replay(self, changes: Sequence[Json]) -> None:
        for change in changes:
            self._apply(change)

    def _apply(self, change: Json) -> None:
        op, at = change["op"], change["at"]
        if op == "register":
            self.catalog.register(change["descriptor"]["service"], change["descriptor"], at)
        elif op == "heartbeat":
            if self.catalog.heartbeat(change["service"], change, change["health"], at).drift:
                self.issue_book.file_drift(change["service"], at)
        elif op == "traces":
            failures: defaultdict[str, int] = defaultdict(int)
            declared: dict[str, frozenset[str] | None] = {}
            for event in change["events"]:
                service = event["service"]
                if service not in declared:
                    declared[service] = held_topics(self.catalog.records(service).declared(),
                                                    self.trace_log.topics_of(service), self.limits.undescribed_topics)
                if self.trace_log.add(event, declared[service], at):
                    failures[event["service"]] += is_failure(event["status"])
            self.trace_log.count_buckets()
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
