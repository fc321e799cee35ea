"""write_artifacts: the file set, byte-stable output, atomic writes and service names that are never paths."""

from __future__ import annotations

import json
import os
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

from svcgen.collector.artifacts import sanitise, service_file_names, write_artifacts
from svcgen.collector.artifacts.times import Now
from svcgen.collector.artifacts.writer import confined
from svcgen.runtime._jsontext import document_bytes
from tests.support.snapshots import NOW, NOW_EPOCH, empty_snapshot, instance, sample_snapshot

TOP_LEVEL = {"manifest.json", "topology.json", "topics.json", "usage.json", "asyncapi.json", "annotations.json",
             "issues.json", "windows.json"}
HOSTILE_NAMES = ["../../etc/passwd", "/abs", "a/b", "..", ".", "", "nul\x00byte", "ünïcødé", "日本", "a\\b", "CON"]


def _tree(root: Path) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def test_writes_every_artifact(tmp_path: Path) -> None:
    written = write_artifacts(sample_snapshot(), tmp_path, now=NOW_EPOCH)
    assert {path.name for path in written if path.parent == tmp_path} == TOP_LEVEL
    assert written[-1] == tmp_path / "manifest.json"  # last, so it never names a file not yet written
    assert sorted(path.name for path in (tmp_path / "services").iterdir()) == [
        "inventory.json",
        "mesh-collector.json",
        "orders.json",
        "payments-eu.json",
        "payments.json",
    ]
    assert set(_tree(tmp_path)) == {str(path.relative_to(tmp_path)) for path in written}
    annotations = json.loads((tmp_path / "annotations.json").read_bytes())
    assert annotations == {"generatedAtUtc": NOW, "annotations": []}
    for name in TOP_LEVEL - {"asyncapi.json"}:
        assert json.loads((tmp_path / name).read_bytes())["generatedAtUtc"] == NOW


def test_output_is_byte_stable_with_final_newline(tmp_path: Path) -> None:
    write_artifacts(sample_snapshot(), tmp_path / "one", now=NOW_EPOCH)
    write_artifacts(sample_snapshot(), tmp_path / "two", now=NOW_EPOCH)
    write_artifacts(sample_snapshot(), tmp_path / "two", now=NOW_EPOCH)  # rewritten in place
    one, two = _tree(tmp_path / "one"), _tree(tmp_path / "two")
    assert one == two
    for data in one.values():
        assert data.endswith(b"}\n") and b"\r" not in data
        json.loads(data)


def test_input_order_does_not_change_the_bytes(tmp_path: Path) -> None:
    write_artifacts(sample_snapshot(), tmp_path / "one", now=NOW_EPOCH)
    reordered = sample_snapshot()
    for key in ("catalog", "polls", "instances", "counters", "edges"):
        reordered[key].reverse()
    write_artifacts(reordered, tmp_path / "two", now=NOW_EPOCH)
    assert _tree(tmp_path / "one") == _tree(tmp_path / "two")


def test_now_accepts_datetimes_and_epoch_seconds(tmp_path: Path) -> None:
    aware = datetime(2026, 11, 22, 10, 10, tzinfo=UTC)
    nows: list[Now] = [NOW_EPOCH, aware, aware.replace(tzinfo=None)]
    for index, now in enumerate(nows):
        write_artifacts(empty_snapshot(), tmp_path / str(index), now=now)
        assert json.loads((tmp_path / str(index) / "manifest.json").read_bytes())["generatedAtUtc"] == NOW


def test_empty_snapshot_keeps_every_array(tmp_path: Path) -> None:
    write_artifacts(empty_snapshot(), tmp_path, now=NOW_EPOCH)
    assert json.loads((tmp_path / "manifest.json").read_bytes()) == {"generatedAtUtc": NOW, "services": []}
    assert json.loads((tmp_path / "topics.json").read_bytes())["removedTopics"] == []
    assert list((tmp_path / "services").iterdir()) == []


def test_no_temporary_files_are_left(tmp_path: Path) -> None:
    write_artifacts(sample_snapshot(), tmp_path, now=NOW_EPOCH)
    write_artifacts(sample_snapshot(), tmp_path, now=NOW_EPOCH)
    assert not [path for path in tmp_path.rglob("*") if path.name.startswith(".")]


def test_hostile_service_names_stay_inside_services(tmp_path: Path) -> None:
    target = tmp_path / "out"
    snapshot = empty_snapshot()
    snapshot["instances"] = [instance(name, f"i-{index}") for index, name in enumerate(HOSTILE_NAMES)]
    written = write_artifacts(snapshot, target, now=NOW_EPOCH)
    services = (target / "services").resolve()
    service_files = [path for path in written if path.parent.name == "services"]
    assert len(service_files) == len(HOSTILE_NAMES)  # nobody overwrote anybody
    for path in service_files:
        assert path.resolve().parent == services
    assert {path.name for path in tmp_path.rglob("*") if path.is_file()} <= TOP_LEVEL | {p.name for p in service_files}
    named = {json.loads(path.read_bytes())["name"] for path in service_files}
    assert named == set(HOSTILE_NAMES)


def test_sanitising_rule() -> None:
    assert sanitise("orders") == "orders"
    assert sanitise("payments-eu") == "payments-eu"
    assert sanitise("../../etc/passwd") == "_.._etc_passwd"
    assert sanitise("..") == "_"
    assert sanitise("") == "_"
    assert sanitise("/abs") == "_abs"
    assert sanitise("a\x00b") == "a_b"
    assert sanitise("café") == "caf_"
    assert len(sanitise("x" * 500)) == 100


@pytest.mark.parametrize("name", ["con", "CON", "con.json", "Prn", "aux.txt", "nul", "NUL.tar.gz", "com1", "COM9",
                                  "lpt1", "lpt9.x", "con."])  # fmt: skip
def test_windows_device_names_never_become_file_names(name: str) -> None:
    stem = sanitise(name)
    assert stem.startswith("_") and stem[1:].lower().startswith(name[:3].lower())
    assert service_file_names([name])[name] == f"{stem}.json"


@pytest.mark.parametrize("name", ["console", "com", "com10", "lpt0x", "auxiliary", "nullable", "a.con"])
def test_names_that_only_resemble_devices_are_unchanged(name: str) -> None:
    assert sanitise(name) == name


def test_well_formed_names_keep_their_file_and_collisions_get_suffixes() -> None:
    files = service_file_names(["a/b", "a_b", "a:b", "Orders", "orders"])
    assert files["a_b"] == "a_b.json"  # a clean name is never displaced by a hostile one
    assert files["a/b"] == "a_b_2.json"
    assert files["a:b"] == "a_b_3.json"
    assert files["orders"] == "orders.json"  # a manifest-valid name always keeps its file
    assert files["Orders"] == "Orders_2.json"  # case-insensitive file systems
    assert len(set(files.values())) == len(files)


def test_confined_refuses_anything_but_a_plain_file_name(tmp_path: Path) -> None:
    assert confined(tmp_path, "orders.json") == tmp_path / "orders.json"
    for bad in ["", ".", "..", "../x.json", "a/b.json", "/etc/passwd", "a\x00.json"]:
        with pytest.raises(ValueError):
            confined(tmp_path, bad)


def test_a_symlink_planted_at_a_service_file_is_replaced_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside.json"
    outside.write_text("keep")
    (tmp_path / "out" / "services").mkdir(parents=True)
    (tmp_path / "out" / "services" / "orders.json").symlink_to(outside)
    write_artifacts(sample_snapshot(), tmp_path / "out", now=NOW_EPOCH)
    assert outside.read_text() == "keep"
    assert not (tmp_path / "out" / "services" / "orders.json").is_symlink()


def test_files_of_services_that_left_the_estate_are_removed_and_nothing_else(tmp_path: Path) -> None:
    write_artifacts(sample_snapshot(), tmp_path, now=NOW_EPOCH)
    services = tmp_path / "services"
    (services / "notes.txt").write_text("kept: not a service file")
    (services / ".orders.json.abc.tmp").write_text("kept: another writer's temporary file")
    assert (services / "orders.json").exists() and (services / "inventory.json").exists()

    write_artifacts(empty_snapshot(), tmp_path, now=NOW_EPOCH)
    remaining = sorted(path.name for path in services.iterdir())
    assert remaining == [".orders.json.abc.tmp", "notes.txt"]
    assert json.loads((tmp_path / "manifest.json").read_bytes())["services"] == []

    write_artifacts(sample_snapshot(), tmp_path, now=NOW_EPOCH)  # they come back when the services do
    assert (services / "orders.json").exists() and (services / "inventory.json").exists()


def test_artifacts_are_readable_like_any_new_file_and_a_rewrite_keeps_the_mode(tmp_path: Path) -> None:
    # One atomic writer for the runtime and the generator: a new file gets 0o666 less the umask, not 0o600.
    umask = os.umask(0o022)
    try:
        write_artifacts(sample_snapshot(), tmp_path, now=NOW_EPOCH)
        manifest = tmp_path / "manifest.json"
        assert stat.S_IMODE(manifest.stat().st_mode) == 0o644
        manifest.chmod(0o640)
        write_artifacts(sample_snapshot(), tmp_path, now=NOW_EPOCH + 60)
        assert stat.S_IMODE(manifest.stat().st_mode) == 0o640
    finally:
        os.umask(umask)
    assert not [path for path in tmp_path.rglob("*.tmp")]


def test_artifacts_are_written_in_the_one_document_form(tmp_path: Path) -> None:
    # The form of the generated contracts and the served documents: each document's own key order, not sorted.
    write_artifacts(sample_snapshot(), tmp_path, now=NOW_EPOCH)
    for path in tmp_path.rglob("*.json"):
        data = path.read_bytes()
        assert data == document_bytes(json.loads(data)), path.name
    manifest = json.loads((tmp_path / "manifest.json").read_bytes())
    assert list(manifest) == ["generatedAtUtc", "services"]
