"""`events:` and `subscribes:`: what a service publishes and what it handles (DESIGN §10, docs/events.md).

The semantic checks run inside the manifest's one semantic pass (`check_events`, called by semantics.py with its
checker), and `build_events` makes the model's part. A subscription with `from:` takes the payload type (and every
record and enum it reaches) from the publisher's manifest, loaded and validated like any other.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..runtime._durations import parse_duration
from ..runtime._eventnames import durable_name, event_subject, stream_name
from ..runtime._naming import slug
from .composition import TypeSpace, qualified
from .model import DeliveryDef, EnumDef, EventDef, Manifest, RecordDef, SubscriptionDef
from .owner import OwnerError, chosen_version, load_owner, owner_model, reached_types, relocated
from .spelling import suggestion
from .typeexpr import parse_type

if TYPE_CHECKING:
    from .loader import JsonPath
    from .semantics import _Checker
    from .sources import Sources

DEFAULT_DELIVERY = DeliveryDef()
MAX_DELIVER = 1000


@dataclass(frozen=True)
class PublishedEvent:
    """An event of a publisher's manifest, with the types its payload reaches."""

    publisher: str
    event: EventDef
    records: tuple[RecordDef, ...]
    enums: tuple[EnumDef, ...]
    where: str
    """The publisher's manifest as loaded, for messages."""
    manifest: Manifest
    """The publisher's whole model: the namespace its types are reached under."""


def published_event(
    sources: Sources, base_dir: Path, relative: str, event_id: str, version: str | None
) -> PublishedEvent:
    """The event `event_id` (at `version`; None: its only version) the manifest at `relative` publishes; raises
    OwnerError keyed to the entry key it is about."""
    target, loaded = load_owner(sources, base_dir, relative, "publisher")
    owner = loaded.manifest
    event = _event(owner, relative, event_id, version)
    records, enums = reached_types(owner, sorted(event.payload.records()))
    return PublishedEvent(
        owner.service, event, *relocated(relative, records, enums), target.as_posix(), owner_model(owner, relative)
    )


def _event(owner: Manifest, relative: str, event_id: str, version: str | None) -> EventDef:
    return chosen_version(owner.events, event_id, version, f"publisher {owner.service} ({relative})", "publishes",
                          "event")


def delivery_def(spec: dict[str, Any] | None) -> DeliveryDef:
    """The delivery settings of a subscription that passed the checks (defaults where absent)."""
    spec = spec or {}
    return DeliveryDef(
        max_deliver=int(spec.get("maxDeliver", DEFAULT_DELIVERY.max_deliver)),
        backoff=tuple(parse_duration(step) for step in spec["backoff"]) if "backoff" in spec
        else DEFAULT_DELIVERY.backoff,
        ack_wait=parse_duration(spec["ackWait"]) if "ackWait" in spec else DEFAULT_DELIVERY.ack_wait,
    )


def subscribed_events(data: dict[str, Any], base_dir: Path, sources: Sources) -> dict[int, PublishedEvent]:
    """The `subscribes:` entries with `from:` (by index), with the publisher's event they take."""
    return {
        index: published_event(sources, base_dir, entry["from"], entry["id"], entry.get("version"))
        for index, entry in enumerate(data.get("subscribes", ()))
        if "from" in entry
    }


def publisher_namespace(taken: PublishedEvent, aliases: dict[str, str]) -> str:
    """The namespace a subscription's publisher's types are reached under: its `imports:` alias, else its name."""
    return aliases.get(taken.where, taken.publisher.replace("-", "_"))


def build_events(
    data: dict[str, Any], space: TypeSpace, taken: dict[int, PublishedEvent], aliases: dict[str, str]
) -> tuple[tuple[EventDef, ...], tuple[SubscriptionDef, ...]]:
    """(events, subscriptions), their payloads resolved into the model's concrete types by `space` (a publisher's
    types under its namespace)."""
    events = tuple(
        EventDef(
            entry["id"], entry.get("version", ""),
            space.resolve(parse_type(entry["payload"]), entry.get("version", "")),
            entry.get("key"), entry.get("summary"),
        )
        for entry in data.get("events", ())
    )
    subscriptions: list[SubscriptionDef] = []
    for index, entry in enumerate(data.get("subscribes", ())):
        delivery = delivery_def(entry.get("delivery"))
        if index not in taken:
            payload = space.resolve(parse_type(entry["payload"]), entry.get("version", ""))
            subscriptions.append(
                SubscriptionDef(entry["id"], entry.get("version", ""), entry["publisher"], payload, delivery,
                                entry.get("summary"))
            )
            continue
        published = taken[index]
        payload = space.resolve(qualified(published.event.payload, publisher_namespace(published, aliases)), None)
        subscriptions.append(SubscriptionDef(published.event.id, published.event.version, published.publisher,
                                             payload, delivery,
                                             entry.get("summary", published.event.summary), entry["from"]))  # fmt: skip
    return events, tuple(subscriptions)


def check_events(checker: _Checker) -> None:
    """Every problem of `events:` and `subscribes:`, reported through the semantic pass's `checker`."""
    _check_published(checker)
    _check_subscribed(checker)


def _check_published(checker: _Checker) -> None:
    entries = checker.read(checker.data, (), "events", list, []) or []
    seen: dict[tuple[str, str], int] = {}
    wire: dict[str, tuple[str, int]] = {}
    service = checker.data.get("service")
    for index, entry in enumerate(entries):
        path: JsonPath = ("events", index)
        payload = checker.parse(checker.read(entry, path, "payload", str), (*path, "payload"))
        checker.parsed[(*path, "payload")] = payload
        if _check_id(checker, path, entry, seen, "event") and isinstance(service, str):
            event_id, version = entry["id"], entry.get("version", "")
            _check_wire(checker, path, _label(event_id, version), wire,
                        [f"the subject {event_subject(service, event_id, version)}"])  # fmt: skip
        key = checker.read(entry, path, "key", str)
        if key is None or payload is None:
            continue
        if payload.kind == "record" and "." in payload.name:
            continue  # an imported record: its owner's manifest is where its fields are checked
        record = checker.records.get(payload.name) if payload.kind == "record" and not payload.is_nullable else None
        if record is None:
            checker.error(checker.doc.at((*path, "key")),
                          f"key {key!r} needs a record payload, but the payload is {payload}; remove 'key' or make "
                          "the payload a record")  # fmt: skip
        elif record.names_known and key not in record.fields:
            hint = suggestion(key, list(record.fields)) or f"; its fields are {', '.join(record.fields) or 'none'}"
            checker.error(checker.doc.at((*path, "key")),
                          f"key {key!r} is not a field of the payload {payload.name}{hint}")  # fmt: skip


def _check_subscribed(checker: _Checker) -> None:
    entries = checker.read(checker.data, (), "subscribes", list, []) or []
    seen: dict[tuple[str, str], int] = {}
    wire: dict[str, tuple[str, int]] = {}
    service = checker.data.get("service")
    subscriber = service if isinstance(service, str) else ""
    for index, entry in enumerate(entries):
        path: JsonPath = ("subscribes", index)
        if not isinstance(entry, dict):
            continue
        _check_delivery(checker, path, entry.get("delivery"))
        has_from, has_payload = "from" in entry, "payload" in entry
        if has_from and (has_payload or "publisher" in entry):
            extra = "payload" if has_payload else "publisher"
            checker.error(checker.doc.key_at((*path, extra)),
                          f"a subscription with 'from' takes its {extra} from the publisher's manifest; remove "
                          f"{extra!r}, or 'from' to declare it here")  # fmt: skip
        if not has_from:
            if not has_payload:
                checker.error(checker.doc.key_at(path),
                              "a subscription needs 'from: <the publisher's manifest>' or 'payload: <type>' with "
                              "'publisher: <service>'")  # fmt: skip
            elif "publisher" not in entry:
                checker.error(checker.doc.key_at(path),
                              "a subscription with 'payload' names its publisher: add 'publisher: <service>' (its "
                              "stream and subjects are named after it), or take everything with 'from'")  # fmt: skip
            payload = checker.parse(checker.read(entry, path, "payload", str), (*path, "payload"))
            checker.parsed[(*path, "payload")] = payload
            publisher = entry.get("publisher")
            if _check_id(checker, path, entry, seen, "subscription") and isinstance(publisher, str):
                _check_subscription_wire(checker, path, wire, subscriber, publisher, entry["id"],
                                         entry.get("version", ""))  # fmt: skip
            continue
        relative, event_id = checker.read(entry, path, "from", str), checker.read(entry, path, "id", str)
        version = checker.read(entry, path, "version", str)
        if relative is None or event_id is None:
            checker.uses_known, checker.owner_unread = False, True
            continue
        try:
            published = published_event(checker.sources, checker.base_dir, relative, event_id, version)
        except OwnerError as error:
            checker.uses_known, checker.owner_unread = False, True
            checker.error(checker.doc.at((*path, error.key)), str(error))
            continue
        namespace = checker.take_namespace(path, published.publisher, published.where, published.manifest)
        checker.parsed[(*path, "payload")] = qualified(published.event.payload, namespace or published.publisher)
        if _check_id(checker, path, {**entry, "version": published.event.version}, seen, "subscription"):
            _check_subscription_wire(checker, path, wire, subscriber, published.publisher, published.event.id,
                                     published.event.version)  # fmt: skip


def _label(event_id: str, version: str) -> str:
    return f"{event_id!r} version {version!r}" if version else f"{event_id!r}"


def _check_subscription_wire(checker: _Checker, path: JsonPath, wire: dict[str, tuple[str, int]], subscriber: str,
                             publisher: str, event_id: str, version: str) -> None:  # fmt: skip
    consumer = durable_name(subscriber, event_id, version)
    _check_wire(checker, path, _label(event_id, version), wire,
                [f"the subject {event_subject(publisher, event_id, version)}",
                 f"the durable consumer {consumer} on {stream_name(publisher)}"])  # fmt: skip


def _check_wire(checker: _Checker, path: JsonPath, label: str, taken: dict[str, tuple[str, int]],
                names: list[str]) -> None:  # fmt: skip
    """Ids and versions that differ only in punctuation (`a:b`, `a.b`) would share a subject or a durable consumer,
    and each would get the other's messages: an error, not a mix-up on the wire."""
    position = checker.doc.at((*path, "id"))
    for name in names:
        if name in taken:
            other, line = taken[name]
            checker.error(position, f"{label} would share {name} with {other} at line {line} (ids and versions "
                                    "that differ only in punctuation do); rename one of them")  # fmt: skip
            return
    for name in names:
        taken[name] = (label, position.line)


def _check_id(checker: _Checker, path: JsonPath, entry: Any, seen: dict[tuple[str, str], int], what: str) -> bool:
    """Reports a bad or repeated (id, version); True when it is new and well formed."""
    event_id = checker.read(entry, path, "id", str)
    version = checker.read(entry, path, "version", str, "")
    if event_id is None or version is None:
        return False
    position = checker.doc.at((*path, "id"))
    well_formed = bool(slug(event_id)) and (not version or bool(slug(version)))
    if not slug(event_id):
        checker.error(position, f"event id {event_id!r} needs at least one ASCII letter or digit, like orders:placed")
    if version and not slug(version):
        message = f"version {version!r} needs at least one ASCII letter or digit"
        checker.error(checker.doc.at((*path, "version")), message)
    key = (event_id, version)
    if key in seen:
        label = f"{event_id!r} version {version!r}" if version else f"{event_id!r} without a version"
        checker.error(position, f"{what} {label} is already declared at line {seen[key]}; each (id, version) once")
        return False
    seen[key] = position.line
    return well_formed


def _check_delivery(checker: _Checker, path: JsonPath, spec: Any) -> None:
    if not isinstance(spec, dict):
        return
    where: JsonPath = (*path, "delivery")
    attempts = spec.get("maxDeliver")
    if isinstance(attempts, int) and attempts > MAX_DELIVER:
        checker.error(checker.doc.at((*where, "maxDeliver")),
                      f"maxDeliver {attempts} is more than {MAX_DELIVER} attempts; a message that fails that often "
                      "belongs in the dead-letter stream sooner")  # fmt: skip
    steps = spec.get("backoff")
    if isinstance(steps, list):
        for number, step in enumerate(steps):
            if isinstance(step, str):
                _check_duration(checker, (*where, "backoff", number), step, "backoff step")
    wait = spec.get("ackWait")
    if isinstance(wait, str):
        _check_duration(checker, (*where, "ackWait"), wait, "ackWait")


def _check_duration(checker: _Checker, path: JsonPath, text: str, what: str) -> None:
    try:
        parse_duration(text)
    except ValueError as error:
        checker.error(checker.doc.at(path), f"{what} {error}")
