"""Which feeds each service has sent: the bookkeeping behind `missingFeeds`.

`missingFeeds` is ordered descriptor, health, traces, issues. The issues feed is optional, so `issues` is listed
only when a failing trace event arrived while no issues batch (an empty one counts) had ever been received: a
failure nothing explains.
"""

from __future__ import annotations

from collections import OrderedDict

from .caps import CollectorLimits
from .snapshot import FeedEntry
from .wire import put_bounded, require, saturated


class FeedLog:
    def __init__(self, limits: CollectorLimits) -> None:
        self.limits = limits
        self.entries: OrderedDict[str, FeedEntry] = OrderedDict()
        self.evicted = 0
        """Services dropped past `CollectorLimits.services`, the least recently heard first."""

    def _entry(self, service: str) -> FeedEntry:
        entry = self.entries.get(service)
        if entry is None:
            entry = FeedEntry(service=service, traces=False, issueBatches=0, unexplainedFailures=0)
        self.evicted += put_bounded(self.entries, service, entry, self.limits.services)
        return entry

    def traced(self, service: str, failures: int) -> None:
        entry = self._entry(service)
        entry["traces"] = True
        if failures and entry["issueBatches"] == 0:
            entry["unexplainedFailures"] = saturated(entry["unexplainedFailures"] + failures)

    def issue_batch(self, service: str) -> None:
        entry = self._entry(service)
        entry["issueBatches"] = saturated(entry["issueBatches"] + 1)

    def missing(self, service: str, *, described: bool, health: bool) -> list[str]:
        entry = self.entries.get(service)
        missing = []
        if not described:
            missing.append("descriptor")
        if not health:
            missing.append("health")
        if entry is None or not entry["traces"]:
            missing.append("traces")
        if entry is not None and entry["issueBatches"] == 0 and entry["unexplainedFailures"] > 0:
            missing.append("issues")
        return missing

    def snapshot(self) -> list[FeedEntry]:
        return [FeedEntry(**entry) for entry in self.entries.values()]

    def restore(self, entries: list[FeedEntry]) -> None:
        for entry in entries:
            require(entry, {"service": str, "traces": bool, "issueBatches": int, "unexplainedFailures": int})
            put_bounded(
                self.entries,
                entry["service"],
                FeedEntry(
                    service=str(entry["service"]),
                    traces=bool(entry["traces"]),
                    issueBatches=int(entry["issueBatches"]),
                    unexplainedFailures=int(entry["unexplainedFailures"]),
                ),
                self.limits.services,
            )
