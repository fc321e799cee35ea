"""Writing the artifacts: every file atomic (temp file in the same directory, fsync, replace) and
confined to the target directory, whatever a service is called.

services/ is written first and manifest.json last, so a reader following the manifest never meets a
service file that is not there yet. The files of services that left the estate are removed after the
manifest stops naming them; anything in services/ that is not a `.json` service file is left alone.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Final

from ...runtime._atomicwrite import write_atomic
from ...runtime._jsontext import document_bytes
from ...runtime._topics import DEFAULT_PREFIX
from ..snapshot import Json, Snapshot
from .annotations import build_annotations
from .asyncapi import build_asyncapi
from .estate import build_estate_manifest, build_service_documents
from .filenames import service_file_names
from .issuepanel import build_issues
from .times import Now, generated_at
from .topics import build_topics
from .topology import build_topology
from .usage import build_usage
from .windows import build_windows

SERVICES_DIR: Final = "services"

logger = logging.getLogger("svcgen.mesh.artifacts")


def write_artifacts(snapshot: Snapshot, target: Path, *, now: Now = None, prefix: str = DEFAULT_PREFIX) -> list[Path]:
    """Write every artifact under `target` (created if missing); returns the paths written, in order.

    `now` stamps `generatedAtUtc` (the wall clock when None): the same snapshot at the same `now` gives
    the same bytes. `prefix` is the well-known prefix of the polled services, for specUrl and healthUrl.
    """
    stamp = generated_at(now)
    root = Path(target)
    services_dir = root / SERVICES_DIR
    services_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    documents = build_service_documents(snapshot)
    service_files = service_file_names(documents)
    for name, file_name in service_files.items():
        written.append(write_json(confined(services_dir, file_name), documents[name]))
    top_level: list[tuple[str, Json]] = [
        ("topics.json", build_topics(snapshot, generated_at=stamp)),
        ("topology.json", build_topology(snapshot, generated_at=stamp)),
        ("usage.json", build_usage(snapshot, generated_at=stamp)),
        ("windows.json", build_windows(snapshot, generated_at=stamp)),
        ("asyncapi.json", build_asyncapi(snapshot)),
        ("annotations.json", build_annotations(generated_at=stamp)),
        ("issues.json", build_issues(snapshot, generated_at=stamp)),
        ("manifest.json", build_estate_manifest(snapshot, generated_at=stamp, prefix=prefix)),
    ]
    for file_name, document in top_level:
        written.append(write_json(confined(root, file_name), document))
    remove_stale_service_files(services_dir, set(service_files.values()))
    return written


def remove_stale_service_files(services_dir: Path, current: set[str]) -> None:
    """Remove services/*.json files the manifest no longer names.

    Temporary files of an atomic write start with a dot and are never touched. A file that cannot be removed
    is logged and left: the manifest no longer names it, so no reader reaches it.
    """
    for path in sorted(services_dir.glob("*.json")):
        if path.name in current or path.name.startswith(".") or not path.is_file():
            continue
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            logger.warning("could not remove %s of a service that left the estate (%s)", path, exc)


def confined(directory: Path, file_name: str) -> Path:
    """`directory/file_name`, refused unless it is a plain file name directly inside `directory`."""
    candidate = directory / file_name
    if (
        not file_name
        or file_name in {".", ".."}
        or "\x00" in file_name
        or Path(file_name).name != file_name
        or os.sep in file_name
        or (os.altsep is not None and os.altsep in file_name)
        # The parent, not the file: os.replace swaps a symlink planted at the name, never follows it.
        or candidate.parent.resolve() != directory.resolve()
    ):
        raise ValueError(f"refusing to write {file_name!r} outside {directory}")
    return candidate


def write_json(path: Path, document: Json) -> Path:
    write_atomic(path, document_bytes(document))
    return path
