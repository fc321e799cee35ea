"""Durable atomic file writes for the mesh's stores and artifacts: temp file in the same directory, fsync,
rename, fsync of the directory. Readers see the old file or the new one, never a torn one."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Final

_TEMP_SUFFIX: Final = ".tmp"


def write_atomic(path: Path, data: bytes) -> None:
    """Replace `path` with `data`; a crash leaves at most a stray temp file beside it."""
    fd, temp_name = tempfile.mkstemp(dir=path.parent, prefix=_temp_prefix(path), suffix=_TEMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as temp:
            temp.write(data)
            temp.flush()
            os.fsync(temp.fileno())
        os.replace(temp_name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
        raise
    _fsync_directory(path.parent)


def remove_stale_temps(path: Path) -> list[Path]:
    """Remove the temp files a killed writer of `path` left behind; call it before writing `path` again."""
    removed = []
    prefix = _temp_prefix(path)
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        for entry in path.parent.iterdir():
            if entry.name.startswith(prefix) and entry.name.endswith(_TEMP_SUFFIX):
                with contextlib.suppress(OSError):
                    entry.unlink()
                    removed.append(entry)
    return removed


def _temp_prefix(path: Path) -> str:
    return f".{path.name}."


def _fsync_directory(directory: Path) -> None:
    # Makes the rename itself durable; not every platform can open a directory, which is not an error.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)
