"""Shared helpers for manifest tests."""

from __future__ import annotations

import textwrap

import pytest

from svcgen.manifest import ManifestError, load_manifest_text, load_manifest_text_with_warnings
from svcgen.manifest.model import Manifest

MINIMAL = """\
svcgen: 1
service: orders
types:
  Order:
    fields:
      orderId: string
topics:
  - id: orders:get
    request: Order
    response: Order
"""


def manifest(text: str) -> str:
    """Dedent a manifest written inline in a test."""
    return textwrap.dedent(text).lstrip("\n")


def load_ok(text: str, path: str = "m.yaml") -> Manifest:
    return load_manifest_text(manifest(text), path)


def errors(text: str, path: str = "m.yaml") -> list[str]:
    """Every diagnostic of an invalid manifest, as `file:line:col: message` lines."""
    with pytest.raises(ManifestError) as info:
        load_manifest_text(manifest(text), path)
    return [str(diagnostic) for diagnostic in info.value.diagnostics]


def warnings(text: str, path: str = "m.yaml") -> list[str]:
    """The warnings of a valid manifest, as `file:line:col: warning: message` lines."""
    return [str(diagnostic) for diagnostic in load_manifest_text_with_warnings(manifest(text), path).warnings]
