"""`Sources`: the files one manifest load reads besides the manifest, each read and resolved once.

A load reads the owners' manifests its `produces: from:` entries name (each loaded, recursively, like any
manifest) and its jsonSchema files. The semantic check resolves them and the model build takes the very same
results from here, and an owner two entries (or two owners) name is loaded once: a chain of four `from:`
manifests loads five manifests, not 31. One `Sources` lives for one top-level load, so a later load sees the
files as they are then.

The front end that loads an owner is handed in (`load`), so this module needs nothing above it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from .diagnostics import ManifestError
from .loader import YamlDocument
from .model import Manifest
from .schemaimport import ImportedTypes, SchemaImportError, translate_json_schema


@dataclass(frozen=True)
class LoadedOwner:
    """An owner's manifest as the front end loaded it, with its YAML document (where each type is declared)."""

    manifest: Manifest
    document: YamlDocument


class FromCycle(Exception):
    """An owner's manifest that is being loaded above this point: an `imports:` or `from:` cycle, which would never
    end. It passes through the manifests of the cycle, so the manifest that started the load names it once."""

    def __init__(self, chain: tuple[str, ...]) -> None:
        super().__init__(" → ".join(chain))
        self.chain = chain
        """The manifests' paths (`/`-separated) from the one taken again, through each one taking from the next,
        back to it: `(a.yaml, b.yaml, a.yaml)`."""


LoadOwner = Callable[[str, "Sources"], LoadedOwner]
"""The front end: the manifest at a path (`/`-separated) → its model and document, or ManifestError."""


class Sources:
    def __init__(self, load: LoadOwner, top: str | None = None) -> None:
        self._load = load
        self._owners: dict[str, LoadedOwner | ManifestError | FromCycle] = {}
        self._schemas: dict[tuple[str, str], Any] = {}
        self._imported: dict[tuple[str, str, str], ImportedTypes | SchemaImportError | ValueError] = {}
        self._loading: dict[str, str] = {} if top is None else {_identity(Path(top)): top}
        """identity → path of each manifest being loaded, outermost first."""
        self._top = top is not None

    @property
    def nested(self) -> bool:
        """Whether an owner's manifest is being loaded: the caller is not the manifest the load started with."""
        return len(self._loading) > (1 if self._top else 0)

    def owner(self, target: Path) -> LoadedOwner:
        """The owner's manifest at `target`, loaded once; raises ManifestError (invalid) or FromCycle."""
        identity = _identity(target)
        known = self._owners.get(identity)
        if known is None:
            if identity in self._loading:
                loading = list(self._loading)
                chain = [self._loading[key] for key in loading[loading.index(identity):]]
                raise FromCycle((*chain, target.as_posix()))
            self._loading[identity] = target.as_posix()
            try:
                known = self._load(target.as_posix(), self)
            except (ManifestError, FromCycle) as error:
                known = error
            finally:
                del self._loading[identity]
            self._owners[identity] = known
        if isinstance(known, ManifestError | FromCycle):
            raise known
        return known

    def json_schema(self, base_dir: Path, relative: str) -> Any:
        """The JSON content of a record's jsonSchema file, read once; raises ValueError with a diagnostic
        message."""
        key = (base_dir.as_posix(), relative)
        if key not in self._schemas:
            try:
                self._schemas[key] = _read_json_schema(base_dir, relative)
            except ValueError as error:
                self._schemas[key] = error
        content = self._schemas[key]
        if isinstance(content, ValueError):
            raise content
        return content

    def imported_types(self, name: str, relative: str, base_dir: Path) -> ImportedTypes:
        """The records and enums of the type `name` whose schema is the file `relative` (to `base_dir`), translated
        once; raises SchemaImportError (what cannot be translated) or ValueError (the file)."""
        key = (name, relative, base_dir.as_posix())
        if key not in self._imported:
            try:
                self._imported[key] = translate_json_schema(
                    name, relative.replace("\\", "/"), self.json_schema(base_dir, relative)
                )
            except ValueError as error:  # SchemaImportError is one
                self._imported[key] = error
        imported = self._imported[key]
        if isinstance(imported, ValueError):
            raise imported
        return imported


def _identity(path: Path) -> str:
    return str(path.resolve())


def _read_json_schema(base_dir: Path, relative: str) -> Any:
    if PurePosixPath(relative).is_absolute() or PureWindowsPath(relative).is_absolute():
        raise ValueError(f"jsonSchema path {relative!r} must be relative to the manifest's directory")
    target = base_dir / relative
    try:
        exists = target.is_file()
    except OSError:  # e.g. a name too long for the file system
        exists = False
    if not exists:
        raise ValueError(
            f"jsonSchema file {relative!r} not found (looked for {target.as_posix()}); "
            "the path is relative to the manifest's directory"
        )
    try:
        return json.loads(target.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(
            f"jsonSchema file {relative!r} is not valid JSON: {error.msg} at line {error.lineno} column {error.colno}"
        ) from None
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"jsonSchema file {relative!r} cannot be read: {error}") from None
