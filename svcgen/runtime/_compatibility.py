"""Contract compatibility: the rules of the contract diff, and their verdict on two JSON Schemas.

A type is judged by the direction it travels in. A request must still accept what its senders send; a response
must still decode in its receivers. The rules are declared once, here, as data (`RULES`): `svcgen diff` and
`svcgen compat` classify manifest changes with them (svcgen.contractdiff), and `first_incompatibility` applies
the same rules to the runtime's derived JSON Schemas (a spec document's or a descriptor's), so the mesh can
judge a producer's copy of a topic against its owner without the manifests.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from ._meta import CONSTRAINT_KEYWORDS

Level = Literal["error", "warning", "info"]
Direction = Literal["service", "request", "response", "route", "topic", "security", "produces", "doc"]
LEVELS: tuple[Level, ...] = ("error", "warning", "info")
DIRECTIONS: tuple[Direction, ...] = ("service", "request", "response", "route", "topic", "security", "produces", "doc")


@dataclass(frozen=True)
class Rule:
    id: str
    direction: Direction
    level: Level
    """The default level; a levels file may override it."""
    why: str
    example: str
    """A change that triggers the rule, as a reader would write it."""
    typed: bool = False
    """Its findings' old and new are type expressions as a manifest writes them (`Address?`), which a JSON Schema
    (a live descriptor's) does not carry: a finding's fingerprint leaves them out (the gate's `Finding.fingerprint`)."""


RULES: tuple[Rule, ...] = (
    # The service as a whole: its name and prefix are in every client, subject and collector identity.
    Rule("service-renamed", "service", "error",
         "clients, NATS subjects and the collector know the service by its name; every one of them moves",
         "`service: orders` → `service: ordering`"),
    Rule("prefix-changed", "service", "error",
         "callers of the envelope invoke surface and the well-known surfaces use the old prefix and get 404",
         "`prefix: /svc` → `prefix: /ops`"),
    # Request: what old callers send must still be accepted.
    Rule("request-property-added-required", "request", "error",
         "old callers do not send the new property, so their requests are refused",
         "add `couponCode: string`", typed=True),
    Rule("request-property-added-optional", "request", "info",
         "old callers leave the new nullable property out and it is null",
         "add `note: string?`", typed=True),
    Rule("request-property-added-with-default", "request", "info",
         "old callers leave the new property out and get its default",
         "add `priority: {type: integer, default: 0}`", typed=True),
    Rule("request-property-removed", "request", "warning",
         "old callers still send the property; the service now ignores what they say",
         "remove `note`", typed=True),
    Rule("request-property-removed-from-closed-record", "request", "error",
         "old callers still send the property and a closed record refuses it",
         "remove `note` from a record with `additionalProperties: false`", typed=True),
    Rule("request-property-became-required", "request", "error",
         "old callers that leave the property out are refused",
         "`note: string?` → `note: string`"),
    Rule("request-property-became-optional", "request", "info",
         "old callers send it anyway; new callers may leave it out",
         "`note: string` → `note: string?`"),
    Rule("request-default-changed", "request", "warning",
         "old callers that leave the property out now get a different value",
         "`default: 1` → `default: 2`"),
    Rule("request-type-widened", "request", "info",
         "every value old callers send is still accepted",
         "`integer` → `float`", typed=True),
    Rule("request-type-narrowed", "request", "error",
         "some values old callers send are refused",
         "`float` → `integer`", typed=True),
    Rule("request-type-changed", "request", "error",
         "values old callers send are refused",
         "`string` → `integer`", typed=True),
    Rule("request-nullable-added", "request", "info",
         "null is accepted as well as every value old callers send",
         "`string` → `string?`", typed=True),
    Rule("request-nullable-removed", "request", "error",
         "old callers that send null are refused",
         "`string?` → `string`", typed=True),
    Rule("request-enum-value-added", "request", "info",
         "every value old callers send is still accepted",
         "`[placed, paid]` → `[placed, paid, shipped]`"),
    Rule("request-enum-value-removed", "request", "error",
         "old callers that send the removed value are refused",
         "`[placed, paid]` → `[placed]`"),
    Rule("request-constraint-tightened", "request", "error",
         "some values old callers send break the new constraint and are refused",
         "`minLength: 1` → `minLength: 3`; `maximum` or `format` added"),
    Rule("request-constraint-loosened", "request", "info",
         "every value old callers send still fits",
         "`maxLength: 10` → `maxLength: 20`; `pattern` removed"),
    Rule("request-constraint-changed", "request", "error",
         "the new constraint refuses some values the old one accepted",
         "`pattern: ^[a-z]+$` → `pattern: ^[0-9]+$`; `format: email` → `format: uri`"),
    Rule("request-record-closed", "request", "error",
         "old callers that send a property the record does not declare are refused",
         "`additionalProperties: false` added to the record's JSON Schema"),
    Rule("request-record-opened", "request", "info",
         "undeclared properties are now ignored instead of refused",
         "`additionalProperties: false` removed"),
    # Response: what the service answers must still decode in old callers.
    Rule("response-property-added", "response", "info",
         "old callers ignore a property they do not know",
         "add `trackingUrl: string?`", typed=True),
    Rule("response-property-added-to-closed-record", "response", "error",
         "old callers decode the record as closed and refuse a property it did not declare",
         "add `trackingUrl` to a record with `additionalProperties: false`", typed=True),
    Rule("response-property-removed", "response", "error",
         "old callers expect the property and no longer get it",
         "remove `status`", typed=True),
    Rule("response-property-became-required", "response", "info",
         "the service always sends it, as old callers may expect",
         "`note: string?` → `note: string`"),
    Rule("response-property-became-optional", "response", "warning",
         "old callers that need the property may find it null",
         "`note: string` → `note: string?`"),
    Rule("response-default-changed", "response", "info",
         "the service sends the value either way; only the documented default moves",
         "`default: placed` → `default: new`"),
    Rule("response-type-widened", "response", "error",
         "the service may answer values old callers' type cannot hold",
         "`integer` → `float` (a 2.5 does not decode as an integer)", typed=True),
    Rule("response-type-narrowed", "response", "info",
         "every value the service answers still decodes in old callers",
         "`float` → `integer`", typed=True),
    Rule("response-type-changed", "response", "error",
         "what the service answers no longer decodes in old callers",
         "`string` → `integer`", typed=True),
    Rule("response-nullable-added", "response", "error",
         "old callers do not expect null and fail to decode it",
         "`string` → `string?`", typed=True),
    Rule("response-nullable-removed", "response", "info",
         "the service never answers null any more; old callers handled it anyway",
         "`string?` → `string`", typed=True),
    Rule("response-enum-value-added", "response", "warning",
         "old callers may receive a value they do not know",
         "`[placed, paid]` → `[placed, paid, shipped]`"),
    Rule("response-enum-value-removed", "response", "info",
         "the service no longer answers the value; old callers knew every remaining one",
         "`[placed, paid]` → `[placed]`"),
    Rule("response-constraint-tightened", "response", "info",
         "every value the service answers still fits what old callers expect",
         "`maxLength: 20` → `maxLength: 10`"),
    Rule("response-constraint-loosened", "response", "warning",
         "the service may answer values outside what old callers check",
         "`maximum: 100` → `maximum: 1000`; `format` removed"),
    Rule("response-constraint-changed", "response", "warning",
         "the service may answer values the old constraint refused",
         "`pattern: ^[a-z]+$` → `pattern: ^[0-9]+$`"),
    Rule("response-success-status-added", "response", "warning",
         "old callers may receive a success status they do not know",
         "`success: [ok]` → `success: [ok, created]`"),
    Rule("response-success-status-removed", "response", "info",
         "the service no longer answers the status; old callers knew every remaining one",
         "`success: [ok, created]` → `success: [created]`"),
    Rule("response-failure-status-added", "response", "warning",
         "old callers may receive a failure status they do not handle by name",
         "`failures: [not-found]` → `failures: [not-found, conflict]`"),
    Rule("response-failure-status-removed", "response", "info",
         "the service no longer answers the failure; old callers' handling of it is unused",
         "`failures: [not-found, conflict]` → `failures: [not-found]`"),
    # Routes and topics.
    Rule("route-added", "route", "info",
         "a new way in; old callers are unaffected",
         "`routes: [POST /orders]` → `routes: [POST /orders, PUT /orders]`"),
    Rule("route-removed", "route", "error",
         "old callers of the route get 404",
         "`routes: [POST /orders, PUT /orders]` → `routes: [POST /orders]`"),
    Rule("route-changed", "route", "error",
         "old callers of the old route get 404 or 405",
         "`POST /orders` → `POST /v1/orders`"),
    Rule("route-version-changed", "route", "warning",
         "old callers of the route now reach the other version of the topic and get its contract (what in it "
         "breaks them is reported at the route); a caller that must keep its version names it (a `{version}` route "
         "or a version header)",
         "`versions: [v1, v2]` → `versions: [v1, v2, v3]`: the routes move to the newest, `v3`"),
    Rule("topic-version-added", "topic", "info",
         "a new (topic, version) beside the existing ones; old callers are unaffected",
         "add `orders:place` version `v2`"),
    Rule("topic-version-removed", "topic", "error",
         "old callers of the (topic, version) get unknown-topic",
         "remove `orders:place` version `v1`"),
    Rule("topic-version-removed-after-sunset", "topic", "warning",
         "the (topic, version) was deprecated and its sunset has passed: callers were told to move",
         "remove `orders:place` version `v1` after its `deprecated.sunset`"),
    Rule("topic-version-not-bumped", "topic", "error",
         "a breaking change inside a published (topic, version) breaks its callers; publish it as a new version",
         "`request-property-became-required` inside `orders:place@v1`"),
    # The service's own produces entries (its copies of topics it sends): judged as the owner meets them, the
    # owner being the old caller of the copy; warnings at most, since the owner decides (svcgen compat).
    Rule("produces-added", "produces", "info",
         "the service now sends the topic; its owner must serve it (svcgen compat, svcgen can-i-deploy)",
         "add `payments:capture` under `produces`"),
    Rule("produces-removed", "produces", "info",
         "the service no longer sends the topic; the owner may retire it once nobody else does",
         "remove `payments:capture` from `produces`"),
    Rule("produces-changed", "produces", "warning",
         "the service's copy of a topic it sends changed in a way its owner, written against the old copy, may "
         "not accept or answer; check it against the owner (svcgen compat, svcgen can-i-deploy)",
         "a property removed from the request copy, or one added to the response copy"),
    # Security: who may call a (topic, version), and the schemes that say so.
    Rule("security-requirement-added", "security", "error",
         "old callers without the newly required credential are refused (401)",
         "`security: []` → `security: [staff]`"),
    Rule("security-scope-added", "security", "error",
         "old callers whose credential lacks the new scope are refused (403)",
         "`[{staff: []}]` → `[{staff: [patients:read]}]`"),
    Rule("security-requirement-removed", "security", "warning",
         "callers that were refused before are let in; check that this is meant",
         "`security: [staff]` → `security: []`"),
    Rule("security-scope-removed", "security", "warning",
         "credentials without the scope are now let in; check that this is meant",
         "`[{staff: [patients:read]}]` → `[{staff: []}]`"),
    Rule("security-scheme-changed", "security", "error",
         "tokens old callers hold (their type, issuer or audience) are refused by the changed scheme",
         "`issuer: https://id.example.com/` → `issuer: https://login.example.com/`"),
    Rule("security-scheme-header-changed", "security", "error",
         "old callers send their API key in the old header, which the changed scheme no longer reads (401)",
         "`header: x-api-key` → `header: x-partner-key`"),
    # Annotations only.
    Rule("doc-description-changed", "doc", "info",
         "documentation only; the wire is unchanged",
         "`description: How many` → `description: Units ordered`"),
    Rule("doc-summary-changed", "doc", "info",
         "documentation only; the wire is unchanged",
         "`summary: Place an order` → `summary: Place one order`"),
    Rule("doc-examples-changed", "doc", "info",
         "documentation only; the wire is unchanged",
         "`examples: [1]` → `examples: [1, 5]`"),
    Rule("doc-deprecated-changed", "doc", "info",
         "documentation only; deprecated values are still accepted and answered",
         "`deprecated: true` added"),
)
RULES_BY_ID: dict[str, Rule] = {rule.id: rule for rule in RULES}

JsonSchema = Mapping[str, Any]
WireDirection = Literal["request", "response"]


def first_incompatibility(sent: JsonSchema, accepted: JsonSchema, *, direction: WireDirection) -> str | None:
    """Where a value `sent` allows first fails to be `accepted`, or None when every one is: the path from the
    direction (`request.items[].quantity`, `[]` an item, `{}` a map value), the rule id and why. Only error-level
    rules count, at their default levels.

    For a request, `sent` is the caller's copy and `accepted` the owner's; for a response, `sent` is the
    owner's and `accepted` the caller's copy. The verdict is the contract diff's for the same change."""
    old, new = (sent, accepted) if direction == "request" else (accepted, sent)
    for change in _Walk(direction).types(direction, old, new):
        rule = RULES_BY_ID[change.rule]
        if rule.level == "error":
            return f"{change.path}: {change.rule}: {rule.why}"
    return None


class SchemaChange(NamedTuple):
    """One change the walk finds: the rule, the path, and the old and new values as `svcgen diff` states them
    (an enum value, `{keyword: value}` of a constraint, `required` or `optional`, a default, whether the record is
    closed); None for both under a `typed` rule, whose values are the manifest's type texts."""

    rule: str
    path: str
    old: Any = None
    new: Any = None


def schema_changes(old: JsonSchema, new: JsonSchema, *, direction: WireDirection) -> list[tuple[str, str]]:
    """Every (rule id, path) from the `old` contract of a request or response to the `new` one, in walk order, by
    the diff's rules: `old` is what callers were written against (see `first_incompatibility`)."""
    return [(change.rule, change.path) for change in _Walk(direction).types(direction, old, new)]


def schema_change_values(old: JsonSchema, new: JsonSchema, *, direction: WireDirection) -> list[SchemaChange]:
    """`schema_changes` with each change's old and new values, for a finding like the diff's (same fingerprint)."""
    return list(_Walk(direction).types(direction, old, new))


_LOWER_BOUNDS = ("minLength", "minimum", "exclusiveMinimum", "minItems")
_UPPER_BOUNDS = ("maxLength", "maximum", "exclusiveMaximum", "maxItems")
_WIDENINGS = {("integer", "number")}
"""(narrower, wider) JSON types: every value of the first is a value of the second."""
_NULL: JsonSchema = {"type": "null"}
_DATETIME_FORMAT = "date-time"
"""The format of the `datetime` scalar: part of the type, not a constraint."""


def constraint_change(keyword: str, old: Any, new: Any) -> str:
    """`tightened` (fewer values fit), `loosened` (more values fit) or `changed` (neither contains the other)."""
    if old is None or new is None:
        return "tightened" if old is None else "loosened"
    if keyword in _LOWER_BOUNDS:
        return "tightened" if new > old else "loosened"
    if keyword in _UPPER_BOUNDS:
        return "tightened" if new < old else "loosened"
    if keyword == "multipleOf":
        if _divides(old, new):
            return "tightened"
        if _divides(new, old):
            return "loosened"
    return "changed"


def _divides(step: float, value: float) -> bool:
    quotient = value / step
    return abs(quotient - round(quotient)) < 1e-9


@dataclass(frozen=True)
class _Walk:
    """The diff's type walk over JSON Schemas: `old` is what the contract was (the caller's side), `new` what it
    is; yields the changes in walk order."""

    direction: WireDirection

    def types(self, path: str, old: JsonSchema, new: JsonSchema) -> Iterator[SchemaChange]:
        if _is_nullable(old) != _is_nullable(new):
            yield SchemaChange(f"{self.direction}-nullable-{'added' if _is_nullable(new) else 'removed'}", path)
        old, new = _without_null(old), _without_null(new)
        old_kind, new_kind = _kind(old), _kind(new)
        if old_kind == new_kind == "enum":
            yield from self.enum_values(path, old["enum"], new["enum"])
        elif old_kind == new_kind == "record":
            yield from self.records(path, old, new)
        elif old_kind == new_kind == "array":
            yield from self.types(path + "[]", old.get("items", {}), new.get("items", {}))
        elif old_kind == new_kind == "map":
            yield from self.types(path + "{}", old["additionalProperties"], new["additionalProperties"])
        else:
            change = _relation(old_kind, new_kind)
            if change is not None:
                yield SchemaChange(f"{self.direction}-type-{change}", path)

    def enum_values(self, path: str, old: list[Any], new: list[Any]) -> Iterator[SchemaChange]:
        for value in old:
            if value not in new:
                yield SchemaChange(f"{self.direction}-enum-value-removed", path, value, None)
        for value in new:
            if value not in old:
                yield SchemaChange(f"{self.direction}-enum-value-added", path, None, value)

    def records(self, path: str, old: JsonSchema, new: JsonSchema) -> Iterator[SchemaChange]:
        old_closed, new_closed = _is_closed(old), _is_closed(new)
        if self.direction == "request" and old_closed != new_closed:
            yield SchemaChange(f"request-record-{'closed' if new_closed else 'opened'}", path, old_closed, new_closed)
        old_fields, new_fields = old.get("properties", {}), new.get("properties", {})
        old_required, new_required = set(old.get("required", ())), set(new.get("required", ()))
        for wire, before in old_fields.items():
            at = f"{path}.{wire}"
            after = new_fields.get(wire)
            if after is None:
                if self.direction == "response":
                    yield SchemaChange("response-property-removed", at)
                else:
                    yield SchemaChange("request-property-removed" + ("-from-closed-record" if new_closed else ""), at)
                continue
            if (wire in old_required) != (wire in new_required):
                became = "optional" if wire in old_required else "required"
                yield SchemaChange(f"{self.direction}-property-became-{became}", at,
                                   "required" if wire in old_required else "optional", became)
            elif "default" in before and "default" in after and before["default"] != after["default"]:
                yield SchemaChange(f"{self.direction}-default-changed", at, before["default"], after["default"])
            old_constraints, new_constraints = _constraints(before), _constraints(after)
            for keyword in sorted(old_constraints.keys() | new_constraints.keys()):
                limit, moved = old_constraints.get(keyword), new_constraints.get(keyword)
                if limit != moved:
                    change = constraint_change(keyword, limit, moved)
                    yield SchemaChange(f"{self.direction}-constraint-{change}", at, {keyword: limit}, {keyword: moved})
            yield from self.types(at, before, after)
        for wire in new_fields:
            if wire in old_fields:
                continue
            if self.direction == "response":
                yield SchemaChange("response-property-added" + ("-to-closed-record" if old_closed else ""),
                                   f"{path}.{wire}")
            else:
                optional = "required" if wire in new_required else "optional"
                yield SchemaChange(f"request-property-added-{optional}", f"{path}.{wire}")


def _is_nullable(schema: JsonSchema) -> bool:
    kind = schema.get("type")
    return (isinstance(kind, list) and "null" in kind) or _NULL in schema.get("anyOf", ())


def _without_null(schema: JsonSchema) -> JsonSchema:
    kind = schema.get("type")
    if isinstance(kind, list) and "null" in kind:
        rest = [item for item in kind if item != "null"]
        stripped = {**schema, "type": rest[0] if len(rest) == 1 else rest}
        if "enum" in schema:
            stripped["enum"] = [value for value in schema["enum"] if value is not None]
        return stripped
    members = [member for member in schema.get("anyOf", ()) if member != _NULL]
    if len(members) == 1 and _NULL in schema.get("anyOf", ()):
        only: JsonSchema = members[0]
        return only
    return schema


def _kind(schema: JsonSchema) -> str:
    """`enum`, `record`, `map`, `array`, `datetime`, a JSON scalar type, or `any` (an open schema: `any`, a
    union, a recursive reference)."""
    if "enum" in schema:
        return "enum"
    kind = schema.get("type")
    if not isinstance(kind, str):
        return "any"
    if kind == "object":
        is_map = "properties" not in schema and isinstance(schema.get("additionalProperties"), Mapping)
        return "map" if is_map else "record"
    if kind == "string" and schema.get("format") == _DATETIME_FORMAT:
        return "datetime"
    return kind


def _relation(old: str, new: str) -> str | None:
    """`widened` (new accepts every old value), `narrowed` (the reverse), `changed`, or None (the same)."""
    if old == new:
        return None
    if new == "any" or (old, new) in _WIDENINGS or (old, new) == ("enum", "string"):
        return "widened"
    if old == "any" or (new, old) in _WIDENINGS or (new, old) == ("enum", "string"):
        return "narrowed"
    return "changed"


def _is_closed(schema: JsonSchema) -> bool:
    return schema.get("additionalProperties") is False


def _constraints(schema: JsonSchema) -> dict[str, Any]:
    return {
        keyword: value
        for keyword, value in schema.items()
        if keyword in CONSTRAINT_KEYWORDS and not (keyword == "format" and value == _DATETIME_FORMAT)
    }
