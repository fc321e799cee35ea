"""A deprecated topic version says so on every answer (RFC 9745 `Deprecation`, RFC 8594 `Sunset`), over HTTP and
the envelope alike, and the HTTP API document marks its operations deprecated; other versions say nothing."""

from __future__ import annotations

import asyncio
import json

from svcgen.runtime import Deprecation
from svcgen.runtime._context import Context
from svcgen.runtime._descriptor import Identity
from svcgen.runtime._http.app import create_app
from svcgen.runtime._registry import Registry
from svcgen.runtime._result import Result
from svcgen.runtime._service import Service
from tests.support.client import call

LIFECYCLE = Deprecation(since="2026-01-01", sunset="2027-01-01", successor="orders:place@v2")


async def place_v1(request: dict[str, object], context: Context) -> Result[dict[str, object]]:
    return Result.ok({"version": "v1"})


async def place_v2(request: dict[str, object], context: Context) -> Result[dict[str, object]]:
    return Result.ok({"version": "v2"})


async def refuse(request: dict[str, object], context: Context) -> Result[dict[str, object]]:
    return Result.conflict("taken")


def service() -> Service:
    registry = Registry()
    json_object = dict[str, object]
    registry.add("orders:place", place_v1, version="v1", request=json_object, response=json_object,
                 deprecated=LIFECYCLE)
    registry.add("orders:place", place_v2, version="v2", request=json_object, response=json_object)
    registry.add("orders:refuse", refuse, version="v1", request=json_object, response=json_object,
                 failures=["conflict"], deprecated=Deprecation(sunset="2026-12-31"))
    return Service(Identity("orders"), registry)


def test_answers_of_a_deprecated_version_carry_deprecation_and_sunset() -> None:
    app = create_app(service(), ["POST /{version}/orders -> orders:place", "POST /refuse -> orders:refuse@v1"])
    old = call(app, "POST", "/v1/orders", json={})
    assert old.status_code == 200 and old.json() == {"version": "v1"}
    assert old.headers["deprecation"] == "@1767225600"  # 2026-01-01T00:00:00Z
    assert old.headers["sunset"] == "Fri, 01 Jan 2027 00:00:00 GMT"
    again = call(app, "POST", "/v1/orders", json={})  # the cached header block is the same
    assert [again.headers[name] for name in ("deprecation", "sunset")] == [old.headers["deprecation"],
                                                                           old.headers["sunset"]]
    new = call(app, "POST", "/v2/orders", json={})
    assert new.status_code == 200 and "deprecation" not in new.headers and "sunset" not in new.headers
    failed = call(app, "POST", "/refuse", json={})  # failures too; a sunset without a start date is sent alone
    assert failed.status_code == 409 and failed.headers["sunset"] == "Thu, 31 Dec 2026 00:00:00 GMT"
    assert "deprecation" not in failed.headers


def test_the_envelope_answer_carries_them_too() -> None:
    answer = json.loads(asyncio.run(service().invoke_envelope(
        {"topic": "orders:place", "headers": {"svc-version": "v1"}, "body": "{}"})))
    assert answer["headers"]["deprecation"] == "@1767225600"
    assert answer["headers"]["sunset"] == "Fri, 01 Jan 2027 00:00:00 GMT"


def test_the_http_api_document_marks_the_operation_deprecated() -> None:
    app = create_app(service(), ["POST /{version}/orders -> orders:place"])
    document = app.http_api
    operations = {item["post"]["operationId"]: item["post"] for item in document["paths"].values()}
    assert operations["ordersPlace_v1"]["deprecated"] is True
    assert "Deprecated since 2026-01-01; sunset 2027-01-01; use orders:place@v2." in operations["ordersPlace_v1"][
        "description"]
    assert "deprecated" not in operations["ordersPlace_v2"]
