"""Shared timing for bench/ scripts: medians of repeated runs, ratios to a baseline from the same run."""

from __future__ import annotations

import asyncio
import os
import platform
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

REPEATS = int(os.environ.get("BENCH_REPEATS", "5"))


def machine() -> str:
    python = f"{platform.python_implementation()} {platform.python_version()}"
    return f"{python}, {os.cpu_count()} cores, {platform.machine()}"


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
        samples = []
        for _ in range(REPEATS):
            started = time.perf_counter()
            for _ in range(calls):
                await make()
            samples.append((time.perf_counter() - started) / calls * 1e6)
        return statistics.median(samples)

    return asyncio.run(run())


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
