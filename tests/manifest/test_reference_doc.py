"""docs/manifest.md stays true: its example is a valid manifest and it documents every key of the format."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from svcgen.manifest import load_manifest_with_warnings
from svcgen.manifest.validate import manifest_schema

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "manifest.md").read_text(encoding="utf-8")


def _keys(schema: dict[str, Any]) -> Iterator[str]:
    yield from schema.get("properties", {})
    for definition in schema.get("$defs", {}).values():
        yield from _keys(definition)


def test_the_complete_example_is_valid_without_warnings(tmp_path: Path) -> None:
    example = re.search(r"## A complete example\n\n```yaml\n(.*?)```", DOC, re.DOTALL)
    assert example is not None
    (tmp_path / "orders.yaml").write_text(example.group(1), encoding="utf-8")
    shutil.copytree(ROOT / "examples" / "manifests" / "schemas", tmp_path / "schemas")
    loaded = load_manifest_with_warnings(tmp_path / "orders.yaml")
    assert loaded.warnings == ()
    assert [topic.id for topic in loaded.manifest.topics] == ["orders:place", "orders:place", "orders:get"]


def test_every_key_of_the_format_is_documented() -> None:
    keys = set(_keys(manifest_schema()))
    assert {"svcgen", "heartbeatSeconds", "jsonSchema", "routes", "default"} <= keys
    undocumented = sorted(key for key in keys if f"| `{key}` |" not in DOC)
    assert undocumented == []


def test_every_example_message_is_one_svcgen_prints() -> None:
    """Positions aside, each example line is a line of a golden case (whose paths sit under tests/golden/errors)."""
    printed = {
        line.split(": ", 1)[1].replace("tests/golden/errors/", "")
        for case in (ROOT / "tests" / "golden" / "errors").glob("*.txt")
        for line in case.read_text(encoding="utf-8").splitlines()
    }
    examples = re.findall(r"^(?:m|orders)\.yaml:\d+:\d+: (.*)$", DOC, re.MULTILINE)
    assert len(examples) >= 30
    assert [example for example in examples if example not in printed] == []
