"""Producers checked against consumers: does what a service sends fit what the topic's handler accepts, and does
what the handler answers fit what the sender expects?

For every (topic, version) a service's current catalog entry lists under `produces` and a service's current
entry handles (declarations.current_entries: a later register replaces what an earlier one said), the producer's
request schema is checked against the consumer's (direction request) and the consumer's response schema against the
producer's (direction response) with the one rule set, `first_incompatibility`. The first breaking path found is a
`Mismatch`. Computed from the stored catalog on demand, never stored: every replica on a shared store answers the
same, nothing is counted twice, and a register that fixes the contract clears it. Schemas are outside input kept
verbatim: a pair the rules cannot read (a malformed schema) is not judged, and never breaks a query.

Events likewise: each subscriber's declared payload schema (its descriptor's `events.subscribes`) is checked
against its publisher's (`events.publishes`), the payload flowing publisher -> subscriber (direction response, the
breaking path named `payload...`); a mismatch is a `Mismatch` whose producer is the publisher and consumer the
subscriber, surfaced as the same `contract-mismatch` issue.

Verdicts are remembered per pair of schemas (the newest VERDICTS of them): a fleet query or an artifact run judges
only contracts it has not seen before, however often it runs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Final, Literal

import orjson

from ..runtime._compatibility import first_incompatibility
from .declarations import TopicContract, current_entries, declared_events, produced_topics, served_topics
from .snapshot import CatalogEntry

Direction = Literal["request", "response"]
VERDICTS: Final = 4096


@dataclass(frozen=True, slots=True)
class Mismatch:
    producer: str
    """The service that sends the topic (its manifest's `produces`)."""
    consumer: str
    """The service that handles it."""
    topic: str
    version: str
    direction: Direction
    breaking: str
    """The first breaking path and why, as `first_incompatibility` says it (`request.amount: ...`)."""
    at: str
    """When the newer of the two contracts was stated (register or polled spec); "" when unknown."""

    @property
    def detail(self) -> str:
        """`orders -> payments: payments:capture@v1.request.amount: ...`, as `svcgen compat` names a finding."""
        version = f"@{self.version}" if self.version else ""
        return f"{self.producer} -> {self.consumer}: {self.topic}{version}.{self.breaking}"


def find_mismatches(catalog: Iterable[CatalogEntry]) -> list[Mismatch]:
    """Every incompatible (producer, consumer, topic, version) of the current entries, sorted by (topic, version,
    producer, consumer)."""
    current = current_entries(catalog)
    produced = {name: produced_topics(entry) for name, entry in current.items()}
    sent_ids = {contract.topic for contracts in produced.values() for contract in contracts}
    handlers: defaultdict[tuple[str, str], list[TopicContract]] = defaultdict(list)
    for entry in current.values() if sent_ids else ():
        for contract in served_topics(entry, sent_ids):
            handlers[contract.key].append(contract)
    found: list[Mismatch] = []
    for producer, entry in current.items():
        for sent in produced[producer]:
            for handled in handlers.get(sent.key, ()):
                breaking = _first_breaking(sent, handled)
                if breaking is not None:
                    direction, why = breaking
                    at = max(_stated_at(entry), _stated_at(current[handled.service]))
                    found.append(Mismatch(producer, handled.service, sent.topic, sent.version, direction, why, at))
    found.extend(_event_mismatches(current))
    found.sort(key=lambda m: (m.topic, m.version, m.producer, m.consumer))
    return found


def _event_mismatches(current: dict[str, CatalogEntry]) -> list[Mismatch]:
    """Each subscriber's declared payload schema against its publisher's: the payload flows publisher ->
    subscriber, judged by the response-direction rules (what the publisher sends must decode as the subscriber's
    copy). A subscription whose publisher does not (yet) declare the event is not judged."""
    declared = {name: declared_events(entry) for name, entry in current.items()}
    published = {(c.service, c.event, c.version): c for contracts in declared.values() for c in contracts
                 if c.role == "publisher"}  # fmt: skip
    found: list[Mismatch] = []
    for subscriber, contracts in declared.items():
        for handled in contracts:
            sent = published.get((handled.publisher, handled.event, handled.version))
            if handled.role != "subscriber" or sent is None:
                continue
            why = _payload_verdict(_schema_key(sent.payload_schema), _schema_key(handled.payload_schema))
            if why is not None:
                at = max(_stated_at(current[sent.service]), _stated_at(current[subscriber]))
                found.append(Mismatch(sent.service, subscriber, handled.event, handled.version, "response", why, at))
    return found


def _schema_key(schema: object) -> bytes:
    return orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)


@lru_cache(maxsize=VERDICTS)
def _payload_verdict(sent: bytes, accepted: bytes) -> str | None:
    """The first breaking path of a publisher's payload schema against a subscriber's (`payload.email: ...`)."""
    try:
        why = first_incompatibility(orjson.loads(sent), orjson.loads(accepted), direction="response")
    except _UNREADABLE:
        return None
    if why is not None and why.startswith("response"):
        why = "payload" + why[len("response"):]
    return why


def mismatched_topics(mismatches: Iterable[Mismatch]) -> set[tuple[str, str]]:
    return {(m.topic, m.version) for m in mismatches}


_UNREADABLE = (TypeError, AttributeError, ValueError, KeyError, IndexError, ArithmeticError, RecursionError)
"""What the rules raise on a schema that is not JSON Schema (`properties: 1`, `required: 5`, ...)."""


def _first_breaking(sent: TopicContract, handled: TopicContract) -> tuple[Direction, str] | None:
    return _verdict(_key(sent), _key(handled))


def _key(contract: TopicContract) -> bytes:
    return orjson.dumps([contract.request_schema, contract.response_schema], option=orjson.OPT_SORT_KEYS)


@lru_cache(maxsize=VERDICTS)
def _verdict(sent: bytes, handled: bytes) -> tuple[Direction, str] | None:
    """The first breaking (direction, path and why) between two contracts' `[request, response]` schemas."""
    (sent_request, sent_response), (handled_request, handled_response) = orjson.loads(sent), orjson.loads(handled)
    try:
        request = first_incompatibility(sent_request, handled_request, direction="request")
        if request is not None:
            return "request", request
        response = first_incompatibility(handled_response, sent_response, direction="response")
    except _UNREADABLE:
        return None
    return ("response", response) if response is not None else None


def _stated_at(entry: CatalogEntry) -> str:
    """RFC 3339 UTC text of the collector's one clock, so the greater text is the later time."""
    return max(entry.get("registeredAt", ""), entry.get("specFetchedAt", ""))
