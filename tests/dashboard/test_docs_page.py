"""`GET {prefix}/docs`, rendered by headless Chromium from a real server: every operation of the HTTP API document
is listed with its parameters, body and responses, and the page asks for nothing but itself.

Chromium is required: when it is missing this test fails and says to run `make test`, which installs it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx

from svcgen.runtime._http.docspage import CONTENT_SECURITY_POLICY
from tests.http.test_httpapi import app
from tests.support.browser import Element, chromium_dump_dom, parse_dom
from tests.support.server import running


class Recorded:
    """The app, with every request path it receives written down."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.paths: list[str] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.paths.append(scope["path"])
        await self.inner(scope, receive, send)


def cells(row: Element) -> list[str]:
    return [" ".join(cell.text().split()) for cell in row.children if isinstance(cell, Element) and cell.tag == "td"]


def test_the_docs_page_lists_every_operation_and_loads_nothing_else(tmp_path: Path) -> None:
    served = app()
    document = served.http_api
    recorded = Recorded(served)
    with running(recorded) as base:
        page = httpx.get(f"{base}/svc/docs", timeout=10)
        recorded.paths.clear()
        dom = parse_dom(chromium_dump_dom(f"{base}/svc/docs", tmp_path / "profile"))
    assert page.status_code == 200 and page.headers["content-type"] == "text/html; charset=utf-8"
    assert page.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert "script-src" not in CONTENT_SECURITY_POLICY and "default-src 'none'" in CONTENT_SECURITY_POLICY
    # Nothing outside the page: no script, no stylesheet or image source, no absolute URL to follow.
    assert not re.search(r"<script|<link|<img|src=|https?://", page.text)
    assert set(recorded.paths) <= {"/svc/docs", "/favicon.ico"} and "/svc/docs" in recorded.paths

    sections = {element.attrs["id"]: element for element in dom.by_class("operation")}
    expected = {
        operation["operationId"]: (method, path, operation)
        for path, item in document["paths"].items()
        for method, operation in item.items()
    }
    assert set(sections) == {f"op-{operation_id}" for operation_id in expected}
    for operation_id, (method, path, operation) in expected.items():
        section = sections[f"op-{operation_id}"]
        heading = " ".join(section.find_all(lambda element: element.tag == "h3")[0].text().split())
        assert heading == f"{method} {path}"
        assert operation["summary"] in section.text()
        parameters = [cells(row) for row in section.by_class("parameter")]
        assert [row[:3] for row in parameters] == [
            [p["name"], p["in"], "yes" if p["required"] else "no"] for p in operation.get("parameters", [])
        ]
        responses = [cells(row) for row in section.by_class("response")]
        assert [row[:2] for row in responses] == [
            [code, r["description"]] for code, r in operation["responses"].items()
        ]
        assert ("requestBody" in operation) == bool(section.by_class("request-body"))
    placed = sections["op-shopPlace_v1"]
    assert "PlaceBody" in placed.by_class("request-body")[0].text()
    assert ["201", "created", "Placed"] in [cells(row) for row in placed.by_class("response")]
    forget = sections["op-shopForget"]
    assert ["204", "deleted", "no content"] in [cells(row) for row in forget.by_class("response")]
    listed = {p[0]: p for p in (cells(row) for row in sections["op-shopSearch"].by_class("parameter"))}
    assert listed["tags"][3] == "array of string" and listed["limit"][3] == "integer"
    schemas = {element.attrs["id"] for element in dom.by_class("schema")}
    assert schemas == {f"schema-{name}" for name in document["components"]["schemas"]}
