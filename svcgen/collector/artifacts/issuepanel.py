"""issues.json: the collector's merged issues, for the dashboard's Issues panel.

`{generatedAtUtc, issues: [...]}`, each issue in the wire shape of docs/mesh-view.md (Issues) (`fingerprint,
classification, service, topic, version, transport, status, exceptionType, count, firstSeen, lastSeen,
exemplarTraceIds`) plus `consumer` and `detail` (a `contract-mismatch`'s consumer and first breaking path), with
every key present: an optional one that is unknown is null, `exemplarTraceIds` always an array. The merged issues
come from the snapshot's issues, the contract mismatches from its catalog (as the fleet query lists them). Most
recently seen first (ties by fingerprint, so the bytes do not depend on the snapshot's order). The snapshot is
outside input, read defensively: an entry without a string fingerprint, service and topic is left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from ..issuebook import mismatch_issue
from ..mismatches import find_mismatches
from ..snapshot import Json, Snapshot
from .times import utc_text

_TEXTS: Final = ("classification", "version", "transport", "status", "exceptionType", "consumer", "detail")


def build_issues(snapshot: Snapshot, *, generated_at: str) -> Json:
    listed = [*snapshot["issues"], *(mismatch_issue(mismatch) for mismatch in find_mismatches(snapshot["catalog"]))]
    issues = [issue for issue in (_issue(raw) for raw in listed) if issue is not None]
    issues.sort(key=lambda issue: issue["fingerprint"])
    issues.sort(key=lambda issue: issue["lastSeen"] or "", reverse=True)
    return {"generatedAtUtc": generated_at, "issues": issues}


def _issue(raw: object) -> Json | None:
    if not isinstance(raw, Mapping) or not all(isinstance(raw.get(key), str) for key in ("fingerprint", "service",
                                                                                          "topic")):
        return None
    issue: Json = {"fingerprint": raw["fingerprint"], "service": raw["service"], "topic": raw["topic"]}
    for key in _TEXTS:
        value = raw.get(key)
        issue[key] = value if isinstance(value, str) and (value or key == "status") else None
    count = raw.get("count")
    issue["count"] = count if isinstance(count, int) and not isinstance(count, bool) else None
    issue["firstSeen"] = utc_text(raw.get("firstSeen"))
    issue["lastSeen"] = utc_text(raw.get("lastSeen"))
    exemplars = raw.get("exemplarTraceIds")
    issue["exemplarTraceIds"] = [t for t in exemplars if isinstance(t, str)] if isinstance(exemplars, list) else []
    return issue
