"""The collector: ingest of the mesh feeds, the catalog, its queries, its stores and its snapshot.

Host it with `create_app(collector_service(Collector(JsonFileStore(path))))`; the poller feeds it through
`Collector.record_poll`; the UI artifacts are written from `Collector.snapshot()` (or a store's `load()`). The
collector reads and writes its tables through one `Backend` (store.py): `MemoryBackend` (memory, JSON file) or
`postgres.PostgresStore`.
"""

from .caps import CollectorLimits
from .collector import Collector
from .memory import MemoryBackend, SnapshotError
from .service import collector_service
from .snapshot import Snapshot
from .store import Backend, JsonFileStore, MemoryStore, Rows, Store, Stored, StoreError, StoreInUse

__all__ = ["Backend", "Collector", "CollectorLimits", "JsonFileStore", "MemoryBackend", "MemoryStore", "Rows",
           "Snapshot", "SnapshotError", "Store", "StoreError", "StoreInUse", "Stored", "collector_service"]
