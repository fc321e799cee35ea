"""`svcgen can-i-deploy`: a change judged against the live fleet, not against another document.

The collector holds the contract the service runs now (its newest registered descriptor), every registered
service's declared copies of topics (their `produces`) and per-version traffic. The change's descriptor (derived
from the manifest exactly as a build publishes it) is diffed against the running one by the contract diff's rules,
on the same JSON Schemas the mesh compares; each breaking finding is `blocked` when another registered service still
declares that (topic, version) or traffic used it within the window, `safe` otherwise. An event the service
publishes is judged the same way, its payload by the response-direction rules; it is `blocked` while a registered
service subscribes to it (deliveries are not counted). The change's own produces entries are checked against the
live owners' declared copies, and its subscriptions against the live publishers' payloads, as `svcgen compat`
checks manifests.

Traffic within the window is counted in the collector's per-minute time buckets (`windowMinutes` of the contract
query) when the window fits in them (24 h by default); a longer window falls back to the all-time counters and the
newest call's time, and the report says so.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal

import httpx
import orjson

from .contractdiff import Finding
from .runtime._compatibility import RULES_BY_ID, WireDirection, schema_change_values
from .runtime._descriptor import declared_entries
from .runtime._mesh.clock import parse_rfc3339
from .runtime._topics import DEFAULT_PREFIX, QUERY_CONTRACT_TOPIC

Verdict = Literal["blocked", "safe"]
Json = dict[str, Any]

_WINDOW = re.compile(r"(\d+)\s*([smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
BUCKET_MINUTES = 1440
"""The collector's time buckets span (its default `bucket_minutes`): a longer window is counted all-time."""


class CollectorUnavailable(Exception):
    """The collector cannot say (unreachable, refused the token, never heard of the service): one line."""


def parse_window(text: str) -> dt.timedelta:
    """`7d`, `24h`, `30m`, `90s`, `2w`; ValueError with the expected form otherwise."""
    match = _WINDOW.fullmatch(text.strip())
    if match is None or int(match.group(1)) == 0:
        raise ValueError(f"window {text!r}: expected a positive number and a unit (s, m, h, d, w), like 7d or 24h")
    return dt.timedelta(seconds=int(match.group(1)) * _UNITS[match.group(2)])


@dataclass(frozen=True)
class Usage:
    """Who declares a (topic, version) now and its traffic, from the collector's contract query."""

    declared_by: tuple[str, ...] = ()
    invocations: int = 0
    last_seen: str | None = None


@dataclass(frozen=True)
class Judged:
    finding: Finding
    verdict: Verdict
    usage: Usage
    recent: bool
    """Traffic within the window."""

    def document(self) -> Json:
        return {**self.finding.document(), "verdict": self.verdict, "declaredBy": list(self.usage.declared_by),
                "invocations": self.usage.invocations, "lastSeen": self.usage.last_seen}

    @property
    def fails(self) -> bool:
        return self.verdict == "blocked" and self.finding.accepted is None

    def line(self) -> str:
        """`verdict: path: rule: why; who uses it`; an accepted finding says so first and ends with `[fingerprint:
        reason]`, a blocked one with `[fingerprint]` (for an approvals file, as `svcgen diff` prints it)."""
        finding = self.finding
        label = self.verdict if finding.accepted is None else f"accepted {self.verdict}"
        text = f"{label}: {finding.path}: {finding.rule}: {finding.why}"
        if self.verdict == "safe":
            text += "; nobody declares it and no traffic in the window"
        else:
            reasons = []
            if self.usage.declared_by:
                reasons.append(f"declared by {', '.join(self.usage.declared_by)}")
            if self.recent:
                reasons.append(f"{self.usage.invocations} invocation{'s' if self.usage.invocations != 1 else ''}, "
                               f"last seen {self.usage.last_seen}")
            text += f"; {'; '.join(reasons)}"
        if finding.accepted is not None:
            return f"{text} [{finding.fingerprint}: {finding.accepted}]"
        return f"{text} [{finding.fingerprint}]" if self.verdict == "blocked" else text


@dataclass(frozen=True)
class PeerCheck:
    """One entry of the change that depends on another live service: a produces entry against the owners that
    handle its topic, a subscription against the publisher of its event."""

    relation: Literal["produces", "subscribes"]
    label: str
    """`topic@version` for produces, `publisher/event@version` for subscribes."""
    peers: tuple[str, ...]
    """The registered services on the other end: owners of the topic id, or the publisher when it publishes the
    event id; none: nothing to check against."""
    findings: tuple[Finding, ...] = ()

    @property
    def verdict(self) -> str:
        if not self.peers:
            return "unknown"
        return "blocked" if any(finding.level == "error" for finding in self.findings) else "compatible"

    def document(self) -> Json:
        head: Json = ({"topic": self.label, "owners": list(self.peers)} if self.relation == "produces" else
                      {"subscription": self.label, "publisher": self.peers[0] if self.peers else None})
        return {**head, "verdict": self.verdict, "findings": [finding.document() for finding in self.findings]}

    def lines(self) -> list[str]:
        if not self.peers:
            serves = "serves" if self.relation == "produces" else "publishes"
            return [f"warning: {self.relation} {self.label}: no registered service {serves} it; not checked"]
        label = "blocked" if self.verdict == "blocked" else "safe"
        head = f"{label}: {self.relation} {self.label} -> {', '.join(self.peers)}"
        if self.verdict == "compatible":
            return [f"{head}: compatible"]
        return [f"{head}: {finding.path}: {finding.rule}: {finding.why}" for finding in self.findings
                if finding.level == "error"]


@dataclass(frozen=True)
class DeployReport:
    service: str
    against: Json
    """`{serviceVersion?, registeredAt, descriptorHash?}` of the running contract."""
    window: str
    judged: tuple[Judged, ...] = ()
    produced: tuple[PeerCheck, ...] = field(default=())
    counted: Json | None = None
    """The collector's `window` (`{minutes, since, until}`) the invocation counts cover; None: they are all-time."""
    subscriptions: tuple[PeerCheck, ...] = ()

    @property
    def blocked(self) -> int:
        """Blocked findings and entries, the accepted findings apart."""
        return sum(1 for item in self.judged if item.fails) + sum(
            1 for check in (*self.produced, *self.subscriptions) if check.verdict == "blocked")

    @property
    def safe(self) -> int:
        return sum(1 for item in self.judged if item.verdict == "safe" and item.finding.accepted is None)

    @property
    def accepted(self) -> int:
        return sum(1 for item in self.judged if item.finding.accepted is not None)

    def accept(self, approvals: Mapping[str, str]) -> DeployReport:
        """The report with the findings whose fingerprint `approvals` lists (fingerprint → reason) accepted: they
        no longer block. The produces and subscription checks are not findings of this service's change and stay
        as they are (as `svcgen check --accept` leaves its compat with the owners)."""
        judged = tuple(
            replace(item, finding=replace(item.finding, accepted=approvals[item.finding.fingerprint]))
            if item.finding.fingerprint in approvals else item for item in self.judged
        )  # fmt: skip
        return replace(self, judged=judged)

    @property
    def breaking(self) -> bool:
        return self.blocked > 0

    def summary(self) -> str:
        verdict = "blocked: do not deploy" if self.breaking else "safe to deploy"
        # An entry no registered service serves (or publishes) was not checked: counted apart, as `compat` does.
        produced = sum(1 for check in self.produced if check.peers)
        subscribed = sum(1 for check in self.subscriptions if check.peers)
        unowned = len(self.produced) + len(self.subscriptions) - produced - subscribed
        skipped = f", {unowned} without an owner" if unowned else ""
        accepted = f", {self.accepted} accepted" if self.accepted else ""
        return (f"{self.blocked} blocked, {self.safe} safe breaking change{'s' if self.safe != 1 else ''}{accepted}, "
                f"{produced} produces entr{'y' if produced == 1 else 'ies'} and {subscribed} "
                f"subscription{'' if subscribed == 1 else 's'} checked{skipped}: {verdict}")

    def lines(self) -> list[str]:
        running = self.against.get("serviceVersion")
        version = f"serviceVersion {running}, " if running else ""
        head = (f"{self.service}: against the contract it runs now ({version}registered "
                f"{self.against.get('registeredAt') or 'at an unknown time'}), window {self.window}")
        if self.counted is not None:
            head += f"; invocations counted {self.counted.get('since')} to {self.counted.get('until')}"
        else:
            head += "; invocation counts are all-time (the window is longer than the collector's time buckets, 24 h)"
        lines = [head, *(item.line() for item in self.judged)]
        lines += [line for check in (*self.produced, *self.subscriptions) for line in check.lines()]
        return [*lines, self.summary()]

    def document(self) -> Json:
        return {
            "service": self.service,
            "against": self.against,
            "window": self.window,
            "findings": [item.document() for item in self.judged],
            "produces": [check.document() for check in self.produced],
            "invocationsCounted": self.counted if self.counted is not None else "all-time",
            "subscriptions": [check.document() for check in self.subscriptions],
            "summary": {"blocked": self.blocked, "safe": self.safe,
                        **({"accepted": self.accepted} if self.accepted else {}), "breaking": self.breaking},
        }


def window_minutes(window: dt.timedelta) -> int | None:
    """The minutes the contract query counts in its time buckets, None past their 24 h (counts are all-time)."""
    minutes = -(-int(window.total_seconds()) // 60)
    return minutes if minutes <= BUCKET_MINUTES else None


def judge(change: Json, answer: Json, *, window: dt.timedelta, window_text: str, now: dt.datetime) -> DeployReport:
    """The change's descriptor against the collector's contract answer (see collector/queries.py, contract);
    with the answer's `window`, traffic within the window is its `windowInvocations`."""
    running: Json = answer["descriptor"]
    service = str(change.get("service"))
    usage = {(item["topic"], item["version"]): item for item in answer.get("usage", ())}
    cutoff = (now - window).timestamp()
    counted = answer.get("window") if isinstance(answer.get("window"), dict) else None
    judged = []
    for finding in descriptor_findings(running, change):
        # A renamed service moves every topic's identity: whoever uses any of them is blocked.
        renamed = finding.rule == "service-renamed"
        keys = list(declared_entries(running, "topics")) if renamed else [_key_of(finding.path)]
        used = [usage[key] for key in keys if key in usage]
        declared = tuple(sorted({name for item in used for name in item.get("providers", ()) if name != service}))
        seen = [item["lastInvokedAt"] for item in used if parse_rfc3339(item.get("lastInvokedAt")) is not None]
        last = max(seen, key=lambda text: parse_rfc3339(text) or 0.0) if seen else None
        seen_at = parse_rfc3339(last)
        if counted is not None:
            invocations = sum(int(item.get("windowInvocations") or 0) for item in used)
            recent = invocations > 0
        else:
            recent = seen_at is not None and seen_at >= cutoff
            invocations = sum(int(item.get("invocations", 0)) for item in used)
        verdict: Verdict = "blocked" if declared or recent else "safe"
        judged.append(Judged(finding, verdict, Usage(declared, invocations, last), recent))
    events: list[Json] = [item for item in answer.get("events", ()) if isinstance(item, dict)]
    for finding in published_event_findings(running, change):
        key = _key_of(finding.path)
        subscribers = tuple(sorted({item["service"] for item in events if item.get("role") == "subscriber"
                                    and item.get("publisher") == service and (item.get("event"), item.get("version"))
                                    == key and item.get("service") != service}))  # fmt: skip
        judged.append(Judged(finding, "blocked" if subscribers else "safe", Usage(subscribers), False))
    against = {key: answer[key] for key in ("serviceVersion", "registeredAt") if answer.get(key)}
    if isinstance(running.get("descriptorHash"), str):
        against["descriptorHash"] = running["descriptorHash"]
    produced = produced_checks(change, answer.get("declared", ()), service)
    return DeployReport(service, against, window_text, tuple(judged), produced, counted,
                        subscription_checks(change, events))


def descriptor_findings(running: Json, change: Json) -> list[Finding]:
    """The error-level changes from the running descriptor's topics to the change's: removed (topic, version)s and
    breaking request and response changes, by the contract diff's rules."""
    findings = []
    if running.get("service") != change.get("service"):
        findings.append(_finding("service-renamed", "service", running.get("service"), change.get("service")))
    return findings + _entry_findings(declared_entries(running, "topics"), declared_entries(change, "topics"),
                                      _TOPIC_SCHEMAS)


def published_event_findings(running: Json, change: Json) -> list[Finding]:
    """The error-level changes from the events the running descriptor publishes to the change's: removed (event,
    version)s and breaking payload changes (the payload flows to subscribers as a response flows to callers)."""
    return _entry_findings(declared_entries(_events(running), "publishes"),
                           declared_entries(_events(change), "publishes"), _PAYLOAD_SCHEMA)


_TOPIC_SCHEMAS: Final = (("request", "requestSchema", "request"), ("response", "responseSchema", "response"))
"""(direction, descriptor key, path part) of a topic's declared schemas."""
_PAYLOAD_SCHEMA: Final = (("response", "payloadSchema", "payload"),)
"""An event's payload, read as a response (it flows to subscribers as a response flows to callers), at `.payload`."""


def _entry_findings(before: Mapping[tuple[str, str], Json], after: Mapping[tuple[str, str], Json],
                    schemas: Sequence[tuple[WireDirection, str, str]]) -> list[Finding]:
    """Per declared (id, version) of `before`: removed in `after`, or the breaking changes of its schemas."""
    findings = []
    for key, old in before.items():
        label = _label(key)
        new = after.get(key)
        if new is None:
            findings.append(_finding("topic-version-removed", label, label, None))
        else:
            findings += _breaking(label, old, new, schemas)
    return findings


def _breaking(label: str, old: Json, new: Json, schemas: Sequence[tuple[WireDirection, str, str]]) -> list[Finding]:
    """The error-level changes, by the contract diff's rules, from `old`'s declared schemas to `new`'s (`old` is
    what the other side was written against), each at `label.<part>...`."""
    findings = []
    for direction, key, part in schemas:
        for change in schema_change_values(old.get(key) or {}, new.get(key) or {}, direction=direction):
            if RULES_BY_ID[change.rule].level == "error":
                path = f"{label}.{part}{change.path[len(direction):]}"
                findings.append(_finding(change.rule, path, change.old, change.new))
    return findings


def subscription_checks(change: Json, declared: Sequence[Json]) -> tuple[PeerCheck, ...]:
    """Each subscription of the change against its publisher's live declaration of the event (the collector's
    `events`): the subscriber's copy of the payload is the old contract, the publisher's the new one."""
    listed = _events(change).get("subscribes")
    checks = []
    for entry in listed if isinstance(listed, list) else ():
        if not isinstance(entry, dict):
            continue
        event_id, version, publisher = entry.get("id"), entry.get("version") or "", entry.get("publisher")
        key = _label((str(event_id), str(version)))
        published = [item for item in declared if item.get("role") == "publisher"
                     and item.get("service") == publisher and item.get("event") == event_id]  # fmt: skip
        exact = [item for item in published if item.get("version") == version]
        findings: list[Finding] = []
        if published and not exact:
            findings.append(_finding("topic-version-removed", key, key, None))
        for item in exact:
            findings += _breaking(key, entry, item, _PAYLOAD_SCHEMA)
        checks.append(PeerCheck("subscribes", f"{publisher}/{key}", (str(publisher),) if published else (),
                                tuple(findings)))
    return tuple(checks)


def _events(descriptor: Json) -> Json:
    events = descriptor.get("events")
    return events if isinstance(events, dict) else {}


def produced_checks(change: Json, declared: Sequence[Json], service: str) -> tuple[PeerCheck, ...]:
    """Each produces entry of the change against the registered services that handle its topic."""
    checks = []
    for key, copy in declared_entries(change, "produces").items():
        label = _label(key)
        serving = [item for item in declared if item["role"] == "consumer" and item["topic"] == key[0]
                   and item["service"] != service]
        exact = [item for item in serving if item["version"] == key[1]]
        owners = tuple(sorted({item["service"] for item in serving}))
        findings: list[Finding] = []
        if serving and not exact:
            findings.append(_finding("topic-version-removed", label, label, None))
        for owner in exact:
            findings += _breaking(label, copy, owner, _TOPIC_SCHEMAS)
        checks.append(PeerCheck("produces", label, owners, tuple(findings)))
    return tuple(checks)


def fetch_contract(collector: str, service: str, topics: Sequence[str], *, events: Sequence[str] = (),
                   token: str | None = None, window_minutes: int | None = None,
                   transport: httpx.BaseTransport | None = None, timeout: float = 10.0) -> Json:
    """The collector's contract answer for `service` (asking the declared copies of `topics` and the declarations
    of `events`); CollectorUnavailable when it cannot say. A path in `collector` is the collector's prefix (`/svc`
    without one)."""
    parts = httpx.URL(collector)
    prefix = parts.path.rstrip("/") or DEFAULT_PREFIX
    url = parts.copy_with(path=f"{prefix}/invoke", query=None, fragment=None)
    asked: Json = {"service": service, "topics": list(topics)}
    if events:
        asked["events"] = list(events)
    if window_minutes is not None:
        asked["windowMinutes"] = window_minutes
    envelope = {"topic": QUERY_CONTRACT_TOPIC, "body": orjson.dumps(asked).decode()}
    headers = {"authorization": f"Bearer {token}"} if token else {}
    try:
        with httpx.Client(transport=transport, timeout=timeout) as client:
            response = client.post(url, content=orjson.dumps(envelope),
                                   headers={"content-type": "application/json", **headers})
    except httpx.HTTPError as error:
        raise CollectorUnavailable(f"collector {collector} unreachable: {error or type(error).__name__}") from None
    if response.status_code == 401:
        why = "the token given is not its token" if token else "it is locked; give its token"
        raise CollectorUnavailable(f"collector {collector} refused the request: {why} "
                                   "(--token-file FILE or SVCGEN_COLLECTOR_TOKEN)")
    try:
        reply: Any = response.json()
        body = orjson.loads(reply["body"]) if reply.get("body") else None
        status = reply["statusCode"]  # any JSON without one (an app's own 404 under a wrong prefix) is no envelope
    except (ValueError, KeyError, TypeError, AttributeError):
        raise CollectorUnavailable(f"collector {collector} answered HTTP {response.status_code} with something "
                                   "that is not an envelope; is the URL a svcgen collector?") from None
    if status == "not-found" and isinstance(body, Mapping) and f"of service {service} " in str(body.get("detail")):
        raise CollectorUnavailable(f"collector {collector} has never heard of service {service} (no descriptor "
                                   "registered); it cannot say who uses it")
    if not reply.get("isSuccessful") or not isinstance(body, dict):
        detail = body.get("detail") if isinstance(body, Mapping) else None
        raise CollectorUnavailable(f"collector {collector} answered {status}: {detail or 'no detail'}"
                                   + ("; it may predate can-i-deploy" if status == "not-found" else ""))
    return body


def _label(key: tuple[str, str]) -> str:
    return f"{key[0]}@{key[1]}" if key[1] else key[0]


def _key_of(path: str) -> tuple[str, str]:
    """(topic or event, version) of a finding path (`orders:place@v1.request.x`, `orders:get`,
    `orders:placed@v1.payload.x`)."""
    head = re.split(r"\.(?:request|response|payload)(?:\.|\[|\{|$)", path, maxsplit=1)[0]
    topic_id, _, version = head.partition("@")
    return topic_id, version


def _finding(rule_id: str, path: str, old: Any, new: Any) -> Finding:
    rule = RULES_BY_ID[rule_id]
    return Finding(rule.id, rule.level, rule.direction, path, old, new, rule.why)

