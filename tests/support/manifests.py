"""Shared helpers for manifest tests."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest
import yaml

from svcgen.manifest import ManifestError, load_manifest_text, load_manifest_text_with_warnings
from svcgen.manifest.loader import _EXPONENT_FLOAT
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


_STR_TAG = "tag:yaml.org,2002:str"


class _Dumper(yaml.SafeDumper):
    """PyYAML's YAML 1.1 writer, quoting the texts the manifest loader reads as numbers where YAML 1.1 does not
    (`0E0`, `1e-7`: JSON's exponent form)."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar(_STR_TAG, value, style='"' if _EXPONENT_FLOAT.fullmatch(value) else None)


_Dumper.add_representer(str, _text)


def manifest_yaml(data: Any, **options: Any) -> str:
    """`data` as YAML text (`yaml.safe_dump`'s options) that the manifest loader reads back as `data`."""
    text: str = yaml.dump(data, Dumper=_Dumper, **options)
    return text
