"""A manifest as committed at a git revision (`REV:PATH`), its jsonSchema files read at the same revision.

The files are copied out with `git show` into a scratch directory laid out like the repository, so the
manifest is loaded exactly as from a checkout; diagnostics name `REV:PATH`, never the scratch copy.
"""

from __future__ import annotations

import posixpath
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from .diagnostics import Diagnostic, ManifestError
from .load import LoadedManifest, load_manifest_text_with_warnings
from .loader import load_yaml


class RevisionError(Exception):
    """The revision or the path cannot be read from git (the message is one line)."""


class ManifestAbsent(RevisionError):
    """The revision is there and the manifest is not in it: a manifest added since."""


def split_revision(spec: str) -> tuple[str, str] | None:
    """(REV, PATH) when `spec` is `REV:PATH` and no file is named `spec`; None for a plain path."""
    if Path(spec).exists():
        return None
    rev, separator, path = spec.partition(":")
    if not separator or not rev or not path or (len(rev) == 1 and path.startswith(("\\", "/"))):
        return None  # not `REV:PATH`, or a Windows drive (`C:\...`)
    return rev, path


def repository_path(file: str | Path) -> tuple[Path, str]:
    """(repository root, path of `file` inside it, `/`-separated) for a file in a git working tree."""
    folder = Path(file).resolve().parent
    root = Path(_git(["rev-parse", "--show-toplevel"], folder).strip())
    return root, Path(file).resolve().relative_to(root.resolve()).as_posix()


def load_manifest_at(rev: str, path: str, cwd: Path | None = None) -> LoadedManifest:
    """The manifest at `path` in revision `rev` of the repository `cwd` is in. A path starting with `./` or
    `../` is relative to `cwd` (as git reads it); any other is relative to the repository root. Raises
    RevisionError when git cannot give it, ManifestError (naming `REV:PATH`) when it is invalid."""
    where = cwd or Path.cwd()
    if path.startswith(("./", "../")):
        path = posixpath.join(_git(["rev-parse", "--show-prefix"], where).strip(), path)
    path = posixpath.normpath(path)
    try:
        text = _show(rev, path, where)
    except RevisionError as error:
        # Added since only when it is there now: a path on disk neither has is a typo, told by git's own reason.
        if _exists(f"{rev}^{{commit}}", where) and not _exists(f"{rev}:{path}", where) and _on_disk(path, where):
            raise ManifestAbsent(f"{path} is not in {rev} (added since)") from error
        raise
    with tempfile.TemporaryDirectory(prefix="svcgen-rev-") as scratch:
        manifests, copied = [(path, text)], {path}
        unreadable: dict[str, str] = {}  # repository path -> why git could not give it
        while manifests:  # the manifest, and each manifest it takes types from, with what they name
            manifest, manifest_text = manifests.pop()
            for referenced, is_manifest in _referenced_paths(manifest_text, manifest):
                if referenced in copied:
                    continue
                copied.add(referenced)
                try:
                    content = _show(rev, referenced, where)
                except RevisionError as error:
                    unreadable[referenced] = str(error)
                    continue  # the loader reports the missing file at the manifest's line; the cause is added
                target = Path(scratch, referenced)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(content, encoding="utf-8")
                if is_manifest:
                    manifests.append((referenced, content))
        root = Path(scratch).as_posix()
        copy = f"{root}/{path}"
        try:
            loaded = load_manifest_text_with_warnings(text, copy)
        except ManifestError as error:
            raise ManifestError(
                _at_revision(diagnostic, rev, root, unreadable) for diagnostic in error.diagnostics
            ) from None
        warnings = tuple(_at_revision(warning, rev, root, unreadable) for warning in loaded.warnings)
        return replace(loaded, manifest=replace(loaded.manifest, path=f"{rev}:{path}"), warnings=warnings)


def _at_revision(diagnostic: Diagnostic, rev: str, root: str, unreadable: dict[str, str]) -> Diagnostic:
    """The diagnostic naming `REV:PATH` wherever it named the scratch copy, with git's reason for each file the
    revision could not give (so a missing owner's manifest says why it is missing)."""
    def named(text: str) -> str:
        return text.replace(f"{root}/", f"{rev}:")

    message = named(diagnostic.message)
    causes = [f"{rev}:{file}: {why}" for file, why in unreadable.items() if f"{rev}:{file}" in message
              or posixpath.basename(file) in message]
    if causes:
        message += f" ({'; '.join(causes)})"
    position = diagnostic.position
    return replace(diagnostic, message=message, position=replace(position, file=named(position.file)))


def _referenced_paths(text: str, manifest: str) -> list[tuple[str, bool]]:
    """Repository paths of the files the manifest names (inside the repository): its jsonSchema files, and the
    manifests it takes types from, by `produces: - from:`, `subscribes: - from:` or `imports:` (each with True)."""
    try:
        document: Any = load_yaml(text, manifest).data  # svcgen's own loader: the manifest reads as it will load
    except ManifestError:
        return []  # the loader says what is wrong when the manifest itself is loaded
    if not isinstance(document, dict):
        return []
    types, produces, imports = document.get("types"), document.get("produces"), document.get("imports")
    named = [(spec.get("jsonSchema"), False) for spec in (types.values() if isinstance(types, dict) else ())
             if isinstance(spec, dict)]  # fmt: skip
    for section in (produces, document.get("subscribes")):  # an owner's or a publisher's manifest
        named += [(entry.get("from"), True) for entry in (section if isinstance(section, list) else ())
                  if isinstance(entry, dict)]  # fmt: skip
    named += [(relative, True) for relative in (imports.values() if isinstance(imports, dict) else ())]
    found = []
    for relative, is_manifest in named:
        if isinstance(relative, str):
            joined = posixpath.normpath(posixpath.join(posixpath.dirname(manifest), relative))
            if not joined.startswith("../") and not posixpath.isabs(joined):
                found.append((joined, is_manifest))
    return found


def _show(rev: str, path: str, cwd: Path) -> str:
    return _git(["show", f"{rev}:{path}"], cwd)


def _on_disk(path: str, cwd: Path) -> bool:
    """Whether the repository path `path` is a file of the working tree `cwd` is in."""
    try:
        return Path(_git(["rev-parse", "--show-toplevel"], cwd).strip(), path).is_file()
    except RevisionError:
        return False


def _exists(object_name: str, cwd: Path) -> bool:
    try:
        _git(["cat-file", "-e", object_name], cwd)
    except RevisionError:
        return False
    return True


def _git(arguments: list[str], cwd: Path) -> str:
    try:
        done = subprocess.run(["git", *arguments], cwd=cwd, capture_output=True, check=False, timeout=60)
    except FileNotFoundError:
        raise RevisionError("git is not installed (needed to read REV:PATH)") from None
    except OSError as error:
        raise RevisionError(f"cannot run git: {error.strerror or error}") from None
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise RevisionError(message[-1] if message else f"git {' '.join(arguments)} failed")
    try:
        return done.stdout.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise RevisionError(f"{arguments[-1]}: not UTF-8 text (byte {error.start})") from None


def matching_tags(pattern: str, cwd: Path) -> list[str]:
    """The git tags matching the glob `pattern` (`v*`), oldest version first; RevisionError when none does."""
    tags = _git(["tag", "--list", "--sort=version:refname", pattern], cwd).split()
    if not tags:
        raise RevisionError(f"no git tag matches {pattern!r}")
    return tags
