"""Shared timing for bench/ scripts: medians of repeated runs, ratios to a baseline from the same run.

Each script records its figures through a `Recorder`, which prints them as they come and keeps them as data
(`Figure`): `python -m bench.X` prints, `python -m bench.X --json FILE` also writes them for bench/report.py.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import platform
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

REPEATS = int(os.environ.get("BENCH_REPEATS", "5"))


def machine() -> str:
    python = f"{platform.python_implementation()} {platform.python_version()}"
    return f"{python}, {os.cpu_count()} cores, {platform.machine()}"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_details() -> dict[str, str]:
    """What bench/REPORT.md says about the machine."""
    details = {
        "CPU": cpu_model(),
        "cores": str(os.cpu_count()),
        "architecture": platform.machine(),
        "Python": f"{platform.python_implementation()} {platform.python_version()}",
        "OS": platform.platform(),
    }
    if hasattr(os, "getloadavg"):
        details["load average at start (1/5/15 min)"] = " / ".join(f"{n:.2f}" for n in os.getloadavg())
    return details


def per_call_us(fn: Callable[[], Any], calls: int) -> float:
    """Median over REPEATS of the mean µs per call."""
    samples = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - started) / calls * 1e6)
    return statistics.median(samples)


def per_await_us(make: Callable[[], Awaitable[Any]], calls: int) -> float:
    """Like per_call_us for coroutines, all awaited inside one event loop."""

    async def run() -> float:
        return statistics.median([await awaited_us(make, calls) for _ in range(REPEATS)])

    return asyncio.run(run())


async def awaited_us(make: Callable[[], Awaitable[Any]], calls: int) -> float:
    """Mean µs per call of `calls` calls awaited one after the other, once (a round of an alternating bench)."""
    started = time.perf_counter()
    for _ in range(calls):
        await make()
    return (time.perf_counter() - started) / calls * 1e6


def once_ms(fn: Callable[[Any], Any], setup: Callable[[], Any] = lambda: None) -> float:
    """Median over REPEATS of one call `fn(setup())`, in ms; only `fn` is timed."""
    samples = []
    for _ in range(REPEATS):
        prepared = setup()
        started = time.perf_counter()
        fn(prepared)
        samples.append((time.perf_counter() - started) * 1e3)
    return statistics.median(samples)


def verdict(value: float, target: float) -> str:
    return "meets target" if value <= target else "MISSES target"


def report(name: str, value: float, unit: str, target: float | None = None, note: str = "") -> None:
    line = f"{name:<58} {value:10.2f} {unit}"
    if target is not None:
        line += f"   (target ≤ {target:g} {unit}: {verdict(value, target)})"
    if note:
        line += f"   {note}"
    print(line)


@dataclasses.dataclass(frozen=True)
class Figure:
    """One measured or derived figure of a run. `target` is an upper bound on `value`; `baseline` names the
    figure of the same run this one is compared against (bench/report.py shows the ratio)."""

    name: str
    value: float
    unit: str
    target: float | None = None
    baseline: str | None = None
    note: str = ""

    @property
    def met(self) -> bool | None:
        return None if self.target is None else self.value <= self.target


class Recorder:
    """Prints each figure as `report` does and keeps it; names are unique within a script's run."""

    def __init__(self) -> None:
        self.figures: list[Figure] = []

    def __call__(
        self,
        name: str,
        value: float,
        unit: str,
        target: float | None = None,
        note: str = "",
        baseline: str | None = None,
    ) -> float:
        report(name, value, unit, target, note)
        if any(figure.name == name.strip() for figure in self.figures):
            raise ValueError(f"figure {name.strip()!r} recorded twice")
        self.figures.append(Figure(name.strip(), value, unit, target, baseline, note))
        return value


def run(
    title: str,
    measure: Callable[[Recorder, argparse.Namespace], None],
    argv: Sequence[str] | None = None,
    parser: argparse.ArgumentParser | None = None,
) -> list[Figure]:
    """The `main` of a script: parse `--json FILE` (and the script's own options), print, measure, write."""
    parser = parser or argparse.ArgumentParser()
    parser.add_argument("--json", type=Path, help="also write the figures to this file as JSON")
    args = parser.parse_args(argv)
    print(f"{title} on {machine()}\n")
    recorder = Recorder()
    measure(recorder, args)
    if args.json is not None:
        args.json.write_text(json.dumps([dataclasses.asdict(figure) for figure in recorder.figures], indent=1))
    return recorder.figures


def load_figures(path: Path) -> list[Figure]:
    return [Figure(**entry) for entry in json.loads(path.read_text())]
