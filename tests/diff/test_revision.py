"""Manifests read at a git revision (`REV:PATH`) read exactly as from disk: every manifest of the repository
diffs clean against itself at HEAD, a random manifest reads the same either way, and a file the revision cannot
give is named with git's reason."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given

from svcgen.cli import main
from svcgen.manifest import ManifestError, load_manifest
from svcgen.manifest.revision import load_manifest_at
from tests.manifest.test_properties import SETTINGS, manifests
from tests.support.diffs import REPO
from tests.support.manifests import manifest_yaml

MANIFEST_FOLDERS = ("examples/manifests", "tests/codegen/manifests", "tests/golden/errors")


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args], cwd=repo, check=True,
                   capture_output=True, timeout=60)


def committed(repo: Path) -> None:
    if not (repo / ".git").exists():
        git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "snapshot", "--allow-empty")


def valid_manifests(root: Path) -> list[str]:
    """Every manifest under the copied folders that loads (the error goldens hold invalid ones too)."""
    found = []
    for path in sorted(root.rglob("*.yaml")):
        relative = path.relative_to(root).as_posix()
        try:
            load_manifest(path)
        except ManifestError:
            continue
        found.append(relative)
    return found


def test_every_example_and_test_manifest_diffs_clean_against_itself_at_head(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo = tmp_path / "repo"
    for folder in [*MANIFEST_FOLDERS, *(path.relative_to(REPO).as_posix() for path in REPO.glob("tests/**/manifests"))]:
        if (REPO / folder).is_dir() and not (repo / folder).exists():
            shutil.copytree(REPO / folder, repo / folder, ignore=shutil.ignore_patterns("__pycache__"))
    committed(repo)
    monkeypatch.chdir(repo)
    paths = valid_manifests(repo)
    assert "examples/manifests/orders.yaml" in paths and len(paths) >= 5, paths
    for path in paths:
        result = CliRunner().invoke(main, ["diff", f"HEAD:{path}", path, "--format", "json"], catch_exceptions=False)
        assert result.exit_code == 0, (path, result.output)
        assert '"findings": []' in result.output, (path, result.output)


OWNER = """\
svcgen: 1
service: payments
types:
  Charge:
    fields:
      ref: {type: string?, maxLength: 5}
      amount: {type: integer, minimum: 1}
topics:
  - {id: payments:charge, request: Charge, response: Charge}
"""

PRODUCER = """\
svcgen: 1
service: checkout
types:
  Cart: {fields: {note: {type: string?, maxLength: 5}}}
topics:
  - {id: checkout:pay, request: Cart, response: Cart}
produces:
  - id: payments:charge
    from: ../payments/payments.yaml
"""


def test_a_from_entry_whose_owner_uses_flow_mappings_reads_at_a_revision(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo = tmp_path / "repo"
    (repo / "payments").mkdir(parents=True)
    (repo / "checkout").mkdir()
    (repo / "payments" / "payments.yaml").write_text(OWNER)
    (repo / "checkout" / "checkout.yaml").write_text(PRODUCER)
    committed(repo)
    monkeypatch.chdir(repo)
    for args in (["diff", "HEAD:checkout/checkout.yaml", "checkout/checkout.yaml"],
                 ["compat", "HEAD:checkout/checkout.yaml", "HEAD:payments/payments.yaml"]):
        result = CliRunner().invoke(main, args, catch_exceptions=False)
        assert result.exit_code == 0, result.output
    at_head = load_manifest_at("HEAD", "checkout/checkout.yaml", repo).manifest
    # The owner's type, under its namespace (docs/manifest.md, "Types for an estate").
    assert at_head.produces[0].request.name == "payments_Charge"
    taken = {record.name: record for record in at_head.types}["payments_Charge"]
    assert [item.wire for item in taken.fields] == ["ref", "amount"]
    assert taken.fields[0].contract == {"maxLength": 5}


def test_an_owner_the_revision_lacks_is_named_with_gits_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = tmp_path / "repo"
    (repo / "checkout").mkdir(parents=True)
    (repo / "checkout" / "checkout.yaml").write_text(PRODUCER)
    committed(repo)
    monkeypatch.chdir(repo)
    result = CliRunner().invoke(main, ["diff", "HEAD:checkout/checkout.yaml", "checkout/checkout.yaml"])
    assert result.exit_code == 2, result.output
    message = result.stderr
    assert "HEAD:checkout/checkout.yaml:" in message  # positioned at the entry, named at the revision
    assert "HEAD:payments/payments.yaml" in message and "does not exist" in message  # git's own reason
    assert "svcgen-rev-" not in message  # never the scratch copy


def test_a_path_in_no_revision_and_not_on_disk_is_not_called_added_since(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`svcgen diff HEAD:chekout/checkout.yaml ...` (a typo) said "is not in HEAD (added since)", sending the user
    looking for a commit; a file neither in the revision nor on disk gets git's own reason. A file on disk that the
    revision lacks is still the manifest added since."""
    repo = tmp_path / "repo"
    (repo / "checkout").mkdir(parents=True)
    (repo / "checkout" / "checkout.yaml").write_text(OWNER)
    committed(repo)
    monkeypatch.chdir(repo)
    result = CliRunner().invoke(main, ["diff", "HEAD:chekout/checkout.yaml", "checkout/checkout.yaml"])
    assert result.exit_code == 2
    assert "added since" not in result.stderr and "does not exist in 'HEAD'" in result.stderr, result.stderr
    (repo / "checkout" / "new.yaml").write_text(OWNER)
    result = CliRunner().invoke(main, ["diff", "HEAD:checkout/new.yaml", "checkout/new.yaml"])
    assert result.exit_code == 2 and "checkout/new.yaml is not in HEAD (added since)" in result.stderr


def flow_text(data: dict[str, Any]) -> str:
    """The manifest with leaf mappings in flow style and nullable scalar types written plainly inside them
    (`{type: string?, maxLength: 5}`), as people write them."""
    text = manifest_yaml(data, sort_keys=False, allow_unicode=True, width=1000, default_flow_style=None)
    return re.sub(r"'([a-z]+\?)'", r"\1", text)


def nullable_bounds(data: dict[str, Any]) -> dict[str, Any]:
    for record in data["types"].values():
        record["fields"]["zzNote"] = {"type": "string?", "maxLength": 5}
    return data


@SETTINGS
@given(manifests().map(nullable_bounds))
def test_a_manifest_read_at_a_revision_equals_the_file_read_from_disk(data: dict[str, Any]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        repo = Path(folder)
        (repo / "svc").mkdir()
        (repo / "svc" / "m.yaml").write_text(flow_text(data), encoding="utf-8")
        committed(repo)
        from_disk = load_manifest(repo / "svc" / "m.yaml")
        at_revision = load_manifest_at("HEAD", "svc/m.yaml", repo).manifest
    assert replace(at_revision, path="") == replace(from_disk, path="")
