"""The collector: ingests the mesh feeds and polls, answers the four queries, snapshots and restores itself.

Every ingest answers a `Result` (spec "Collector ingest"): `{accepted: n}` on success; a missing `service` on
register, heartbeat or issues is `bad-request`; a malformed entry of a traces or issues batch is skipped and
counted in `skipped`, the rest accepted. A heartbeat answer carries `reregister: true` (feeds.REREGISTER_KEY) while
the collector expects the instance to register again.

Persistence: the last snapshot in the store is restored at construction; after every mutating ingest a fresh,
bounded snapshot is saved (or, with `save_interval` > 0, at most once per interval plus on `flush`). A failing
store never fails an ingest: failures are counted in `save_failures` and logged once per `log_interval`.

Thread-safe: one lock around every read and write, so the poller may call `record_poll` from another thread.
"""

from __future__ import annotations

import logging
import math
import threading
from collections import defaultdict
from typing import Any, Final

from ..._reserved import DEFAULT_PREFIX
from ..._result import Result
from ..clock import WallClock, rfc3339, wall_clock
from ..feeds import REREGISTER_KEY
from . import queries
from .catalog import Catalog
from .feeds import FeedLog
from .issues import IssueBook, normalize_issue
from .limits import Limits
from .snapshot import SNAPSHOT_FORMAT, Json, Snapshot
from .store import MemoryStore, Store
from .traces import TraceLog, is_failure, normalize_event
from .wire import text

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
    skipped: int
    """Malformed trace or issue entries skipped."""

    def __init__(
        self,
        store: Store | None = None,
        *,
        limits: Limits | None = None,
        clock: WallClock = wall_clock,
        stale_after: float = DEFAULT_STALE_AFTER,
        save_interval: float = 0.0,
        log_interval: float = DEFAULT_LOG_INTERVAL,
    ) -> None:
        self.store: Store = store if store is not None else MemoryStore()
        self.limits = limits or Limits()
        self.clock = clock
        self.stale_after = stale_after
        self.save_interval = save_interval
        self.log_interval = log_interval
        self.save_failures = 0
        self.last_save_error: str | None = None
        """Exception type of the newest failed save; None once a save succeeds."""
        self._lock = threading.RLock()
        self._dirty = False
        self._last_save = -math.inf
        self._last_failure_log = -math.inf
        self._reset()
        self._load()

    # --- ingest ---------------------------------------------------------------------------------------------

    def register(self, body: Any) -> Answer:
        service = _service(body)
        if service is None:
            return Result.bad_request("register needs a service descriptor with a string `service`")
        with self._lock:
            self.catalog.register(service, body, self._now())
            self._mutated()
        return Result.ok({"accepted": 1})

    def heartbeat(self, body: Any) -> Answer:
        service = _service(body)
        if service is None:
            return Result.bad_request("heartbeat needs a string `service`")
        health = _health(body.get("health"))
        if health is None:
            return Result.bad_request("heartbeat health must be {isHealthy: boolean, healthChecks: object}")
        with self._lock:
            now = self._now()
            verdict = self.catalog.heartbeat(service, body, health, now)
            if verdict.drift:
                self.issue_book.file_drift(service, now)
            self._mutated()
        answer: dict[str, Any] = {"accepted": 1}
        if verdict.reregister:
            answer[REREGISTER_KEY] = True
        return Result.ok(answer)

    def traces(self, body: Any) -> Answer:
        events = body.get("events") if isinstance(body, dict) else None
        if not isinstance(events, list):
            return Result.bad_request("traces needs {events: [trace event, ...]}")
        accepted = 0
        failures: defaultdict[str, int] = defaultdict(int)
        with self._lock:
            for raw in events:
                event = normalize_event(raw)
                if event is None:
                    self.skipped += 1
                    continue
                self.trace_log.add(event)
                accepted += 1
                failures[event["service"]] += is_failure(event["status"])
            for service, failed in failures.items():
                self.feeds.traced(service, failed)
            self._mutated()
        return Result.ok({"accepted": accepted})

    def issues(self, body: Any) -> Answer:
        service = _service(body)
        if service is None:
            return Result.bad_request("an issue batch needs a string `service`")
        entries = body.get("issues")
        if not isinstance(entries, list):
            return Result.bad_request("an issue batch needs {service, issues: [...]}")
        accepted = 0
        with self._lock:
            for raw in entries:
                issue = normalize_issue(raw, service)
                if issue is None:
                    self.skipped += 1
                    continue
                self.issue_book.merge(issue)
                accepted += 1
            self.feeds.issue_batch(service)
            self._mutated()
        return Result.ok({"accepted": accepted})

    def record_poll(
        self, service: str, base_url: str, *, spec: dict[str, Any] | None, health: dict[str, Any] | None,
        error: str | None, prefix: str = DEFAULT_PREFIX,
    ) -> None:
        """Fold one poll of a fleet member in (its surfaces under `prefix`). `error` None: a successful poll,
        `spec` and `health` are data; otherwise a failed poll, recorded (ok false, failures + 1) and never
        ingested as data."""
        with self._lock:
            self.catalog.poll(
                service,
                base_url,
                self._now(),
                prefix=prefix,
                spec=spec if error is None and isinstance(spec, dict) else None,
                health=_health(health) if error is None and isinstance(health, dict) else None,
                error=error,
            )
            self._mutated()

    # --- queries --------------------------------------------------------------------------------------------

    def query_fleet(self, body: Any = None) -> Answer:
        with self._lock:
            return Result.ok(queries.fleet(self.catalog, self.feeds, self.trace_log, self.issue_book, self._fresh()))

    def query_service(self, body: Any) -> Answer:
        name = _key(body, "service")
        if name is None:
            return Result.bad_request("query needs {service}")
        with self._lock:
            found = queries.service(self.catalog, self.feeds, self.trace_log, name, self._fresh())
        return Result.ok(found) if found is not None else Result.not_found(f"no service {name}")

    def query_topic(self, body: Any) -> Answer:
        name = _key(body, "topic")
        if name is None:
            return Result.bad_request("query needs {topic}")
        with self._lock:
            found = queries.topic(self.catalog, self.trace_log, name)
        return Result.ok(found) if found is not None else Result.not_found(f"no topic {name}")

    def query_trace(self, body: Any) -> Answer:
        trace_id = _key(body, "traceId")
        if trace_id is None:
            return Result.bad_request("query needs {traceId}")
        with self._lock:
            found = queries.trace(self.trace_log, trace_id)
        return Result.ok(found) if found is not None else Result.not_found(f"no trace {trace_id} in the window")

    # --- snapshot and persistence ---------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """Everything the collector knows, bounded by its limits, as plain JSON. Treat it as read-only: raw
        events and documents are shared with the collector."""
        with self._lock:
            catalog, instances, polls = self.catalog.snapshot()
            return Snapshot(
                format=SNAPSHOT_FORMAT,
                savedAt=self._now(),
                catalog=catalog,
                instances=instances,
                polls=polls,
                feeds=self.feeds.snapshot(),
                issues=self.issue_book.snapshot(),
                counters=self.trace_log.counter_snapshot(),
                edges=self.trace_log.edge_snapshot(),
                traces=self.trace_log.window_snapshot(),
                skipped=self.skipped,
            )

    def restore(self, snapshot: Snapshot) -> None:
        """Replace the whole state with `snapshot`'s. Raises SnapshotError, leaving the state untouched, when it
        is not a collector snapshot."""
        if not isinstance(snapshot, dict) or snapshot.get("format") != SNAPSHOT_FORMAT:
            raise SnapshotError(f"not a collector snapshot of format {SNAPSHOT_FORMAT}")
        with self._lock:
            saved = (self.catalog, self.feeds, self.trace_log, self.issue_book, self.skipped)
            self._reset()
            try:
                self.catalog.restore(snapshot["catalog"], snapshot["instances"], snapshot["polls"])
                self.feeds.restore(snapshot["feeds"])
                self.trace_log.restore(snapshot["traces"], snapshot["counters"], snapshot["edges"])
                self.issue_book.restore(snapshot["issues"])
                self.skipped = int(snapshot["skipped"])
            except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
                self.catalog, self.feeds, self.trace_log, self.issue_book, self.skipped = saved
                raise SnapshotError(f"malformed collector snapshot ({type(exc).__name__}: {exc})") from exc

    def flush(self) -> None:
        """Save now if anything changed since the last save (for `save_interval` > 0 and shutdown)."""
        with self._lock:
            if self._dirty:
                self._save(self.clock())

    # --- internals ------------------------------------------------------------------------------------------

    def _reset(self) -> None:
        self.catalog = Catalog(self.limits)
        self.feeds = FeedLog(self.limits)
        self.trace_log = TraceLog(self.limits)
        self.issue_book = IssueBook(self.limits)
        self.skipped = 0

    def _load(self) -> None:
        try:
            loaded = self.store.load()
        except Exception as exc:
            logger.warning("collector store failed to load (%s); starting empty", type(exc).__name__)
            return
        if loaded is None:
            return
        try:
            self.restore(loaded)
        except SnapshotError as exc:
            logger.warning("collector store holds no usable snapshot (%s); starting empty", exc)

    def _mutated(self) -> None:
        self._dirty = True
        now = self.clock()
        if now - self._last_save >= self.save_interval:
            self._save(now)

    def _save(self, now: float) -> None:
        self._last_save = now
        try:
            self.store.save(self.snapshot())
        except Exception as exc:
            self.save_failures += 1
            self.last_save_error = type(exc).__name__
            if now - self._last_failure_log >= self.log_interval:
                self._last_failure_log = now
                logger.warning(
                    "collector store failed to save (%s); %d failed save(s) so far, ingest goes on",
                    type(exc).__name__,
                    self.save_failures,
                )
            return
        self._dirty = False
        self.last_save_error = None

    def _now(self) -> str:
        return rfc3339(self.clock())

    def _fresh(self) -> str:
        return rfc3339(self.clock() - self.stale_after)


def _service(body: Any) -> str | None:
    return text(body.get("service")) if isinstance(body, dict) else None


def _key(body: Any, key: str) -> str | None:
    return text(body.get(key)) if isinstance(body, dict) else None


def _health(value: Any) -> Json | None:
    """`{isHealthy, healthChecks}` with the spec defaults (healthy, no checks); None when malformed."""
    if value is None:
        return {"isHealthy": True, "healthChecks": {}}
    if not isinstance(value, dict):
        return None
    healthy = value.get("isHealthy", True)
    checks = value.get("healthChecks", {})
    if not isinstance(healthy, bool) or not isinstance(checks, dict):
        return None
    return {"isHealthy": healthy, "healthChecks": checks}
