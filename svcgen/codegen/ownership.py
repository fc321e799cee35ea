"""Ownership rules: what a build writes, keeps, refuses and reports, and what `check` finds stale.

- Generated files are rewritten on every build (a file whose bytes would not change is left alone).
  `.svcgen-record.json` keeps the sha256 of each as written, so a generated file edited by hand since
  is refused by name (`force` overrides). A file svcgen did not write (not in the record, no svcgen
  header) is refused likewise. A generated file the manifest no longer calls for is removed.
- User files (handler and health stubs, wiring.py) are created only when missing and never overwritten; a
  handler or health module whose topic or check left the manifest is reported as orphaned, never deleted
  (findings.py says what else build and check report about user files).
- Writes are atomic (a temporary file in the same directory, then a rename).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..runtime._atomicwrite import write_atomic
from ..runtime._jsontext import content_hash
from .errors import CodegenError
from .files import HEADER_PREFIX, GeneratedFile
from .findings import Findings, user_findings

RECORD = ".svcgen-record.json"
RECORD_FORMAT = 1
CONTRACTS_DIR = "contracts/"

Status = Literal["same", "new", "stale", "hand-edited", "foreign"]


@dataclass
class BuildReport:
    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    orphaned: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def summary(self) -> list[str]:
        """One line per class of file."""
        unchanged = f" ({len(self.unchanged)} generated files unchanged)" if self.unchanged else ""
        lines = [
            f"written: {_names(self.written)}{unchanged}",
            f"created: {_names(self.created)}",
            f"kept: {_names(self.kept)}",
            f"orphaned: {_names(self.orphaned)}"
            + (" (their topics or checks left the manifest; not deleted)" if self.orphaned else ""),
        ]
        if self.removed:
            lines.append(f"removed: {_names(self.removed)} (no longer generated)")
        return lines + [f"note: {note}" for note in self.notes]


@dataclass(frozen=True)
class _Plan:
    generated: dict[str, tuple[Status, bytes]]
    """relpath → (status, new bytes); includes the record."""
    removals: dict[str, Status]
    """Generated files no longer generated → `stale` (ours, unchanged) or `hand-edited`."""
    user_missing: dict[str, bytes]
    user_present: list[str]
    findings: Findings

    def refused(self) -> list[tuple[str, Status]]:
        bad = [(path, status) for path, (status, _) in self.generated.items() if status in ("hand-edited", "foreign")]
        bad += [(path, status) for path, status in self.removals.items() if status == "hand-edited"]
        return sorted(bad)


def write_package(files: Sequence[GeneratedFile], package_dir: Path, *, force: bool = False) -> BuildReport:
    """Apply the ownership rules to OUT/<package>; raises CodegenError (writing nothing) on a refused file."""
    plan = _plan(files, package_dir)
    refused = plan.refused()
    if refused and not force:
        raise CodegenError(_refusal(refused, package_dir))
    report = BuildReport(orphaned=plan.findings.orphaned, notes=plan.findings.notes, kept=plan.user_present)
    for relpath, (status, data) in sorted(plan.generated.items()):
        if relpath == RECORD:
            continue
        if status == "same":
            report.unchanged.append(relpath)
        else:
            _write_atomic(package_dir / relpath, data)
            report.written.append(relpath)
    for relpath, data in sorted(plan.user_missing.items()):
        _write_atomic(package_dir / relpath, data)
        report.created.append(relpath)
    for relpath in sorted(plan.removals):
        (package_dir / relpath).unlink()
        report.removed.append(relpath)
    # The record goes last: it vouches for files already on disk.
    record_status, record_data = plan.generated[RECORD]
    if record_status != "same":
        _write_atomic(package_dir / RECORD, record_data)
    return report


def stale_diff(files: Sequence[GeneratedFile], package_dir: Path, label: str) -> str:
    """A unified diff from what is on disk to what a build would write; empty when up to date. The record is in
    it only when nothing else differs: its hash lines beside the files it records would only repeat them."""
    plan = _plan(files, package_dir)
    chunks: list[str] = []
    for relpath, (status, data) in sorted(plan.generated.items()):
        if status != "same" and relpath != RECORD:
            old = None if status == "new" else (package_dir / relpath).read_bytes()
            chunks.append(_diff(old, data, f"{label}/{relpath}"))
    for relpath, data in sorted(plan.user_missing.items()):
        chunks.append(_diff(None, data, f"{label}/{relpath}"))
    for relpath in sorted(plan.removals):
        chunks.append(_diff((package_dir / relpath).read_bytes(), None, f"{label}/{relpath}"))
    status, record = plan.generated[RECORD]
    if not chunks and status != "same":
        chunks.append(_diff(None if status == "new" else (package_dir / RECORD).read_bytes(), record,
                            f"{label}/{RECORD}"))
    return "".join(chunks)


def record_bytes(files: Sequence[GeneratedFile]) -> bytes:
    """The record of a build: sha256 per generated file; sorted keys, so byte-stable."""
    hashes = {f.relpath: content_hash(f.data) for f in files if f.owner == "generated"}
    return (json.dumps({"generated": hashes, "svcgen": RECORD_FORMAT}, indent=2, sort_keys=True) + "\n").encode()


def check_findings(files: Sequence[GeneratedFile], package_dir: Path) -> list[str]:
    """What `check` fails on besides a stale diff, one line each: generated files `build` would refuse (edited by
    hand, not svcgen's), orphans, likely renames, handlers whose types changed, an old health.py, missing user
    files."""
    refused = [f"{relpath}: {_refusal_reason(status)}" for relpath, status in _plan(files, package_dir).refused()]
    return refused + user_findings(files, package_dir, missing=True).problems()


def _plan(files: Sequence[GeneratedFile], package_dir: Path) -> _Plan:
    recorded = _read_record(package_dir)
    generated: dict[str, tuple[Status, bytes]] = {}
    for f in files:
        if f.owner == "generated":
            generated[f.relpath] = (_status(package_dir / f.relpath, f.relpath, f.data, recorded), f.data)
    record = record_bytes(files)
    on_disk = _read(package_dir / RECORD)
    generated[RECORD] = ("new" if on_disk is None else "same" if on_disk == record else "stale", record)
    removals: dict[str, Status] = {}
    for relpath, digest in recorded.items():
        path = package_dir / relpath
        if relpath not in generated and path.is_file():
            removals[relpath] = "stale" if content_hash(path.read_bytes()) == digest else "hand-edited"
    user = [f for f in files if f.owner == "user"]
    missing = {f.relpath: f.data for f in user if not (package_dir / f.relpath).exists()}
    present = sorted(f.relpath for f in user if f.relpath not in missing)
    return _Plan(
        generated=generated,
        removals=removals,
        user_missing=missing,
        user_present=present,
        findings=user_findings(files, package_dir, missing=False),
    )


def _status(path: Path, relpath: str, data: bytes, recorded: dict[str, str]) -> Status:
    current = _read(path)
    if current is None:
        return "new"
    if current == data:
        return "same"
    digest = recorded.get(relpath)
    if digest is not None:
        return "stale" if content_hash(current) == digest else "hand-edited"
    # No record of it (a first build over existing files, or a lost record): our header or place vouches.
    if current.startswith(HEADER_PREFIX.encode()) or relpath.startswith(CONTRACTS_DIR):
        return "stale"
    return "foreign"


def _read_record(package_dir: Path) -> dict[str, str]:
    data = _read(package_dir / RECORD)
    if data is None:
        return {}
    try:
        hashes = json.loads(data)["generated"]
    except (ValueError, KeyError, TypeError):
        return {}  # a damaged record vouches for nothing; headers still identify generated files
    if not isinstance(hashes, dict):
        return {}
    return {str(path): str(digest) for path, digest in hashes.items()}


def _refusal(refused: list[tuple[str, Status]], package_dir: Path) -> list[str]:
    return [f"{package_dir / relpath}: {_refusal_reason(status)}" for relpath, status in refused]


def _refusal_reason(status: Status) -> str:
    """Why `build` refuses a generated file (and `check` names it), and what to do."""
    if status == "foreign":
        return "exists but was not written by svcgen; move it away or build with --force"
    return ("generated file edited by hand since the last build; generated files are rewritten on every build, so "
            "move the change into a handler (or the manifest), or build with --force to discard it")


def _diff(old: bytes | None, new: bytes | None, name: str) -> str:
    before = [] if old is None else old.decode("utf-8", errors="replace").splitlines(keepends=True)
    after = [] if new is None else new.decode("utf-8", errors="replace").splitlines(keepends=True)
    # git's a/ and b/ prefixes (for `patch -p1`) only make sense on a relative path.
    a, b = (name, name) if name.startswith("/") else (f"a/{name}", f"b/{name}")
    lines = difflib.unified_diff(before, after, "/dev/null" if old is None else a, "/dev/null" if new is None else b)
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)  # an error names the directory in the way
    try:
        write_atomic(path, data, durable=False)
    except OSError as error:  # named by the file the build wanted, not its scratch file
        raise OSError(error.errno, error.strerror, str(path)) from None


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None


def _names(paths: list[str]) -> str:
    return ", ".join(paths) if paths else "none"
