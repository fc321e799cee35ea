"""The static mesh dashboard, rendered by headless Chromium against UI artifacts served from a local directory.

Chromium is required: when it is missing these tests fail and say to run `make test`, which installs it.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from svcgen.collector import Collector
from svcgen.collector.artifacts.writer import write_artifacts
from tests.support.browser import (
    ARTIFACT_FILES,
    Element,
    Request,
    chromium_dump_dom,
    dashboard_source,
    inline_script_hashes,
    parse_dom,
    serve_directory,
    service_detail_files,
)
from tests.support.meshrun import TOKEN, locked_mesh
from tests.support.processes import wait_for
from tests.support.snapshots import sample_snapshot

FIXTURES = Path(__file__).parent / "fixtures"
GOLDEN = Path(__file__).resolve().parents[1] / "golden"
DASH = "\u2014"


def write_fixture_artifacts(target: Path) -> None:
    """Hand-made artifacts with the field sets of docs/mesh-view.md."""
    shutil.copytree(FIXTURES, target, dirs_exist_ok=True)


def write_sample_artifacts(target: Path) -> None:
    """The artifact writer's output for the artifact tests' sample estate."""
    write_artifacts(sample_snapshot(), target)


# The artifacts the dashboard is tested against by default (fixtures, or `write_sample_artifacts`).
write_test_artifacts: Callable[[Path], None] = write_fixture_artifacts


@dataclass
class Rendered:
    site: Path
    dom: Element
    markup: str
    requests: list[Request]
    origin_host: str

    def load(self, name: str) -> Any:
        return json.loads((self.site / name).read_text(encoding="utf-8"))

    def section(self, section_id: str) -> Element:
        return self.dom.by_id(section_id)

    def errors(self) -> list[str]:
        return [item.text() for item in self.dom.by_id("dashboard-errors").find_all(lambda e: e.tag == "li")]

    def state(self) -> str | None:
        bodies = self.dom.find_all(lambda e: e.tag == "body")
        assert len(bodies) == 1
        return bodies[0].attrs.get("data-state")


def write_mesh_artifacts(target: Path) -> None:
    """What `make demo` writes: a real collector fed the example services' feeds (register, heartbeats, a trace
    spanning orders and payments, failures, issues) and a poll, then the artifact writer."""
    collector = Collector()
    for name in ("orders", "payments", "inventory"):
        descriptor = json.loads((GOLDEN / name / f"{name}_service" / "contracts" / "descriptor.json").read_text())
        collector.register({**descriptor, "instanceId": f"{name}-1"})
        collector.heartbeat({"service": name, "instanceId": f"{name}-1", "sentAt": "2026-11-23T09:00:01Z",
                             "descriptorHash": descriptor["descriptorHash"], "health": {"isHealthy": True,
                                                                                        "healthChecks": {}}})
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    events = [
        {"traceId": trace, "spanId": "a" * 16, "service": "orders", "topic": "orders:place", "status": "created",
         "topicVersion": "v1", "durationMs": 28.3, "startedAt": "2026-11-23T09:00:00.000Z"},
        {"traceId": trace, "spanId": "b" * 16, "parentSpanId": "a" * 16, "service": "payments",
         "topic": "payments:capture", "status": "ok", "durationMs": 0.9, "startedAt": "2026-11-23T09:00:00.010Z"},
        {"traceId": "c" * 32, "spanId": "d" * 16, "service": "orders", "topic": "orders:place",
         "status": "service-unavailable", "exceptionType": "RuntimeError", "durationMs": 1.2},
    ]
    collector.traces({"events": events})
    collector.issues({"service": "orders", "issues": [{
        "fingerprint": "f" * 32, "classification": "exception", "service": "orders", "topic": "orders:place",
        "status": "service-unavailable", "exceptionType": "RuntimeError", "count": 1,
        "firstSeen": "2026-11-23T09:00:00Z", "lastSeen": "2026-11-23T09:00:00Z", "exemplarTraceIds": ["c" * 32]}]})
    collector.record_poll("payments", "http://127.0.0.1:8001", spec=None, health=None, error="spec: HTTP 503")
    write_artifacts(collector.snapshot(), target)


def render(tmp_path: Path, write: Callable[[Path], None] = write_test_artifacts) -> Rendered:
    site = tmp_path / "site"
    site.mkdir()
    write(site)
    (site / "dashboard.html").write_text(dashboard_source(), encoding="utf-8")
    with serve_directory(site) as server:
        markup = chromium_dump_dom(server.url("dashboard.html"), tmp_path / "chromium-profile")
        requests = list(server.requests)
        host = f"{server.host}:{server.port}"
    return Rendered(site=site, dom=parse_dom(markup), markup=markup, requests=requests, origin_host=host)


def texts(root: Element, css_class: str) -> list[str]:
    return [element.text() for element in root.by_class(css_class)]


def assert_renders_cleanly(rendered: Rendered) -> None:
    """Ready, no errors, everything in the artifacts shown, and only our artifact files requested."""
    assert rendered.errors() == []
    assert rendered.state() == "ready"

    manifest = rendered.load("manifest.json")
    names = [service["name"] for service in manifest["services"]]
    assert sorted(texts(rendered.section("estate"), "service-name")) == sorted(name or DASH for name in names)

    topics = rendered.load("topics.json")
    assert sorted(texts(rendered.section("topics"), "topic-name")) == sorted(t["topic"] for t in topics["topics"])
    removed = texts(rendered.section("topics"), "removed-topic")
    assert len(removed) == len(topics["removedTopics"])
    for entry, shown in zip(topics["removedTopics"], removed, strict=True):
        assert shown.startswith(entry["topic"])

    topology = rendered.load("topology.json")
    graph = rendered.section("topology").find_all(lambda e: e.tag == "svg")
    node_names = set(names) | {e["client"] for e in topology["edges"]} | {e["server"] for e in topology["edges"]}
    if not node_names:
        assert graph == []
        return assert_only_artifact_requests(rendered, names)
    assert len(graph) == 1
    assert len(graph[0].find_all(lambda e: e.tag == "g" and "node" in e.classes)) == len(node_names)
    assert len(graph[0].by_class("edge")) == len(topology["edges"])
    assert len(graph[0].by_class("edge-label")) == len(topology["edges"])

    usage = rendered.load("usage.json")
    rows = rendered.section("usage").find_all(lambda e: e.tag == "tr")
    assert len(rows) == (len(usage["entries"]) + 1 if usage["entries"] else 0)

    issues = rendered.load("issues.json")["issues"]
    assert texts(rendered.section("issues"), "issue-fingerprint") == [issue["fingerprint"] for issue in issues]
    links = [link.attrs["href"] for link in rendered.section("issues").by_class("trace-link")]
    assert links == ["#" + urlencode({"trace": trace_id})
                     for issue in issues for trace_id in issue["exemplarTraceIds"] if isinstance(trace_id, str)]

    assert_only_artifact_requests(rendered, names)


def assert_only_artifact_requests(rendered: Rendered, service_names: list[str]) -> None:
    served = {path.relative_to(rendered.site).as_posix() for path in rendered.site.rglob("*") if path.is_file()}
    detail_files = set(service_detail_files(service_names).values())
    allowed = served | detail_files
    for request in rendered.requests:
        assert request.host == rendered.origin_host, f"request for another host: {request}"
        assert request.method == "GET", f"unexpected method: {request}"
        assert request.target.startswith("/"), f"proxy-style request: {request}"
        assert request.path in allowed, f"request for something that is not an artifact: {request}"
        if request.status == 404:
            assert request.path in detail_files, f"only a service detail file may be missing: {request}"
        else:
            assert request.status == 200, f"unexpected status: {request}"
    requested = {request.path for request in rendered.requests}
    missing = ({"dashboard.html", *ARTIFACT_FILES} | detail_files) - requested
    assert not missing, f"the dashboard never fetched {sorted(missing)}"


# ---- Static checks ----------------------------------------------------------------------------------------


def test_dashboard_has_no_external_references() -> None:
    source = dashboard_source()
    assert not re.search(r"https?://", source, re.IGNORECASE)
    assert not re.search(r"""(src|href)\s*=\s*["']?//""", source, re.IGNORECASE)
    assert "@import" not in source
    assert "innerHTML" not in source and "outerHTML" not in source and "insertAdjacentHTML" not in source
    assert "document.write" not in source
    assert "default-src 'none'" in source and "connect-src 'self'" in source


def test_dashboard_script_is_allowed_by_its_hash_only() -> None:
    source = dashboard_source()
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', source)
    assert policy, "dashboard.html has no Content-Security-Policy"
    script_src = [d.split()[1:] for d in policy.group(1).split(";") if d.split()[:1] == ["script-src"]]
    hashes = inline_script_hashes(source)
    assert len(hashes) == 1, "dashboard.html must have exactly one inline script"
    assert script_src == [hashes], (
        f"the CSP script-src must be exactly {hashes[0]} (the SHA-256 of the inline script); "
        f"update it in dashboard.html after editing the script"
    )


# ---- Rendered in Chromium -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "write", [write_test_artifacts, write_sample_artifacts, write_mesh_artifacts], ids=["fixtures", "writer", "mesh"]
)
def test_dashboard_renders_the_artifacts(tmp_path: Path, write: Callable[[Path], None]) -> None:
    rendered = render(tmp_path, write)
    assert_renders_cleanly(rendered)


def test_dashboard_renders_fixture_details_and_nulls(tmp_path: Path) -> None:
    rendered = render(tmp_path, write_fixture_artifacts)
    assert_renders_cleanly(rendered)

    estate = rendered.section("estate")
    cards = {card.by_class("service-name")[0].text(): card for card in estate.by_class("service-card")}
    assert "unreachable" in cards["inventory"].text()
    assert "error: connection refused" in cards["inventory"].text()
    assert "not healthy" in cards["payments"].text() and "timed out after 2s" in cards["payments"].text()
    assert "contract drift" in cards["payments"].text()
    assert "hit rate 40%" in cards["orders"].text()
    assert "orders:place" in cards["orders"].text()  # the parsed specJson, in an expandable block

    topics = rendered.section("topics")
    body_rows = topics.find_all(lambda e: e.tag == "tr")[1:]
    rows = {row.by_class("topic-name")[0].text() + "|" + row.text(): row for row in body_rows}
    reserved = [row for key, row in rows.items() if key.startswith("svc:healthcheck|")]
    assert len(reserved) == 1 and reserved[0].by_class("badge")[0].text() == "reserved"
    mismatch = [row for key, row in rows.items() if key.startswith("payments:charge|")]
    assert "payments, inventory" in mismatch[0].text() and "yes" in texts(mismatch[0], "badge")
    changed = [row for key, row in rows.items() if "2024-05-01T11:00:00Z: requestSchema" in key]
    assert len(changed) == 1
    assert texts(topics, "removed-topic") == ["orders:cancel"]
    schemas = topics.find_all(lambda e: e.tag == "details")
    assert any('"customerId"' in block.text() for block in schemas)

    topology = rendered.section("topology")
    labels = texts(topology, "edge-label")
    assert labels == ["err 4.0% · 12.5 rpm", f"err {DASH} · {DASH} rpm", "err 0.0% · 3.0 rpm"]
    edge_rows = [row.text() for row in topology.find_all(lambda e: e.tag == "tr")[1:]]
    assert edge_rows[1] == f"ordersinventorytraces{DASH}{DASH}{DASH}{DASH}{DASH}{DASH}"

    usage = rendered.section("usage").text()
    assert f"window start{DASH}" in usage and "service-unavailable" in usage

    merged = rendered.section("issues").find_all(lambda e: e.tag == "tr")[1:]
    assert [row.text() for row in merged] == [
        "9f2c4e1a7b3d5f60a1b2c3d4e5f60718exceptionordersorders:place [v2]service-unavailable (KeyError)3"
        "2024-05-01T11:58:00Z4bf92f3577b3\u2026 5bf92f3577b3\u2026",
        f"0a1b2c3d4e5f60718293a4b5c6d7e8f9clientordersorders:getnot-found122024-05-01T11:30:00Z{DASH}",
    ]

    issues = rendered.section("issues").text()
    assert "service inventory is unreachable" in issues
    assert "topic payments:charge: consumers disagree on its schema" in issues
    assert "topic orders:cancel is no longer handled" in issues
    assert "No annotations." in issues


def test_dashboard_shows_a_locked_collectors_issues_and_an_exemplar_trace(tmp_path: Path) -> None:
    with locked_mesh(tmp_path / "mesh") as mesh:
        for book in ("dune", "missing", "boom"):
            httpx.get(f"{mesh.books}/books/{book}", timeout=10)

        def merged() -> list[Any] | None:
            answer = httpx.get(f"{mesh.collector}/issues.json", headers=mesh.headers(), timeout=5)
            issues = answer.json()["issues"] if answer.status_code == 200 else []
            return issues if len(issues) == 2 else None

        issues = wait_for(merged, timeout=30, what="both issues in issues.json")
        (exploded,) = [issue for issue in issues if issue["classification"] == "exception"]
        trace_id = exploded["exemplarTraceIds"][0]
        # Issues go with the beat, traces on their own ~1 s period: wait for the exemplar's events too.
        wait_for(lambda: mesh.invoke("svc:mesh:query:trace", {"traceId": trace_id}).json()["statusCode"] == "ok",
                 timeout=30, what="the exemplar trace's events")
        dom = parse_dom(chromium_dump_dom(f"{mesh.collector}/#token={TOKEN}&trace={trace_id}", tmp_path / "one"))
        locked = parse_dom(chromium_dump_dom(f"{mesh.collector}/", tmp_path / "two"))

    (body,) = dom.find_all(lambda e: e.tag == "body")
    errors = [item.text() for item in dom.by_id("dashboard-errors").find_all(lambda e: e.tag == "li")]
    assert (body.attrs.get("data-state"), errors) == ("ready", [])
    panel = dom.by_id("issues")
    assert texts(panel, "issue-fingerprint") == [issue["fingerprint"] for issue in issues]
    assert sorted(texts(panel, "issue-classification")) == ["client", "exception"]
    assert "books" in texts(dom.by_id("estate"), "service-name")
    trace = dom.by_id("trace")
    assert "hidden" not in trace.attrs
    assert texts(trace, "trace-id") == [trace_id]
    assert texts(trace, "trace-service") == ["books"] and "service-unavailable" in trace.text()

    (body,) = locked.find_all(lambda e: e.tag == "body")
    assert body.attrs.get("data-state") == "locked"
    assert "hidden" not in locked.by_id("token-form").attrs
    assert "enter the collector token" in locked.by_id("generated-at").text()


HOSTILE_NAME = "<img src=x onerror=alert(1)>"
HOSTILE_WITH_DETAIL = '"><svg onload=alert(2)>'
HOSTILE_TOPIC = "<script>alert(3)</script>"


def write_hostile_artifacts(target: Path) -> None:
    write_fixture_artifacts(target)

    def update(name: str, change: Callable[[Any], None]) -> None:
        path = target / name
        document = json.loads(path.read_text(encoding="utf-8"))
        change(document)
        path.write_text(json.dumps(document), encoding="utf-8")

    def manifest(doc: Any) -> None:
        doc["services"].append(
            {
                "name": HOSTILE_NAME,
                "status": "<b>healthy</b>",
                "contractDrift": None,
                "specUrl": "javascript:alert(4)",
                "healthUrl": "<i>x</i>",
            }
        )
        doc["services"].append(
            {
                "name": HOSTILE_WITH_DETAIL,
                "status": "healthy",
                "contractDrift": False,
                "specUrl": None,
                "healthUrl": None,
            }
        )

    def topics(doc: Any) -> None:
        doc["topics"].append(
            {
                "topic": HOSTILE_TOPIC,
                "version": "<u>1</u>",
                "reserved": False,
                "consumers": [{"service": HOSTILE_NAME}],
                "producers": [{"service": HOSTILE_NAME}],
                "requestSchema": {"description": "<img src=y onerror=alert(5)>"},
                "responseSchema": None,
                "schemaMismatch": True,
                "changes": [{"at": "<b>now</b>", "fields": ["<i>f</i>"]}],
            }
        )
        doc["removedTopics"].append({"topic": HOSTILE_TOPIC, "version": None})

    def topology(doc: Any) -> None:
        doc["edges"].append(
            {
                "client": HOSTILE_NAME,
                "server": HOSTILE_WITH_DETAIL,
                "source": "<b>s</b>",
                "requestsPerMinute": None,
                "errorRate": None,
                "p50LatencyMs": None,
                "p95LatencyMs": None,
                "p99LatencyMs": None,
            }
        )

    def usage(doc: Any) -> None:
        doc["entries"].append(
            {
                "topic": HOSTILE_TOPIC,
                "version": None,
                "service": HOSTILE_NAME,
                "transport": None,
                "status": "<b>ok</b>",
                "count": None,
                "avgDurationMs": None,
                "source": None,
            }
        )

    def annotations(doc: Any) -> None:
        doc["annotations"].append({"text": "<img src=z onerror=alert(6)>"})

    update("manifest.json", manifest)
    update("topics.json", topics)
    update("topology.json", topology)
    update("usage.json", usage)
    update("annotations.json", annotations)
    update("issues.json", lambda doc: doc["issues"].append({
        "fingerprint": HOSTILE_NAME, "classification": "<b>c</b>", "service": HOSTILE_WITH_DETAIL,
        "topic": HOSTILE_TOPIC, "version": None, "transport": None, "status": "<i>s</i>", "exceptionType": "<u>E</u>",
        "count": "<b>1</b>", "firstSeen": None, "lastSeen": "<b>t</b>",
        "exemplarTraceIds": ["javascript:alert(8)", "\"><img src=v onerror=alert(9)>", 7]}))
    detail = {
        "name": HOSTILE_WITH_DETAIL,
        "fetchedAtUtc": "<b>t</b>",
        "specJson": "<not json>",
        "specHash": None,
        "previousSpecHash": None,
        "contractDrift": False,
        "error": "<img src=w onerror=alert(7)>",
        "health": {"isHealthy": False, "healthChecks": {"<i>db</i>": {"status": "<b>failed</b>", "detail": "<x>"}}},
    }
    names = [service["name"] for service in json.loads((target / "manifest.json").read_text("utf-8"))["services"]]
    detail_file = service_detail_files(names)[HOSTILE_WITH_DETAIL]
    (target / detail_file).write_text(json.dumps(detail), encoding="utf-8")
    # HOSTILE_NAME deliberately has no detail file: the dashboard must show "no detail" for the 404.


def test_dashboard_says_no_health_seen_for_a_service_never_heard_from(tmp_path: Path) -> None:
    rendered = render(tmp_path, write_sample_artifacts)
    assert_renders_cleanly(rendered)
    statuses = {s["name"]: s["status"] for s in rendered.load("manifest.json")["services"]}
    assert statuses["payments-eu"] == statuses["inventory"] == "unreachable"  # never heard vs poll failed
    estate = rendered.section("estate")
    cards = {card.by_class("service-name")[0].text(): card for card in estate.by_class("service-card")}
    assert texts(cards["payments-eu"], "badge")[0] == "no health seen"
    assert texts(cards["inventory"], "badge")[0] == "unreachable"
    warnings = texts(rendered.section("issues"), "estate-warnings")[0]
    assert "service payments-eu: no health seen" in warnings and "service inventory is unreachable" in warnings


def test_dashboard_renders_hostile_strings_as_text(tmp_path: Path) -> None:
    rendered = render(tmp_path, write_hostile_artifacts)
    assert_renders_cleanly(rendered)

    elements = list(rendered.dom.iter())
    assert not [e for e in elements if e.tag in {"img", "b", "i", "u", "x", "iframe", "object"}]
    assert len([e for e in elements if e.tag == "script"]) == 1
    assert not [e for e in elements if any(name.startswith("on") for name in e.attrs)]
    assert not [e for e in elements if e.attrs.get("href", "").lower().startswith("javascript:")]
    svg_roots = [e for e in elements if e.tag == "svg" and "sparkline" not in e.classes]
    assert len(svg_roots) == 2  # the namespace probe and the topology graph, besides the window's sparklines

    estate = rendered.section("estate")
    cards = {card.by_class("service-name")[0].text(): card for card in estate.by_class("service-card")}
    assert set(cards) >= {HOSTILE_NAME, HOSTILE_WITH_DETAIL}
    assert "no detail" in cards[HOSTILE_NAME].text()
    assert "javascript:alert(4)" in cards[HOSTILE_NAME].text()
    assert "error: <img src=w onerror=alert(7)>" in cards[HOSTILE_WITH_DETAIL].text()
    assert "<not json>" in cards[HOSTILE_WITH_DETAIL].text()
    assert HOSTILE_NAME in rendered.section("topology").text()
    assert "<img src=z onerror=alert(6)>" in rendered.section("issues").text()
    assert HOSTILE_NAME in texts(rendered.section("issues"), "issue-fingerprint")
    hrefs = [link.attrs["href"] for link in rendered.section("issues").by_class("trace-link")]
    assert all(href.startswith("#trace=") for href in hrefs) and len(hrefs) == 2 + 2  # fixture links + 2 strings
    names = [service["name"] for service in rendered.load("manifest.json")["services"]]
    missing = service_detail_files(names)[HOSTILE_NAME]
    assert any(r.status == 404 and r.path == missing for r in rendered.requests)


def write_empty_artifacts(target: Path) -> None:
    documents: dict[str, Any] = {
        "manifest.json": {"generatedAtUtc": None, "services": []},
        "topics.json": {"generatedAtUtc": None, "topics": [], "removedTopics": []},
        "topology.json": {"generatedAtUtc": None, "edges": []},
        "usage.json": {"generatedAtUtc": None, "windowStartUtc": None, "windowEndUtc": None, "entries": []},
        "annotations.json": {"generatedAtUtc": None, "annotations": []},
        "issues.json": {"generatedAtUtc": None, "issues": []},
        "windows.json": {"generatedAtUtc": None, "windowEndUtc": None, "windows": {}},
    }
    for name, document in documents.items():
        (target / name).write_text(json.dumps(document), encoding="utf-8")


def test_dashboard_renders_an_empty_estate(tmp_path: Path) -> None:
    rendered = render(tmp_path, write_empty_artifacts)
    assert_renders_cleanly(rendered)
    assert "No services." in rendered.section("estate").text()
    assert "No topics." in rendered.section("topics").text()
    assert "No usage recorded." in rendered.section("usage").text()
    assert "No issues." in rendered.section("issues").text()
    assert "Nothing needs attention" in rendered.section("problems").text()


def test_dashboard_lists_a_missing_artifact_as_an_error(tmp_path: Path) -> None:
    def without_usage(target: Path) -> None:
        write_fixture_artifacts(target)
        (target / "usage.json").unlink()

    rendered = render(tmp_path, without_usage)
    assert rendered.state() == "error"
    assert any("usage.json" in error for error in rendered.errors())
    # Everything else still renders.
    assert "orders" in texts(rendered.section("estate"), "service-name")
    assert "usage.json unavailable." in rendered.section("usage").text()


# Names that collide once sanitised, Windows device names, hidden-file names, non-ASCII and an overlong one; each
# with a detail file except the last, whose file is missing.
ODD_NAMES = ["a-b", "a b", "con", "Lpt1.json", "a_b", "A_B", "..hidden", ".", "", "zürich", "日本", "x" * 130,
             "a/../../b", "no-file b"]


def write_odd_name_artifacts(target: Path) -> None:
    write_empty_artifacts(target)
    services = [
        {"name": name, "status": "healthy", "contractDrift": False, "specUrl": None, "healthUrl": None}
        for name in ODD_NAMES
    ]
    (target / "manifest.json").write_text(json.dumps({"generatedAtUtc": None, "services": services}), "utf-8")
    (target / "services").mkdir()
    for name, file_name in service_detail_files(ODD_NAMES).items():
        if name == "no-file b":
            continue
        detail = {
            "name": name,
            "fetchedAtUtc": None,
            "specJson": None,
            "specHash": None,
            "previousSpecHash": None,
            "contractDrift": False,
            "health": None,
            "error": f"file of {name!r}",
        }
        (target / file_name).write_text(json.dumps(detail), encoding="utf-8")


def test_dashboard_finds_service_files_by_the_writers_rule(tmp_path: Path) -> None:
    rendered = render(tmp_path, write_odd_name_artifacts)
    assert_renders_cleanly(rendered)  # fetched exactly the files filenames.py names, and nothing else
    cards = rendered.section("estate").by_class("service-card")
    assert len(cards) == len(ODD_NAMES)
    for name, card in zip(ODD_NAMES, cards, strict=True):
        if name == "no-file b":
            assert "no detail" in card.text()
        else:
            assert f"error: file of {name!r}" in card.text()
