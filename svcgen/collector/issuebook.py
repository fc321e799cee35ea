"""Issue batches merged by fingerprint across instances (wire shape in docs/mesh-view.md, Issues), plus the
collector's own issues: `contract-drift` (filed by a heartbeat, merged like the others) and `contract-mismatch`
(derived from the catalog on every read, see mismatches.py, never stored).

Counts are deltas and accrue; firstSeen is the earliest, lastSeen the latest; the newest `exemplars` trace ids are
kept. Fields outside the fingerprint (transport, status when an exception type decides it) keep their first value.
The table is bounded: past `CollectorLimits.issues` the least recently seen issue is dropped and counted. An entry
with a count above 64 bits is skipped and counted (the store could not hold it); merged counts saturate at MAX_COUNT
instead of growing past it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final

from ..runtime._codec import codec_for, decode_datetime
from ..runtime._mesh.issues import fingerprint
from ..runtime._mesh.messages import IssueEntry
from ..runtime._status import CONFLICT, UNEXPECTED_ERROR, VALIDATION_ERROR
from ..runtime._topics import MESH_TOPIC
from .caps import CollectorLimits
from .mismatches import Mismatch
from .snapshot import Json
from .wire import decode_entry, mesh_time, put_bounded, saturated

CONTRACT_DRIFT: Final = "contract-drift"
DRIFT_TOPIC: Final = MESH_TOPIC
"""A drift is about the descriptor, which `svc:mesh` answers."""
DRIFT_STATUS: Final = CONFLICT
"""The heartbeat's descriptor hash conflicts with the registered one."""
CONTRACT_MISMATCH: Final = "contract-mismatch"
MISMATCH_STATUS: Final = {"request": VALIDATION_ERROR, "response": UNEXPECTED_ERROR}
"""What the mismatch gives at run time: the consumer refuses the request (422), or the producer's client cannot
decode the answer."""
_DECODE_ENTRY = codec_for(IssueEntry).decode
_ENCODE_ENTRY: Callable[[IssueEntry], Json] = codec_for(IssueEntry).encode


def normalize_issue(raw: Any, service: str) -> Json | None:
    """The issue in wire key order, read through its record (`IssueEntry`); None when malformed, unstorable (a
    count above 64 bits) or about another service."""
    entry = decode_entry(_DECODE_ENTRY, raw)
    if entry is None or entry.service not in (None, service):  # a batch speaks for one service
        return None
    first, last = mesh_time(entry.first_seen), mesh_time(entry.last_seen)
    entry.service = service  # a fresh record, the batch's service
    return _stored(entry, min(first, last), max(first, last))


def mismatch_issue(mismatch: Mismatch) -> Json:
    """The collector's issue for a producer/consumer incompatibility: the producer's, one per (producer, consumer,
    topic, version) (the consumer is the fingerprint's discriminator), naming the consumer and the first breaking
    path (`detail`)."""
    issue: Json = {
        "fingerprint": fingerprint(mismatch.producer, mismatch.topic, mismatch.version, CONTRACT_MISMATCH,
                                   mismatch.consumer),
        "classification": CONTRACT_MISMATCH,
        "service": mismatch.producer,
        "topic": mismatch.topic,
    }
    if mismatch.version:
        issue["version"] = mismatch.version
    issue.update(status=MISMATCH_STATUS[mismatch.direction], count=1, firstSeen=mismatch.at, lastSeen=mismatch.at,
                 exemplarTraceIds=[], consumer=mismatch.consumer, detail=mismatch.detail)
    return issue



def newest_first(listed: list[Json]) -> list[Json]:
    """Issues by `lastSeen` descending, then fingerprint ascending (the order the database's index reads them in);
    sorts `listed` in place and returns it."""
    listed.sort(key=lambda issue: issue["fingerprint"])
    listed.sort(key=lambda issue: issue["lastSeen"], reverse=True)
    return listed


def _stored(entry: IssueEntry, first_seen: str, last_seen: str) -> Json:
    """The issue as the collector keeps it: wire key order, times in the mesh's one form (comparable as text)."""
    issue = _ENCODE_ENTRY(entry)
    issue["firstSeen"], issue["lastSeen"] = first_seen, last_seen
    return issue


class IssueBook:
    def __init__(self, limits: CollectorLimits) -> None:
        self.limits = limits
        self.issues: OrderedDict[str, Json] = OrderedDict()
        self.dropped = 0
        """Issues pushed out by newer ones past the cap."""

    def merge(self, issue: Json) -> None:
        """Fold one normalised issue in."""
        existing = self.issues.get(issue["fingerprint"])
        if existing is None:
            issue["exemplarTraceIds"] = _newest(issue["exemplarTraceIds"], [], self.limits.exemplars)
            self.dropped += put_bounded(self.issues, issue["fingerprint"], issue, self.limits.issues)
            return
        newer = issue["lastSeen"] >= existing["lastSeen"]
        existing["count"] = saturated(existing["count"] + issue["count"])
        existing["firstSeen"] = min(existing["firstSeen"], issue["firstSeen"])
        existing["lastSeen"] = max(existing["lastSeen"], issue["lastSeen"])
        old, new = existing["exemplarTraceIds"], issue["exemplarTraceIds"]
        existing["exemplarTraceIds"] = (
            _newest(new, old, self.limits.exemplars) if newer else _newest(old, new, self.limits.exemplars)
        )
        self.issues.move_to_end(issue["fingerprint"])

    def file_drift(self, service: str, at: str) -> None:
        """One occurrence of the collector's own issue: a heartbeat whose descriptor hash differs from the
        registered one."""
        moment = decode_datetime(at)
        self.merge(_stored(IssueEntry(
            fingerprint=fingerprint(service, DRIFT_TOPIC, "", CONTRACT_DRIFT, DRIFT_STATUS),
            classification=CONTRACT_DRIFT, service=service, topic=DRIFT_TOPIC, status=DRIFT_STATUS, count=1,
            first_seen=moment, last_seen=moment,
        ), at, at))  # fmt: skip

    def snapshot(self) -> list[Json]:
        return [{**issue, "exemplarTraceIds": list(issue["exemplarTraceIds"])} for issue in self.issues.values()]

    def hold(self, issues: list[Json]) -> None:
        """Take issues this collector stored itself (a database backend's rows, least recently seen first) as they
        are: they were checked when they came in, so a query does not check them again."""
        for issue in issues:
            self.issues[issue["fingerprint"]] = issue

    def restore(self, issues: list[Json]) -> None:
        """Merge snapshot issues back, checked like a batch's; a malformed one is left out."""
        for raw in issues:
            service = raw.get("service") if isinstance(raw, dict) else None
            issue = normalize_issue(raw, service) if isinstance(service, str) else None
            if issue is not None:
                self.merge(issue)


def _newest(newer: list[str], older: list[str], keep: int) -> list[str]:
    """Trace ids oldest first, `newer` after `older`, each once (at its newest place), the last `keep` of them."""
    seen = set(newer)
    merged = [trace_id for trace_id in older if trace_id not in seen] + list(dict.fromkeys(newer))
    return merged[-keep:]
