"""Named health checks, each with a timeout, and their aggregate `{isHealthy, healthChecks}`."""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

logger = logging.getLogger("svcgen.health")

CheckStatus = Literal["ok", "warning", "failed"]
DEFAULT_CHECK_TIMEOUT = 2.0


@dataclass(frozen=True, slots=True)
class HealthCheckResult:
    status: CheckStatus
    detail: str | None = None

    @classmethod
    def ok(cls, detail: str | None = None) -> HealthCheckResult:
        return cls("ok", detail)

    @classmethod
    def warning(cls, detail: str | None = None) -> HealthCheckResult:
        return cls("warning", detail)

    @classmethod
    def failed(cls, detail: str | None = None) -> HealthCheckResult:
        return cls("failed", detail)

    @property
    def is_healthy(self) -> bool:
        return self.status != "failed"

    def document(self) -> dict[str, str]:
        entry: dict[str, str] = {"status": self.status}
        if self.detail:
            entry["detail"] = self.detail
        return entry


CheckFunction = Callable[[], "HealthCheckResult | bool | Awaitable[HealthCheckResult | bool]"]


@dataclass(frozen=True, slots=True)
class HealthCheck:
    """One named check. An `async` check is awaited within its timeout. A plain function runs inline on the event
    loop, so it must not block; `blocking=True` runs it in a worker thread within its timeout instead, and a
    plain one that ever overruns its timeout is reported failed and runs in a worker thread from then on."""

    name: str
    check: CheckFunction
    timeout: float = DEFAULT_CHECK_TIMEOUT
    blocking: bool = False


@dataclass(frozen=True, slots=True)
class HealthReport:
    checks: dict[str, HealthCheckResult]

    @property
    def is_healthy(self) -> bool:
        return all(result.is_healthy for result in self.checks.values())

    @property
    def failing(self) -> list[str]:
        return [name for name, result in self.checks.items() if not result.is_healthy]

    def document(self) -> dict[str, Any]:
        return {
            "isHealthy": self.is_healthy,
            "healthChecks": {name: result.document() for name, result in self.checks.items()},
        }


class HealthChecks:
    """The checks a service supplies; `run` executes them, the awaited ones concurrently, each bounded by its
    timeout. `clock` (monotonic seconds) times the inline ones."""

    def __init__(self, checks: Iterable[HealthCheck] = (), *, clock: Callable[[], float] = time.monotonic) -> None:
        self._checks: list[HealthCheck] = []
        self._clock = clock
        self._offloaded: set[str] = set()
        """Plain checks that overran their timeout once: from then on they run in a worker thread."""
        for check in checks:
            self.add(check)

    def add(self, check: HealthCheck) -> None:
        if any(existing.name == check.name for existing in self._checks):
            raise ValueError(f"duplicate health check name {check.name!r}")
        self._checks.append(check)

    def __len__(self) -> int:
        return len(self._checks)

    @property
    def names(self) -> list[str]:
        return [check.name for check in self._checks]

    def runs_inline(self, check: HealthCheck) -> bool:
        """Whether `check` runs on the event loop without a thread hop or a task."""
        return not (check.blocking or check.name in self._offloaded or inspect.iscoroutinefunction(check.check))

    async def run(self) -> HealthReport:
        results: dict[str, HealthCheckResult] = {}
        awaited: list[HealthCheck] = []
        for check in self._checks:
            if self.runs_inline(check):
                results[check.name] = await self._run_inline(check)
            else:
                awaited.append(check)
        if awaited:
            done = await asyncio.gather(*(_run_one(check) for check in awaited))
            results.update(zip((check.name for check in awaited), done, strict=True))
        return HealthReport({name: results[name] for name in self.names})

    async def _run_inline(self, check: HealthCheck) -> HealthCheckResult:
        started = self._clock()
        try:
            outcome = check.check()
            if inspect.isawaitable(outcome):  # a plain function handing back a coroutine
                outcome = await asyncio.wait_for(outcome, timeout=check.timeout)
        except TimeoutError:
            return _timed_out(check)
        except Exception as exc:
            return _raised(check, exc)
        took = self._clock() - started
        if took > check.timeout:
            # It blocked the loop past its timeout: honest about it now, and off the loop from now on.
            self._offloaded.add(check.name)
            logger.warning("health check %s took %.3gs on the event loop; it runs in a worker thread from now on",
                           check.name, took)
            return HealthCheckResult.failed(f"took {took:.3g}s, over its {check.timeout:g}s timeout")
        return _judge(outcome)


async def _run_one(check: HealthCheck) -> HealthCheckResult:
    try:
        outcome = await asyncio.wait_for(_call(check.check), timeout=check.timeout)
    except TimeoutError:
        return _timed_out(check)
    except Exception as exc:
        return _raised(check, exc)
    return _judge(outcome)


def _timed_out(check: HealthCheck) -> HealthCheckResult:
    return HealthCheckResult.failed(f"timed out after {check.timeout:g}s")


def _raised(check: HealthCheck, exc: Exception) -> HealthCheckResult:
    logger.warning("health check %s raised %s", check.name, type(exc).__name__, exc_info=True)
    return HealthCheckResult.failed(f"raised {type(exc).__name__}")


def _judge(outcome: Any) -> HealthCheckResult:
    if isinstance(outcome, HealthCheckResult):
        return outcome
    if isinstance(outcome, bool):
        return HealthCheckResult.ok() if outcome else HealthCheckResult.failed()
    return HealthCheckResult.failed(f"returned {type(outcome).__name__}, expected HealthCheckResult or bool")


async def _call(fn: CheckFunction) -> Any:
    if inspect.iscoroutinefunction(fn):
        return await fn()
    # Declared blocking (or caught blocking once): off the event loop so the timeout can fire.
    outcome = await asyncio.to_thread(fn)
    if inspect.isawaitable(outcome):
        return await outcome
    return outcome
