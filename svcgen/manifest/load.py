"""The manifest front end: YAML text → loader → schema and semantics → `Manifest` and its warnings, or
ManifestError with every diagnostic."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .build import build_manifest
from .diagnostics import Diagnostic, ManifestError, sort_diagnostics
from .loader import YamlDocument, load_yaml
from .model import Manifest, Position
from .semantics import check_semantics
from .sources import LoadedOwner, Sources
from .validate import validate_schema


@dataclass(frozen=True)
class LoadedManifest:
    """A valid manifest and the warnings it gave, sorted by position (for the user to read, not fatal)."""

    manifest: Manifest
    warnings: tuple[Diagnostic, ...] = ()


def load_manifest(path: str | Path) -> Manifest:
    """Read and validate the manifest at `path`; diagnostics name the path as given. Warnings are dropped:
    callers that show them use `load_manifest_with_warnings`."""
    return load_manifest_with_warnings(path).manifest


def load_manifest_text(text: str, path: str) -> Manifest:
    """Validate manifest `text`; `path` names it in diagnostics and anchors relative jsonSchema paths."""
    return load_manifest_text_with_warnings(text, path).manifest


def load_manifest_with_warnings(path: str | Path) -> LoadedManifest:
    """As `load_manifest`, with the manifest's warnings; raises ManifestError when it has any error."""
    name = str(path).replace("\\", "/")
    return load_manifest_text_with_warnings(_read(name), name)


def load_manifest_text_with_warnings(text: str, path: str) -> LoadedManifest:
    """As `load_manifest_text`, with the manifest's warnings; raises ManifestError when it has any error."""
    name = path.replace("\\", "/")
    with cycle_collection_paused():
        # One Sources per load: every owner's manifest and jsonSchema file below it is read once.
        return _checked_and_built(text, name, Sources(_load_owner, top=name))[0]


def _read(name: str) -> str:
    try:
        return Path(name).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ManifestError([Diagnostic(Position(name, 1, 1), "manifest file not found")]) from None
    except UnicodeDecodeError as error:
        message = f"manifest is not UTF-8 text (byte {error.start}: {error.reason})"
        raise ManifestError([Diagnostic(Position(name, 1, 1), message)]) from None
    except OSError as error:
        message = f"cannot read the manifest: {error.strerror or error}"
        raise ManifestError([Diagnostic(Position(name, 1, 1), message)]) from None


def _load_owner(name: str, sources: Sources) -> LoadedOwner:
    loaded, document = _checked_and_built(_read(name), name, sources)
    return LoadedOwner(loaded.manifest, document)


def _checked_and_built(text: str, name: str, sources: Sources) -> tuple[LoadedManifest, YamlDocument]:
    document = load_yaml(text, name)
    findings = validate_schema(document)
    # Each stage runs whatever the earlier ones found, skipping only what that leaves unreadable; the build
    # takes what the check resolved (owners' manifests, jsonSchema files) from `sources`.
    semantic = check_semantics(document, Path(name).parent, findings, sources)
    diagnostics = [*document.diagnostics, *findings.diagnostics, *semantic]
    if any(diagnostic.is_error for diagnostic in diagnostics):
        raise ManifestError(diagnostics)
    model = build_manifest(document, Path(name).parent, sources)
    return LoadedManifest(model, tuple(sort_diagnostics(diagnostics))), document


@contextmanager
def cycle_collection_paused() -> Iterator[None]:
    """The cycle collector paused inside the block and restored after it (a nested block leaves it paused).

    Loading allocates hundreds of thousands of objects that stay alive until it ends (nodes, paths, marks,
    the model), which would make the cycle collector run over them again and again for nothing: about half the
    load time of a large manifest. It runs again once they are freed and only the model is left."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
