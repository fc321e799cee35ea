"""The same manifest gives the same bytes: across runs, hash seeds and output directories."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from svcgen.codegen import manifest_of
from svcgen.codegen.files import HEADER_PREFIX
from svcgen.codegen.ownership import RECORD
from tests.support.codegen import ESTATE, EXAMPLES, REPO, build_example, manifest_path, tree

# Prints a digest of every rendered file of every example (the estate's three too), so runs compare as text.
DIGEST = """
import hashlib
from pathlib import Path
from svcgen.codegen import render_package
from svcgen.manifest import load_manifest
for example in {examples!r}:
    for f in render_package(load_manifest(example), Path("out")):
        print(example, f.relpath, f.owner, hashlib.sha256(f.data).hexdigest())
"""


def digest(seed: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", DIGEST.format(examples=[manifest_path(e) for e in (*EXAMPLES, *ESTATE)])],
        cwd=REPO,
        env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return result.stdout


def test_same_bytes_across_hash_seeds() -> None:
    first = digest("0")
    assert first.count("\n") > 30
    assert digest("1") == first
    assert digest("4242") == first


def without_header(data: bytes) -> bytes:
    first, _, rest = data.partition(b"\n")
    return rest if first.startswith(HEADER_PREFIX.encode()) else data


def test_only_the_header_follows_the_output_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The header names the manifest relative to OUT; every other byte is the same wherever OUT is."""
    monkeypatch.chdir(REPO)
    for example in EXAMPLES:
        near = build_example(example, tmp_path / "a")
        far = build_example(example, tmp_path / "b" / "deeper" / "out")
        assert manifest_of(near) == manifest_of(far) == REPO / manifest_path(example)
        near_tree, far_tree = tree(near), tree(far)
        assert sorted(near_tree) == sorted(far_tree)
        for relpath, data in near_tree.items():
            if relpath != RECORD:  # the record hashes the generated files, headers included
                assert without_header(data) == without_header(far_tree[relpath]), relpath
        texts = b"".join(near_tree.values())
        assert str(tmp_path).encode() not in texts and HEADER_PREFIX.encode() + b"/" not in texts, "no absolute paths"
