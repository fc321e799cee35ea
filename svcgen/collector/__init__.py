"""The collector: ingest of the mesh feeds, the catalog, its queries, its stores and its snapshot.

Host it with `create_app(collector_service(Collector(JsonFileStore(path))))`; the poller feeds it through
`Collector.record_poll`; the UI artifacts are written from `Collector.snapshot()` (or a store's `load()`).
"""

from .caps import CollectorLimits
from .collector import Collector, SnapshotError
from .service import collector_service
from .snapshot import Snapshot
from .store import JsonFileStore, MemoryStore, Store, Stored, StoreError

__all__ = ["Collector", "CollectorLimits", "JsonFileStore", "MemoryStore", "Snapshot", "SnapshotError", "Store",
           "StoreError", "Stored", "collector_service"]
