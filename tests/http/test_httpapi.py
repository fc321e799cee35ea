"""The HTTP API document (`GET {prefix}/http-api.json`) and the statuses each topic declares."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any

import pytest
from openapi_spec_validator import validate

from svcgen.runtime import Context, HttpApp, Identity, Registry, RegistryError, Result, Service, create_app
from svcgen.runtime._jsontext import document_bytes
from tests.support.client import call


@dataclass
class LineItem:
    sku: str
    quantity: int = 1


@dataclass
class Node:
    name: str
    children: list[Node] = field(default_factory=list)


@dataclass
class Filter:
    label: str
    depth: int


@dataclass
class Search:
    shop_id: str
    query: str
    limit: int = 10
    tags: list[str] = field(default_factory=list)
    filter: Filter | None = None
    scores: dict[str, float] = field(default_factory=dict)


@dataclass
class Place:
    shop_id: str
    items: list[LineItem]
    note: str | None = None


@dataclass
class Placed:
    order_id: str
    first: LineItem
    rest: list[LineItem]
    tree: Node | None = None


@dataclass
class Failure:
    """A record whose name the failure body component would take."""

    reason: str


async def place(request: Place, context: Context) -> Result[Placed]:
    return Result.created(Placed("o-1", request.items[0], request.items[1:]))


async def place_v2(request: Place, context: Context) -> Result[Placed]:
    return Result.ok(Placed("o-2", request.items[0], []))


async def search(request: Search, context: Context) -> Result[list[Placed]]:
    return Result.ok([])


async def forget(request: Search, context: Context) -> Result[Failure]:
    return Result.deleted()


def app() -> HttpApp:
    registry = Registry()
    registry.add(
        "shop:place", place, version="v1", summary="Place an order", success=["created"], failures=["conflict"]
    )
    registry.add("shop:place", place_v2, version="v2")
    registry.add("shop:search", search, summary="Search orders")
    registry.add("shop:forget", forget, success=["deleted", "ok"], failures=["not-found", "forbidden"])
    routes = [
        "POST /shops/{shopId}/orders -> shop:place@v1",
        "POST /{version}/shops/{shopId}/orders -> shop:place@v1",
        "GET /shops/{shopId}/orders -> shop:search",
        "GET /shops/{shopId}/all -> shop:search",
        "DELETE /shops/{shopId}/orders -> shop:forget",
        "POST /orders -> shop:place@v2",
    ]
    return create_app(Service(Identity("shop"), registry, title="Shop", api_version="2.1.0"), routes)


def operation(document: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    found: dict[str, Any] = document["paths"][path][method]
    return found


def test_the_document_is_valid_openapi_3_1_and_served_as_built() -> None:
    served = call(app(), "GET", "/svc/http-api.json")
    assert served.status_code == 200
    assert served.headers["content-type"] == "application/json"
    document = served.json()
    validate(document)
    assert served.content == document_bytes(document) == app().http_api_body
    assert served.content.endswith(b"}\n") and b"\r" not in served.content
    assert document["openapi"] == "3.1.0"
    assert document["info"] == {"title": "Shop", "version": "2.1.0"}


def test_one_operation_per_route_and_method_with_version_routes_expanded() -> None:
    document = app().http_api
    listed = [(method, path) for path, item in document["paths"].items() for method in item]
    assert listed == [
        ("post", "/orders"),
        ("get", "/shops/{shopId}/all"),
        ("get", "/shops/{shopId}/orders"),
        ("post", "/shops/{shopId}/orders"),
        ("delete", "/shops/{shopId}/orders"),
        ("post", "/v1/shops/{shopId}/orders"),
        ("post", "/v2/shops/{shopId}/orders"),
    ]
    ids = [op["operationId"] for item in document["paths"].values() for op in item.values()]
    assert len(set(ids)) == len(ids)
    assert operation(document, "post", "/shops/{shopId}/orders")["operationId"] == "shopPlace_v1"
    assert operation(document, "post", "/v1/shops/{shopId}/orders")["operationId"] == "shopPlace_v1_2"
    assert operation(document, "post", "/v2/shops/{shopId}/orders")["operationId"] == "shopPlace_v2"
    assert operation(document, "get", "/shops/{shopId}/all")["operationId"] == "shopSearch_2"
    assert operation(document, "post", "/shops/{shopId}/orders")["summary"] == "Place an order"


def test_records_are_named_components_referenced_never_repeated() -> None:
    document = app().http_api
    schemas = document["components"]["schemas"]
    assert list(schemas) == sorted(schemas)
    assert {"LineItem", "Node", "Filter", "Search", "Place", "Placed", "Failure", "PlaceBody"} <= set(schemas)
    # A record named like the failure body keeps its name; the failure body takes the next free one.
    assert schemas["Failure"]["properties"] == {"reason": {"type": "string"}}
    assert schemas["Failure_2"]["required"] == ["status", "detail"]
    assert schemas["Placed"]["properties"]["first"] == {"$ref": "#/components/schemas/LineItem"}
    assert schemas["Placed"]["properties"]["rest"] == {
        "type": "array",
        "items": {"$ref": "#/components/schemas/LineItem"},
    }
    assert schemas["Placed"]["properties"]["tree"] == {
        "anyOf": [{"$ref": "#/components/schemas/Node"}, {"type": "null"}],
        "default": None,  # a nullable field's default, published here like any other (DESIGN §12)
    }
    # A recursive record refers to itself instead of becoming an open schema.
    assert schemas["Node"]["properties"]["children"]["items"] == {"$ref": "#/components/schemas/Node"}
    text = json.dumps(document)
    for name, schema in schemas.items():
        assert text.count(json.dumps(schema)) == 1, f"{name} is repeated"


def test_path_placeholders_and_query_fields_are_typed_parameters() -> None:
    document = app().http_api
    parameters = {p["name"]: p for p in operation(document, "get", "/shops/{shopId}/orders")["parameters"]}
    # Then the optional Idempotency-Key: the topic is not idempotent (the registry's default).
    assert list(parameters) == ["shopId", "query", "limit", "tags", "filter", "scores", "Idempotency-Key"]
    assert parameters["shopId"] == {"name": "shopId", "in": "path", "required": True, "schema": {"type": "string"}}
    assert parameters["query"] == {"name": "query", "in": "query", "required": True, "schema": {"type": "string"}}
    limit_schema = {"type": "integer", "format": "int64", "default": 10}  # the binding takes signed 64-bit integers
    assert parameters["limit"] == {"name": "limit", "in": "query", "required": False, "schema": limit_schema}
    assert parameters["tags"]["schema"]["default"] == []  # a default factory's value is published too
    # An array of scalars is one comma-separated value; a record or map is JSON text.
    assert parameters["tags"]["style"] == "form" and parameters["tags"]["explode"] is False
    assert parameters["filter"]["content"] == {
        "application/json": {
            "schema": {"anyOf": [{"$ref": "#/components/schemas/Filter"}, {"type": "null"}], "default": None}
        }
    }
    assert parameters["scores"]["content"]["application/json"]["schema"]["additionalProperties"] == {"type": "number"}
    assert "requestBody" not in operation(document, "get", "/shops/{shopId}/orders")


def test_the_body_is_the_request_without_its_path_fields() -> None:
    document = app().http_api
    placed = operation(document, "post", "/shops/{shopId}/orders")
    assert placed["parameters"][0] == {"name": "shopId", "in": "path", "required": True, "schema": {"type": "string"}}
    assert [p["name"] for p in placed["parameters"]] == ["shopId", "Idempotency-Key"]
    assert placed["requestBody"] == {
        "required": True,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/PlaceBody"}}},
    }
    body = document["components"]["schemas"]["PlaceBody"]
    assert list(body["properties"]) == ["items", "note"] and body["required"] == ["items"]
    # Without path fields the body is the record's own component.
    unrouted = operation(document, "post", "/orders")
    assert unrouted["requestBody"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Place"}


def test_declared_statuses_and_the_binding_failures_are_the_responses() -> None:
    document = app().http_api
    placed = operation(document, "post", "/shops/{shopId}/orders")["responses"]
    assert list(placed) == ["201", "400", "404", "409", "413", "422", "431", "503", "504"]
    assert placed["201"]["description"] == "created"
    assert placed["201"]["content"] == {"application/json": {"schema": {"$ref": "#/components/schemas/Placed"}}}
    assert placed["409"]["description"].startswith("conflict; or ")  # declared, and an Idempotency-Key's answer
    assert placed["409"]["content"] == {"application/json": {"schema": {"$ref": "#/components/schemas/Failure_2"}}}
    forget = operation(document, "delete", "/shops/{shopId}/orders")["responses"]
    assert list(forget) == ["200", "204", "400", "403", "404", "409", "413", "422", "431", "503", "504"]
    assert "content" not in forget["204"] and forget["204"]["description"] == "deleted"
    assert "404" in operation(document, "post", "/orders")["responses"]  # v2: a version header can miss


def test_an_unversioned_topic_on_a_route_without_placeholders_lists_the_404_a_version_header_gets() -> None:
    # Spec rule 5: a caller's version header picks the version, so naming one the topic lacks is a 404 here too.
    registry = Registry()
    registry.add("shop:search", search)
    served = create_app(Service(Identity("shop"), registry), ["GET /search -> shop:search"])
    responses = served.http_api["paths"]["/search"]["get"]["responses"]
    answer = call(served, "GET", "/search", params={"shopId": "s", "query": "q"}, headers={"svc-version": "v9"})
    assert answer.status_code == 404 and answer.json()["status"] == "not-found"
    assert "404" in responses and responses["404"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Failure"
    }


def test_every_operation_lists_the_504_a_deadline_gets_naming_the_topics_timeout() -> None:
    # Any caller may send svc-deadline (docs/wire.md), and a topic's timeout bounds every call: either is a 504.
    async def slow(request: Search, context: Context) -> Result[list[Placed]]:
        await asyncio.Event().wait()  # until the timeout cancels it
        return Result.ok([])

    registry = Registry()
    registry.add("shop:search", search, idempotent=True)
    registry.add("shop:slow", slow, idempotent=True, timeout=0.05)
    served = create_app(Service(Identity("shop"), registry), ["GET /search -> shop:search", "GET /slow -> shop:slow"])
    document = served.http_api
    validate(document)
    searched = operation(document, "get", "/search")["responses"]["504"]
    assert searched["description"] == "timeout: the call ran past the caller's svc-deadline"
    assert searched["content"] == {"application/json": {"schema": {"$ref": "#/components/schemas/Failure"}}}
    bounded = operation(document, "get", "/slow")["responses"]["504"]["description"]
    assert bounded == "timeout: the call ran past the topic's timeout (0.05 s) or the caller's earlier svc-deadline"
    # What the document says, the service answers.
    query = {"shopId": "s", "query": "q"}
    late = call(served, "GET", "/search", params=query, headers={"svc-deadline": "0"})
    assert (late.status_code, late.json()["status"]) == (504, "timeout")
    timed_out = call(served, "GET", "/slow", params=query)
    assert (timed_out.status_code, timed_out.json()["status"]) == (504, "timeout")


def test_the_document_is_byte_stable() -> None:
    assert app().http_api_body == app().http_api_body
    assert document_bytes(json.loads(app().http_api_body)) == app().http_api_body


def test_answers_match_the_document() -> None:
    served = app()
    created = call(served, "POST", "/shops/s-1/orders", json={"items": [{"sku": "a"}, {"sku": "b", "quantity": 2}]})
    assert created.status_code == 201 and created.json()["rest"] == [{"sku": "b", "quantity": 2}]
    listed = call(
        served, "GET", "/shops/s-1/orders", params={"query": "x", "tags": "a,b", "filter": '{"label": "l", "depth": 1}'}
    )
    assert (listed.status_code, listed.json()) == (200, [])
    assert call(served, "DELETE", "/shops/s-1/orders", params={"query": "x"}).status_code == 204


# --- declared statuses ---------------------------------------------------------------------------------------


def test_statuses_must_be_of_the_table_and_of_the_right_kind() -> None:
    registry = Registry()
    with pytest.raises(RegistryError, match=r"success status 'conflict' is a failure status; success statuses are ok"):
        registry.add("t", place, success=["conflict"])
    with pytest.raises(RegistryError, match=r"failures status 'created' is a success status"):
        registry.add("t", place, failures=["created"])
    with pytest.raises(RegistryError, match=r"success status 'done' is not a status"):
        registry.add("t", place, success=["done"])
    with pytest.raises(RegistryError, match=r"success needs at least one status"):
        registry.add("t", place, success=[])
    registration = registry.add("t", place, success=["created", "ok"], failures=["not-found", "conflict"])
    assert (registration.success, registration.failures) == (("ok", "created"), ("not-found", "conflict"))


def test_an_undeclared_success_still_answers_and_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    registry = Registry()
    registry.add("shop:place", place)  # answers created, declares only ok
    served = create_app(Service(Identity("shop"), registry), ["POST /orders -> shop:place"])
    with caplog.at_level(logging.WARNING, logger="svcgen.registry"):
        for _ in range(3):
            answer = call(served, "POST", "/orders", json={"shopId": "s", "items": [{"sku": "a"}]})
            assert answer.status_code == 201
    warnings = [r.getMessage() for r in caplog.records if r.name == "svcgen.registry"]
    assert len(warnings) == 1 and "answered 'created'" in warnings[0]


def test_a_route_without_a_version_to_a_topic_of_several_needs_the_version_header() -> None:
    registry = Registry()
    registry.add("shop:place", place, version="v1", success=["created"])
    registry.add("shop:place", place_v2, version="v2")
    served = create_app(Service(Identity("shop"), registry), ["POST /orders -> shop:place"])
    document = served.http_api
    validate(document)
    posted = operation(document, "post", "/orders")
    assert posted["parameters"][0] == {"name": "svc-version", "in": "header", "required": True,
                                       "schema": {"type": "string"}}  # fmt: skip
    assert "404" in posted["responses"] and posted["requestBody"]["content"]["application/json"]["schema"] == {}
    # What the document says: without the header no version is chosen; with it, that version answers.
    assert call(served, "POST", "/orders", json={"shopId": "s", "items": [{"sku": "a"}]}).status_code == 404
    chosen = call(
        served, "POST", "/orders", json={"shopId": "s", "items": [{"sku": "a"}]}, headers={"svc-version": "v1"}
    )
    assert chosen.status_code == 201


def keyed_shop(*, forget_too: bool = False) -> HttpApp:
    """A shop whose placing is versioned and not idempotent, searching idempotent; `forget_too` adds a DELETE."""
    registry = Registry()
    registry.add("shop:place", place, version="v1", success=["created"], failures=["conflict"])
    registry.add("shop:place", place_v2, version="v2")
    registry.add("shop:search", search, idempotent=True)
    routes = ["POST /orders -> shop:place@v1", "POST /any/orders -> shop:place", "GET /search -> shop:search"]
    if forget_too:
        registry.add("shop:forget", forget, success=["deleted"])
        routes.append("DELETE /orders -> shop:forget")
    return create_app(Service(Identity("shop"), registry), routes)


def test_an_operation_that_honours_an_idempotency_key_lists_the_answers_the_key_can_get() -> None:
    served = keyed_shop(forget_too=True)
    document = served.http_api
    validate(document)
    forgotten = operation(document, "delete", "/orders")["responses"]
    # Not idempotent (the registry's default): a key still in flight is 409, one reused with another body 422.
    assert forgotten["409"]["description"].startswith("conflict: a call with this Idempotency-Key is still running")
    assert forgotten["409"]["headers"]["retry-after"] == {"description": "seconds to wait before retrying",
                                                          "schema": {"type": "string"}}  # fmt: skip
    assert "Idempotency-Key was used with another request" in forgotten["422"]["description"]
    assert forgotten["422"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ValidationFailure"
    }
    # A topic's own conflict keeps its word, the key's reason beside it.
    placed = operation(document, "post", "/orders")["responses"]["409"]["description"]
    assert placed.startswith("conflict; or a call with this Idempotency-Key is still running")
    # Where a header picks the version, a version that is not idempotent makes the key count.
    assert "409" in operation(document, "post", "/any/orders")["responses"]
    # An idempotent topic ignores the key: none of its answers.
    searched = operation(document, "get", "/search")["responses"]
    assert "409" not in searched and "Idempotency-Key" not in json.dumps(searched)
    # What the document says, the service answers.
    body = {"shopId": "s", "query": "q"}
    assert call(served, "DELETE", "/orders", json=body, headers={"idempotency-key": "k"}).status_code == 204
    reused = call(served, "DELETE", "/orders", json={**body, "query": "r"}, headers={"idempotency-key": "k"})
    assert reused.status_code == 422


def test_an_operation_that_honours_an_idempotency_key_declares_the_header_and_the_replayed_mark() -> None:
    served = keyed_shop()
    document = served.http_api
    validate(document)
    placed = operation(document, "post", "/orders")
    key: dict[str, Any] = {
        "name": "Idempotency-Key",
        "in": "header",
        "required": False,
        "description": "runs the call once per key: a repeat of the same request gets the first answer again",
        "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[!-~]([ -~]*[!-~])?$"},
    }
    assert placed["parameters"] == [key]
    assert operation(document, "post", "/any/orders")["parameters"][-1] == key  # beside the version header
    searched = operation(document, "get", "/search")
    assert "Idempotency-Key" not in json.dumps(searched)  # an idempotent topic ignores the key
    # The pattern is the key the service takes: printable ASCII, 1 to 255 characters.
    pattern = re.compile(key["schema"]["pattern"])
    assert all(pattern.fullmatch(text) for text in ("k", "a b", "~" * 255))
    assert not any(pattern.fullmatch(text) for text in (" k", "k ", "é", "a\tb"))
    # Every answer a key can replay says it may carry the mark; the limits' and the released ones do not.
    responses = placed["responses"]
    replayed = {"idempotent-replayed": {"description": "true: the answer kept for this Idempotency-Key, again",
                                        "schema": {"type": "string", "enum": ["true"]}}}  # fmt: skip
    marked = [code for code, answer in responses.items() if "idempotent-replayed" in answer.get("headers", {})]
    assert marked == ["201", "400", "404", "409", "422"]
    assert responses["201"]["headers"] == replayed
    assert responses["409"]["headers"] == {**replayed, "retry-after": responses["409"]["headers"]["retry-after"]}
    # What the document says, the service answers.
    body = {"shopId": "s", "items": [{"sku": "a"}]}
    first = call(served, "POST", "/orders", json=body, headers={"idempotency-key": "k-1"})
    again = call(served, "POST", "/orders", json=body, headers={"idempotency-key": "k-1"})
    assert (first.status_code, again.status_code) == (201, 201)
    assert "idempotent-replayed" not in first.headers and again.headers["idempotent-replayed"] == "true"
    bad = call(served, "POST", "/orders", json=[], headers={"idempotency-key": "k-2"})
    bad_again = call(served, "POST", "/orders", json=[], headers={"idempotency-key": "k-2"})
    assert (bad.status_code, bad_again.status_code, bad_again.headers["idempotent-replayed"]) == (400, 400, "true")
