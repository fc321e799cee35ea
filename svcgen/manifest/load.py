"""The manifest front end: YAML text → loader → schema → semantics → `Manifest`, or ManifestError."""

from __future__ import annotations

from pathlib import Path

from .build import build_manifest
from .diagnostics import Diagnostic, ManifestError
from .loader import load_yaml
from .model import Manifest, Position
from .semantics import check_semantics
from .validate import validate_schema


def load_manifest(path: str | Path) -> Manifest:
    """Read and validate the manifest at `path`; diagnostics name the path as given."""
    name = str(path).replace("\\", "/")
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ManifestError([Diagnostic(Position(name, 1, 1), "manifest file not found")]) from None
    except UnicodeDecodeError as error:
        message = f"manifest is not UTF-8 text (byte {error.start}: {error.reason})"
        raise ManifestError([Diagnostic(Position(name, 1, 1), message)]) from None
    except OSError as error:
        message = f"cannot read the manifest: {error.strerror or error}"
        raise ManifestError([Diagnostic(Position(name, 1, 1), message)]) from None
    return load_manifest_text(text, name)


def load_manifest_text(text: str, path: str) -> Manifest:
    """Validate manifest `text`; `path` names it in diagnostics and anchors relative jsonSchema paths."""
    name = path.replace("\\", "/")
    document = load_yaml(text, name)
    diagnostics = validate_schema(document)
    if not diagnostics:
        # Semantic checks assume the shapes the schema guarantees, so they run only on a valid shape.
        diagnostics = check_semantics(document, Path(name).parent)
    if diagnostics:
        raise ManifestError(diagnostics)
    return build_manifest(document)
