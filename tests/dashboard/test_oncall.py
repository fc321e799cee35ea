"""The on-call view in headless Chromium against a real collector (`svcgen collector serve`) fed by a generated
service with injected failures: a handler that raises, a response that does not fit its type, a flood of harmless
not-found answers, and an instance that stopped heartbeating. Every view is rendered and photographed; the
screenshots of the last run are kept in tests/dashboard/screenshots/ (git-ignored).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx

from tests.support.browser import Element, chromium_dump_dom, parse_dom
from tests.support.meshrun import BOOKS_HANDLER, TOKEN, LockedMesh, MeshService, locked_mesh
from tests.support.processes import wait_for

SHELF = """svcgen: 1
service: shelf
serviceVersion: 1.0.0
mesh: {collector: "http://127.0.0.1:9", heartbeatSeconds: 0.2}
types:
  GetBook:
    fields:
      bookId: string
  Book:
    fields:
      bookId: string
      title: string
  Tally:
    fields:
      total: integer
topics:
  - id: shelf:get
    request: GetBook
    response: Book
    routes: ["GET /books/{bookId}"]
  - id: shelf:count
    request: GetBook
    response: Tally
    routes: ["GET /count/{bookId}"]
"""
COUNT_HANDLER = '''
from svcgen.runtime import Context, Result

from ..models import GetBook, Tally


async def handle(request: GetBook, context: Context) -> Result[Tally]:
    return Result.ok(Tally(total=2**70))  # does not fit the wire's 64-bit integers
'''
SHELF_SERVICE = MeshService("shelf", SHELF, {"shelf_get.py": BOOKS_HANDLER, "shelf_count.py": COUNT_HANDLER})
CHILD_FIRST_TRACE = "ab" * 16
SCREENSHOTS = Path(__file__).parent / "screenshots"


def view(mesh: LockedMesh, tmp_path: Path, name: str, **fragment: str) -> Element:
    url = f"{mesh.collector}/#" + urlencode({"token": TOKEN, **fragment})
    dom = parse_dom(chromium_dump_dom(url, tmp_path / "chromium", SCREENSHOTS / f"{name}.png"))
    (body,) = dom.find_all(lambda e: e.tag == "body")
    errors = [item.text() for item in dom.by_id("dashboard-errors").find_all(lambda e: e.tag == "li")]
    assert (body.attrs.get("data-state"), errors) == ("ready", []), name
    return dom


def problems(dom: Element) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for item in dom.by_id("problems").by_class("problem"):
        found.setdefault(item.attrs["data-kind"], []).append(item.text())
    return found


def panel_order(dom: Element) -> list[str]:
    (main,) = dom.find_all(lambda e: e.tag == "main")
    return [child.attrs["id"] for child in main.children
            if isinstance(child, Element) and child.tag == "section" and "hidden" not in child.attrs]  # fmt: skip


def windows(mesh: LockedMesh) -> Any:
    answer = httpx.get(f"{mesh.collector}/windows.json", headers=mesh.headers(), timeout=5)
    return answer.json() if answer.status_code == 200 else None


def test_the_on_call_view_puts_what_needs_a_person_first_and_every_view_renders(tmp_path: Path) -> None:
    with locked_mesh(tmp_path / "mesh", (SHELF_SERVICE,), ["--heartbeat-seconds", "1"]) as mesh:
        shelf = mesh.services["shelf"]
        for _ in range(30):
            assert httpx.get(f"{shelf}/books/missing", timeout=10).status_code == 404  # client noise
        for _ in range(5):
            assert httpx.get(f"{shelf}/books/dune", timeout=10).status_code == 200
        for _ in range(3):
            assert httpx.get(f"{shelf}/books/boom", timeout=10).status_code == 503
        for _ in range(2):
            assert httpx.get(f"{shelf}/count/any", timeout=10).status_code == 500
        # An instance that beat once and went silent: stale after three missed heartbeats (3 s here).
        assert mesh.invoke("svc:mesh:heartbeat", {"service": "shelf", "instanceId": "shelf-ghost"}).status_code == 200
        # A two-service trace whose child arrives before its parent.
        events = [
            {"traceId": CHILD_FIRST_TRACE, "spanId": "2" * 16, "parentSpanId": "1" * 16, "service": "ledger",
             "topic": "ledger:post", "status": "timeout", "durationMs": 40.0, "startedAt": "2026-11-26T10:00:00.010Z",
             "exceptionType": "TimeoutError", "transport": "nats"},
            {"traceId": CHILD_FIRST_TRACE, "spanId": "1" * 16, "service": "shelf", "topic": "shelf:get",
             "status": "service-unavailable", "durationMs": 55.0, "startedAt": "2026-11-26T10:00:00.000Z",
             "transport": "http"},
        ]
        assert mesh.invoke("svc:mesh:traces", {"events": events}).status_code == 200

        def settled() -> Any:
            document = windows(mesh)
            if document is None:
                return None
            rows = {row["topic"]: row for row in document["windows"]["1h"]["topics"] if row["service"] == "shelf"}
            get, count = rows.get("shelf:get"), rows.get("shelf:count")
            if not (get and count and get["invocations"] == 38 and count["invocations"] == 2):
                return None
            fleet = mesh.query("svc:mesh:query:fleet", {})
            (entry,) = [s for s in fleet["services"] if s["service"] == "shelf"]
            return document if entry["staleInstances"] == 1 and len(fleet["issues"]) >= 3 else None

        document = wait_for(settled, timeout=60, what="the failures in windows.json and a stale instance")
        rows = {row["topic"]: row for row in document["windows"]["1h"]["topics"] if row["service"] == "shelf"}
        assert (rows["shelf:get"]["errors"], rows["shelf:get"]["clientErrors"]) == (3, 30)
        assert rows["shelf:count"]["errors"] == 2

        count_trace = mesh.query("svc:mesh:query:fleet", {})
        (fitting,) = [i for i in count_trace["issues"] if i["topic"] == "shelf:count"]
        trace_id = fitting["exemplarTraceIds"][0]
        wait_for(lambda: mesh.invoke("svc:mesh:query:trace", {"traceId": trace_id}).json()["statusCode"] == "ok",
                 timeout=30, what="the response-that-does-not-fit trace")
        answer = mesh.query("svc:mesh:query:trace", {"traceId": trace_id})
        assert answer["events"][0]["transport"] == "http"
        assert "does not fit its type" in answer["events"][0]["failureDetail"]

        first = view(mesh, tmp_path, "problems-first")
        by_window = view(mesh, tmp_path, "filtered-5m-shelf", window="5m", service="shelf")
        by_class = view(mesh, tmp_path, "classification-client", classification="client", focus="issues")
        waterfall = view(mesh, tmp_path, "trace-does-not-fit", trace=trace_id)
        ordered = view(mesh, tmp_path, "trace-parents-first", trace=CHILD_FIRST_TRACE)
        usage = httpx.get(f"{mesh.collector}/usage.json", headers=mesh.headers(), timeout=5).json()

    # Problems first: the panel right after the (empty) error list, before the details.
    order = panel_order(first)
    assert order.index("problems") < order.index("hot-topics") < order.index("estate") < order.index("issues")
    found = problems(first)
    assert any("shelf:get" in text and "3 server-side failure(s)" in text for text in found["failures"])
    assert any("shelf:count" in text for text in found["failures"])
    assert any("1 instance(s) missed three heartbeats" in text for text in found["stale"])
    assert not any("not-found" in text for texts in found.values() for text in texts)  # the 4xx noise is not here
    links = [link.attrs["href"] for link in first.by_id("problems").by_class("problem-link")]
    assert any(link.startswith("#trace=") for link in links) and any("focus=estate" in link for link in links)
    assert "hidden" in first.by_id("lock-notice").attrs  # a locked collector
    hot = first.by_id("hot-topics")
    assert len(hot.by_class("sparkline")) == len(hot.by_class("hot-topic")) >= 2
    assert "78.9%" in hot.text()  # shelf:get's client error rate (30 of 38 calls), apart from its error rate (7.9%)

    # Filtered: only shelf in the estate, the 5 minute window chosen.
    assert [card.attrs["data-service"] for card in by_window.by_id("estate").by_class("service-card")] == ["shelf"]
    assert all("in the last 5m" in text for text in problems(by_window)["failures"])

    # Classification filter: only the client issues listed.
    issues = [e.text() for e in by_class.by_id("issues").by_class("issue-classification")]
    assert issues == ["client"]

    # The waterfall of the response that did not fit: the runtime's reason, never the handler's text.
    trace = waterfall.by_id("trace")
    (failure,) = trace.by_class("trace-failure")
    assert failure.text().startswith("shelf:count produced a response that does not fit its type")
    assert "2**70" not in trace.text()

    # Parents before children, whatever order the spans arrived in; exception type and transport shown.
    rows_ = ordered.by_id("trace").by_class("waterfall-row")
    assert [(row.attrs["data-span"], row.attrs["data-depth"]) for row in rows_] == [("1" * 16, "0"), ("2" * 16, "1")]
    assert "exception TimeoutError" in ordered.by_id("trace").text() and "via nats" in ordered.by_id("trace").text()

    # The service's own log line about the raising handler carries the trace and span ids of its invocation.
    log = (tmp_path / "mesh" / "shelf.log").read_text().splitlines()
    raised = [line for line in log if "raised LookupError" in line]
    assert raised and all(re.search(r" trace=[0-9a-f]{32} span=[0-9a-f]{16}$", line) for line in raised), raised

    # usage.json says what carried the calls.
    assert {entry["transport"] for entry in usage["entries"] if entry["service"] == "shelf"} == {"http"}
    for name in ("problems-first", "filtered-5m-shelf", "classification-client", "trace-does-not-fit",
                 "trace-parents-first"):
        assert (SCREENSHOTS / f"{name}.png").stat().st_size > 0


def test_an_unlocked_collector_says_so_on_the_dashboard(tmp_path: Path) -> None:
    from tests.support.meshrun import SVCGEN, process
    from tests.support.server import free_port

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with process([*SVCGEN, "collector", "serve", "--port", str(port)], base + "/", tmp_path / "collector.log",
                 {"SVCGEN_COLLECTOR_TOKEN": ""}):  # fmt: skip
        dom = parse_dom(chromium_dump_dom(base + "/", tmp_path / "chromium", SCREENSHOTS / "unlocked.png"))
    notice = dom.by_id("lock-notice")
    assert "hidden" not in notice.attrs and "Collector unlocked" in notice.text()


def test_problems_from_written_artifacts_dead_letters_in_the_window_only(tmp_path: Path) -> None:
    from tests.dashboard.test_dashboard import render, write_fixture_artifacts

    def write(target: Path) -> None:
        write_fixture_artifacts(target)
        issues = json.loads((target / "issues.json").read_text())
        dead = {**issues["issues"][0], "classification": "dead-letter", "topic": "orders:placed", "count": 4,
                "exceptionType": None, "status": "unexpected-error"}  # fmt: skip
        recent = {**dead, "fingerprint": "d" * 32, "lastSeen": "2024-05-01T11:50:00Z"}
        old = {**dead, "fingerprint": "e" * 32, "topic": "orders:old", "lastSeen": "2024-04-01T00:00:00Z"}
        issues["issues"] += [recent, old]
        (target / "issues.json").write_text(json.dumps(issues))

    rendered = render(tmp_path, write)
    assert (rendered.state(), rendered.errors()) == ("ready", [])
    found = problems(rendered.dom)
    (dead_letter,) = found["dead-letter"]  # the one from before the window is not a problem now
    assert dead_letter == "dead-letterdead letters on orders:placed [v2]: 4 (last 2024-05-01T11:50:00Z)issues"
    assert any("inventory" in text for text in found["unreachable"])
    assert any("payments is unhealthy" in text for text in found["unhealthy"])
    assert any("payments:charge" in text and "3 server-side failure(s)" in text for text in found["failures"])
    assert not any("orders:get" in text for texts in found.values() for text in texts)  # 4xx only: not a problem


def test_a_stale_service_that_also_fails_its_poll_shows_the_poll_error(tmp_path: Path) -> None:
    # A service that went down is both: its instances stop heartbeating and its poll fails. The line said only that
    # every instance missed three heartbeats, leaving out why the poller cannot reach it (docs/mesh-view.md: an
    # unreachable service's line carries its poll error).
    from tests.dashboard.test_dashboard import render, write_fixture_artifacts

    def write(target: Path) -> None:
        write_fixture_artifacts(target)
        detail = json.loads((target / "services" / "inventory.json").read_text())
        detail["instances"] = [{"instanceId": "i-1", "stale": True, "healthy": None,
                                "lastHeartbeatAt": "2024-05-01T11:40:00.000Z"}]  # fmt: skip
        detail["staleInstances"] = 1
        (target / "services" / "inventory.json").write_text(json.dumps(detail))

    rendered = render(tmp_path, write)
    assert (rendered.state(), rendered.errors()) == ("ready", [])
    (line,) = [text for text in problems(rendered.dom)["stale"] if "inventory" in text]
    assert "every instance missed three heartbeats (1 stale)" in line and "connection refused" in line


def test_a_drifting_service_is_one_line_in_needs_attention(tmp_path: Path) -> None:
    # The collector files a contract-drift issue and flags the service in manifest.json for the same drift: the
    # panel listed it twice ("service payments: contract drift ..." and "contract drift: payments"), one problem
    # made to look like two.
    from tests.dashboard.test_dashboard import render, write_fixture_artifacts

    def write(target: Path) -> None:
        write_fixture_artifacts(target)
        issues = json.loads((target / "issues.json").read_text())
        issues["issues"].append({**issues["issues"][0], "fingerprint": "f" * 32, "classification": "contract-drift",
                                 "service": "payments", "topic": "svc:mesh", "version": None, "status": "conflict",
                                 "exceptionType": None, "count": 7})  # fmt: skip
        (target / "issues.json").write_text(json.dumps(issues))

    rendered = render(tmp_path, write)
    assert (rendered.state(), rendered.errors()) == ("ready", [])
    drift = problems(rendered.dom)["drift"]
    assert len(drift) == 1 and "payments" in drift[0], drift


def test_a_topics_failures_name_every_server_side_status_of_its_issues(tmp_path: Path) -> None:
    # A stub answering not-implemented (config-wiring) is a server-side failure too: its count was in the line's
    # total but missing from the list after it; a 4xx issue of the same topic stays out.
    from tests.dashboard.test_dashboard import render, write_fixture_artifacts

    def write(target: Path) -> None:
        write_fixture_artifacts(target)
        issues = json.loads((target / "issues.json").read_text())
        base = {**issues["issues"][0], "service": "payments", "topic": "payments:charge", "exceptionType": None,
                "lastSeen": "2024-05-01T11:50:00Z"}  # fmt: skip
        issues["issues"] += [
            {**base, "fingerprint": "1" * 32, "classification": "dependency", "status": "timeout", "count": 2},
            {**base, "fingerprint": "2" * 32, "classification": "config-wiring", "status": "not-implemented",
             "count": 1},
            {**base, "fingerprint": "3" * 32, "classification": "config-wiring", "status": "unauthorized", "count": 5},
        ]
        (target / "issues.json").write_text(json.dumps(issues))

    rendered = render(tmp_path, write)
    assert (rendered.state(), rendered.errors()) == ("ready", [])
    (charge,) = [text for text in problems(rendered.dom)["failures"] if "payments:charge" in text]
    assert "3 server-side failure(s)" in charge and "timeout \u00d72" in charge and "not-implemented \u00d71" in charge
    assert "unauthorized" not in charge
