"""The manifest: YAML in, a validated `Manifest` model and its warnings out (or every diagnostic at once)."""

from .diagnostics import Diagnostic, ManifestError, Severity
from .load import (
    LoadedManifest,
    load_manifest,
    load_manifest_text,
    load_manifest_text_with_warnings,
    load_manifest_with_warnings,
)
from .model import Manifest, Position

__all__ = [
    "Diagnostic",
    "LoadedManifest",
    "Manifest",
    "ManifestError",
    "Position",
    "Severity",
    "load_manifest",
    "load_manifest_text",
    "load_manifest_text_with_warnings",
    "load_manifest_with_warnings",
]
