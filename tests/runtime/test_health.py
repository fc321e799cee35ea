import asyncio
import threading

from svcgen.runtime import HealthCheck, HealthCheckResult, HealthChecks
from svcgen.runtime._health import HealthReport


def run(checks: HealthChecks) -> dict[str, object]:
    return asyncio.run(checks.run()).document()


def test_empty_checks_are_healthy() -> None:
    assert run(HealthChecks()) == {"isHealthy": True, "healthChecks": {}}


def test_bools_and_results() -> None:
    checks = HealthChecks([
        HealthCheck("a", lambda: True),
        HealthCheck("b", lambda: HealthCheckResult.warning("slow")),
    ])
    assert run(checks) == {"isHealthy": True,
                           "healthChecks": {"a": {"status": "ok"}, "b": {"status": "warning", "detail": "slow"}}}


def test_false_raise_and_wrong_type_fail() -> None:
    def boom() -> bool:
        raise ConnectionError("secret dsn")

    checks = HealthChecks([
        HealthCheck("false", lambda: False),
        HealthCheck("boom", boom),
        HealthCheck("weird", lambda: "yes"),  # type: ignore[arg-type, return-value]
    ])
    report = asyncio.run(checks.run())
    assert not report.is_healthy
    assert report.failing == ["false", "boom", "weird"]
    assert report.checks["boom"] == HealthCheckResult.failed("raised ConnectionError")
    assert "secret" not in str(report.document())


def test_timeouts_fail_the_check_and_are_bounded() -> None:
    release = threading.Event()

    async def hangs() -> bool:
        await asyncio.sleep(30)
        return True

    def blocks() -> bool:
        # Had the timeout not fired, this would end healthy once released after the report.
        release.wait(10)
        return True

    async def run() -> HealthReport:
        try:
            return await HealthChecks(
                [HealthCheck("hangs", hangs, timeout=0.05), HealthCheck("blocks", blocks, timeout=0.05, blocking=True)]
            ).run()
        finally:
            release.set()

    report = asyncio.run(run())
    assert report.failing == ["hangs", "blocks"]
    assert report.checks["hangs"].detail == "timed out after 0.05s"
    assert report.checks["blocks"].detail == "timed out after 0.05s"


def test_a_plain_sync_check_runs_inline_and_a_blocking_one_in_a_worker() -> None:
    threads: dict[str, int] = {}

    def plain() -> bool:
        threads["plain"] = threading.get_ident()
        return True

    def blocking() -> bool:
        threads["blocking"] = threading.get_ident()
        return True

    async def run() -> tuple[HealthReport, int]:
        checks = HealthChecks([HealthCheck("plain", plain), HealthCheck("blocking", blocking, blocking=True)])
        return await checks.run(), threading.get_ident()

    report, loop_thread = asyncio.run(run())
    assert report.is_healthy
    assert threads["plain"] == loop_thread
    assert threads["blocking"] != loop_thread


def test_a_plain_check_over_its_timeout_fails_and_moves_to_a_worker() -> None:
    readings = iter([0.0, 3.0])  # the first run takes 3 s on the event loop; later ones run in a worker
    threads: list[int] = []

    def slow() -> bool:
        threads.append(threading.get_ident())
        return True

    checks = HealthChecks([HealthCheck("slow", slow, timeout=2)], clock=lambda: next(readings))

    async def twice() -> tuple[HealthReport, HealthReport, int]:
        return await checks.run(), await checks.run(), threading.get_ident()

    first, second, loop_thread = asyncio.run(twice())
    assert first.checks["slow"] == HealthCheckResult.failed("took 3s, over its 2s timeout")
    assert second.is_healthy
    assert threads[0] == loop_thread and threads[1] != loop_thread
    assert not checks.runs_inline(HealthCheck("slow", slow))


def test_duplicate_names_refused() -> None:
    checks = HealthChecks([HealthCheck("a", lambda: True)])
    try:
        checks.add(HealthCheck("a", lambda: True))
    except ValueError as exc:
        assert "duplicate" in str(exc)
    else:
        raise AssertionError("duplicate name accepted")
