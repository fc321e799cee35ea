"""`svcgen compat`: each produces entry against its owner, by the diff's rules with the producer's copy as the
old contract; the verdicts agree with `first_incompatibility` on the built descriptor and spec documents."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from svcgen.cli import main
from svcgen.contractdiff import compat_manifests
from svcgen.manifest import load_manifest
from svcgen.runtime._compatibility import first_incompatibility
from tests.diff.test_cli import git
from tests.support.diffs import REPO, produced_schemas, topic_schemas

EXAMPLES = REPO / "examples" / "manifests"
PAYMENTS: dict[str, Any] = {
    "svcgen": 1,
    "service": "payments",
    "types": {
        "Capture": {"fields": {"captureId": "string", "amount": "integer", "status": "string"}},
        "CapturePayment": {"fields": {"orderId": "string", "amount": {"type": "integer", "minimum": 1}}},
    },
    "topics": [{"id": "payments:capture", "version": "v1", "request": "CapturePayment", "response": "Capture"}],
}


def orders(request: dict[str, Any], response: dict[str, Any], version: str = "v1") -> dict[str, Any]:
    """A producer with its own copy of payments:capture's types."""
    return {
        "svcgen": 1,
        "service": "orders",
        "types": {"Pay": {"fields": request}, "Paid": {"fields": response}},
        "produces": [{"id": "payments:capture", "version": version, "request": "Pay", "response": "Paid"}],
    }


COPY_REQUEST = {"orderId": "string", "amount": {"type": "integer", "minimum": 1}}
COPY_RESPONSE = {"captureId": "string", "amount": "integer", "status": "string"}


def write(folder: Path, name: str, document: dict[str, Any]) -> str:
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return str(path)


def run(*args: str) -> Result:
    return CliRunner().invoke(main, ["compat", *args], catch_exceptions=False)


def compat(tmp_path: Path, producer: dict[str, Any], *options: str) -> Result:
    return run(write(tmp_path, "orders", producer), write(tmp_path, "payments", PAYMENTS), *options)


def test_the_examples_are_compatible(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    result = run(*(f"examples/manifests/{name}.yaml" for name in ("inventory", "orders", "payments")))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "warning: payments -> ?: ledger:record: no owner among the given manifests; not checked",
        "warning: payments -> ?: notifications:send@v2: no owner among the given manifests; not checked",
        "1 produces entry checked, 2 without an owner: 0 errors, 0 warnings, 0 infos; compatible",
    ]


def test_an_exact_copy_is_compatible(tmp_path: Path) -> None:
    result = compat(tmp_path, orders(COPY_REQUEST, COPY_RESPONSE))
    assert (result.exit_code, result.stdout) == (
        0, "1 produces entry checked: 0 errors, 0 warnings, 0 infos; compatible\n"
    )


@pytest.mark.parametrize(
    ("request_fields", "response_fields", "line"),
    [
        # The producer does not send a property the owner requires.
        ({"orderId": "string"}, COPY_RESPONSE,
         "error: orders -> payments: payments:capture@v1.request.amount: request-property-added-required"),
        # The producer sends what the owner's constraint refuses.
        ({"orderId": "string", "amount": "integer"}, COPY_RESPONSE,
         "error: orders -> payments: payments:capture@v1.request.amount: request-constraint-tightened"),
        # The producer decodes a narrower response than the owner answers.
        (COPY_REQUEST, {**COPY_RESPONSE, "status": "Status"},
         "error: orders -> payments: payments:capture@v1.response.status: response-type-widened"),
        # The producer expects a property the owner never answers.
        (COPY_REQUEST, {**COPY_RESPONSE, "fee": "integer?"},
         "error: orders -> payments: payments:capture@v1.response.fee: response-property-removed"),
    ],
)
def test_a_broken_copy_fails_with_both_services_and_the_path(
    tmp_path: Path, request_fields: dict[str, Any], response_fields: dict[str, Any], line: str
) -> None:
    producer = orders(request_fields, response_fields)
    producer["enums"] = {"Status": {"values": ["captured"]}}
    result = compat(tmp_path, producer)
    assert result.exit_code == 1, result.output
    assert any(text.startswith(line) for text in result.stdout.splitlines()), result.stdout
    assert result.stdout.splitlines()[-1].endswith("; incompatible")
    # The runtime's verdict on the built documents (the producer's descriptor, the owner's spec) agrees.
    key, direction = "payments:capture@v1", line.split(".")[1]
    copy = produced_schemas(load_manifest(tmp_path / "orders.yaml"), tmp_path / "out")[key]
    served = topic_schemas(load_manifest(tmp_path / "payments.yaml"), tmp_path / "out")[key]
    verdict = (
        first_incompatibility(copy[0], served[0], direction="request") if direction == "request"
        else first_incompatibility(served[1], copy[1], direction="response")
    )
    assert verdict is not None
    path, rule, _ = verdict.split(": ", 2)
    assert line.endswith(f" {key}.{path}: {rule}")


def test_what_only_loosens_is_compatible_but_reported(tmp_path: Path) -> None:
    # The producer sends a property the owner ignores (a warning) and misses one the owner adds (info).
    result = compat(tmp_path, orders({**COPY_REQUEST, "note": "string?"}, {"captureId": "string", "amount": "integer"}))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "warning: orders -> payments: payments:capture@v1.request.note: request-property-removed (string? → none): "
        "old callers still send the property; the service now ignores what they say",
        "info: orders -> payments: payments:capture@v1.response.status: response-property-added (none → string): "
        "old callers ignore a property they do not know",
        "1 produces entry checked: 0 errors, 1 warning, 1 info; compatible",
    ]


def test_a_version_the_owner_does_not_serve_is_an_error(tmp_path: Path) -> None:
    result = compat(tmp_path, orders(COPY_REQUEST, COPY_RESPONSE, version="v9"))
    assert result.exit_code == 1
    assert result.stdout.startswith(
        "error: orders -> payments: payments:capture@v9: topic-version-removed (payments:capture@v9 → none): old "
        "callers of the (topic, version) get unknown-topic\n"
    )


def test_json_output(tmp_path: Path) -> None:
    result = compat(tmp_path, orders({"orderId": "string"}, COPY_RESPONSE), "--format", "json")
    document = json.loads(result.stdout)
    assert result.exit_code == 1
    assert document["summary"] == {"checked": 1, "error": 1, "warning": 0, "info": 0, "breaking": True}
    assert document["unmatched"] == []
    (finding,) = document["findings"]
    assert {key: finding[key] for key in ("producer", "owner", "rule", "path")} == {
        "producer": "orders", "owner": "payments", "rule": "request-property-added-required",
        "path": "payments:capture@v1.request.amount",
    }


def test_unreadable_input_exits_2_with_one_line(tmp_path: Path) -> None:
    result = run(write(tmp_path, "payments", PAYMENTS), str(tmp_path / "missing.yaml"))
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [f"{tmp_path / 'missing.yaml'}:1:1: manifest file not found"]


def test_a_levels_file_lowers_a_rule(tmp_path: Path) -> None:
    levels = tmp_path / "levels.yaml"
    levels.write_text("request-property-added-required: warning\n", encoding="utf-8")
    result = compat(tmp_path, orders({"orderId": "string"}, COPY_RESPONSE), "--levels", str(levels))
    assert result.exit_code == 0, result.output


def test_a_producer_taking_its_types_from_the_owner_is_compatible_by_construction() -> None:
    report = compat_manifests([load_manifest(EXAMPLES / "orders.yaml"), load_manifest(EXAMPLES / "payments.yaml")])
    assert (report.checked, report.findings) == (1, ())


def test_rev_path_reads_the_owner_a_from_entry_names_at_the_same_revision(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, "payments", PAYMENTS)
    producer = {"svcgen": 1, "service": "orders", "produces": [{"id": "payments:capture", "from": "payments.yaml"}]}
    write(tmp_path, "orders", producer)
    for arguments in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "estate"]):
        git(tmp_path, *arguments)
    (tmp_path / "payments.yaml").unlink()  # only the committed copy is left
    monkeypatch.chdir(tmp_path)
    result = run("HEAD:orders.yaml", "HEAD:payments.yaml")
    assert result.exit_code == 0, result.output
    assert result.stdout == "1 produces entry checked: 0 errors, 0 warnings, 0 infos; compatible\n"
