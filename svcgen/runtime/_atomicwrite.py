"""Atomic file writes, the one writer of the mesh's stores and artifacts and of the generator's files: temp file in
the same directory, fsync, rename, fsync of the directory. Readers see the old file or the new one, never a torn
one. A replaced file keeps its mode; a new one gets 0o666 less the umask (not mkstemp's 0o600)."""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path
from typing import Final

_TEMP_SUFFIX: Final = ".tmp"


def write_atomic(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace `path` with `data`; a crash leaves at most a stray temp file beside it. `durable` False skips the
    fsyncs: atomic still, but a power cut may lose the write (generated files, which a build writes again)."""
    temp_name = str(path.parent / f"{_temp_prefix(path)}{secrets.token_hex(6)}{_TEMP_SUFFIX}")
    try:
        mode: int | None = path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = None  # created with 0o666 less the umask, as open() would
    fd = os.open(temp_name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as temp:
            if mode is not None:
                os.fchmod(temp.fileno(), mode)
            temp.write(data)
            if durable:
                temp.flush()
                os.fsync(temp.fileno())
        os.replace(temp_name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
        raise
    if durable:
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
