"""`svcgen diff` and `svcgen compat` cover events: the payload travels publisher → subscriber, so the
response-direction rules judge it, and a subscriber's copy is checked against its publisher."""

from __future__ import annotations

from pathlib import Path

from svcgen.contractdiff import compat_manifests, diff_manifests
from svcgen.manifest import load_manifest_text
from tests.support.codegen import REPO, run_cli

PUBLISHER = """svcgen: 1
service: orders
types:
  OrderPlaced:
    fields:
      orderId: string
      total: integer
FIELDS
events:
  - {id: "orders:placed", version: v1, payload: OrderPlaced, key: orderId}
"""
SUBSCRIBER = """svcgen: 1
service: notify
types:
  OrderPlaced:
    fields:
      orderId: string
      total: integer
subscribes:
  - {id: "orders:placed", version: v1, publisher: orders, payload: OrderPlaced}
"""


def _publisher(extra: str = "", drop_total: bool = False) -> str:
    text = PUBLISHER.replace("FIELDS\n", extra)
    return text.replace("      total: integer\n", "") if drop_total else text


def test_removing_a_payload_field_breaks_subscribers_and_adding_one_does_not() -> None:
    old = load_manifest_text(_publisher(), "orders.yaml")
    removed = diff_manifests(old, load_manifest_text(_publisher(drop_total=True), "orders.yaml"))
    rules = {(finding.rule, finding.path, finding.level) for finding in removed.findings}
    assert ("response-property-removed", "orders:placed@v1.payload.total", "error") in rules
    assert ("topic-version-not-bumped", "orders:placed@v1", "error") in rules
    [gate] = [finding for finding in removed.findings if finding.rule == "topic-version-not-bumped"]
    assert gate.why == "breaking change inside a published version: orders:placed@v1.payload.total"  # its payload
    assert removed.breaking
    added = diff_manifests(old, load_manifest_text(_publisher("      note: string?\n"), "orders.yaml"))
    assert [(f.rule, f.path, f.level) for f in added.findings] == [
        ("response-property-added", "orders:placed@v1.payload.note", "info")
    ]
    gone = diff_manifests(old, load_manifest_text(_publisher().split("events:")[0], "orders.yaml"))
    assert [(f.rule, f.path) for f in gone.findings if f.level == "error"] == [
        ("topic-version-removed", "orders:placed@v1")
    ]


def test_compat_checks_a_subscribers_copy_against_its_publisher(tmp_path: Path) -> None:
    subscriber = load_manifest_text(SUBSCRIBER, "notify.yaml")
    fine = compat_manifests([load_manifest_text(_publisher(), "orders.yaml"), subscriber])
    assert not fine.breaking and (fine.checked, fine.subscriptions) == (0, 1)
    assert "1 subscription checked" in fine.summary()
    broken = compat_manifests([load_manifest_text(_publisher(drop_total=True), "orders.yaml"), subscriber])
    assert [item.line() for item in broken.findings] == [
        "error: notify -> orders: orders:placed@v1.payload.total: response-property-removed (integer → none): "
        + broken.findings[0].finding.why
    ]
    (tmp_path / "orders.yaml").write_text(_publisher(drop_total=True))
    (tmp_path / "notify.yaml").write_text(SUBSCRIBER)
    result = run_cli("compat", str(tmp_path / "orders.yaml"), str(tmp_path / "notify.yaml"), cwd=REPO)
    assert result.returncode == 1 and "orders:placed@v1.payload.total" in result.stdout
