"""The collector lock: with a token, every feed, query and artifact needs `authorization: Bearer <token>`; without
it the answer is 401 `{status: unauthorized, detail}` and nothing changes."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import httpx
import pytest

from svcgen.collector.host import (
    CollectorHost,
    CollectorSettings,
    collector_token,
    exposed_without_token,
)
from svcgen.collector.poller import Poller
from svcgen.runtime import MeshSettings
from svcgen.runtime._mesh.feeds import EnvelopeSender
from svcgen.runtime._mesh.host import _overridden
from tests.support.feeds import descriptor, ok
from tests.support.meshrun import TOKEN, locked_mesh
from tests.support.processes import wait_for
from tests.support.server import running

UNAUTHORIZED = {"status": "unauthorized", "detail": "this collector wants `authorization: Bearer <token>`"}


def test_without_the_token_nothing_is_answered_and_nothing_changes(tmp_path: Path) -> None:
    host = CollectorHost(CollectorSettings(artifacts=tmp_path, artifacts_interval=0.1, token=TOKEN))
    envelope = {"topic": "svc:mesh:register", "body": '{"service": "intruder"}'}
    fleet = {"topic": "svc:mesh:query:fleet", "body": "{}"}
    with running(host.app) as base:
        for headers in (
            {},
            {"authorization": "Bearer wrong"},
            {"authorization": TOKEN},
            {"authorization": f"Basic {TOKEN}"},
            {"authorization": f"Bearer {TOKEN}x"},
        ):
            for method, path, body in (
                ("POST", "/svc/invoke", envelope),
                ("POST", "/svc/invoke", fleet),
                ("GET", "/manifest.json", None),
                ("GET", "/issues.json", None),
                ("GET", "/services/orders.json", None),
                ("GET", "/svc/health", None),
            ):
                answer = httpx.request(method, base + path, json=body, headers=headers, timeout=5)
                assert (answer.status_code, answer.json()) == (401, UNAUTHORIZED), (method, path, headers)
                # RFC 9110: every 401 names its challenge, worded as a service's own guard words it
                refused = headers.get("authorization", "").lower().startswith("bearer ")
                challenge = 'Bearer realm="svc"' + (', error="invalid_token"' if refused else "")
                assert answer.headers["www-authenticate"] == challenge, (method, path, headers)
        assert host.collector.snapshot()["catalog"] == []

        # The page itself holds no data: a browser loads it, then sends the token with every fetch.
        page = httpx.get(base + "/", timeout=5)
        assert page.status_code == 200 and b'name="svcgen-invoke" content="svc/invoke"' in page.content
        good = {"authorization": f"bearer {TOKEN}"}  # the scheme is case-insensitive
        answer = httpx.post(
            base + "/svc/invoke",
            json={"topic": "svc:mesh:register", "body": '{"service": "orders"}'},
            headers=good,
            timeout=5,
        )
        assert answer.status_code == 200 and answer.json()["statusCode"] == "ok"
        assert [entry["service"] for entry in host.collector.snapshot()["catalog"]] == ["orders"]
        wait_for(lambda: httpx.get(base + "/manifest.json", headers=good, timeout=5).status_code == 200)


def test_a_generated_service_given_the_token_reports_to_a_locked_collector(tmp_path: Path) -> None:
    with locked_mesh(tmp_path) as mesh:
        assert httpx.get(f"{mesh.books}/books/dune", timeout=10).status_code == 200
        assert httpx.get(f"{mesh.books}/books/missing", timeout=10).status_code == 404
        assert httpx.get(f"{mesh.books}/books/boom", timeout=10).status_code == 503

        def reported() -> dict[str, object] | None:
            fleet = mesh.query("svc:mesh:query:fleet", {})
            (service,) = fleet["services"] or [{}]
            # Traces flush on their own ~1 s period, issues with the beat: wait for every feed.
            arrived = service.get("health") == "healthy" and service.get("missingFeeds") == []
            return fleet if len(fleet["issues"]) == 2 and arrived else None

        fleet = wait_for(reported, timeout=30, what="the books service's feeds")
        (books,) = fleet["services"]
        assert books == {
            "service": "books",
            "serviceVersion": "2.1.0",
            "topics": 1,
            "health": "healthy",
            "instances": 1,
            "staleInstances": 0,
            "missingFeeds": [],
        }
        assert sorted((i["classification"], i["status"]) for i in fleet["issues"]) == [
            ("client", "not-found"),
            ("exception", "service-unavailable"),
        ]
        topic = mesh.query("svc:mesh:query:topic", {"topic": "books:get"})
        assert (topic["consumers"], topic["providers"], topic["invocations"]) == (["books"], [], 3)

        # Without the token: refused, and nothing changed (the books service keeps beating, so compare what a
        # refused register would have changed).
        refused = mesh.invoke("svc:mesh:register", descriptor("intruder"), token=None)
        assert (refused.status_code, refused.json()["status"]) == (401, "unauthorized")
        assert mesh.invoke("svc:mesh:query:fleet", {}, token="wrong").status_code == 401
        assert mesh.invoke("svc:mesh:query:service", {"service": "intruder"}).json()["statusCode"] == "not-found"
        assert [s["service"] for s in mesh.query("svc:mesh:query:fleet", {})["services"]] == ["books"]


def test_the_poller_sends_the_collectors_token() -> None:
    seen: list[str | None] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization"))
        if request.url.path.endswith("/spec"):
            return httpx.Response(200, json={"service": "stock", "topics": []})
        return httpx.Response(200, json={"isHealthy": True, "healthChecks": {}})

    host = CollectorHost(
        CollectorSettings(fleet=[("stock", "http://stock.test")], token=TOKEN), transport=httpx.MockTransport(answer)
    )
    assert host.poller is not None
    asyncio.run(host.poller.sweep())
    assert seen == [f"Bearer {TOKEN}", f"Bearer {TOKEN}"]
    assert ok(host.collector.query_fleet())["services"][0]["service"] == "stock"
    seen.clear()
    asyncio.run(Poller(host.collector, [("stock", "http://stock.test")], transport=httpx.MockTransport(answer)).sweep())
    assert seen == [None, None]  # a poller without the token sends none


def test_reporters_take_the_token_from_the_environment() -> None:
    settings = MeshSettings(collector="http://collector")
    assert _overridden(settings, {}).token is None
    assert _overridden(settings, {"SVCGEN_COLLECTOR_TOKEN": f" {TOKEN}\n"}).token == TOKEN


def test_the_token_comes_from_the_file_else_the_environment(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(f"{TOKEN}\n")
    assert collector_token(token_file, {"SVCGEN_COLLECTOR_TOKEN": "other"}) == TOKEN
    assert collector_token(None, {"SVCGEN_COLLECTOR_TOKEN": " other "}) == "other"
    assert collector_token(None, {}) is None
    token_file.write_text("  \n")
    with pytest.raises(ValueError, match="expected one token"):
        collector_token(token_file, {})
    with pytest.raises(ValueError, match="cannot read the token"):
        collector_token(tmp_path / "missing", {})


@pytest.mark.parametrize(
    ("host", "token", "exposed"),
    [
        ("127.0.0.1", None, False),
        ("::1", None, False),
        ("localhost", None, False),
        ("127.0.0.2", None, False),
        ("0.0.0.0", None, True),
        ("::", None, True),
        ("10.1.2.3", None, True),
        ("collector.internal", None, True),
        ("0.0.0.0", TOKEN, False),
    ],
)
def test_only_a_reachable_address_without_a_token_is_exposed(host: str, token: str | None, exposed: bool) -> None:
    assert exposed_without_token(host, token) is exposed


def test_svcgen_collector_serve_refuses_an_empty_token_file(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from click.testing import CliRunner

    from svcgen.cli import main

    empty = tmp_path / "token"
    empty.write_text("")
    with caplog.at_level(logging.WARNING):
        result = CliRunner().invoke(main, ["collector", "serve", "--token-file", str(empty)])
    assert result.exit_code == 1
    assert f"{empty}: expected one token (no spaces) in the file" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("host", "token", "warned"), [("0.0.0.0", None, True), ("0.0.0.0", TOKEN, False), ("127.0.0.1", None, False)]
)
def test_svcgen_collector_serve_warns_once_when_reachable_and_open(
    host: str,
    token: str | None,
    warned: bool,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    import uvicorn
    from click.testing import CliRunner

    from svcgen.cli import main

    served: list[object] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: served.append(app))  # bind nothing
    monkeypatch.setattr("svcgen.cli.configure_logging", lambda: None)  # it would replace caplog's handler
    monkeypatch.setenv("SVCGEN_COLLECTOR_TOKEN", token or "")
    with caplog.at_level(logging.WARNING, logger="svcgen.mesh.collector"):
        result = CliRunner().invoke(main, ["collector", "serve", "--host", host, "--artifacts", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert len(served) == 1
    lines = [r.getMessage() for r in caplog.records if "without a token" in r.getMessage()]
    assert lines == (
        [
            f"collector bound to {host} without a token: anyone who can reach it can write to it and "
            "read it (lock it with --token-file FILE or SVCGEN_COLLECTOR_TOKEN)"
        ]
        if warned
        else []
    )


def test_a_reporter_with_the_token_is_accepted_and_one_without_is_unauthorized(tmp_path: Path) -> None:
    host = CollectorHost(CollectorSettings(artifacts=tmp_path, token=TOKEN))

    async def report(token: str | None) -> str:
        sender = EnvelopeSender("http://collector", token=token, transport=httpx.ASGITransport(host.app))
        try:
            return (await sender.send("svc:mesh:register", descriptor("orders"))).status
        finally:
            await sender.aclose()

    assert asyncio.run(report(None)) == "unauthorized"
    assert host.collector.snapshot()["catalog"] == []
    assert asyncio.run(report(TOKEN)) == "ok"
    assert [entry["service"] for entry in host.collector.snapshot()["catalog"]] == ["orders"]
