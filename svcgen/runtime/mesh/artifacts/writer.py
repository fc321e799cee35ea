"""Writing the artifacts: every file atomic (temp file in the same directory, fsync, replace) and
confined to the target directory, whatever a service is called.

services/ is written first and manifest.json last, so a reader following the manifest never meets a
service file that is not there yet. Files of services that left the estate are not deleted; the
manifest no longer names them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

from ...reserved import DEFAULT_PREFIX
from ..atomicwrite import write_atomic
from ..collector.snapshot import Json, Snapshot
from .annotations import build_annotations
from .asyncapi import build_asyncapi
from .encoding import document_bytes
from .estate import build_manifest, build_service_documents
from .filenames import service_file_names
from .times import Now, generated_at
from .topics import build_topics
from .topology import build_topology
from .usage import build_usage

SERVICES_DIR: Final = "services"


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
    for name, file_name in service_file_names(documents).items():
        written.append(write_json(confined(services_dir, file_name), documents[name]))
    top_level: list[tuple[str, Json]] = [
        ("topics.json", build_topics(snapshot, generated_at=stamp)),
        ("topology.json", build_topology(snapshot, generated_at=stamp)),
        ("usage.json", build_usage(snapshot, generated_at=stamp)),
        ("asyncapi.json", build_asyncapi(snapshot)),
        ("annotations.json", build_annotations(generated_at=stamp)),
        ("manifest.json", build_manifest(snapshot, generated_at=stamp, prefix=prefix)),
    ]
    for file_name, document in top_level:
        written.append(write_json(confined(root, file_name), document))
    return written


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
