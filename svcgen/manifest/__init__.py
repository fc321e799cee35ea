"""The manifest: YAML in, a validated `Manifest` model out (or every diagnostic at once)."""

from .diagnostics import Diagnostic, ManifestError
from .load import load_manifest, load_manifest_text
from .model import Manifest, Position

__all__ = ["Diagnostic", "Manifest", "ManifestError", "Position", "load_manifest", "load_manifest_text"]
