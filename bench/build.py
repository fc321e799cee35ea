"""`svcgen build` as a whole process: a 1000-topic, 2000-type manifest and a 20-type one.

Wall time and peak memory of the child process, with `python -c pass` measured in the same run as the
interpreter-start baseline.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from bench.harness import REPEATS, Figure, Recorder, run

SCALARS = ["string", "integer", "float", "boolean", "datetime", "string?", "list[string]", "map[integer]"]


def synthetic_manifest(topics: int, types: int) -> dict[str, Any]:
    records: dict[str, Any] = {}
    for index in range(types):
        fields: dict[str, Any] = {f"field{n}Value": SCALARS[(index + n) % len(SCALARS)] for n in range(5)}
        if index % 2:
            fields["previous"] = f"Record{index - 1}?"
        records[f"Record{index}"] = {"fields": fields}
    entries = [
        {"id": f"domain{index % 50}:action-{index}", "request": f"Record{(2 * index) % types}",
         "response": f"Record{(2 * index + 1) % types}", "routes": [f"POST /d{index % 50}/a{index}/{{field0Value}}"]}
        for index in range(topics)
    ]
    return {"svcgen": 1, "service": "synthetic", "types": records, "topics": entries}


def run_child(args: list[str]) -> tuple[float, float, float]:
    """(wall seconds, peak RSS MB, CPU seconds: user + system) of one child process, its own rusage read with
    wait4. On a machine busy with other work the wall time grows first; the CPU time tells them apart."""
    started = time.perf_counter()
    child = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert child.stderr is not None
    stderr = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{stderr.decode()}")
    return wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def measure(manifest: dict[str, Any], workdir: Path, name: str) -> tuple[float, float]:
    path = workdir / f"{name}.yaml"
    path.write_text(yaml.safe_dump(manifest, sort_keys=False))
    walls, peaks = [], []
    for attempt in range(REPEATS):
        out = workdir / f"out-{name}-{attempt}"
        wall, peak, _ = run_child([sys.executable, "-m", "svcgen", "build", str(path), "-o", str(out)])
        walls.append(wall)
        peaks.append(peak)
    return statistics.median(walls), max(peaks)


def measure_build(record: Recorder, args: argparse.Namespace) -> None:
    start_walls = [run_child([sys.executable, "-c", "pass"])[0] for _ in range(REPEATS)]
    interpreter = statistics.median(start_walls)
    record(INTERPRETER, interpreter * 1e3, "ms")
    with tempfile.TemporaryDirectory() as scratch:
        workdir = Path(scratch)
        small_wall, small_peak = measure(synthetic_manifest(10, 20), workdir, "small")
        record(SMALL, small_wall, "s", target=0.6)
        record("  peak memory (RSS), small build", small_peak, "MB")
        record("  ratio to interpreter start", small_wall / interpreter, "x")
        large_wall, large_peak = measure(synthetic_manifest(1000, 2000), workdir, "large")
        record("build, 2000 types / 1000 topics, whole process", large_wall, "s", target=3, baseline=SMALL)
        record("  peak memory (RSS), large build", large_peak, "MB", target=300)
        record("  ratio large/small wall time", large_wall / small_wall, "x")


INTERPRETER = "interpreter start (python -c pass)"
SMALL = "build, 20 types / 10 topics, whole process"


def main(argv: list[str] | None = None) -> list[Figure]:
    return run("bench/build.py", measure_build, argv)


if __name__ == "__main__":
    main()
