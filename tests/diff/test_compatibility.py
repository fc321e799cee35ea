"""`first_incompatibility` (the runtime's verdict on two JSON Schemas) against the contract diff's (on two
manifests), over every golden diff case where the change is to a request or response type. (A union derives the
open schema `{}`, so what only the manifest diff can see of unions is pinned apart, as docs/contract-diff.md
states it.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from svcgen.contractdiff import Finding, diff_manifests, topic_key
from svcgen.runtime._compatibility import first_incompatibility, schema_changes
from tests.diff.test_golden import case_title, load_cases
from tests.support.diffs import load_fragment, topic_schemas

CASES = load_cases()


def breaking(findings: tuple[Finding, ...], key: str, direction: str) -> set[tuple[str, str]]:
    """(rule, path below the topic version) of the error-level type findings in one direction."""
    prefix = f"{key}."
    return {
        (finding.rule, finding.path.removeprefix(prefix))
        for finding in findings
        if finding.level == "error" and finding.direction == direction and "-status-" not in finding.rule
        and finding.path.startswith(f"{prefix}{direction}")
    }


@pytest.mark.parametrize("case", CASES, ids=[case_title(case) for case in CASES])
def test_runtime_verdict_agrees_with_the_diff(case: dict[str, Any], tmp_path: Path) -> None:
    files = case.get("files")
    old = load_fragment(tmp_path / "old", case["old"], files)
    new = load_fragment(tmp_path / "new", case["new"], files)
    findings = diff_manifests(old, new).findings
    old_schemas, new_schemas = topic_schemas(old, tmp_path / "old-out"), topic_schemas(new, tmp_path / "new-out")
    for topic in old.topics:
        key = topic_key(topic)
        if key not in new_schemas:
            continue
        (old_request, old_response), (new_request, new_response) = old_schemas[key], new_schemas[key]
        verdicts = {
            "request": first_incompatibility(old_request, new_request, direction="request"),
            "response": first_incompatibility(new_response, old_response, direction="response"),
        }
        for direction, verdict in verdicts.items():
            expected = breaking(findings, key, direction)
            assert (verdict is not None) == bool(expected), f"{key} {direction}: {verdict} vs {sorted(expected)}"
            if verdict is not None:
                path, rule, _ = verdict.split(": ", 2)
                assert (rule, path) in expected


def test_a_request_missing_a_required_property_names_its_path() -> None:
    sent = {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}
    accepted = {
        "type": "object",
        "properties": {"sku": {"type": "string"}, "quantity": {"type": "integer"}},
        "required": ["sku", "quantity"],
    }
    verdict = first_incompatibility(sent, accepted, direction="request")
    assert verdict is not None and verdict.startswith("request.quantity: request-property-added-required: ")
    # The other way round the receiver ignores what it does not know: no incompatibility.
    assert first_incompatibility(accepted, sent, direction="request") is None


def test_directions_are_not_symmetric() -> None:
    integer = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    number = {"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]}
    # A caller sending integers to an owner accepting numbers is fine; numbers to integers is not.
    assert first_incompatibility(integer, number, direction="request") is None
    assert first_incompatibility(number, integer, direction="request") == (
        "request.n: request-type-narrowed: some values old callers send are refused"
    )
    # An owner answering numbers to a caller decoding integers breaks it (a 2.5); the reverse is fine.
    assert first_incompatibility(number, integer, direction="response") is not None
    assert first_incompatibility(integer, number, direction="response") is None


def test_nested_items_maps_and_nullables() -> None:
    def order(item: dict[str, Any]) -> dict[str, Any]:
        line = {"type": "object", "properties": {"quantity": item}, "required": ["quantity"]}
        return {"type": "object", "properties": {"items": {"type": "array", "items": line}}, "required": ["items"]}

    nullable = order({"type": ["integer", "null"]})
    plain = order({"type": "integer"})
    verdict = first_incompatibility(nullable, plain, direction="request")
    assert verdict is not None and verdict.startswith("request.items[].quantity: request-nullable-removed: ")
    verdict = first_incompatibility(nullable, plain, direction="response")
    assert verdict is not None and verdict.startswith("response.items[].quantity: response-nullable-added: ")
    counts = {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}}
    flags = {"type": "object", "additionalProperties": {"type": "boolean"}}
    verdict = first_incompatibility(counts, flags, direction="request")
    assert verdict is not None and verdict.startswith("request{}: request-type-changed: ")


def test_a_spec_document_is_compatible_with_itself() -> None:
    spec = json.loads(Path("tests/golden/orders/orders_service/contracts/spec.json").read_text(encoding="utf-8"))
    for topic in spec["topics"]:
        assert first_incompatibility(topic["requestSchema"], topic["requestSchema"], direction="request") is None
        assert first_incompatibility(topic["responseSchema"], topic["responseSchema"], direction="response") is None


def _both(old_type: str, new_type: str, tmp_path: Path) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """(rule, path) of the changes of a request and response field `v` from `old_type` to `new_type`: the diff's
    (on the manifests), then the schema walk's (on the spec documents' schemas, as can-i-deploy compares them)."""
    def fragment(kind: str) -> dict[str, Any]:
        return {"types": {"Req": {"fields": {"v": kind}}, "Res": {"fields": {"v": kind}}}}

    old, new = load_fragment(tmp_path / "old", fragment(old_type)), load_fragment(tmp_path / "new", fragment(new_type))
    prefix = "orders:place@v1."
    diff = {(finding.rule, finding.path.removeprefix(prefix)) for finding in diff_manifests(old, new).findings
            if finding.path.startswith(prefix)}  # fmt: skip
    (old_request, old_response), = topic_schemas(old, tmp_path / "old-out").values()
    (new_request, new_response), = topic_schemas(new, tmp_path / "new-out").values()
    walk = {*schema_changes(old_request, new_request, direction="request"),
            *schema_changes(old_response, new_response, direction="response")}  # fmt: skip
    return diff, walk


@pytest.mark.parametrize(
    ("old_type", "new_type", "diff_rule", "walk_rule"),
    [
        # The union holds the old type: the same rule and path both ways.
        ("integer", "integer | string", "type-widened", "type-widened"),
        ("integer | string", "integer", "type-narrowed", "type-narrowed"),
        # A union is the open schema {} like `any`: judged as if it were one (docs/contract-diff.md).
        ("string", "integer | boolean", "type-changed", "type-widened"),
        ("integer | string", "integer | boolean", "type-changed", None),
        # The same JSON array on the wire: neither reports it.
        ("list[string]", "set[string]", None, None),
        ("set[string]", "tuple[string]", None, None),
    ],
)
def test_what_the_schema_walk_sees_of_unions_and_arrays_is_what_the_docs_say(
    old_type: str, new_type: str, diff_rule: str | None, walk_rule: str | None, tmp_path: Path
) -> None:
    diff, walk = _both(old_type, new_type, tmp_path)
    expected = {(f"{side}-{rule}", f"{side}.v") for side in ("request", "response") for rule in [diff_rule] if rule}
    assert diff == expected
    assert walk == {(f"{side}-{walk_rule}", f"{side}.v") for side in ("request", "response") if walk_rule}
