"""Shared by the diff tests: manifests from small fragments, a finding as one golden line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from svcgen.codegen.contracts import DESCRIPTOR, SPEC
from svcgen.codegen.render import render_package
from svcgen.contractdiff import Finding
from svcgen.manifest import Manifest, load_manifest

REPO = Path(__file__).resolve().parents[2]
CASES = REPO / "tests" / "golden" / "diff" / "cases.yaml"
EXPECTED = REPO / "tests" / "golden" / "diff" / "expected.txt"
BASE_TOPICS = [{"id": "orders:place", "version": "v1", "request": "Req", "response": "Res"}]


def manifest_document(fragment: dict[str, Any]) -> dict[str, Any]:
    """A whole manifest: one topic orders:place@v1 (Req → Res) unless the fragment gives topics; the
    fragment's types and enums over empty Req and Res; its service (default orders), prefix and produces."""
    types = {"Req": {"fields": {}}, "Res": {"fields": {}}, **fragment.get("types", {})}
    document: dict[str, Any] = {"svcgen": 1, "service": fragment.get("service", "orders")}
    if "prefix" in fragment:
        document["prefix"] = fragment["prefix"]
    for key in ("imports", "closed", "versions"):  # the estate's keys (types for an estate)
        if key in fragment:
            document[key] = fragment[key]
    if "enums" in fragment:
        document["enums"] = fragment["enums"]
    if "security" in fragment:
        document["security"] = fragment["security"]
    document["types"] = types
    document["topics"] = fragment.get("topics", BASE_TOPICS)
    if "produces" in fragment:
        document["produces"] = fragment["produces"]
    return document


def write_manifest(folder: Path, fragment: dict[str, Any], files: dict[str, Any] | None = None) -> Path:
    """Write the manifest of `fragment` (and JSON files beside it) into `folder`; its path."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in (files or {}).items():
        (folder / name).write_text(json.dumps(content), encoding="utf-8")
    path = folder / "orders.yaml"
    path.write_text(yaml.safe_dump(manifest_document(fragment), sort_keys=False), encoding="utf-8")
    return path


def load_fragment(folder: Path, fragment: dict[str, Any], files: dict[str, Any] | None = None) -> Manifest:
    return load_manifest(write_manifest(folder, fragment, files))


def golden_line(finding: Finding) -> str:
    old, new = json.dumps(finding.old), json.dumps(finding.new)
    line = f"{finding.level} {finding.rule} {finding.path}: {old} -> {new}"
    return line if finding.fix is None else f"{line}\n  why: {finding.why}\n  fix: {finding.fix}"


Schemas = dict[str, tuple[dict[str, Any], dict[str, Any]]]
"""(requestSchema, responseSchema) by `topic` or `topic@version`."""


def topic_schemas(manifest: Manifest, out: Path) -> Schemas:
    """(requestSchema, responseSchema) of each topic version as the built package's spec document derives them."""
    return _schemas(manifest, out, SPEC, "topics")


def produced_schemas(manifest: Manifest, out: Path) -> Schemas:
    """(requestSchema, responseSchema) of each produces entry as the built package's descriptor publishes them."""
    return _schemas(manifest, out, DESCRIPTOR, "produces")


def _schemas(manifest: Manifest, out: Path, document: str, key: str) -> Schemas:
    files = {generated.relpath: generated for generated in render_package(manifest, out)}
    entries = json.loads(files[document].text)[key]
    return {
        f"{entry['id']}@{entry['version']}" if entry.get("version") else entry["id"]: (
            entry["requestSchema"],
            entry["responseSchema"],
        )
        for entry in entries
    }
