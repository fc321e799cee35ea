"""The gate as CI runs it: approvals by fingerprint, `check --against` over several revisions and tag globs
(each finding naming the revisions it breaks), compat against the owners `from:` names, and whole-service
changes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from svcgen.cli import main
from svcgen.contractdiff import across_revisions, diff_manifests
from svcgen.manifest import load_manifest
from tests.support.diffs import REPO, manifest_document, write_manifest

V1: dict[str, Any] = {"types": {"Req": {"fields": {"sku": "string"}}, "Res": {"fields": {"orderId": "string"}}}}
V2_BREAKS: dict[str, Any] = {
    "types": {"Req": {"fields": {"sku": "string", "couponCode": "string"}}, "Res": {"fields": {"orderId": "string"}}}
}


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args], cwd=repo, check=True,
                   capture_output=True, timeout=60)


def test_an_approved_fingerprint_is_accepted_and_the_others_still_fail(tmp_path: Path) -> None:
    old = str(write_manifest(tmp_path / "old", V1))
    new = str(write_manifest(tmp_path / "new", {**V2_BREAKS, "service": "ordering"}))
    first = json.loads(run("diff", old, new, "--format", "json").stdout)["findings"]
    by_rule = {finding["rule"]: finding["fingerprint"] for finding in first}
    approvals = tmp_path / "approvals.yaml"
    approvals.write_text(yaml.safe_dump([
        {"fingerprint": by_rule["request-property-added-required"], "reason": "no caller sends Req yet (TICKET-1)"},
        {"fingerprint": by_rule["topic-version-not-bumped"], "reason": "same: v1 has no callers"},
    ]))
    still_failing = run("diff", old, new, "--accept", str(approvals))
    assert still_failing.exit_code == 1  # the rename is not approved
    assert "accepted error: orders:place@v1.request.couponCode" in still_failing.stdout
    assert "no caller sends Req yet (TICKET-1)" in still_failing.stdout
    assert still_failing.stdout.splitlines()[-1].endswith("0 warnings, 0 infos, 2 accepted; breaking")

    approvals.write_text(json.dumps([{"fingerprint": finding["fingerprint"], "reason": "agreed in review"}
                                     for finding in first] + [{"fingerprint": "0" * 16, "reason": "long fixed"}]))
    passing = run("diff", old, new, "--accept", str(approvals), "--format", "json")
    assert passing.exit_code == 0, passing.output
    assert passing.stderr == f"warning: {approvals}: approval {'0' * 16} matches no finding; remove it\n"
    document = json.loads(passing.stdout)
    assert all(finding["accepted"] is True and finding["reason"] == "agreed in review"
               for finding in document["findings"])
    assert document["summary"] == {"error": 0, "warning": 0, "info": 0, "accepted": 3, "breaking": False}


def test_the_docs_approvals_walkthrough_is_what_the_cli_prints(tmp_path: Path) -> None:
    # docs/contract-diff.md approves the example at its top: both of its errors must be approved to pass the gate.
    text = (REPO / "docs" / "contract-diff.md").read_text(encoding="utf-8")
    section = text.split("## Approvals: fingerprints and `--accept`", 1)[1]
    approvals_block, after = section.split("```yaml\n", 1)[1].split("```\n", 1)
    printed_block = after.split("```\n", 2)[1]
    approvals = tmp_path / "approvals.yaml"
    approvals.write_text(approvals_block, encoding="utf-8")
    response = {"orderId": "string", "trackingUrl": "string?"}
    old = str(write_manifest(tmp_path / "old", V1))
    new = str(write_manifest(tmp_path / "new", {"types": {**V2_BREAKS["types"], "Res": {"fields": response}}}))
    result = run("diff", old, new, "--accept", str(approvals))
    assert (result.exit_code, result.stdout) == (0, printed_block)


def test_a_fingerprint_survives_unrelated_edits(tmp_path: Path) -> None:
    def fingerprints(old: dict[str, Any], new: dict[str, Any], name: str) -> dict[str, str]:
        result = run("diff", str(write_manifest(tmp_path / name / "a", old)),
                     str(write_manifest(tmp_path / name / "b", new)), "--format", "json")
        return {finding["path"]: finding["fingerprint"] for finding in json.loads(result.stdout)["findings"]}

    plain = fingerprints(V1, V2_BREAKS, "plain")
    edited = {"types": {**V2_BREAKS["types"], "Other": {"fields": {"x": "string"}}},
              "topics": [*manifest_document({})["topics"],
                         {"id": "orders:other", "request": "Other", "response": "Res"}]}
    unrelated = fingerprints({**V1, "types": {**V1["types"], "Other": {"fields": {"x": "string"}}},
                              "topics": edited["topics"]}, edited, "unrelated")
    assert plain["orders:place@v1.request.couponCode"] == unrelated["orders:place@v1.request.couponCode"]


@pytest.mark.parametrize(("content", "fragment"), [
    ("{fingerprint: abc}", "expected a list"),
    ("[{fingerprint: 0123456789abcdef}]", "exactly the keys fingerprint and reason"),
    ("[{fingerprint: nothex, reason: x}]", "is not 16 hex digits"),
    ("[{fingerprint: 0123456789abcdef, reason: ''}]", "the reason must say why"),
])
def test_a_bad_approvals_file_is_one_clear_line(tmp_path: Path, content: str, fragment: str) -> None:
    approvals = tmp_path / "approvals.yaml"
    approvals.write_text(content)
    manifest = str(write_manifest(tmp_path, V1))
    result = run("diff", manifest, manifest, "--accept", str(approvals))
    assert result.exit_code == 2 and len(result.stderr.splitlines()) == 1 and fragment in result.stderr


def test_renaming_the_service_or_moving_its_prefix_is_breaking(tmp_path: Path) -> None:
    old = str(write_manifest(tmp_path / "old", V1))
    new = str(write_manifest(tmp_path / "new", {**V1, "service": "ordering", "prefix": "/ops"}))
    result = run("diff", old, new)
    assert result.exit_code == 1
    assert result.stdout.startswith("error: prefix: prefix-changed (/svc → /ops): ")
    assert "error: service: service-renamed (orders → ordering): " in result.stdout


def release(repo: Path, fragment: dict[str, Any], tag: str) -> None:
    write_manifest(repo, fragment)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", tag)
    git(repo, "tag", tag)


def svcgen(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    import sys

    return subprocess.run([sys.executable, "-m", "svcgen", *args], cwd=repo, capture_output=True, text=True,
                          timeout=120, check=False)


def test_check_against_a_tag_glob_names_the_releases_each_finding_breaks(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    git(tmp_path, "init", "-q", str(repo))
    with_note = {"types": {"Req": {"fields": {"sku": "string"}},
                           "Res": {"fields": {"orderId": "string", "note": "string"}}}}
    release(repo, V1, "v1.0")
    release(repo, with_note, "v1.1")  # adds a response property: removing it breaks v1.1's callers only
    write_manifest(repo, {"types": {"Req": {"fields": {"sku": "string", "couponCode": "string"}},
                                    "Res": {"fields": {"orderId": "string"}}}})
    assert svcgen(repo, "build", "orders.yaml", "-o", "out").returncode == 0
    done = svcgen(repo, "check", "orders.yaml", "-o", "out", "--against", "v*")
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert "contract of orders.yaml against v*:" in lines
    coupon = next(line for line in lines if ".request.couponCode: request-property-added-required" in line)
    assert coupon.endswith("(breaks v1.0, v1.1)")
    note = next(line for line in lines if ".response.note: response-property-removed" in line)
    assert note.endswith("(breaks v1.1)")

    repeated = svcgen(repo, "check", "orders.yaml", "-o", "out", "--against", "v1.0", "--against", "HEAD")
    assert repeated.returncode == 1 and "(breaks v1.0, HEAD)" in repeated.stdout
    missing = svcgen(repo, "check", "orders.yaml", "-o", "out", "--against", "release-*")
    assert missing.returncode == 2 and "no git tag matches 'release-*'" in missing.stderr


def test_check_against_a_revision_from_before_the_manifest_existed_passes_a_new_contract(tmp_path: Path) -> None:
    # A pull request adding a service ran `check --against origin/main` and failed (exit 2) with git's
    # "exists on disk, but not in 'main'": a new contract has no callers at that revision to break.
    repo = tmp_path / "repo"
    git(tmp_path, "init", "-q", str(repo))
    (repo / "README").write_text("estate\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "before")
    git(repo, "tag", "v0")
    release(repo, V1, "v1.0")
    write_manifest(repo, V2_BREAKS)
    assert svcgen(repo, "build", "orders.yaml", "-o", "out").returncode == 0
    new = svcgen(repo, "check", "orders.yaml", "-o", "out", "--against", "v0")
    assert new.returncode == 0, new.stderr
    assert "--against v0: orders.yaml is not in v0: a new contract, nothing there to break" in new.stderr
    assert "no contract changes" in new.stdout
    # Beside a revision that has it, that one is still judged; a revision git does not know still fails.
    both = svcgen(repo, "check", "orders.yaml", "-o", "out", "--against", "v*")
    assert both.returncode == 1 and "(breaks v1.0)" in both.stdout, both.stdout
    unknown = svcgen(repo, "check", "orders.yaml", "-o", "out", "--against", "no-such-rev")
    assert unknown.returncode == 2 and "no-such-rev" in unknown.stderr


def test_against_several_revisions_only_an_error_says_it_breaks_them(tmp_path: Path) -> None:
    # An info or a warning breaks nobody: its line names the revisions it appears against.
    old = load_manifest(str(write_manifest(tmp_path / "old", V1)))
    new = load_manifest(str(write_manifest(tmp_path / "new", {"types": {
        "Req": {"fields": {"sku": "string", "couponCode": "string"}},
        "Res": {"fields": {"orderId": "string", "note": "string?"}}}})))
    merged = across_revisions([("v1.0", diff_manifests(old, new)), ("v1.1", diff_manifests(old, new))])
    lines = {finding.rule: finding.line() for finding in merged.findings}
    assert lines["request-property-added-required"].endswith(" (breaks v1.0, v1.1)")
    assert lines["response-property-added"].startswith("info: ")
    assert lines["response-property-added"].endswith(" (appears against v1.0, v1.1)")


OWNER = {"svcgen": 1, "service": "payments",
         "types": {"Pay": {"fields": {"amount": "integer", "currency": "string"}},
                   "Paid": {"fields": {"id": "string"}}},
         "topics": [{"id": "payments:capture", "request": "Pay", "response": "Paid"},
                    {"id": "payments:refund", "request": "Pay", "response": "Paid"}]}


def checked_against_head(tmp_path: Path, checkout: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """`svcgen check --against HEAD` of `checkout` committed beside the payments owner (OWNER)."""
    repo = tmp_path / "repo"
    git(tmp_path, "init", "-q", str(repo))
    for service, manifest in (("payments", OWNER), ("checkout", checkout)):
        (repo / service).mkdir()
        (repo / service / f"{service}.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "one")
    assert svcgen(repo, "build", "checkout/checkout.yaml", "-o", "out").returncode == 0
    return svcgen(repo, "check", "checkout/checkout.yaml", "-o", "out", "--against", "HEAD")


def test_check_against_runs_compat_with_the_owners_from_names(tmp_path: Path) -> None:
    checkout = {"svcgen": 1, "service": "checkout",
                "types": {"Cart": {"fields": {"sku": "string"}}, "Refund": {"fields": {"amount": "integer"}},
                          "Receipt": {"fields": {"id": "string"}}},
                "topics": [{"id": "checkout:pay", "request": "Cart", "response": "Cart"}],
                "produces": [{"id": "payments:capture", "from": "../payments/payments.yaml"},
                             {"id": "payments:refund", "request": "Refund", "response": "Receipt"}]}
    done = checked_against_head(tmp_path, checkout)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "produces entries of checkout/checkout.yaml against their owners:" in done.stdout
    assert ("error: checkout -> payments: payments:refund.request.currency: request-property-added-required"
            in done.stdout)  # checkout's own copy of Refund lacks the currency payments requires
    assert "2 produces entries checked: 1 error" in done.stdout


def test_check_against_runs_compat_with_the_owners_imports_names(tmp_path: Path) -> None:
    """A consumer that imports its owner for the types (imports:) but keeps its own copy of a produced topic: the
    owner's manifest resolves, so check --against judges the copy against it (DESIGN §11), as svcgen compat does."""
    checkout = {"svcgen": 1, "service": "checkout", "imports": {"payments": "../payments/payments.yaml"},
                "types": {"Cart": {"fields": {"sku": "string"}}, "Refund": {"fields": {"amount": "integer"}}},
                "topics": [{"id": "checkout:pay", "request": "Cart", "response": "Cart"}],
                "produces": [{"id": "payments:refund", "request": "Refund", "response": "payments.Paid"}]}
    done = checked_against_head(tmp_path, checkout)
    assert done.returncode == 1, done.stdout + done.stderr
    assert ("error: checkout -> payments: payments:refund.request.currency: request-property-added-required"
            in done.stdout)  # checkout's own copy of Refund lacks the currency payments requires
    assert "1 produces entry checked: 1 error" in done.stdout


@pytest.mark.parametrize("fingerprint", ["1234567890123456", "0123456701234567", "1234567890123e45"])
def test_a_fingerprint_of_digits_is_read_as_written_unquoted(tmp_path: Path, fingerprint: str) -> None:
    # YAML would read these as an integer, an octal integer and a float; a fingerprint is text.
    approvals = tmp_path / "approvals.yaml"
    approvals.write_text(f"- fingerprint: {fingerprint}\n  reason: agreed\n")
    manifest = str(write_manifest(tmp_path, V1))
    result = run("diff", manifest, manifest, "--accept", str(approvals))
    assert result.exit_code == 0, result.output
    assert result.stderr == f"warning: {approvals}: approval {fingerprint} matches no finding; remove it\n"
