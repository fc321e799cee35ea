"""`produces: - from: <owner's manifest>`: a produces entry that takes its topic's types from the owner.

The owner's manifest is loaded (and validated) like any other, once per load (`Sources`); the entry gets the
owner's (topic, version) and every record and enum its request and response reach, so the producer never
re-declares them.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Literal, TypeVar

from .diagnostics import ManifestError
from .loader import YamlDocument, load_yaml
from .model import EnumDef, EventDef, Manifest, Position, RecordDef, TopicDef
from .sources import FromCycle, LoadedOwner, Sources
from .spelling import suggestion

EntryKey = Literal["from", "id", "version"]


class OwnerError(ValueError):
    """The entry cannot take its types: the message, and the entry key it is about (where it is reported)."""

    def __init__(self, message: str, key: EntryKey = "from") -> None:
        super().__init__(message)
        self.key: EntryKey = key


@dataclass(frozen=True)
class OwnedTopic:
    owner: str
    """The owner's manifest's path as the producer names it (relative to the working directory)."""
    service: str
    topic: TopicDef
    records: tuple[RecordDef, ...]
    """Every record the request and response reach; jsonSchema paths relative to the producer's directory."""
    enums: tuple[EnumDef, ...]
    positions: dict[str, Position]
    """Where the owner declares each of the types."""
    manifest: Manifest
    """The owner's whole model (jsonSchema paths relative to the producer's directory): its namespace."""

    @property
    def namespace(self) -> str:
        """The namespace its types are reached under when no `imports:` alias names the owner."""
        return self.service.replace("-", "_")


def owned_topic(sources: Sources, base_dir: Path, relative: str, topic_id: str, version: str | None) -> OwnedTopic:
    """The topic `topic_id` (at `version`; None: its only version) of the owner's manifest at `relative` (to
    `base_dir`, the producer's directory), with the types it reaches; the manifest comes from `sources`, loaded
    once however many entries name it. Raises OwnerError."""
    target, loaded = load_owner(sources, base_dir, relative)
    owner = loaded.manifest
    topic = _topic(owner, relative, topic_id, version)
    records, enums = relocated(relative, *_reached(owner, topic))
    return OwnedTopic(
        target.as_posix(), owner.service, topic, records, enums, _positions(loaded.document, owner),
        owner_model(owner, relative),
    )


def owner_model(owner: Manifest, relative: str) -> Manifest:
    """The owner's model as a namespace of the taker's: jsonSchema paths relative to the taker's directory."""
    return replace(owner, types=relocated(relative, owner.types, ())[0])


def load_owner(sources: Sources, base_dir: Path, relative: str, role: str = "owner") -> tuple[Path, LoadedOwner]:
    """The manifest at `relative` (to `base_dir`) from `sources`, and where it is; raises OwnerError (a missing
    file, an invalid manifest, a `from:` cycle) naming it by `role` ("publisher" for a subscription's)."""
    if PurePosixPath(relative).is_absolute() or PureWindowsPath(relative).is_absolute():
        raise OwnerError(f"{role}'s manifest path {relative!r} must be relative to the manifest's directory")
    target = Path(posixpath.normpath((base_dir / relative).as_posix()))  # named without `dir/..` detours
    try:
        exists = target.is_file()
    except OSError:
        exists = False
    if not exists:
        raise OwnerError(
            f"{role}'s manifest {relative!r} not found (looked for {target.as_posix()}); "
            "the path is relative to the manifest's directory"
        )
    try:
        loaded = sources.owner(target)
    except FromCycle as cycle:
        if sources.nested:
            raise  # up to the manifest the load started with, which names the cycle once
        if len(cycle.chain) == 2 and Path(cycle.chain[0]).resolve() == target.resolve():
            raise OwnerError(
                f"{relative!r} is this manifest itself: its own types need no 'from:' or import (to handle an event "
                "it publishes, subscribe with 'payload: <Type>' and 'publisher: <its service>')"
            ) from None
        chain = " → ".join(_shown(path, base_dir) for path in cycle.chain)
        within = any(Path(path).resolve() == target.resolve() for path in cycle.chain)
        raise OwnerError(f"{role}'s manifest {relative!r} {'is in' if within else 'leads into'} an imports or from: "
                         f"cycle: {chain}; a manifest cannot take types from one that takes types from it, directly "
                         "or through others") from None
    except ManifestError as error:
        problems = [diagnostic for diagnostic in error.diagnostics if diagnostic.is_error]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise OwnerError(f"{role}'s manifest {relative!r} is invalid: {problems[0]}{more}") from None
    return target, loaded


def _shown(path: str, base_dir: Path) -> str:
    """A manifest's path as the manifest in `base_dir` would name it."""
    try:
        return Path(os.path.relpath(Path(path).resolve(), base_dir.resolve())).as_posix()
    except ValueError:  # another drive
        return path


def relocated(
    relative: str, records: tuple[RecordDef, ...], enums: tuple[EnumDef, ...]
) -> tuple[tuple[RecordDef, ...], tuple[EnumDef, ...]]:
    """The owner's records with their jsonSchema paths relative to the taker's directory."""
    folder = posixpath.dirname(relative.replace("\\", "/"))
    moved = tuple(
        replace(record, json_schema=posixpath.normpath(posixpath.join(folder, record.json_schema)))
        if record.json_schema else record
        for record in records
    )
    return moved, enums


def _topic(owner: Manifest, relative: str, topic_id: str, version: str | None) -> TopicDef:
    return chosen_version(owner.topics, topic_id, version, f"owner {owner.service} ({relative})", "serves", "topic")


Versioned = TypeVar("Versioned", TopicDef, EventDef)


def chosen_version(
    declared: Sequence[Versioned], wanted: str, version: str | None, where: str, verb: str, noun: str
) -> Versioned:
    """The entry `wanted` (at `version`; None: its only version) among what an owner `verb`s (serves, publishes),
    or an OwnerError at the key the user can fix, with a did-you-mean or the versions there are."""
    candidates = [entry for entry in declared if entry.id == wanted]
    if not candidates:
        ids = list(dict.fromkeys(entry.id for entry in declared))
        hint = suggestion(wanted, ids) or (f"; it {verb} {', '.join(ids)}" if ids else f"; it {verb} no {noun}s")
        raise OwnerError(f"{where} {verb} no {noun} {wanted!r}{hint}", "id")
    versions = ", ".join(repr(entry.version) for entry in candidates)
    if version is None:
        if len(candidates) > 1:
            # An unversioned entry is named by the empty version, which nobody guesses.
            unversioned = ' (version: "" names the unversioned one)' if any(not e.version for e in candidates) else ""
            raise OwnerError(f"{where} {verb} {wanted} in versions {versions}; name one with 'version'{unversioned}",
                             "id")
        return candidates[0]
    for entry in candidates:
        if entry.version == version:
            return entry
    if versions == "''":
        message = f"{where} {verb} {wanted} without a version, not {version!r}; leave out 'version'"
        raise OwnerError(message, "version")
    raise OwnerError(f"{where} {verb} {wanted} in versions {versions}, not {version!r}", "version")


def _reached(owner: Manifest, topic: TopicDef) -> tuple[tuple[RecordDef, ...], tuple[EnumDef, ...]]:
    """The owner's records and enums the topic's request and response reach, in the owner's order."""
    return reached_types(owner, [*topic.request.records(), *topic.response.records()])


def reached_types(owner: Manifest, names: list[str]) -> tuple[tuple[RecordDef, ...], tuple[EnumDef, ...]]:
    """The owner's records and enums the type names reach, in the owner's order."""
    records = {record.name: record for record in owner.types}
    reached: set[str] = set()
    pending = list(names)
    while pending:
        name = pending.pop()
        if name in reached:
            continue
        reached.add(name)
        if name in records:
            pending += [ref for item in records[name].fields for ref in item.type.records()]
    return (
        tuple(record for record in owner.types if record.name in reached),
        tuple(enum for enum in owner.enums if enum.name in reached),
    )


def _positions(document: YamlDocument, owner: Manifest) -> dict[str, Position]:
    positions = {record.name: document.key_at(("types", record.name)) for record in owner.types}
    return positions | {enum.name: document.key_at(("enums", enum.name)) for enum in owner.enums}


def owner_paths(manifest: str | Path) -> list[str]:
    """The owners' manifests the manifest at `manifest` names, by its `from:` entries and its `imports:`, as paths
    from the working directory (`/`-separated, each once); unreadable entries are left to the manifest's own load
    to report."""
    source = Path(manifest)
    try:
        data = load_yaml(source.read_text(encoding="utf-8-sig"), source.as_posix()).data
    except (OSError, UnicodeDecodeError, ManifestError):
        return []
    produces = data.get("produces") if isinstance(data, dict) else None
    imports = data.get("imports") if isinstance(data, dict) else None
    named = [entry.get("from") for entry in (produces if isinstance(produces, list) else ()) if isinstance(entry, dict)]
    named += list(imports.values()) if isinstance(imports, dict) else []  # an imported owner resolves as well
    return list(dict.fromkeys(
        posixpath.normpath((source.parent / relative).as_posix()) for relative in named if isinstance(relative, str)
    ))
