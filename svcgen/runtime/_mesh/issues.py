"""The issue aggregator: failures deduplicated into issues, flushed as delta batches (spec "Issue and issue batch").

docs/mesh-view.md ("Issues and their classification") fixes the wire form, the fingerprint and the classification.
Fed from finished trace events (`observe`, an `on_failure` observer of the trace middleware), so a failure is seen once
and nothing is computed twice; `record` is the direct entry for other sources.

Bounded per window (docs/collector.md, Limits): at most `max_issues` distinct issues (further occurrences of NEW
issues are counted in `dropped` and logged; issues already in the window keep counting) and at most `max_exemplars` (5)
distinct trace ids per issue, the first ones seen. Fields outside the fingerprint (status when an exception type
decides it, transport) keep their first value of the window.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from .._codec import codec_for
from .._status import (
    BAD_REQUEST,
    CONFLICT,
    FORBIDDEN,
    NOT_FOUND,
    NOT_IMPLEMENTED,
    SERVICE_UNAVAILABLE,
    TIMEOUT,
    TOO_MANY_REQUESTS,
    UNAUTHORIZED,
    UNEXPECTED_ERROR,
    VALIDATION_ERROR,
)
from .._topics import UNKNOWN_TOPIC
from .clock import WallClock, wall_clock
from .messages import IssueBatch, IssueEntry

if TYPE_CHECKING:
    from .._context import Context
    from .traces import TraceEvent

logger = logging.getLogger("svcgen.mesh.issues")
_ENCODE_BATCH: Final = codec_for(IssueBatch).encode

VALIDATION: Final = "validation"
EXCEPTION: Final = "exception"
CONFIG_WIRING: Final = "config-wiring"
DEPENDENCY: Final = "dependency"
UNCLASSIFIED: Final = "unclassified"

CLIENT: Final = "client"
"""A handler's own business answer to its caller (not found, conflict, bad input): the caller's problem."""

DEFAULT_MAX_ISSUES: Final = 1000
MAX_EXEMPLARS: Final = 5
"""At most 5 exemplar trace ids per issue per window at the sender (docs/mesh-view.md)."""

_CLIENT_STATUSES: Final = frozenset({NOT_FOUND, CONFLICT, BAD_REQUEST, VALIDATION_ERROR})
_VALIDATION_STATUSES: Final = frozenset({BAD_REQUEST, VALIDATION_ERROR})
_CONFIG_STATUSES: Final = frozenset({NOT_FOUND, UNAUTHORIZED, FORBIDDEN, NOT_IMPLEMENTED, ""})
_DEPENDENCY_STATUSES: Final = frozenset({SERVICE_UNAVAILABLE, TIMEOUT, TOO_MANY_REQUESTS})


def classify(status: str, exception_type: str | None = None, *, handler_answered: bool = False) -> str:
    """The classification rules in order (docs/mesh-view.md), first match wins. `handler_answered`: the handler
    returned this status itself, so not-found, conflict, bad-request and validation-error are its business answer
    (`client`), not the binding's (an unknown topic, an undecodable request)."""
    if handler_answered and status in _CLIENT_STATUSES:
        return CLIENT
    if status in _VALIDATION_STATUSES:
        return VALIDATION
    if exception_type:
        return EXCEPTION
    if status in _CONFIG_STATUSES:
        return CONFIG_WIRING
    if status in _DEPENDENCY_STATUSES:
        return DEPENDENCY
    if status == UNEXPECTED_ERROR:
        return EXCEPTION
    return UNCLASSIFIED


def fingerprint(service: str, topic: str, version: str, classification: str, discriminator: str) -> str:
    """Hex of the first 16 bytes of SHA-256 of `service|topic|version|classification|d` (d: exception type, else
    status). Transport is not part of it."""
    text = f"{service}|{topic}|{version}|{classification}|{discriminator}"
    # surrogatepass: a topic decoded from a hostile path must still hash, never raise.
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:16].hex()


@dataclass(slots=True)
class _Issue:
    fingerprint: str
    classification: str
    topic: str
    version: str
    transport: str | None
    status: str
    exception_type: str | None
    first_seen: float
    last_seen: float
    count: int = 0
    exemplars: list[str] = field(default_factory=list)

    def to_entry(self, service: str) -> IssueEntry:
        """The issue as the issues feed's record declares it (the collector decodes the same record)."""
        return IssueEntry(
            fingerprint=self.fingerprint,
            classification=self.classification,
            service=service,
            topic=self.topic,
            version=self.version or None,
            transport=self.transport or None,
            status=self.status,
            exception_type=self.exception_type or None,
            count=self.count,
            first_seen=datetime.fromtimestamp(self.first_seen, UTC),
            last_seen=datetime.fromtimestamp(self.last_seen, UTC),
            exemplar_trace_ids=list(self.exemplars),
        )


class IssueAggregator:
    """Records failures into the current window; `flush` hands the window over as a batch and starts a new one."""

    def __init__(
        self,
        service: str,
        *,
        clock: WallClock = wall_clock,
        max_issues: int = DEFAULT_MAX_ISSUES,
        max_exemplars: int = MAX_EXEMPLARS,
    ) -> None:
        if max_issues < 1:
            raise ValueError("max_issues must be at least 1")
        if not 0 <= max_exemplars <= MAX_EXEMPLARS:
            raise ValueError(f"max_exemplars must be between 0 and {MAX_EXEMPLARS}")
        self.service = service
        self.max_issues = max_issues
        self.max_exemplars = max_exemplars
        self.dropped = 0
        """Occurrences of new issues refused because the window was full, since construction."""
        self._clock = clock
        # Keyed by what the fingerprint hashes, so the hash is computed once per issue per window.
        self._window: dict[tuple[str, str, str, str], _Issue] = {}
        self._window_dropped = 0
        # Recording normally happens on the event loop, but a thread may record too; flush must see whole updates.
        self._lock = threading.Lock()

    def record(
        self,
        topic: str,
        status: str,
        version: str = "",
        transport: str | None = None,
        exception_type: str | None = None,
        trace_id: str | None = None,
        *,
        handler_answered: bool = False,
        classification: str | None = None,
    ) -> None:
        """`classification` overrides the rules (a dead letter is `dead-letter` whatever its last status)."""
        classification = classification or classify(status, exception_type, handler_answered=handler_answered)
        key = (topic, version, classification, exception_type or status)
        now = self._clock()
        with self._lock:
            issue = self._window.get(key)
            if issue is None:
                if len(self._window) >= self.max_issues:
                    self._refuse()
                    return
                issue = _Issue(
                    fingerprint(self.service, *key),
                    classification,
                    topic,
                    version,
                    transport or None,
                    status,
                    exception_type or None,
                    first_seen=now,
                    last_seen=now,
                )
                self._window[key] = issue
            issue.count += 1
            issue.last_seen = now
            exemplars = issue.exemplars
            if trace_id and len(exemplars) < self.max_exemplars and trace_id not in exemplars:
                exemplars.append(trace_id)

    def observe(self, event: TraceEvent, context: Context) -> None:
        """A trace middleware observer: records the event when its invocation failed; a topic the service does not
        have under UNKNOWN_TOPIC, so made-up names cannot crowd real issues out of the window."""
        if event.successful:
            return
        self.record(
            event.topic if event.routed else UNKNOWN_TOPIC,
            event.status,
            event.topic_version or "",
            context.transport,
            event.exception_type,
            event.trace_id,
            handler_answered=event.handler_answered,
        )

    def flush(self, batch_id: str | None = None) -> dict[str, Any]:
        """`{service, issues, batchId?}`, encoded through the collector's record: every issue of the window with
        counts since the previous flush; resets the window. An empty batch is valid (the issues feed's liveness
        beat)."""
        with self._lock:
            window, self._window = self._window, {}
            dropped, self._window_dropped = self._window_dropped, 0
        if dropped:
            logger.warning(
                "issue window was full (%d distinct issues): %d occurrence(s) of further issues were dropped",
                self.max_issues,
                dropped,
            )
        batch: dict[str, Any] = _ENCODE_BATCH(
            IssueBatch(self.service, [issue.to_entry(self.service) for issue in window.values()], batch_id)
        )
        return batch

    def __len__(self) -> int:
        """Distinct issues in the current window."""
        return len(self._window)

    def _refuse(self) -> None:
        if self._window_dropped == 0:
            logger.warning(
                "issue window holds %d distinct issues; new ones are dropped until the next flush", self.max_issues
            )
        self._window_dropped += 1
        self.dropped += 1
