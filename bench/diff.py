"""`svcgen diff` as a whole process over two 1000-topic, 2000-type manifests.

The new manifest is the old one with compatible changes spread through it (a nullable property on every
tenth record, a second route on every tenth topic, a v2 beside every twentieth topic), so the diff walks every
topic and finds changes without failing. Wall time is the median of REPEATS child processes, with interpreter
start (`python -c pass`) and the command line's start-up (`svcgen --version`: the imports `svcgen diff` pays)
measured in the same run; loading one manifest and the diff of the two loaded models are timed in-process to show
where the rest goes.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from bench.build import run_child, synthetic_manifest
from bench.harness import REPEATS, Figure, Recorder, once_ms, run
from svcgen.contractdiff import diff_manifests
from svcgen.manifest import load_manifest

TOPICS, TYPES = 1000, 2000


def changed_manifest(old: dict[str, Any]) -> dict[str, Any]:
    new = copy.deepcopy(old)
    for index, record in enumerate(new["types"].values()):
        if index % 10 == 0:
            record["fields"]["benchNote"] = "string?"
    topics = new["topics"]
    for index, topic in enumerate(list(topics)):
        if index % 10 == 0:
            topic["routes"].append(f"PUT /d{index % 50}/a{index}/{{field0Value}}")
        if index % 20 == 0:
            topic["version"] = "v1"
            topics.append({**topic, "version": "v2", "routes": []})
    for topic in old["topics"][::20]:
        topic["version"] = "v1"  # the same (topic, v1) in both: v2 is the only addition
    return new


def measure_diff(record: Recorder, args: argparse.Namespace) -> None:
    interpreter = statistics.median(run_child([sys.executable, "-c", "pass"])[0] for _ in range(REPEATS))
    record("interpreter start (python -c pass)", interpreter * 1e3, "ms")
    with tempfile.TemporaryDirectory() as scratch:
        old_document = synthetic_manifest(TOPICS, TYPES)
        new_document = changed_manifest(old_document)
        old_path, new_path = Path(scratch, "old.yaml"), Path(scratch, "new.yaml")
        old_path.write_text(yaml.safe_dump(old_document, sort_keys=False))
        new_path.write_text(yaml.safe_dump(new_document, sort_keys=False))
        command = [sys.executable, "-m", "svcgen", "diff", str(old_path), str(new_path)]
        runs = [run_child(command) for _ in range(REPEATS)]
        record(f"diff, {TYPES} types / {TOPICS} topics each, whole process", statistics.median(r[0] for r in runs),
               "s", target=1.0)
        record("  its CPU time (user + system)", statistics.median(r[2] for r in runs), "s")
        start_up = [run_child([sys.executable, "-m", "svcgen", "--version"])[0] for _ in range(REPEATS)]
        record("  of which start-up (svcgen --version, whole process)", statistics.median(start_up) * 1e3, "ms")
        record("  of which loading one manifest (in-process)", once_ms(lambda _: load_manifest(old_path)), "ms")
        old, new = load_manifest(old_path), load_manifest(new_path)
        samples = []
        for _ in range(REPEATS):
            started = time.perf_counter()
            report = diff_manifests(old, new)
            samples.append(time.perf_counter() - started)
        record("  of which the diff of the loaded models", statistics.median(samples) * 1e3, "ms",
               note=f"{len(report.findings)} findings, none an error")
        assert not report.breaking, "the bench's changes are meant to be compatible"


def main(argv: list[str] | None = None) -> list[Figure]:
    return run("bench/diff.py", measure_diff, argv)


if __name__ == "__main__":
    main()
