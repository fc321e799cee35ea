"""Named health checks, each with a timeout, and their aggregate `{isHealthy, healthChecks}`."""

from __future__ import annotations

import asyncio
import inspect
import logging
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
    name: str
    check: CheckFunction
    timeout: float = DEFAULT_CHECK_TIMEOUT


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
    """The checks a service supplies; `run` executes them concurrently, each bounded by its timeout."""

    def __init__(self, checks: Iterable[HealthCheck] = ()) -> None:
        self._checks: list[HealthCheck] = []
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

    async def run(self) -> HealthReport:
        results = await asyncio.gather(*(_run_one(check) for check in self._checks))
        return HealthReport(dict(zip(self.names, results, strict=True)))


async def _run_one(check: HealthCheck) -> HealthCheckResult:
    try:
        outcome = await asyncio.wait_for(_call(check.check), timeout=check.timeout)
    except TimeoutError:
        return HealthCheckResult.failed(f"timed out after {check.timeout:g}s")
    except Exception as exc:
        logger.warning("health check %s raised %s", check.name, type(exc).__name__, exc_info=True)
        return HealthCheckResult.failed(f"raised {type(exc).__name__}")
    if isinstance(outcome, HealthCheckResult):
        return outcome
    if isinstance(outcome, bool):
        return HealthCheckResult.ok() if outcome else HealthCheckResult.failed()
    return HealthCheckResult.failed(f"returned {type(outcome).__name__}, expected HealthCheckResult or bool")


async def _call(fn: CheckFunction) -> Any:
    if inspect.iscoroutinefunction(fn):
        return await fn()
    # A sync check may block on I/O; keep it off the event loop so the timeout can fire.
    outcome = await asyncio.to_thread(fn)
    if inspect.isawaitable(outcome):
        return await outcome
    return outcome
