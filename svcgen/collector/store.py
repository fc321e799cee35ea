"""Where the collector's state lives between runs: in memory (the default), in a JSON-file store, or in a shared
store (PostgreSQL) that several collector replicas read and write at once.

The JSON-file store is a snapshot file plus a log: every accepted change is appended to the log as one JSON line
before the collector answers it (a killed collector keeps it), and the log is fsynced at most `sync_interval`
seconds later (a crashed machine loses at most that much). Once the log outgrows the snapshot, the collector
hands over a fresh snapshot, written atomically off the event loop; the log segments it covers are then removed.
So a change costs what the change is, not what the state is. On start the snapshot is read and the newer log
segments are replayed.

The collector reads and writes its tables through one `Backend` (below): `MemoryBackend` keeps them in this
process and persists through a `Store` (memory or the JSON-file log); `PostgresStore` holds them in the database,
one transaction per change, shared by every replica.

A store that cannot be read is never overwritten: the collector moves it aside (`<name>.corrupt-<UTC time>`) and
starts empty. A line cut short at the end of a segment is a write the collector never acknowledged, not damage. A
damaged line inside the log (not JSON) is replayed up to: the collector starts with everything before it, and the
log from that segment on is kept aside (`<segment>.damaged-<UTC time>`) for `svcgen collector repair`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar, Final, Literal, Protocol, cast, runtime_checkable

import orjson

from ..runtime._atomicwrite import remove_stale_temps, write_atomic
from ..runtime._mesh.messages import MAX_FLEET_LIMIT as _MESSAGES_MAX_FLEET_LIMIT
from .caps import CollectorLimits
from .catalog import Catalog
from .issuebook import IssueBook
from .missingfeeds import FeedLog
from .snapshot import SNAPSHOT_FORMAT, BatchEntry, Json, Snapshot
from .tracelog import TraceLog

DEFAULT_SYNC_INTERVAL: Final = 0.05
"""Seconds at most between an acknowledged change and its fsync."""
DEFAULT_COMPACT_AFTER: Final = 8 * 2**20
"""Log bytes at which a snapshot is written, unless the last snapshot is larger (then its size)."""
COMPACT_RETRY: Final = 1.0
"""Seconds between attempts to write a snapshot after one failed."""
DAMAGED: Final = ".damaged-"
"""Suffix (then the UTC time) of log segments set aside from their damage on, for `svcgen collector repair`."""
LOG_SEGMENT: Final = "logSegment"
"""Snapshot key: the first log segment the snapshot does not include."""


class StoreError(Exception):
    """The store cannot be read (corrupt, truncated, not a collector store); the message says why."""


class StoreInUse(StoreError):
    """Another collector writes to this store: two writers would each lose what the other acknowledged."""


@dataclass(slots=True)
class Stored:
    """What a store holds: the newest snapshot, and the changes logged after it, oldest first."""

    snapshot: Snapshot | None = None
    changes: list[Json] = field(default_factory=list)
    damage: str | None = None
    """Where the log is damaged (a line that is not JSON before a segment's end): `changes` stop there; the rest of
    the log is `Store.set_aside_damaged`'s to keep."""


class Store(Protocol):
    def claim(self) -> None:
        """Take the store for this process alone, before `load`, until `close`; raises StoreInUse when another
        collector holds it."""
        ...

    def load(self) -> Stored:
        """Read the store without changing it; raises StoreError when it cannot be read."""
        ...

    def open(self) -> None:
        """Start writing, after `load`: clear what an earlier run left half-done."""
        ...

    def append(self, change: Json) -> None:
        """Persist one accepted change before it is acknowledged; raises when that is not possible."""
        ...

    def wants_compaction(self) -> bool:
        """Whether the collector should hand over a snapshot now."""
        ...

    def compact(self, snapshot: Snapshot) -> None:
        """Replace everything logged so far with `snapshot` (may finish in the background)."""
        ...

    def set_aside(self) -> list[str]:
        """Move an unreadable store out of the way, keeping it; the names it now has."""
        ...

    def set_aside_damaged(self) -> list[str]:
        """After a `load` that found damage: move the log from the damaged segment on out of the way (for `svcgen
        collector repair`), keeping it; the names it now has."""
        ...

    def close(self) -> None:
        """Write out what is pending and stop background work."""
        ...

    @property
    def problem(self) -> str | None:
        """Why the store cannot persist right now; None while it can."""
        ...


class StoreUnavailable(OSError):
    """A store cannot be reached or cannot take the change now; the message says why."""


DEFAULT_FLEET_LIMIT: Final = 200
"""Services, topics, issues (and ranked topics) a fleet answer lists at most unless the query asks for fewer."""
MAX_FLEET_LIMIT: Final = _MESSAGES_MAX_FLEET_LIMIT
"""The most a fleet query may ask for per list (its record's bound)."""


@dataclass(slots=True)
class FleetRows:
    """What a database backend read for one fleet page (`Rows.fleet`), beside the page's rows in `Tables`: the
    candidates in order (at most `limit` + 1 of each, so the query can tell whether more follow), and what only the
    whole database can answer. A memory backend leaves it out: the query picks from every table itself."""

    services: list[str]
    """Service names after the page's cursor (catalog, feeds and counters), in order."""
    topics: list[str]
    """Topic ids after the page's cursor (declared, once declared, or counted), in order."""
    invocations: dict[str, int]
    """Per topic of `topics`: its calls (every service, version and status)."""
    issues: list[Json]
    """The newest `limit` merged issues (lastSeen descending, then fingerprint)."""
    issues_held: int
    """Merged issues held in all."""
    mismatches: list[Json]
    """The newest `limit` contract-mismatch issues of the whole catalog, in the issues' order."""
    mismatches_held: int
    """Contract mismatches in all."""


@dataclass(frozen=True, slots=True)
class Rows:
    """Which rows a reader needs (`Backend.read`): a backend may hand over more (memory hands every table it
    holds, the query picks its rows), never fewer. Build one with the class constants or `service`, `topic`,
    `trace`."""

    kind: Literal["fleet", "service", "topic", "trace", "dropped", "artifacts", "everything", "buckets"]
    key: str = ""
    first: int = 0
    last: int = 0
    """For `buckets`: the window's first and last minute."""
    limit: int = 0
    after: str = ""
    """For `fleet`: the page's size and the topic id its topics start after (`key`: the service name its services
    start after)."""

    FLEET: ClassVar[Rows]
    """The first page of the fleet query (`fleet`)."""
    DROPPED: ClassVar[Rows]
    """Only the `dropped` counts."""
    ARTIFACTS: ClassVar[Rows]
    """What the UI artifacts are written from: every table but the trace window's events and the batch ids (a
    database backend reads it one replica at a time)."""
    EVERYTHING: ClassVar[Rows]
    """A snapshot: every table, the trace window, the edges and the batch ids."""

    @classmethod
    def fleet(cls, limit: int = 0, services_after: str = "", topics_after: str = "") -> Rows:
        """One page of the fleet query: the first `limit` service names after `services_after` with their catalog
        and feed rows, the first `limit` topic ids after `topics_after` with the catalog entries naming them and
        their calls, the newest `limit` issues and the contract mismatches
        (`FleetRows`). 0: `DEFAULT_FLEET_LIMIT`."""
        return cls("fleet", services_after, limit=limit or DEFAULT_FLEET_LIMIT, after=topics_after)

    @classmethod
    def service(cls, name: str) -> Rows:
        """The service query: the catalog, feed and counter rows of service `name`."""
        return cls("service", name)

    @classmethod
    def topic(cls, name: str) -> Rows:
        """The topic query: the catalog (who declares it) and the counter rows of topic `name`."""
        return cls("topic", name)

    @classmethod
    def buckets(cls, topic: str | None, minutes: int, now_minute: int) -> Rows:
        """A window query: the time buckets of `topic` (of every topic when None; edges too) in the `minutes`
        ending at `now_minute`."""
        return cls("buckets", topic or "", now_minute - minutes + 1, now_minute)

    @classmethod
    def trace(cls, trace_id: str) -> Rows:
        """The trace query: the window's events of `trace_id`, nothing else."""
        return cls("trace", trace_id)


Rows.FLEET = Rows.fleet()
Rows.DROPPED = Rows("dropped")
Rows.ARTIFACTS = Rows("artifacts")
Rows.EVERYTHING = Rows("everything")


@dataclass(slots=True)
class Tables:
    """The collector's tables as the queries read them: a memory backend's own, or the rows a database backend read
    back for one `Rows`."""

    catalog: Catalog
    feeds: FeedLog
    trace_log: TraceLog
    issue_book: IssueBook
    dropped: dict[str, int]
    """The fleet query's `dropped`."""
    skipped: int = 0
    batches: list[tuple[str, str, int]] = field(default_factory=list)
    """(feed, batchId, accepted), oldest first."""
    fleet: FleetRows | None = None
    """For `Rows.fleet` on a database backend: the page's candidates and the whole database's answers."""

    def snapshot(self, saved_at: str, *, buckets: bool = True) -> Snapshot:
        """The tables as a collector snapshot (read with `Rows.EVERYTHING`)."""
        catalog, instances, polls = self.catalog.snapshot()
        return Snapshot(
            format=SNAPSHOT_FORMAT,
            savedAt=saved_at,
            catalog=catalog,
            instances=instances,
            polls=polls,
            feeds=self.feeds.snapshot(),
            issues=self.issue_book.snapshot(),
            counters=self.trace_log.counter_snapshot(),
            buckets=self.trace_log.buckets.snapshot() if buckets else [],
            edges=self.trace_log.edge_snapshot(),
            traces=self.trace_log.window_snapshot(),
            skipped=self.skipped,
            batches=[BatchEntry(feed=feed, batchId=batch_id, accepted=accepted)
                     for feed, batch_id, accepted in self.batches],
            dropped=self.dropped,
        )


@dataclass(frozen=True, slots=True)
class Applied:
    """What a backend did with a change."""

    seen: int | None = None
    """For a batch whose batchId the backend holds already: the accepted count answered the first time (the batch
    was not counted again). None when the change was applied."""
    reregister: bool = False
    """For a heartbeat: the instance should register again."""
    dropped: bool = False
    """A limit dropped or skipped something (the collector logs what, at most once per log interval)."""
    skipped: int = 0
    """Entries of a batch the backend could not hold (skipped and counted): the answer's `accepted` leaves them
    out."""


@runtime_checkable
class Backend(Protocol):
    """Where the collector's tables live: the one interface the collector writes and reads through.

    - `MemoryBackend` (memory.py): the tables in this process, persisted through a `Store` (nothing, or the
      JSON-file log); a collector given a `Store` wraps it in one.
    - `PostgresStore` (postgres.py): the tables in PostgreSQL, shared by any number of collector replicas.

    The collector checks and bounds every feed before a backend sees it, so both hold the same things; the
    queries (queries.py) compute their answers from the `Tables` a backend reads for their `Rows`, so both answer
    alike."""

    blocking: bool
    """Whether a call waits on I/O (the host then runs it off the event loop)."""

    def open(self, limits: CollectorLimits) -> None:
        """Load or create the tables, bounded by `limits` (never raises for an unreachable store: `problem` says
        so meanwhile)."""
        ...

    def apply(self, change: Json) -> Applied:
        """Persist and apply one accepted change atomically (a batch with a batchId at most once). Raises
        StoreUnavailable when that is not possible now, Unstorable for a change it can never hold; either way
        nothing is half-applied."""
        ...

    def read(self, rows: Rows) -> contextlib.AbstractContextManager[Tables]:
        """The tables holding at least `rows`, as of now. Raises StoreUnavailable."""
        ...

    def count(self, name: str, amount: int = 1) -> None:
        """Add to a `dropped` count kept outside a change (`refused`; best effort)."""
        ...

    def holds_spec(self, service: str, spec: Json) -> bool:
        """Whether `spec` is the polled spec held for `service` already (a poll then need not store it again);
        False when the backend cannot tell cheaply."""
        ...

    def close(self) -> None:
        """Write out what is pending (a memory backend's last snapshot) and stop background work."""
        ...

    @property
    def problem(self) -> str | None:
        """Why the backend cannot persist right now; None while it can."""
        ...


class MemoryStore:
    """Keeps the newest snapshot object: nothing outlives the process, so changes need no log."""

    def __init__(self, snapshot: Snapshot | None = None) -> None:
        self.snapshot = snapshot
        self.compactions = 0
        self.problem: str | None = None

    def claim(self) -> None:
        pass

    def load(self) -> Stored:
        return Stored(self.snapshot)

    def open(self) -> None:
        pass

    def append(self, change: Json) -> None:
        pass

    def wants_compaction(self) -> bool:
        return False

    def compact(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.compactions += 1

    def set_aside(self) -> list[str]:
        self.snapshot = None
        return []

    def set_aside_damaged(self) -> list[str]:
        return []

    def close(self) -> None:
        pass


class JsonFileStore:
    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        sync_interval: float = DEFAULT_SYNC_INTERVAL,
        compact_after: int = DEFAULT_COMPACT_AFTER,
        compact_retry: float = COMPACT_RETRY,
    ) -> None:
        self.path = Path(path)
        self.sync_interval = sync_interval
        self.compact_after = compact_after
        self.compact_retry = compact_retry
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._segment = 0
        self._log_bytes = 0
        self._snapshot_bytes = 0
        self._unsynced = False
        self._full_snapshot_due = False
        self._errors: dict[str, str] = {}
        self._compaction: threading.Thread | None = None
        self._retry_at = 0.0
        self._stop = threading.Event()
        self._syncer: threading.Thread | None = None
        self._claim: int | None = None
        self._damaged: list[Path] = []
        self._damaged_line = 1

    def claim(self) -> None:
        """An exclusive lock on `<path>.lock` (flock), held until `close`: a second collector on this store refuses
        to start, naming the holder, instead of silently losing half of what both acknowledged."""
        if self._claim is not None:
            return
        lock = self.path.with_name(self.path.name + ".lock")
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            return  # no directory to write in yet: nothing to guard; the first write claims it (`_writable`)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise StoreInUse(f"another collector (pid {holder}) is using this store; one store takes one "
                             "collector (for replicas, use a PostgreSQL store)") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._claim = fd

    # --- reading --------------------------------------------------------------------------------------------

    def load(self) -> Stored:
        for _ in range(3):  # a compaction of a running collector may remove a segment under us: read again
            try:
                return self._read()
            except FileNotFoundError:
                continue
        return self._read()

    def _read(self) -> Stored:
        snapshot: Snapshot | None = None
        try:
            raw = self.path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            raw = None  # nothing written yet; a directory that is not one shows when the collector writes
        except OSError as exc:
            raise StoreError(f"the snapshot cannot be read ({exc.strerror or type(exc).__name__})") from None
        first = 0
        if raw is not None:
            try:
                document = orjson.loads(raw)
            except orjson.JSONDecodeError:
                raise StoreError("the snapshot is not valid JSON (corrupt or truncated)") from None
            if not isinstance(document, dict):
                raise StoreError("the snapshot is not a JSON object")
            first = document.pop(LOG_SEGMENT, 0)
            if not isinstance(first, int):
                raise StoreError(f"the snapshot's {LOG_SEGMENT} is not a number")
            self._snapshot_bytes = len(raw)
            self._segment = max(self._segment, first)
            snapshot = cast(Snapshot, document)
        changes: list[Json] = []
        self._damaged = []
        for number, segment in self._segments():
            if number < first:
                continue
            if self._damaged:  # past the damage: kept aside whole, never replayed out of order
                self._damaged.append(segment)
                continue
            read, damaged_at = _read_segment(segment)
            changes.extend(read)
            if damaged_at is not None:
                self._damaged.append(segment)
                self._damaged_line = damaged_at
                damage = f"{segment.name} line {damaged_at} is not valid JSON"
        return Stored(snapshot, changes, damage if self._damaged else None)

    def exists(self) -> bool:
        """Whether a collector ever wrote here (a snapshot or a log segment)."""
        return self.path.is_file() or bool(self._segments())

    def _segments(self) -> list[tuple[int, Path]]:
        pattern = re.compile(re.escape(self.path.name) + r"\.(\d{6,})\.log")
        found = []
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            for entry in self.path.parent.iterdir():
                matched = pattern.fullmatch(entry.name)
                if matched:
                    found.append((int(matched.group(1)), entry))
        return sorted(found)

    def _segment_path(self, number: int) -> Path:
        return self.path.with_name(f"{self.path.name}.{number:06d}.log")

    # --- writing --------------------------------------------------------------------------------------------

    def open(self) -> None:
        remove_stale_temps(self.path)
        segments = self._segments()
        # A new segment each run (the last one may end in a line a kill cut short), numbered past every segment
        # the snapshot already holds.
        self._segment = max(self._segment, segments[-1][0] + 1 if segments else 1)
        self._log_bytes = sum(_size(path) for _, path in segments)
        self._stop.clear()
        self._syncer = threading.Thread(target=self._sync_loop, name="svcgen-store-sync", daemon=True)
        self._syncer.start()

    def append(self, change: Json) -> None:
        line = orjson.dumps(change) + b"\n"
        with self._lock:
            try:
                fd = self._writable()
                _write_all(fd, line)
            except OSError as exc:
                self._errors["append"] = f"the log cannot be written ({exc.strerror or type(exc).__name__})"
                self._retire_segment()  # a part of the line may be written: later lines go to a fresh segment
                raise
            self._errors.pop("append", None)
            self._unsynced = True
            self._log_bytes += len(line)

    def _writable(self) -> int:
        if self._claim is None:
            try:
                self.claim()
            except StoreInUse as exc:
                raise OSError(errno.EBUSY, str(exc)) from None
        if self._fd is not None and os.fstat(self._fd).st_nlink == 0:
            # Someone removed the segment we write to: what it held lives on only in memory, so the next
            # snapshot must come soon and hold everything.
            self._retire_segment()
            self._full_snapshot_due = True
        if self._fd is None:
            self._fd = os.open(self._segment_path(self._segment), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        return self._fd

    def _retire_segment(self) -> None:
        """Later lines go to a fresh segment, unless nothing reached this one (a full disk refuses every write):
        then it is reused, so failing writes do not leave a trail of empty segments."""
        written = False
        if self._fd is not None:
            with contextlib.suppress(OSError):
                written = os.fstat(self._fd).st_size > 0
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
        if written:
            self._segment += 1

    def _sync_loop(self) -> None:
        while not self._stop.wait(self.sync_interval):
            self._sync()

    def _sync(self) -> None:
        with self._lock:
            if not self._unsynced or self._fd is None:
                return
            self._unsynced = False
            fd = os.dup(self._fd)
        try:
            os.fsync(fd)
            self._errors.pop("sync", None)
        except OSError as exc:
            self._errors["sync"] = f"the log cannot be synced ({exc.strerror or type(exc).__name__})"
            self._unsynced = True
        finally:
            os.close(fd)

    def wants_compaction(self) -> bool:
        if self._compaction is not None and self._compaction.is_alive():
            return False
        if "compact" in self._errors:
            return time.monotonic() >= self._retry_at
        return self._full_snapshot_due or self._log_bytes >= max(self.compact_after, self._snapshot_bytes)

    def compact(self, snapshot: Snapshot) -> None:
        """Start a new log segment now (the caller holds the state still), write the snapshot in a thread."""
        if self._compaction is not None:
            self._compaction.join()
        with self._lock:
            retired, self._fd = self._fd, None
            self._segment += 1
            self._log_bytes = 0
            self._full_snapshot_due = False
            first = self._segment
        self._compaction = threading.Thread(
            target=self._write_snapshot, args=(snapshot, retired, first), name="svcgen-store-compact", daemon=True
        )
        self._compaction.start()

    def _write_snapshot(self, snapshot: Snapshot, retired: int | None, first: int) -> None:
        try:
            if retired is not None:
                os.fsync(retired)
            data = orjson.dumps({**snapshot, LOG_SEGMENT: first})
            write_atomic(self.path, data)
        except OSError as exc:
            # The log segments stay, so nothing is lost; the next compaction tries again.
            self._errors["compact"] = f"the snapshot cannot be written ({exc.strerror or type(exc).__name__})"
            self._retry_at = time.monotonic() + self.compact_retry
            return
        finally:
            if retired is not None:
                with contextlib.suppress(OSError):
                    os.close(retired)
        self._errors.pop("compact", None)
        self._snapshot_bytes = len(data)
        for number, segment in self._segments():
            if number < first:
                with contextlib.suppress(OSError):
                    segment.unlink()

    def set_aside_damaged(self) -> list[str]:
        suffix = DAMAGED + datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        moved = []
        for index, segment in enumerate(self._damaged):
            target = segment.with_name(segment.name + suffix)
            with contextlib.suppress(FileNotFoundError):
                if index == 0:  # the lines before the damage were replayed: only the damage on is kept aside
                    lines = segment.read_bytes().split(b"\n")
                    write_atomic(target, b"\n".join(lines[self._damaged_line - 1 :]))
                    segment.unlink()
                else:
                    segment.rename(target)
                moved.append(target.name)
        self._damaged = []
        return moved

    def damaged_segments(self) -> list[Path]:
        """Log segments a collector set aside as damaged (`set_aside_damaged`), oldest first."""
        pattern = re.compile(re.escape(self.path.name) + r"\.(\d{6,})\.log" + re.escape(DAMAGED) + r"\S+")
        found = [entry for entry in self.path.parent.iterdir() if pattern.fullmatch(entry.name)]
        return sorted(found, key=lambda entry: entry.name)

    def set_aside(self) -> list[str]:
        if self.path.is_dir() and any(self.path.iterdir()):
            # Not the store's file but someone's directory: moving it would carry off all it holds.
            raise StoreError(f"{self.path} is a directory, not a collector store; give the store's file")
        suffix = ".corrupt-" + datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        moved = []
        for path in [self.path, *(segment for _, segment in self._segments())]:
            target = path.with_name(path.name + suffix)
            with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                path.rename(target)  # any other failure propagates: a store neither readable nor movable
                moved.append(target.name)
        return moved

    def close(self) -> None:
        self._stop.set()
        if self._syncer is not None:
            self._syncer.join()
        if self._compaction is not None:
            self._compaction.join()
        self._sync()
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
        if self._claim is not None:
            os.close(self._claim)  # releases the lock
            self._claim = None

    @property
    def problem(self) -> str | None:
        return next(iter(self._errors.values()), None)


def _read_segment(path: Path) -> tuple[list[Json], int | None]:
    """The segment's changes up to its first damaged line, and that line's number (None when it has none)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise  # removed by a compaction meanwhile: the caller reads again
    except OSError as exc:
        raise StoreError(f"{path.name} cannot be read ({exc.strerror or type(exc).__name__})") from None
    lines = data.split(b"\n")
    # The last piece is empty after a complete line, or a line cut short by a kill: never acknowledged.
    changes: list[Json] = []
    for number, line in enumerate(lines[:-1], 1):
        try:
            change: Any = orjson.loads(line)
        except orjson.JSONDecodeError:
            return changes, number
        if not isinstance(change, dict):
            return changes, number
        changes.append(change)
    return changes, None


def read_damaged(path: Path) -> tuple[list[Json], int]:
    """Every change a damaged segment still holds (its undamaged lines), and how many lines were not one."""
    changes: list[Json] = []
    skipped = 0
    for line in path.read_bytes().split(b"\n"):
        if not line.strip():
            continue
        try:
            change: Any = orjson.loads(line)
        except orjson.JSONDecodeError:
            skipped += 1
            continue
        if isinstance(change, dict):
            changes.append(change)
        else:
            skipped += 1
    return changes, skipped


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
