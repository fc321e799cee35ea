"""`svcgen diff` and `svcgen check --against` as users and CI run them: exit statuses, the gate, the levels
file, the JSON output, REV:PATH from git, and clean one-line errors."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from svcgen.cli import main
from svcgen.contractdiff import RULES, rule_table
from tests.support.diffs import REPO, write_manifest

EXAMPLES = REPO / "examples" / "manifests"
V1: dict[str, Any] = {"types": {"Req": {"fields": {"sku": "string"}}, "Res": {"fields": {"orderId": "string"}}}}
BREAKING: dict[str, Any] = {
    "types": {"Req": {"fields": {"sku": "string", "couponCode": "string"}}, "Res": {"fields": {"orderId": "string"}}}
}


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def pair(tmp_path: Path, old: dict[str, Any], new: dict[str, Any]) -> tuple[str, str]:
    return str(write_manifest(tmp_path / "old", old)), str(write_manifest(tmp_path / "new", new))


def assert_usage_error(result: Result, *fragments: str) -> None:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    for fragment in fragments:
        assert fragment in lines[0]


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args], cwd=repo, check=True,
                   capture_output=True, timeout=60)


def test_a_no_op_rewrite_with_reordered_keys_finds_nothing(tmp_path: Path) -> None:
    shutil.copytree(EXAMPLES / "schemas", tmp_path / "schemas")
    shutil.copy(EXAMPLES / "payments.yaml", tmp_path)  # orders takes payments:capture from it
    document = yaml.safe_load((EXAMPLES / "orders.yaml").read_text(encoding="utf-8"))
    rewritten = tmp_path / "orders.yaml"
    # sort_keys reorders every mapping: top-level keys, types, and each record's fields.
    rewritten.write_text(yaml.safe_dump(document, sort_keys=True, default_flow_style=True), encoding="utf-8")
    result = run("diff", str(EXAMPLES / "orders.yaml"), str(rewritten))
    assert (result.exit_code, result.stdout) == (0, "no contract changes\n")


def test_a_breaking_change_fails_with_the_gate_and_its_fix(tmp_path: Path) -> None:
    result = run("diff", *pair(tmp_path, V1, BREAKING))
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert re.fullmatch(re.escape(
        "error: orders:place@v1: topic-version-not-bumped: breaking change inside a published version: "
        "orders:place@v1.request.couponCode; fix: add orders:place version v2 with the new contract and keep "
        "version v1 as it was") + r" \[[0-9a-f]{16}\]", lines[0])  # the fingerprint, for an approvals file
    assert lines[1].startswith("error: orders:place@v1.request.couponCode: request-property-added-required (none → "
                               "string): ")
    assert lines[-1] == "2 contract changes: 2 errors, 0 warnings, 0 infos; breaking"


def test_a_new_version_beside_the_old_one_passes_and_removing_the_old_one_fails(tmp_path: Path) -> None:
    bumped: dict[str, Any] = {
        "types": {**BREAKING["types"], "ReqV1": V1["types"]["Req"]},
        "topics": [{"id": "orders:place", "version": "v1", "request": "ReqV1", "response": "Res"},
                   {"id": "orders:place", "version": "v2", "request": "Req", "response": "Res"}],
    }
    kept = run("diff", *pair(tmp_path / "kept", V1, bumped))
    assert kept.exit_code == 0, kept.stdout
    assert kept.stdout.splitlines()[0].startswith("info: orders:place@v2: topic-version-added")
    dropped = {**bumped, "topics": bumped["topics"][1:]}
    removed = run("diff", *pair(tmp_path / "dropped", V1, dropped))
    assert removed.exit_code == 1
    assert "error: orders:place@v1: topic-version-removed" in removed.stdout


def test_a_version_route_serves_every_version_wherever_it_is_declared(tmp_path: Path) -> None:
    # `versions: [v1, v2]` declares its routes on the newest; `{version}` still serves v1, so adding v3 (or moving the
    # route to another entry of the topic) leaves each version's routes as they were.
    versioned = {"id": "orders:place", "versions": ["v1", "v2"], "request": "Req", "response": "Res",
                 "routes": ["POST /{version}/orders"]}
    old = {**V1, "versions": ["v1", "v2", "v3"], "topics": [versioned]}
    new = {**old, "topics": [{**versioned, "versions": ["v1", "v2", "v3"]}]}
    added = run("diff", *pair(tmp_path / "added", old, new))
    assert (added.exit_code, added.stdout.splitlines()) == (0, [
        "info: orders:place@v3: topic-version-added (none → orders:place@v3): a new (topic, version) beside the "
        "existing ones; old callers are unaffected",
        "1 contract change: 0 errors, 0 warnings, 1 info; compatible"])
    entries = [{"id": "orders:place", "version": version, "request": "Req", "response": "Res"}
               for version in ("v1", "v2")]
    first = {**V1, "topics": [{**entries[0], "routes": ["POST /{version}/orders"]}, entries[1]]}
    second = {**V1, "topics": [entries[0], {**entries[1], "routes": ["POST /{version}/orders"]}]}
    moved = run("diff", *pair(tmp_path / "moved", first, second))
    assert (moved.exit_code, moved.stdout) == (0, "no contract changes\n")


ROUTE_MOVED = ("warning: orders:place@v2.routes: route-version-changed (POST /orders (v2) → POST /orders (v3)): old "
               "callers of the route now reach the other version of the topic and get its contract (what in it "
               "breaks them is reported at the route); a caller that must keep its version names it (a `{version}` "
               "route or a version header)")


def test_adding_a_version_moves_the_plain_routes_to_it_which_is_a_warning_not_a_break(tmp_path: Path) -> None:
    # The docs' own shape: plain routes sit on the newest version, so adding v3 moves `POST /orders` from v2 to v3;
    # v2 is still served (by `{version}` and invoke), so it is no break inside v2 and needs no v4.
    versioned = {"id": "orders:place", "versions": ["v1", "v2"], "request": "Req", "response": "Res",
                 "routes": ["POST /orders", "POST /{version}/orders"]}
    old = {**V1, "versions": ["v1", "v2", "v3"], "topics": [versioned]}
    new = {**old, "topics": [{**versioned, "versions": ["v1", "v2", "v3"]}]}
    result = run("diff", *pair(tmp_path, old, new))
    assert (result.exit_code, result.stdout.splitlines()) == (0, [
        ROUTE_MOVED,
        "info: orders:place@v3: topic-version-added (none → orders:place@v3): a new (topic, version) beside the "
        "existing ones; old callers are unaffected",
        "2 contract changes: 0 errors, 1 warning, 1 info; compatible"])


ROUTED = {"id": "orders:place", "versions": ["v1", "v2"], "request": "Req", "response": "Res",
          "routes": ["POST /orders", "POST /{version}/orders"]}


def moved(tmp_path: Path, req: dict[str, Any], res: dict[str, Any],
          versions: tuple[str, ...] = ("v1", "v2", "v3")) -> tuple[str, str]:
    """v3 added (the topic's new `versions`), its fields `req` and `res` laid over v1/v2's: `POST /orders` moves from
    v2 to v3."""
    old = {"versions": ["v1", "v2", "v3"], "topics": [ROUTED],
           "types": {"Req": {"fields": {"sku": "string"}}, "Res": {"fields": {"orderId": "string", "total": "float"}}}}
    new = {**old, "topics": [{**ROUTED, "versions": list(versions)}],
           "types": {"Req": {"fields": {"sku": "string", **req}},
                     "Res": {"fields": {"orderId": "string", "total": "float", **res}}}}
    return pair(tmp_path, old, new)


def route_breaks(fix: str) -> list[str]:
    """The two errors `moved` with a required couponCode added and total removed gives at POST /orders, each with
    `fix`."""
    return [
        "error: orders:place@v2.routes[POST /orders → v3].request.couponCode: request-property-added-required "
        "(none → string): old callers do not send the new property, so their requests are refused" + fix,
        "error: orders:place@v2.routes[POST /orders → v3].response.total: response-property-removed (float → none): "
        "old callers expect the property and no longer get it" + fix,
    ]


def test_a_plain_route_moved_to_a_breaking_version_fails_the_gate_at_the_route(tmp_path: Path) -> None:
    # Callers of `POST /orders` were written against v2 and now get v3: a required request field they do not send
    # and a response field they read that is gone are errors for them, though v2 itself did not change (no v4 asked).
    old, new = moved(tmp_path, {"couponCode": {"type": "string", "added": "v3"}},
                     {"total": {"type": "float", "removed": "v3"}})
    result = run("diff", old, new)
    lines = [re.sub(r" \[[0-9a-f]{16}\]$", "", line) for line in result.stdout.splitlines()]
    fix = ("; fix: callers of POST /orders were written against v2 and now get v3: keep v3 compatible with v2 for "
           "them, or have them name v2 (a `{version}` route or a version header) before v3 takes the route")
    assert (result.exit_code, lines) == (1, [
        ROUTE_MOVED,
        *route_breaks(fix),
        "info: orders:place@v3: topic-version-added (none → orders:place@v3): a new (topic, version) beside the "
        "existing ones; old callers are unaffected",
        "4 contract changes: 2 errors, 1 warning, 1 info; breaking"])
    # Levels and approvals take them as any finding.
    levels = tmp_path / "levels.yaml"
    levels.write_text("request-property-added-required: warning\n", encoding="utf-8")
    report = json.loads(run("diff", "--levels", str(levels), "--format", "json", old, new).stdout)
    approvals = tmp_path / "approvals.yaml"
    removed = next(item for item in report["findings"] if item["rule"] == "response-property-removed")
    approvals.write_text(yaml.safe_dump([{"fingerprint": removed["fingerprint"], "reason": "nobody reads total"}]),
                         encoding="utf-8")
    accepted = run("diff", "--levels", str(levels), "--accept", str(approvals), old, new)
    assert accepted.exit_code == 0, accepted.stdout


def test_a_plain_route_moved_to_a_compatible_version_stays_a_warning(tmp_path: Path) -> None:
    result = run("diff", *moved(tmp_path, {"note": {"type": "string?", "added": "v3"}}, {}))
    assert (result.exit_code, result.stdout.splitlines()) == (0, [
        ROUTE_MOVED,
        "info: orders:place@v2.routes[POST /orders → v3].request.note: request-property-added-optional "
        "(none → string?): old callers leave the new nullable property out and it is null",
        "info: orders:place@v3: topic-version-added (none → orders:place@v3): a new (topic, version) beside the "
        "existing ones; old callers are unaffected",
        "3 contract changes: 0 errors, 1 warning, 2 infos; compatible"])


def test_a_plain_route_moved_to_a_breaking_version_when_its_old_one_is_removed_fails_at_the_route(
        tmp_path: Path) -> None:
    # [v1, v2] → [v1, v3]: v2's callers by `{version}` get unknown-topic (topic-version-removed), but `POST /orders`
    # still answers, now with v3, and what v3 breaks for its callers is reported at the route as when v2 is kept.
    old, new = moved(tmp_path, {"couponCode": {"type": "string", "added": "v3"}},
                     {"total": {"type": "float", "removed": "v3"}}, versions=("v1", "v3"))
    result = run("diff", old, new)
    lines = [re.sub(r" \[[0-9a-f]{16}\]$", "", line) for line in result.stdout.splitlines()]
    # v2 is gone, so its callers can no longer name it: the fix says to keep it for them.
    fix = ("; fix: callers of POST /orders were written against v2, which is removed, and now get v3: keep v3 "
           "compatible with v2 for them, or keep v2 for them to name (a `{version}` route or a version header) until "
           "they have moved to v3")
    assert (result.exit_code, lines) == (1, [
        "error: orders:place@v2: topic-version-removed (orders:place@v2 → none): old callers of the (topic, version) "
        "get unknown-topic",
        ROUTE_MOVED,
        *route_breaks(fix),
        "info: orders:place@v3: topic-version-added (none → orders:place@v3): a new (topic, version) beside the "
        "existing ones; old callers are unaffected",
        "5 contract changes: 3 errors, 1 warning, 1 info; breaking"])


def test_a_plain_route_that_falls_back_to_an_older_version_is_one_move_not_also_an_added_route(
        tmp_path: Path) -> None:
    # [v1, v2] → [v1]: POST /orders now reaches v1. It was also reported as `route-added` on v1 ("old callers are
    # unaffected"), beside the move that says they are.
    old = {"versions": ["v1", "v2"], "topics": [ROUTED],
           "types": {"Req": {"fields": {"sku": "string"}},
                     "Res": {"fields": {"orderId": "string", "trackingUrl": {"type": "string", "added": "v2"}}}}}
    result = run("diff", *pair(tmp_path, old, {**old, "topics": [{**ROUTED, "versions": ["v1"]}]}))
    rules = [line.split(": ")[2].split(" ")[0] for line in result.stdout.splitlines()[:-1]]
    assert (result.exit_code, rules) == (1, ["topic-version-removed", "route-version-changed",
                                             "response-property-removed"])  # fmt: skip
    assert "orders:place@v2.routes[POST /orders → v1].response.trackingUrl" in result.stdout


def test_an_event_version_replaced_by_another_is_no_route_move(tmp_path: Path) -> None:
    # An event is walked as a topic with a stand-in route; replacing its version moves no route.
    paths = []
    for name, version in (("old", "v1"), ("new", "v2")):
        document = {"svcgen": 1, "service": "orders", "types": {"Placed": {"fields": {"orderId": "string"}}},
                    "topics": [], "events": [{"id": "orders:placed", "version": version, "payload": "Placed"}]}
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(document), encoding="utf-8")
        paths.append(str(tmp_path / f"{name}.yaml"))
    result = run("diff", *paths)
    assert "route" not in result.stdout, result.stdout
    assert result.stdout.splitlines()[-1] == "2 contract changes: 1 error, 0 warnings, 1 info; breaking"


def test_the_levels_file_overrides_levels_per_rule(tmp_path: Path) -> None:
    old, new = pair(tmp_path, V1, BREAKING)
    lenient = tmp_path / "levels.yaml"
    lenient.write_text("request-property-added-required: warning\n")
    result = run("diff", old, new, "--levels", str(lenient))
    # No error-level change is left, so the gate has nothing to report either.
    assert (result.exit_code, result.stdout.splitlines()[-1]) == (0, "1 contract change: 0 errors, 1 warning, 0 "
                                                                     "infos; compatible")
    strict = tmp_path / "strict.json"
    strict.write_text(json.dumps({"response-property-added": "error"}))
    added = {"types": {**V1["types"], "Res": {"fields": {"orderId": "string", "eta": "string?"}}}}
    stricter = run("diff", *pair(tmp_path / "strict", V1, added), "--levels", str(strict))
    assert stricter.exit_code == 1
    assert "error: orders:place@v1.response.eta: response-property-added" in stricter.stdout
    assert "topic-version-not-bumped" in stricter.stdout


@pytest.mark.parametrize(("content", "fragment"), [
    ("request-property-became-requird: error\n", "unknown rule id 'request-property-became-requird'; did you mean "
                                                 "'request-property-became-required'?"),
    ("route-added: fatal\n", "rule route-added: level 'fatal' is not one of error, warning, info"),
    ("- route-added\n", "expected a mapping of rule id to level"),
    ("a: [\n", "not a YAML or JSON file"),
])
def test_a_bad_levels_file_is_one_clear_line(tmp_path: Path, content: str, fragment: str) -> None:
    levels = tmp_path / "levels.yaml"
    levels.write_text(content)
    assert_usage_error(run("diff", *pair(tmp_path, V1, V1), "--levels", str(levels)), str(levels), fragment)


def test_json_output_has_a_stable_shape(tmp_path: Path) -> None:
    result = run("diff", *pair(tmp_path, V1, BREAKING), "--format", "json")
    assert result.exit_code == 1
    document = json.loads(result.stdout)
    assert list(document) == ["findings", "summary"]
    assert document["summary"] == {"error": 2, "warning": 0, "info": 0, "breaking": True}
    gate, added = document["findings"]
    assert list(added) == ["rule", "level", "direction", "path", "old", "new", "why", "fix", "fingerprint", "accepted"]
    assert added == {
        "rule": "request-property-added-required", "level": "error", "direction": "request",
        "path": "orders:place@v1.request.couponCode", "old": None, "new": "string",
        "why": "old callers do not send the new property, so their requests are refused", "fix": None,
        "fingerprint": added["fingerprint"], "accepted": False,
    }
    assert re.fullmatch(r"[0-9a-f]{16}", added["fingerprint"]) and added["fingerprint"] != gate["fingerprint"]
    assert (gate["rule"], gate["direction"], gate["path"]) == ("topic-version-not-bumped", "topic", "orders:place@v1")
    assert gate["fix"] == "add orders:place version v2 with the new contract and keep version v1 as it was"


def test_unreadable_inputs_are_usage_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old, _ = pair(tmp_path, V1, V1)
    assert_usage_error(run("diff", old, str(tmp_path / "missing.yaml")), "missing.yaml:1:1: manifest file not found")
    invalid = tmp_path / "invalid.yaml"
    invalid.write_text("svcgen: 1\nservice: Orders\n")
    result = run("diff", str(invalid), old)
    assert result.exit_code == 2 and f"{invalid}:2:10: " in result.stderr
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    monkeypatch.chdir(repo)
    assert_usage_error(run("diff", "no-such-rev:orders.yaml", old), "no-such-rev:orders.yaml: ")


def test_rev_path_reads_the_manifest_and_its_json_schema_at_that_revision(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    service = repo / "service"
    schema: dict[str, Any] = {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}
    (service / "schemas").mkdir(parents=True)
    (service / "schemas" / "req.json").write_text(json.dumps(schema))
    write_manifest(service, {"types": {"Req": {"jsonSchema": "schemas/req.json"}}})
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "v1")
    # Only the schema file changes: the diff must read the committed one for the old side.
    schema["properties"]["couponCode"] = {"type": "string"}
    schema["required"] = ["sku", "couponCode"]
    (service / "schemas" / "req.json").write_text(json.dumps(schema))
    monkeypatch.chdir(repo)
    from_root = run("diff", "HEAD:service/orders.yaml", "service/orders.yaml")
    assert from_root.exit_code == 1
    assert "error: orders:place@v1.request.couponCode: request-property-added-required" in from_root.stdout
    monkeypatch.chdir(service)
    relative = run("diff", "HEAD:./orders.yaml", "orders.yaml")
    assert relative.stdout == from_root.stdout
    assert run("diff", "HEAD:./orders.yaml", "HEAD:service/orders.yaml").stdout == "no contract changes\n"


def test_check_against_a_revision_in_a_git_repository_as_ci_runs_it(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    manifest = write_manifest(repo, V1)
    cli = [sys.executable, "-m", "svcgen"]

    def svcgen(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*cli, *args], cwd=repo, capture_output=True, text=True, timeout=120, check=False)

    assert svcgen("build", manifest.name, "-o", "out").returncode == 0
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "v1")
    clean = svcgen("check", manifest.name, "-o", "out", "--against", "HEAD")
    assert clean.returncode == 0, clean.stderr
    assert "no contract changes" in clean.stdout

    write_manifest(repo, BREAKING)
    assert svcgen("build", manifest.name, "-o", "out").returncode == 0
    broken = svcgen("check", manifest.name, "-o", "out", "--against", "HEAD")
    assert broken.returncode == 1
    assert "out/orders_service is up to date" in broken.stdout, "the package itself is fine"
    assert "topic-version-not-bumped" in broken.stdout and "request-property-added-required" in broken.stdout

    bad_rev = svcgen("check", manifest.name, "-o", "out", "--against", "no-such-rev")
    assert bad_rev.returncode == 2 and bad_rev.stderr.count("\n") == 1 and "--against no-such-rev" in bad_rev.stderr


def partner_key(header: str) -> dict[str, Any]:
    return {**V1, "security": {"schemes": {"partner": {"type": "apiKey", "header": header}}, "default": ["partner"]}}


def test_an_api_key_moved_to_another_header_breaks_its_callers_and_can_be_approved(tmp_path: Path) -> None:
    # Every caller sending the old header is refused (401), as with a changed JWT issuer.
    repo = tmp_path / "repo"
    manifest = write_manifest(repo, partner_key("x-api-key"))
    cli = [sys.executable, "-m", "svcgen"]

    def svcgen(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*cli, *args], cwd=repo, capture_output=True, text=True, timeout=120, check=False)

    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "v1")
    same = str(write_manifest(tmp_path / "same", partner_key("X-API-Key")))  # header names ignore case
    assert run("diff", str(manifest), same).stdout == "no contract changes\n"

    write_manifest(repo, partner_key("x-partner-key"))
    assert svcgen("build", manifest.name, "-o", "out").returncode == 0
    broken = svcgen("check", manifest.name, "-o", "out", "--against", "HEAD")
    assert broken.returncode == 1, broken.stdout + broken.stderr
    line = next(line.strip() for line in broken.stdout.splitlines() if "security-scheme-header-changed" in line)
    assert line.startswith("error: security.schemes.partner.header: security-scheme-header-changed "
                           "(x-api-key → x-partner-key): ")
    assert "; fix: " in line
    fingerprint = re.findall(r"\[([0-9a-f]{16})\]", line)[-1]
    (repo / "approvals.yaml").write_text(f"- {{fingerprint: '{fingerprint}', reason: partners told}}\n")
    approved = svcgen("check", manifest.name, "-o", "out", "--against", "HEAD", "--accept", "approvals.yaml")
    assert approved.returncode == 0, approved.stdout + approved.stderr


def test_the_docs_rule_table_is_the_generated_one() -> None:
    text = (REPO / "docs" / "contract-diff.md").read_text(encoding="utf-8")
    assert rule_table() in text, "regenerate the table in docs/contract-diff.md from svcgen.contractdiff.rule_table()"
    assert len({rule.id for rule in RULES}) == len(RULES)


def test_help_names_the_options() -> None:
    diff_help = run("diff", "--help")
    assert diff_help.exit_code == 0
    assert "--format [text|json]" in diff_help.stdout and "--levels FILE" in diff_help.stdout
    check_help = run("check", "--help")
    assert check_help.exit_code == 0 and "--against REV" in check_help.stdout
