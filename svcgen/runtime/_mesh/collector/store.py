"""Where the collector's snapshot lives between runs: in memory (the default) or in a JSON file.

The file is written atomically (a temp file in the same directory, fsync, `os.replace`), so a crash leaves the
previous snapshot or the new one, never half of one. A missing, unreadable, truncated or corrupt file loads as
nothing with one warning: the collector starts empty rather than not at all (DESIGN §8).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Protocol, cast

import orjson

from ..atomicwrite import write_atomic
from .snapshot import Snapshot

logger = logging.getLogger("svcgen.mesh.collector")


class Store(Protocol):
    def load(self) -> Snapshot | None: ...

    def save(self, snapshot: Snapshot) -> None:
        """May raise (a full disk, a read-only directory); the collector counts and logs it."""
        ...


class MemoryStore:
    """Keeps the newest snapshot object; the collector hands over a fresh one on every save."""

    def __init__(self, snapshot: Snapshot | None = None) -> None:
        self.snapshot = snapshot
        self.saves = 0

    def load(self) -> Snapshot | None:
        return self.snapshot

    def save(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.saves += 1


class JsonFileStore:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def load(self) -> Snapshot | None:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            logger.warning("collector store %s does not exist yet; starting empty", self.path)
            return None
        except OSError as exc:
            logger.warning("collector store %s is unreadable (%s); starting empty", self.path, type(exc).__name__)
            return None
        try:
            document = orjson.loads(raw)
        except orjson.JSONDecodeError:
            logger.warning("collector store %s is not valid JSON (corrupt or truncated); starting empty", self.path)
            return None
        if not isinstance(document, dict):
            logger.warning("collector store %s does not hold a snapshot object; starting empty", self.path)
            return None
        # The shape is checked where it is used: Collector.restore rejects a malformed snapshot as a whole.
        return cast(Snapshot, document)

    def save(self, snapshot: Snapshot) -> None:
        write_atomic(self.path, orjson.dumps(snapshot))
