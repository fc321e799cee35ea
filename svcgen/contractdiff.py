"""The contract diff: every change between two manifests, classified by who it can break.

A type is judged by the direction it travels in. Request types must still accept what old callers send
(tightening is an error, loosening is info); response types must still decode in old callers (a removed or
newly nullable property is an error, an added one is info). A type used in both directions gets both rule
sets, because the walk starts from each (topic, version)'s request and response.

The rules are declared once, as data (`RULES`): the docs' rule table is generated from them.
"""

from __future__ import annotations

import datetime as dt
import difflib
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .manifest.model import EnumDef, FieldDef, Manifest, RecordDef, Requirement, Requirements, RouteDef, TopicDef
from .manifest.typeexpr import TypeExpr

# The rules live in the runtime (the mesh judges live contracts by them too); they stay this module's names.
from .runtime._compatibility import LEVELS, RULES_BY_ID, Direction, constraint_change
from .runtime._compatibility import RULES as RULES
from .runtime._compatibility import Level as Level
from .runtime._compatibility import Rule as Rule
from .runtime._jsontext import HASH_PREFIX, document_hash
from .runtime._meta import CONSTRAINT_KEYWORDS

GATE_RULE = "topic-version-not-bumped"


@dataclass(frozen=True)
class Finding:
    rule: str
    level: Level
    direction: Direction
    path: str
    """`orders:place@v1.request.items[].quantity`: `[]` is an item, `{}` a map value."""
    old: Any
    new: Any
    why: str
    fix: str | None = None
    accepted: str | None = None
    """The approvals file's reason when it accepts this finding (it then never fails the gate)."""
    revisions: tuple[str, ...] = ()
    """The revisions the finding breaks (an error) or appears against (`check --against` with several revisions or a
    tag glob)."""

    @property
    def fingerprint(self) -> str:
        """Stable over unrelated edits: the hash of (rule, path, old, new), 16 hex digits; of (rule, path) under a
        `typed` rule, whose old and new are type texts a live descriptor's JSON Schema does not carry, so that
        `svcgen can-i-deploy` gives the same change the same fingerprint as `svcgen diff`."""
        rule = RULES_BY_ID.get(self.rule)
        values = [] if rule is not None and rule.typed else [self.old, self.new]
        return document_hash([self.rule, self.path, *values])[len(HASH_PREFIX):][:16]

    @property
    def fails(self) -> bool:
        return self.level == "error" and self.accepted is None

    def document(self) -> dict[str, Any]:
        """The JSON form (key order is part of the format)."""
        document = {"rule": self.rule, "level": self.level, "direction": self.direction, "path": self.path,
                    "old": self.old, "new": self.new, "why": self.why, "fix": self.fix,
                    "fingerprint": self.fingerprint, "accepted": self.accepted is not None}
        if self.accepted is not None:
            document["reason"] = self.accepted
        if self.revisions:
            document["revisions"] = list(self.revisions)
        return document

    def line(self, between: str = "", fingerprint: bool = False) -> str:
        """`level: path: rule (old → new): why; fix: ...`, with `between` (`orders -> payments: `) before the path;
        an accepted finding says so first; `[fingerprint]` (for an approvals file) follows an error with
        `fingerprint`, and the revisions it breaks (an error) or appears against (the others) come last."""
        change = "" if self.old is None and self.new is None else f" ({_show(self.old)} → {_show(self.new)})"
        label = self.level if self.accepted is None else f"accepted {self.level}"
        text = f"{label}: {between}{self.path}: {self.rule}{change}: {self.why}"
        text = text if self.fix is None else f"{text}; fix: {self.fix}"
        if self.accepted is not None:
            text += f" [{self.fingerprint}: {self.accepted}]"
        elif fingerprint and self.level == "error":
            text += f" [{self.fingerprint}]"
        if not self.revisions:
            return text
        # Only an error breaks a revision's callers; an info or a warning merely shows up against it.
        verb = "breaks" if self.level == "error" else "appears against"
        return f"{text} ({verb} {', '.join(self.revisions)})"


@dataclass(frozen=True)
class DiffReport:
    findings: tuple[Finding, ...] = ()

    def count(self, level: Level) -> int:
        """Findings of the level, the accepted ones apart."""
        return sum(1 for finding in self.findings if finding.level == level and finding.accepted is None)

    @property
    def accepted(self) -> int:
        return sum(1 for finding in self.findings if finding.accepted is not None)

    @property
    def breaking(self) -> bool:
        return any(finding.fails for finding in self.findings)

    def summary(self) -> str:
        if not self.findings:
            return "no contract changes"
        counts = _counts(self.count) + (f", {self.accepted} accepted" if self.accepted else "")
        verdict = "breaking" if self.breaking else "compatible"
        return f"{len(self.findings)} contract change{'s' if len(self.findings) != 1 else ''}: {counts}; {verdict}"

    def lines(self) -> list[str]:
        return [finding.line(fingerprint=True) for finding in self.findings] + [self.summary()]

    def document(self) -> dict[str, Any]:
        counts = {level: self.count(level) for level in LEVELS}
        return {
            "findings": [finding.document() for finding in self.findings],
            "summary": {**counts, **({"accepted": self.accepted} if self.accepted else {}), "breaking": self.breaking},
        }

    def accept(self, approvals: Mapping[str, str]) -> DiffReport:
        """The report with the findings whose fingerprint `approvals` lists (fingerprint → reason) accepted."""
        return DiffReport(tuple(
            replace(finding, accepted=approvals[finding.fingerprint]) if finding.fingerprint in approvals else finding
            for finding in self.findings
        ))


class ApprovalsError(ValueError):
    """An approvals file that is not a list of {fingerprint, reason} (the message is one line)."""


def parse_approvals(data: Any) -> dict[str, str]:
    """An approvals file's content, a list of `{fingerprint, reason}`, as fingerprint → reason; ApprovalsError
    names the first entry that is not one."""
    if data is None:
        return {}
    if not isinstance(data, list):
        raise ApprovalsError("expected a list of {fingerprint, reason} entries")
    approvals: dict[str, str] = {}
    for index, entry in enumerate(data, 1):
        if not isinstance(entry, Mapping) or set(entry) != {"fingerprint", "reason"}:
            raise ApprovalsError(f"entry {index}: expected exactly the keys fingerprint and reason")
        fingerprint, reason = entry["fingerprint"], entry["reason"]
        if not isinstance(fingerprint, str) or not re.fullmatch(r"[0-9a-f]{16}", fingerprint):
            raise ApprovalsError(f"entry {index}: fingerprint {fingerprint!r} is not 16 hex digits")
        if not isinstance(reason, str) or not reason.strip():
            raise ApprovalsError(f"entry {index} ({fingerprint}): the reason must say why the change is accepted")
        approvals[fingerprint] = reason.strip()
    return approvals


def across_revisions(reports: Sequence[tuple[str, DiffReport]]) -> DiffReport:
    """One report from the diffs against several revisions (revision, its report): each finding once, naming every
    revision it breaks (error level) or appears against (the others), in the order given."""
    merged: dict[tuple[str, str, str], Finding] = {}
    for revision, report in reports:
        for finding in report.findings:
            key = (finding.fingerprint, finding.rule, finding.path)
            seen = merged.get(key)
            merged[key] = replace(finding, revisions=(*(seen.revisions if seen else ()), revision))
    return DiffReport(tuple(sorted(merged.values(), key=lambda finding: (finding.path, finding.rule))))


class LevelsError(ValueError):
    """A levels mapping that names an unknown rule or level (the message is one line)."""


def parse_levels(data: Any) -> dict[str, Level]:
    """A levels file's content (rule id → level), checked; LevelsError names the first problem."""
    if not isinstance(data, Mapping):
        raise LevelsError("expected a mapping of rule id to level, like {request-property-removed: error}")
    levels: dict[str, Level] = {}
    for rule_id, level in data.items():
        if rule_id not in RULES_BY_ID:
            close = difflib.get_close_matches(str(rule_id), RULES_BY_ID, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else "; the rules are listed in docs/contract-diff.md"
            raise LevelsError(f"unknown rule id {rule_id!r}{hint}")
        if level not in LEVELS:
            raise LevelsError(f"rule {rule_id}: level {level!r} is not one of {', '.join(LEVELS)}")
        levels[rule_id] = level
    return levels


def diff_manifests(old: Manifest, new: Manifest, levels: Mapping[str, Level] | None = None,
                   today: dt.date | None = None) -> DiffReport:
    """Every contract change from `old` to `new`, levels overridden by `levels` (rule id → level), plus the
    `topic-version-not-bumped` gate over the error-level ones, sorted by path then rule. `today` (default: the
    UTC date) decides whether a removed topic version's sunset has passed."""
    overrides = levels or {}

    def leveled(finding: Finding) -> Finding:
        return replace(finding, level=overrides[finding.rule]) if finding.rule in overrides else finding

    when = today or dt.datetime.now(dt.UTC).date()
    old, new = with_events(old), with_events(new)
    events = {topic_key(topic) for topic in (*old.topics, *new.topics) if topic.routes == _EVENT_MARK}
    scoped = [(topic, _as_event(leveled(finding), events))
              for topic, finding in _Differ(old, new, today=when).findings()]  # fmt: skip
    found = [finding for _, finding in scoped]
    gate = [leveled(finding) for finding in _gate(old, new, scoped)]  # naming the paths as the findings do
    ordered = sorted([*found, *gate], key=lambda f: (f.path, f.rule))
    return DiffReport(tuple(ordered))


_EVENT_MARK: tuple[RouteDef, ...] = (RouteDef("EVENT", "/"),)
"""Marks the topic an event stands in for while diffing (never rendered: routes are not diffed for it)."""
_NO_PAYLOAD = TypeExpr("scalar", "any")


def _event_topic(event_id: str, version: str, payload: TypeExpr, summary: str | None) -> TopicDef:
    """An event as the diff walks it: a topic whose response is the payload, since the payload flows from its
    publisher to its subscribers as a response flows from an owner to its callers (the response-direction rules)."""
    return TopicDef(event_id, version, _NO_PAYLOAD, payload, summary, _EVENT_MARK)


def with_events(manifest: Manifest) -> Manifest:
    """`manifest` with each published event among its topics (as `_event_topic`), unless a topic has its key."""
    taken = {(topic.id, topic.version) for topic in manifest.topics}
    events = tuple(_event_topic(event.id, event.version, event.payload, event.summary) for event in manifest.events
                   if (event.id, event.version) not in taken)  # fmt: skip
    return replace(manifest, topics=manifest.topics + events) if events else manifest


def _as_event(finding: Finding, events: set[str]) -> Finding:
    """An event's finding in its own words: its payload, not a response."""
    key, dot, rest = finding.path.partition(".")
    if key not in events:
        return finding
    if dot and rest.startswith("response"):
        return replace(finding, path=f"{key}.payload{rest[len('response'):]}")
    return finding


@dataclass(frozen=True)
class CompatFinding:
    """A diff finding between a producer's copy of a topic (the old contract its client was written against) and
    the owner's topic (the new one)."""

    producer: str
    owner: str
    finding: Finding

    def document(self) -> dict[str, Any]:
        return {"producer": self.producer, "owner": self.owner, **self.finding.document()}

    def line(self) -> str:
        return self.finding.line(f"{self.producer} -> {self.owner}: ")


@dataclass(frozen=True)
class Unmatched:
    """A produces entry whose topic no given manifest serves: not checked, not a failure."""

    producer: str
    topic: str

    def line(self) -> str:
        return f"warning: {self.producer} -> ?: {self.topic}: no owner among the given manifests; not checked"


@dataclass(frozen=True)
class CompatReport:
    findings: tuple[CompatFinding, ...] = ()
    unmatched: tuple[Unmatched, ...] = ()
    checked: int = 0
    """Produces entries checked against an owner."""
    subscriptions: int = 0
    """Subscriptions checked against their publisher's event."""

    def count(self, level: Level) -> int:
        return sum(1 for item in self.findings if item.finding.level == level)

    @property
    def breaking(self) -> bool:
        return self.count("error") > 0

    def summary(self) -> str:
        pairs = f"{self.checked} produces entr{'y' if self.checked == 1 else 'ies'} checked"
        if self.subscriptions:
            pairs += f", {self.subscriptions} subscription{'s' if self.subscriptions != 1 else ''} checked"
        skipped = f", {len(self.unmatched)} without an owner" if self.unmatched else ""
        counts = _counts(self.count)
        return f"{pairs}{skipped}: {counts}; {'incompatible' if self.breaking else 'compatible'}"

    def lines(self) -> list[str]:
        return [item.line() for item in self.unmatched] + [item.line() for item in self.findings] + [self.summary()]

    def document(self) -> dict[str, Any]:
        return {
            "findings": [item.document() for item in self.findings],
            "unmatched": [{"producer": item.producer, "topic": item.topic} for item in self.unmatched],
            "summary": {
                "checked": self.checked,
                **{level: self.count(level) for level in LEVELS},
                "breaking": self.breaking,
            },
        }


_COMPAT_DIRECTIONS = ("request", "response")


def compat_manifests(manifests: Sequence[Manifest], levels: Mapping[str, Level] | None = None) -> CompatReport:
    """Every produces entry of each manifest against each manifest that serves its (topic, version), by the diff's
    rules: the producer's copy is the old contract and the owner's topic the new one, so what the producer sends
    must be accepted and what the owner answers must decode. Statuses, routes and annotations are the owner's
    own and not compared. A topic an owner serves under other versions only is `topic-version-removed`."""
    overrides = levels or {}
    findings: list[CompatFinding] = []
    unmatched: list[Unmatched] = []
    checked = 0
    for producer in manifests:
        for produced in producer.produces:
            key = topic_key(produced)
            owners = [
                (owner, topic) for owner in manifests for topic in owner.topics
                if topic.id == produced.id and topic.version == produced.version
            ]
            serving_id = [owner for owner in manifests if any(t.id == produced.id for t in owner.topics)]
            if not owners and not serving_id:
                unmatched.append(Unmatched(producer.service, key))
                continue
            checked += 1
            found = [] if owners else [
                (owner.service, _finding("topic-version-removed", key, key, None)) for owner in serving_id
            ]
            for owner, topic in owners:
                copy = replace(producer, topics=(produced,), produces=())
                served = replace(owner, topics=(topic,), produces=())
                found += [
                    (owner.service, finding) for _, finding in _Differ(copy, served).findings()
                    if finding.direction in _COMPAT_DIRECTIONS and "-status-" not in finding.rule
                ]
            findings += [
                CompatFinding(producer.service, owner_name,
                              replace(finding, level=overrides[finding.rule]) if finding.rule in overrides else finding)
                for owner_name, finding in found
            ]
    # A subscription against its publisher's event: the subscriber's copy (or `from:` snapshot) is the old contract.
    subscriptions_checked = 0
    for subscriber in manifests:
        for entry in subscriber.subscribes:
            key = f"{entry.id}@{entry.version}" if entry.version else entry.id
            publishers = [manifest for manifest in manifests if manifest.service == entry.publisher]
            events = [(publisher, event) for publisher in publishers for event in publisher.events
                      if event.id == entry.id and event.version == entry.version]  # fmt: skip
            if not events:
                if publishers and any(event.id == entry.id for event in publishers[0].events):
                    subscriptions_checked += 1
                    missing = _finding("topic-version-removed", key, key, None)
                    findings.append(CompatFinding(subscriber.service, entry.publisher, missing))
                else:
                    unmatched.append(Unmatched(subscriber.service, key))
                continue
            subscriptions_checked += 1
            for publisher, event in events:
                copy = replace(subscriber, topics=(_event_topic(entry.id, entry.version, entry.payload, None),),
                               produces=(), events=())  # fmt: skip
                served = replace(publisher, topics=(_event_topic(event.id, event.version, event.payload, None),),
                                 produces=(), events=())  # fmt: skip
                for _, finding in _Differ(copy, served).findings():
                    if finding.direction == "response":
                        finding = _as_event(finding, {key})
                        if finding.rule in overrides:
                            finding = replace(finding, level=overrides[finding.rule])
                        findings.append(CompatFinding(subscriber.service, publisher.service, finding))
    ordered = sorted(findings, key=lambda item: (item.producer, item.owner, item.finding.path, item.finding.rule))
    return CompatReport(tuple(ordered), tuple(unmatched), checked, subscriptions_checked)


def _counts(count: Callable[[Level], int]) -> str:
    """`1 error, 0 warnings, 2 infos`."""
    return ", ".join(f"{count(level)} {level}{'s' if count(level) != 1 else ''}" for level in LEVELS)


def rule_table() -> str:
    """The Markdown rule table of docs/contract-diff.md."""
    rows = ["| id | direction | level | example | why |", "|---|---|---|---|---|"]
    rows += [f"| `{rule.id}` | {rule.direction} | {rule.level} | {rule.example} | {rule.why} |" for rule in RULES]
    return "\n".join(rows) + "\n"


def topic_key(topic: TopicDef) -> str:
    return f"{topic.id}@{topic.version}" if topic.version else topic.id


def _finding(rule_id: str, path: str, old: Any, new: Any, why: str | None = None, fix: str | None = None) -> Finding:
    rule = RULES_BY_ID[rule_id]
    return Finding(rule.id, rule.level, rule.direction, path, old, new, why or rule.why, fix)


def _gate(old: Manifest, new: Manifest, scoped: list[tuple[TopicDef | None, Finding]]) -> Iterator[Finding]:
    """One `topic-version-not-bumped` per (topic, version) in both manifests with an error-level change
    (`scoped`: each finding with the topic version it was found inside, if any)."""
    breaking_paths: dict[int, set[str]] = {}  # by id() of the topic version: one pass, not one per topic
    for scope, finding in scoped:
        if scope is not None and finding.level == "error" and finding.direction in ("request", "response", "route"):
            breaking_paths.setdefault(id(scope), set()).add(finding.path)
    for topic in old.topics:
        key = topic_key(topic)
        breaking = sorted(breaking_paths.get(id(topic), ()))
        if breaking:
            versions = {other.version for other in (*old.topics, *new.topics) if other.id == topic.id}
            fix = (f"add {topic.id} version {_next_version(topic.version, versions)} with the new contract and keep "
                   f"{'version ' + topic.version if topic.version else 'the unversioned one'} as it was")
            why = f"breaking change{'s' if len(breaking) > 1 else ''} inside a published version: {', '.join(breaking)}"
            yield _finding(GATE_RULE, key, None, None, why, fix)


def _served_routes(manifest: Manifest, topic: TopicDef) -> list[str]:
    """The routes that reach the topic version: its own, and a `{version}` route on any entry of the same topic,
    which serves each of its versions (`versions: [v1, v2]` declares the routes on the newest one)."""
    routes = [str(route) for route in topic.routes]
    if not topic.version:
        return routes  # {version} selects a version; the unversioned topic has none to select
    for other in manifest.topics:
        if other.id == topic.id and other is not topic:
            routes += [str(route) for route in other.routes
                       if "{version}" in route.path.split("/") and str(route) not in routes]
    return routes


def _lifecycle(topic: TopicDef) -> dict[str, str] | None:
    """The topic version's `deprecated` as the manifest writes it (only the dates and successor given)."""
    if topic.deprecated is None:
        return None
    return {key: value for key, value in vars(topic.deprecated).items() if value is not None}


def _sunset_passed(topic: TopicDef, today: dt.date | None) -> bool:
    sunset = topic.deprecated.sunset if topic.deprecated is not None else None
    return sunset is not None and today is not None and dt.date.fromisoformat(sunset) <= today


def _next_version(version: str, taken: set[str]) -> str:
    match = re.fullmatch(r"(\D*)(\d+)", version)
    prefix, number = (match.group(1), int(match.group(2))) if match else ("v", 1)
    candidate = f"{prefix}{number + 1}"
    while candidate in taken:
        number += 1
        candidate = f"{prefix}{number + 1}"
    return candidate


_ARRAYS = ("list", "set", "tuple")
_ANY = TypeExpr("scalar", "any")
_STRING = TypeExpr("scalar", "string")
_WIDENINGS = {("integer", "float")}
"""(narrower, wider) scalar pairs: every value of the first is a value of the second."""


@dataclass
class _Differ:
    old: Manifest
    new: Manifest
    out: list[tuple[TopicDef | None, Finding]] = field(default_factory=list)
    scope: TopicDef | None = None
    """The old (topic, version) being walked; None outside one."""
    today: dt.date | None = None
    producing: bool = False
    """Walking the service's own copy of a produced topic: findings become `produces-changed`."""

    def __post_init__(self) -> None:
        self.old_records = {record.name: record for record in self.old.types}
        self.new_records = {record.name: record for record in self.new.types}
        self.old_enums = {enum.name: enum for enum in self.old.enums}
        self.new_enums = {enum.name: enum for enum in self.new.enums}

    def findings(self) -> list[tuple[TopicDef | None, Finding]]:
        """Every change, each with the old (topic, version) it is inside (None for additions, removals and
        annotations of types)."""
        if self.old.service != self.new.service:
            self.add("service-renamed", "service", self.old.service, self.new.service)
        if self.old.prefix != self.new.prefix:
            self.add("prefix-changed", "prefix", self.old.prefix, self.new.prefix)
        new_topics = {topic_key(topic): topic for topic in self.new.topics}
        old_topics = {topic_key(topic): topic for topic in self.old.topics}
        for key, topic in old_topics.items():
            if key not in new_topics:
                removed = "topic-version-removed-after-sunset" if _sunset_passed(topic, self.today) else None
                self.add(removed or "topic-version-removed", key, key, None)
                # Its plain routes may still answer, with another version: their callers are not all gone.
                if topic.routes != _EVENT_MARK:
                    for route in topic.routes:
                        if "{version}" not in route.path.split("/"):
                            self.moved_route(key, str(route), topic)
                continue
            after = new_topics[key]
            self.scope = topic
            if topic.summary != after.summary:
                self.add("doc-summary-changed", key, topic.summary, after.summary)
            if topic.deprecated != after.deprecated:
                self.add("doc-deprecated-changed", key, _lifecycle(topic), _lifecycle(after))
            self.routes(key, topic, after)
            self.security(key, topic, after)
            self.statuses(key, "success", topic.success, after.success)
            self.statuses(key, "failure", topic.failures, after.failures)
            self.types(f"{key}.request", "request", topic.request, after.request, frozenset())
            self.types(f"{key}.response", "response", topic.response, after.response, frozenset())
            self.scope = None
        for key in new_topics:
            if key not in old_topics:
                self.add("topic-version-added", key, None, key)
        self.produced()
        self.annotations()
        self.schemes()
        return self.out

    def produced(self) -> None:
        """The service's own produces entries. Its copy of a topic it sends is met by the owner, who was written
        against the old copy: the request copy is judged as what the owner receives (response rules: it must fit
        what the owner accepted), the response copy as what it reads (request rules: it must take what the owner
        answered). A breaking one is `produces-changed`, a warning: the owner decides (svcgen compat)."""
        new_entries = {topic_key(topic): topic for topic in self.new.produces}
        old_entries = {topic_key(topic): topic for topic in self.old.produces}
        for key, entry in old_entries.items():
            path = f"produces:{key}"
            if key not in new_entries:
                self.add("produces-removed", path, key, None)
                continue
            self.producing = True
            self.types(f"{path}.request", "response", entry.request, new_entries[key].request, frozenset())
            self.types(f"{path}.response", "request", entry.response, new_entries[key].response, frozenset())
            self.producing = False
        for key in new_entries:
            if key not in old_entries:
                self.add("produces-added", f"produces:{key}", None, key)

    def security(self, key: str, old: TopicDef, new: TopicDef) -> None:
        """Who may call the topic version, with each side's default resolved: an old way in that no new one
        covers refuses old callers (error); a new way in that no old one covered lets new callers in (warning)."""
        shown = _show_requirements(_requirements(self.old, old)), _show_requirements(_requirements(self.new, new))
        # Public is the one way in that asks for nothing.
        before, after = _requirements(self.old, old) or ((),), _requirements(self.new, new) or ((),)
        path = f"{key}.security"
        for requirement in before:
            if not any(_lets_in(requirement, other) for other in after):
                same = any(_schemes_of(other) == _schemes_of(requirement) for other in after)
                rule = "security-scope-added" if same else "security-requirement-added"
                self.add(rule, path, *shown)
                break
        for requirement in after:
            if not any(_lets_in(requirement, other) for other in before):
                same = any(_schemes_of(other) == _schemes_of(requirement) for other in before)
                rule = "security-scope-removed" if same else "security-requirement-removed"
                self.add(rule, path, *shown)
                break

    def schemes(self) -> None:
        """A scheme both manifests declare whose type, issuer, audience or (an API key's) header changed."""
        old = {scheme.name: scheme for scheme in self.old.security.schemes} if self.old.security else {}
        new = {scheme.name: scheme for scheme in self.new.security.schemes} if self.new.security else {}
        for name, before in old.items():
            after = new.get(name)
            if after is None:
                continue
            for what in ("type", "issuer", "audience"):
                was, now = getattr(before, what), getattr(after, what)
                if was != now:
                    shown = (list(was), list(now)) if isinstance(was, tuple) else (was, now)
                    self.add("security-scheme-changed", f"security.schemes.{name}.{what}", *shown)
            # Header names are lower-cased when loaded, so only a real rename is a change; a type change is above.
            if before.type == after.type == "apiKey" and before.header != after.header:
                fix = (f"keep 'header: {before.header}', or declare the new header as a second apiKey scheme and let "
                       f"callers in by either ('security: [{name}, <new scheme>]') until every caller has moved")
                self.add("security-scheme-header-changed", f"security.schemes.{name}.header", before.header,
                         after.header, fix)

    def annotations(self) -> None:
        """Documentation changes, once per type (at `Type` and `Type.field`) however many topics use it."""
        for name, old_enum in self.old_enums.items():
            new_enum = self.new_enums.get(name)
            if new_enum is not None and old_enum.description != new_enum.description:
                self.add("doc-description-changed", name, old_enum.description, new_enum.description)
        for name, before in self.old_records.items():
            after = self.new_records.get(name)
            if after is None:
                continue
            if before.description != after.description:
                self.add("doc-description-changed", name, before.description, after.description)
            if before.deprecated != after.deprecated:
                self.add("doc-deprecated-changed", name, before.deprecated, after.deprecated)
            new_fields = {item.wire: item for item in after.fields}
            for old_field in before.fields:
                new_field = new_fields.get(old_field.wire)
                if new_field is None:
                    continue
                at = f"{name}.{old_field.wire}"
                if old_field.description != new_field.description:
                    self.add("doc-description-changed", at, old_field.description, new_field.description)
                for keyword, rule in (("examples", "doc-examples-changed"), ("deprecated", "doc-deprecated-changed")):
                    if old_field.contract.get(keyword) != new_field.contract.get(keyword):
                        self.add(rule, at, old_field.contract.get(keyword), new_field.contract.get(keyword))

    def add(self, rule_id: str, path: str, old: Any, new: Any, fix: str | None = None) -> None:
        if self.producing:
            if RULES_BY_ID[rule_id].level != "error":
                return  # the owner accepts or answers it as before
            why = f"{rule_id} as the owner meets the copy: {RULES_BY_ID[rule_id].why}"
            self.out.append((None, _finding("produces-changed", path, old, new, why)))
            return
        self.out.append((self.scope, _finding(rule_id, path, old, new, fix=fix)))

    def statuses(self, key: str, kind: str, old: tuple[str, ...], new: tuple[str, ...]) -> None:
        """The statuses a topic version declares it answers (`success:` or `failures:`)."""
        path = f"{key}.{'success' if kind == 'success' else 'failures'}"
        for status in old:
            if status not in new:
                self.add(f"response-{kind}-status-removed", path, status, None)
        for status in new:
            if status not in old:
                self.add(f"response-{kind}-status-added", path, None, status)

    def routes(self, key: str, old: TopicDef, new: TopicDef) -> None:
        before, after = _served_routes(self.old, old), _served_routes(self.new, new)
        removed = [route for route in before if route not in after]
        # A route another version of the topic served is a move, said once where it moved from (`moved_route`).
        added = [route for route in after if route not in before and not self._served_elsewhere(old, route)]
        removed = [route for route in removed if not self.moved_route(key, route, old)]
        for gone, came in zip(removed, added, strict=False):
            self.add("route-changed", f"{key}.routes", gone, came)
        for gone in removed[len(added):]:
            self.add("route-removed", f"{key}.routes", gone, None)
        for came in added[len(removed):]:
            self.add("route-added", f"{key}.routes", None, came)

    def _served_elsewhere(self, topic: TopicDef, route: str) -> bool:
        """Whether `route` reached another version of `topic` in the old manifest."""
        return any(other.id == topic.id and other.version != topic.version and route in (str(r) for r in other.routes)
                   for other in self.old.topics)  # fmt: skip

    def moved_route(self, key: str, route: str, old: TopicDef) -> bool:
        """Whether `route`, which reached `old`, now reaches another version of the topic (`versions:` declares its
        routes on the newest one): then it is `route-version-changed`, and what the route's callers now get is
        compared with `old` (`moved`)."""
        serving = next((other for other in self.new.topics if other.id == old.id and other.version != old.version
                        and route in (str(own) for own in other.routes)), None)  # fmt: skip
        if serving is None:
            return False
        self.add("route-version-changed", f"{key}.routes", f"{route} ({old.version or 'unversioned'})",
                 f"{route} ({serving.version or 'unversioned'})")
        self.moved(key, route, old, serving)
        return True

    def moved(self, key: str, route: str, old: TopicDef, serving: TopicDef) -> None:
        """A plain route that now serves another version: its callers, written against `old`, get `serving`'s
        contract, judged as a changed topic version is, at `key.routes[route → version]`. Outside any (topic,
        version): `old` itself is unchanged or removed (`topic-version-removed` says so), and a new version would take
        the route again."""
        was, version = old.version or "unversioned", serving.version or "unversioned"
        at = f"{key}.routes[{route} → {version}]"
        start, scope, self.scope = len(self.out), self.scope, None
        self.security(at, old, serving)
        self.statuses(at, "success", old.success, serving.success)
        self.statuses(at, "failure", old.failures, serving.failures)
        self.types(f"{at}.request", "request", old.request, serving.request, frozenset())
        self.types(f"{at}.response", "response", old.response, serving.response, frozenset())
        kept = any(other.id == old.id and other.version == old.version for other in self.new.topics)
        fix = (f"callers of {route} were written against {was} and now get {version}: keep {version} compatible "
               f"with {was} for them, or have them name {was} (a `{{version}}` route or a version header) before "
               f"{version} takes the route") if kept else (
               f"callers of {route} were written against {was}, which is removed, and now get {version}: keep "
               f"{version} compatible with {was} for them, or keep {was} for them to name (a `{{version}}` route or a "
               f"version header) until they have moved to {version}")
        self.out[start:] = [(None, replace(finding, fix=fix) if finding.level == "error" else finding)
                            for _, finding in self.out[start:]]
        self.scope = scope

    # Types ------------------------------------------------------------------------------------------------

    def types(self, path: str, direction: str, old: TypeExpr, new: TypeExpr, seen: frozenset[tuple[str, str]]) -> None:
        """Compare two type expressions at `path`; `seen` holds the record pairs already being compared above
        (a recursive record is compared once per path)."""
        if old.is_nullable != new.is_nullable:
            self.add(f"{direction}-nullable-{'added' if new.is_nullable else 'removed'}", path, str(old), str(new))
        old, new = _strip(old), _strip(new)
        old_enum, new_enum = self.enum(old, self.old_enums), self.enum(new, self.new_enums)
        if old_enum is not None and new_enum is not None:
            self.enum_values(path, direction, old_enum, new_enum)
        elif old.kind == "record" and new.kind == "record" and old_enum is None and new_enum is None:
            pair = (old.name, new.name)
            if pair not in seen:
                self.records(path, direction, self.old_records[old.name], self.new_records[new.name], seen | {pair})
        elif (old.kind in _ARRAYS and new.kind in _ARRAYS) or old.kind == new.kind == "map":
            suffix = "{}" if old.kind == "map" else "[]"
            self.types(path + suffix, direction, old.args[0], new.args[0], seen)
        elif old.kind == new.kind == "union" and _members(old) == _members(new):
            by_text = {str(member): member for member in new.args}
            for member in old.args:
                self.types(path, direction, member, by_text[str(member)], seen)
        else:
            change = self.relation(old, new, old_enum, new_enum)
            if change is not None:
                self.add(f"{direction}-type-{change}", path, str(old), str(new))

    def relation(self, old: TypeExpr, new: TypeExpr, old_enum: EnumDef | None, new_enum: EnumDef | None) -> str | None:
        """`widened` (new accepts every old value), `narrowed` (the reverse), `changed`, or None (the same)."""
        if old.kind == new.kind == "scalar" and old.name == new.name:
            return None
        if new == _ANY or (str(old), str(new)) in _WIDENINGS or (old_enum is not None and new == _STRING):
            return "widened"
        if old == _ANY or (str(new), str(old)) in _WIDENINGS or (new_enum is not None and old == _STRING):
            return "narrowed"
        old_members, new_members = _members(old), _members(new)
        if old_members < new_members:
            return "widened"
        if new_members < old_members:
            return "narrowed"
        return "changed"

    def enum(self, expr: TypeExpr, enums: Mapping[str, EnumDef]) -> EnumDef | None:
        return enums.get(expr.name) if expr.kind == "record" else None

    def enum_values(self, path: str, direction: str, old: EnumDef, new: EnumDef) -> None:
        for value in old.values:
            if value not in new.values:
                self.add(f"{direction}-enum-value-removed", path, value, None)
        for value in new.values:
            if value not in old.values:
                self.add(f"{direction}-enum-value-added", path, None, value)

    def records(self, path: str, direction: str, old: RecordDef, new: RecordDef,
                seen: frozenset[tuple[str, str]]) -> None:
        if direction == "request" and old.closed != new.closed:
            self.add(f"request-record-{'closed' if new.closed else 'opened'}", path, old.closed, new.closed)
        new_fields = {item.wire: item for item in new.fields}
        old_fields = {item.wire: item for item in old.fields}
        for wire, before in old_fields.items():
            at = f"{path}.{wire}"
            after = new_fields.get(wire)
            if after is None:
                removed = "request-property-removed" + ("-from-closed-record" if new.closed else "")
                self.add(removed if direction == "request" else "response-property-removed", at, str(before.type), None)
            else:
                self.field(at, direction, before, after, seen)
        for wire, after in new_fields.items():
            if wire not in old_fields:
                self.add(_added_rule(direction, after, old), f"{path}.{wire}", None, str(after.type))

    def field(self, path: str, direction: str, old: FieldDef, new: FieldDef, seen: frozenset[tuple[str, str]]) -> None:
        if old.has_default != new.has_default:
            became = "optional" if new.has_default else "required"
            self.add(f"{direction}-property-became-{became}", path, _requiredness(old), _requiredness(new))
        elif old.has_default and old.default != new.default:
            self.add(f"{direction}-default-changed", path, old.default, new.default)
        for keyword in _CONSTRAINTS_IN_ORDER if old.contract != new.contract else ():
            before, after = old.contract.get(keyword), new.contract.get(keyword)
            if before != after:
                change = constraint_change(keyword, before, after)
                self.add(f"{direction}-constraint-{change}", path, {keyword: before}, {keyword: after})
        self.types(path, direction, old.type, new.type, seen)


_CONSTRAINTS_IN_ORDER = sorted(CONSTRAINT_KEYWORDS)


def _added_rule(direction: str, added: FieldDef, old_record: RecordDef) -> str:
    if direction == "response":
        return "response-property-added" + ("-to-closed-record" if old_record.closed else "")
    if not added.has_default:
        return "request-property-added-required"
    return "request-property-added-optional" if added.default is None else "request-property-added-with-default"


def _requiredness(item: FieldDef) -> str:
    return "optional" if item.has_default else "required"


def _strip(expr: TypeExpr) -> TypeExpr:
    return expr.args[0] if expr.is_nullable else expr


def _members(expr: TypeExpr) -> frozenset[str]:
    return frozenset(str(member) for member in expr.args) if expr.kind == "union" else frozenset({str(expr)})


def _show(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _requirements(manifest: Manifest, topic: TopicDef) -> Requirements:
    """Who may call `topic`: its own requirements, else the manifest's default; () is public."""
    if topic.security is not None:
        return topic.security
    return manifest.security.default if manifest.security is not None else ()


def _lets_in(held: Requirement, asked: Requirement) -> bool:
    """Whether a caller holding what `held` asks for meets `asked`: no scheme or scope beyond `held`'s."""
    holds = dict(held)
    return all(name in holds and set(scopes) <= set(holds[name]) for name, scopes in asked)


def _schemes_of(requirement: Requirement) -> frozenset[str]:
    return frozenset(name for name, _ in requirement)


def _show_requirements(requirements: Requirements) -> list[dict[str, list[str]]]:
    return [{name: list(scopes) for name, scopes in requirement} for requirement in requirements]
