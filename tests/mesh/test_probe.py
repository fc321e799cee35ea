"""The outside-in probe: verdicts per requirement, and `svcgen probe` against generated services."""

from __future__ import annotations

import asyncio
import importlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from svcgen.collector.probe import INCONCLUSIVE, NOT_SATISFIED, SATISFIED, ProbeReport, probe
from svcgen.collector.wellknown import SurfaceAnswer, SurfaceProblem, health_document, spec_document
from svcgen.runtime import (
    ApiKeyScheme,
    Guard,
    HealthCheck,
    HealthChecks,
    HttpApp,
    Identity,
    Registry,
    Security,
    Service,
)
from tests.support.fakes import registry
from tests.support.server import free_port, running

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "manifests"


def app(*, health: bool = True, prefix: str = "/svc", topics: Registry | None = None, **options: Any) -> HttpApp:
    checks = HealthChecks([HealthCheck("db", lambda: True)]) if health else None
    service = Service(Identity("orders"), topics if topics is not None else registry(), health=checks, prefix=prefix)
    return HttpApp(service, **options)


def probed(target: Any, *, prefix: str = "/svc") -> ProbeReport:
    transport = target if isinstance(target, httpx.AsyncBaseTransport) else httpx.ASGITransport(app=target)
    return asyncio.run(probe("http://orders.test/", prefix=prefix, transport=transport))


def verdicts(report: ProbeReport) -> dict[str, str]:
    return {v.id: v.verdict for v in report.requirements}


def test_a_fully_wired_service_is_clean_and_the_unobservable_stay_inconclusive() -> None:
    report = probed(app())
    assert verdicts(report) == {
        "R1": SATISFIED, "R2": SATISFIED, "R3": SATISFIED, "R4": SATISFIED,
        "R5": SATISFIED, "R6": INCONCLUSIVE, "R7": SATISFIED, "R8": INCONCLUSIVE,
    }  # fmt: skip
    assert report.is_clean and report.not_satisfied == [] and report.inconclusive == ["R6", "R8"]
    assert report.base_url == "http://orders.test"
    assert all(v.reason for v in report.requirements)
    reason = "http://orders.test/svc/health answered 200 with a health aggregate (healthy)"
    assert report.document()["requirements"][2] == {"id": "R3", "verdict": SATISFIED, "reason": reason}


def test_missing_surfaces_are_positively_unmet() -> None:
    report = probed(app(health=False, spec=False))
    assert report.not_satisfied == ["R3", "R5"]
    assert not report.is_clean
    assert "404" in next(v.reason for v in report.requirements if v.id == "R3")


def test_no_application_topic_is_r2_unmet() -> None:
    assert verdicts(probed(app(topics=Registry())))["R2"] == NOT_SATISFIED


def test_an_unhealthy_service_still_has_a_health_endpoint() -> None:
    checks = HealthChecks([HealthCheck("db", lambda: False)])
    unhealthy = HttpApp(Service(Identity("orders"), registry(), health=checks))
    report = probed(unhealthy)
    assert verdicts(report)["R3"] == SATISFIED
    assert "(unhealthy)" in report.requirements[2].reason


def test_a_non_default_prefix_leaves_r7_inconclusive_never_upgraded() -> None:
    report = probed(app(prefix="/ops"), prefix="/ops")
    assert verdicts(report)["R7"] == INCONCLUSIVE
    assert report.is_clean
    assert verdicts(probed(app(prefix="/ops")))["R4"] == NOT_SATISFIED  # probed where nothing is mounted


def test_an_invoke_surface_that_does_not_answer_svc_mesh_fails_r6() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/svc/invoke":
            envelope = {"statusCode": "not-found", "isSuccessful": False, "headers": {}, "body": "{}"}
            return httpx.Response(200, json=envelope)
        return httpx.Response(404)

    report = probed(httpx.MockTransport(handler))
    assert verdicts(report)["R6"] == NOT_SATISFIED
    assert verdicts(report)["R4"] == SATISFIED


def test_garbage_answers_are_unmet_and_timeouts_inconclusive() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/svc/health":
            raise httpx.ReadTimeout("slow", request=request)
        return httpx.Response(200, content=b"<html>not json</html>")

    result = verdicts(probed(httpx.MockTransport(handler)))
    assert result["R3"] == INCONCLUSIVE
    assert result["R4"] == NOT_SATISFIED and result["R5"] == NOT_SATISFIED
    assert result["R2"] == INCONCLUSIVE


def test_an_unreachable_service_is_r1_unmet_and_nothing_else_is_judged() -> None:
    report = asyncio.run(probe(f"http://127.0.0.1:{free_port()}", timeout=2))
    assert report.not_satisfied == ["R1"]
    assert report.inconclusive == ["R2", "R3", "R4", "R5", "R6", "R7", "R8"]


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    out = tmp_path_factory.mktemp("probe")
    for name in ("orders", "payments"):
        built = subprocess.run(
            [sys.executable, "-m", "svcgen", "build", str(EXAMPLES / f"{name}.yaml"), "-o", str(out)],
            capture_output=True, text=True,
        )  # fmt: skip
        assert built.returncode == 0, built.stderr
    sys.path.insert(0, str(out))
    try:
        yield out
    finally:
        sys.path.remove(str(out))


def cli_probe(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "svcgen", "probe", url, *args], capture_output=True, text=True, timeout=60
    )


def test_svcgen_probe_reports_a_fully_wired_generated_service_clean(generated: Path) -> None:
    orders = importlib.import_module("orders_service.service")
    with running(orders.create_app()) as base:
        table = cli_probe(base)
        as_json = cli_probe(base, "--json")
    assert table.returncode == 0, table.stdout + table.stderr
    assert "clean: nothing positively unmet; inconclusive: R6, R8" in table.stdout
    assert "  R3  satisfied" in table.stdout
    report = json.loads(as_json.stdout)
    assert as_json.returncode == 0
    assert report["baseUrl"] == base and report["isClean"] is True and report["notSatisfied"] == []
    assert [r["id"] for r in report["requirements"]] == [f"R{i}" for i in range(1, 9)]


def test_svcgen_probe_finds_a_service_built_without_health_and_exits_1(generated: Path) -> None:
    payments = importlib.import_module("payments_service.service")
    with running(payments.create_app()) as base:
        result = cli_probe(base)
    assert result.returncode == 1
    assert "  R3  not-satisfied" in result.stdout
    assert "not satisfied: R3" in result.stdout


def test_svcgen_probe_refuses_a_url_that_is_not_http() -> None:
    result = cli_probe("127.0.0.1:8000")
    assert result.returncode == 1
    assert "not an http(s) URL" in result.stderr
    assert "Traceback" not in result.stderr


def test_svcgen_probe_refuses_a_base_url_with_a_query_and_prints_no_credentials_of_one() -> None:
    # The surfaces' paths went after the query (`?x=1/svc/spec`): a healthy service judged unmet.
    result = cli_probe("http://ops:s3cret@127.0.0.1:8000/base?x=1")
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "http://127.0.0.1:8000/base?…: a base URL has no query or fragment; give it as http://127.0.0.1:8000/base"
    )


def test_the_probe_report_names_the_url_without_its_credentials() -> None:
    transport = httpx.ASGITransport(app=protected())
    report = asyncio.run(probe("http://ops:s3cret@orders.test", headers={"x-ops-key": KEY}, transport=transport))
    assert report.base_url == "http://orders.test" and report.document()["baseUrl"] == "http://orders.test"


@pytest.mark.parametrize("timeout", ["nan", "inf"])
def test_svcgen_probe_refuses_a_timeout_that_is_not_a_finite_number(timeout: str) -> None:
    # FloatRange(min=0.1) lets nan through (every comparison with it is false): a traceback from anyio, and inf
    # would wait for ever on a service that never answers.
    result = cli_probe(f"http://127.0.0.1:{free_port()}", "--timeout", timeout)
    assert result.returncode == 2, result.stderr
    assert "--timeout" in result.stderr and "finite" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_probe_and_the_poller_judge_a_surface_by_one_rule() -> None:
    # One client of the well-known surfaces: a spec without a topics array is no spec to either of them.
    not_a_spec = SurfaceAnswer("http://x/svc/spec", 200, b'{"service": "x"}')
    with pytest.raises(SurfaceProblem, match="no topics array"):
        spec_document(not_a_spec)
    assert spec_document(SurfaceAnswer("http://x/svc/spec", 203, b'{"topics": []}')) == {"topics": []}
    assert health_document(SurfaceAnswer("http://x/svc/health", 404)) is None
    with pytest.raises(SurfaceProblem, match="answer exceeds 10 bytes"):
        health_document(SurfaceAnswer("http://x/svc/health", error="answer exceeds 10 bytes"))


KEY = "k-secret-0123456789"


def protected(header: str = "x-ops-key", key: str = KEY) -> HttpApp:
    """A service whose well-known surfaces want the API key `key` in `header` (health stays public)."""
    security = Security.declare([ApiKeyScheme("ops", header)], well_known=["ops"])
    guard = Guard(security, api_keys={"ops": {key: "auditor"}}).load()
    checks = HealthChecks([HealthCheck("db", lambda: True)])
    return HttpApp(Service(Identity("orders"), registry(), health=checks, security=guard))


def test_a_credential_lets_the_probe_audit_protected_well_known_surfaces() -> None:
    assert probed(protected()).not_satisfied == ["R5", "R6"]  # refused 401 without one
    transport = httpx.ASGITransport(app=protected())
    report = asyncio.run(probe("http://orders.test", headers={"x-ops-key": KEY}, transport=transport))
    assert report.is_clean and verdicts(report)["R5"] == SATISFIED


def test_svcgen_probe_sends_headers_and_a_token_file_and_never_prints_them(tmp_path: Path) -> None:
    token_file = tmp_path / "probe.token"
    token_file.write_text(KEY + "\n")
    with running(protected()) as base, running(protected("authorization", f"Bearer {KEY}")) as bearer:
        runs = {
            "without": cli_probe(base),
            "header": cli_probe(base, "--header", f"X-Ops-Key: {KEY}", "--header", "x-probe: yes"),
            "token-file": cli_probe(bearer, "--token-file", str(token_file)),
            "malformed": cli_probe(base, "--header", f"x-ops-key={KEY}"),
            "both": cli_probe(bearer, "--token-file", str(token_file), "--header", f"Authorization: Bearer {KEY}"),
        }
    assert runs["without"].returncode == 1 and "not satisfied: R5, R6" in runs["without"].stdout
    assert runs["header"].returncode == 0, runs["header"].stdout
    assert runs["token-file"].returncode == 0, runs["token-file"].stdout
    assert runs["malformed"].returncode == 1 and "--header" in runs["malformed"].stderr
    assert runs["both"].returncode == 1 and "authorization" in runs["both"].stderr
    for name, run in runs.items():
        assert KEY not in run.stdout + run.stderr, name
        assert "Traceback" not in run.stderr, name
