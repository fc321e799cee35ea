"""The derived documents: spec, service descriptor and operations description (OpenAPI 3.1.0).

Golden files under tests/runtime/golden/ are compared byte for byte; `pytest --update-golden` rewrites
them (review the diff before committing).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from openapi_spec_validator import OpenAPIV31SpecValidator, validate

from svcgen.runtime import Identity, ProducedTopic, Registry, Result, TopicKey
from svcgen.runtime import _openapi as openapi_module
from svcgen.runtime._collisions import collision_suffixes, handler_slugs
from svcgen.runtime._descriptor import Descriptor, build_descriptor, build_spec
from svcgen.runtime._jsontext import document_bytes, hash_bytes
from svcgen.runtime._openapi import build_openapi, error_schema, invoke_path, operation_index
from svcgen.runtime._topics import topic_descriptor

GOLDEN = Path(__file__).parent / "golden"

FAILURE_RESPONSES = [
    ("400", "bad-request"),
    ("401", "unauthorized"),
    ("403", "forbidden"),
    ("404", "not-found"),
    ("409", "conflict"),
    ("422", "validation-error"),
    ("429", "too-many-requests"),
    ("500", "unexpected-error"),
    ("501", "not-implemented"),
    ("503", "service-unavailable"),
    ("504", "timeout"),
]

DESCRIPTOR_KEYS = [
    "service",
    "serviceVersion",
    "runtime",
    "binding",
    "instanceId",
    "placement",
    "topics",
    "produces",
    "degraded",
    "profile",
    "descriptorHash",
]


# --- the golden registry -------------------------------------------------------------------------


@dataclass
class LineItem:
    sku: str
    quantity: int = 1


@dataclass
class PlaceOrder:
    customer_id: str
    items: list[LineItem]
    placed_at: datetime
    note: str | None = None
    attributes: dict[str, str] = field(default_factory=dict)


@dataclass
class PlaceOrderV2:
    customer_id: str
    items: list[LineItem] = field(default_factory=list)
    express: bool = False


@dataclass
class Order:
    order_id: str
    total: float
    lines: dict[str, LineItem | None]


@dataclass
class GetOrder:
    order_id: str


@dataclass
class StockQuery:
    skus: set[str]
    warehouse: str | None = None


@dataclass
class CapturePayment:
    order_id: str
    amount: float


@dataclass
class Capture:
    capture_id: str
    captured_at: datetime | None


def handle(request: Any, context: Any) -> Result[Any]:
    return Result.ok(None)


def register_golden_topics(registry: Registry, order: list[int] | None = None) -> Registry:
    additions: list[tuple[str, dict[str, Any]]] = [
        ("orders:place", {"version": "v1", "request": PlaceOrder, "response": Order, "summary": "Place an order"}),
        ("orders:place", {"version": "v2", "request": PlaceOrderV2, "response": Order}),
        ("orders:get", {"request": GetOrder, "response": Order | None}),
        ("stock-a:b", {"request": StockQuery, "response": dict[str, int], "summary": "Réserve le stock"}),
        ("stock:a-b", {"request": StockQuery, "response": list[LineItem]}),
        ("inventory:ping", {}),
    ]
    for i in order if order is not None else range(len(additions)):
        topic, options = additions[i]
        registry.add(topic, handle, **options)
    return registry


def golden_registry(order: list[int] | None = None) -> Registry:
    return register_golden_topics(Registry(), order)


GOLDEN_IDENTITY = Identity(
    "orders",
    service_version="1.4.2",
    instance_id="orders-7f9c",
    binding="http",
    placement={"region": "eu-west-1", "cloud": "self-hosted"},
    profile={"name": "cloud-service", "missing": ["R6"]},
)
GOLDEN_PRODUCES = [
    ProducedTopic("payments:refund", "v2"),
    ProducedTopic("payments:capture", request_type=CapturePayment, response_type=Capture),
]


def check_golden(name: str, document: Any, update: bool) -> None:
    path = GOLDEN / name
    data = document_bytes(document)
    if update:
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(data)
        return
    assert data == path.read_bytes(), f"{name} differs from its golden file (pytest --update-golden rewrites it)"


def walk_schemas(schema: Any) -> Iterator[Any]:
    yield schema
    if isinstance(schema, dict):
        for value in schema.values():
            yield from walk_schemas(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from walk_schemas(value)


# --- golden documents ----------------------------------------------------------------------------


def test_golden_openapi(update_golden: bool) -> None:
    check_golden("openapi.json", build_openapi(golden_registry()), update_golden)


def test_golden_spec(update_golden: bool) -> None:
    check_golden("spec.json", build_spec("orders", golden_registry()), update_golden)


def test_golden_descriptor(update_golden: bool) -> None:
    descriptor = build_descriptor(GOLDEN_IDENTITY, golden_registry(), GOLDEN_PRODUCES)
    check_golden("descriptor.json", descriptor.document, update_golden)


# --- canonical JSON text -------------------------------------------------------------------------


def test_document_bytes_is_indented_utf8_with_final_newline_in_insertion_order() -> None:
    assert document_bytes({"b": "é", "a": [1, {}], "c": []}) == (
        '{\n  "b": "é",\n  "a": [\n    1,\n    {}\n  ],\n  "c": []\n}\n'.encode()
    )


def test_hash_bytes_sorts_keys_without_whitespace() -> None:
    assert hash_bytes({"b": {"z": 1, "y": "é"}, "a": [2, 1]}) == '{"a":[2,1],"b":{"y":"é","z":1}}'.encode()


# --- topic descriptor and spec -------------------------------------------------------------------


def test_topic_descriptor_omits_empty_version_and_defaults_to_open_schemas() -> None:
    assert topic_descriptor(ProducedTopic("a:b")) == {"id": "a:b", "requestSchema": {}, "responseSchema": {}}
    versioned = topic_descriptor(ProducedTopic("a:b", "v3", request_type=GetOrder))
    assert list(versioned) == ["id", "version", "requestSchema", "responseSchema"]
    assert versioned["version"] == "v3"
    assert versioned["requestSchema"] == {
        "type": "object",
        "properties": {"orderId": {"type": "string"}},
        "required": ["orderId"],
    }


def test_topic_descriptor_is_the_same_for_a_registration_and_a_produced_topic() -> None:
    registry = Registry()
    registration = registry.add("orders:get", handle, version="v1", request=GetOrder, response=Order)
    produced = ProducedTopic("orders:get", "v1", GetOrder, Order)
    assert topic_descriptor(registration) == topic_descriptor(produced)


def test_spec_is_sorted_by_id_then_version_whatever_the_registration_order() -> None:
    spec = build_spec("orders", golden_registry([5, 4, 3, 2, 1, 0]))
    assert list(spec) == ["service", "topics"]
    assert spec["service"] == "orders"
    assert [(t["id"], t.get("version")) for t in spec["topics"]] == [
        ("inventory:ping", None),
        ("orders:get", None),
        ("orders:place", "v1"),
        ("orders:place", "v2"),
        ("stock-a:b", None),
        ("stock:a-b", None),
    ]
    assert document_bytes(spec) == document_bytes(build_spec("orders", golden_registry()))


def test_spec_embeds_the_cached_schemas_verbatim() -> None:
    registry = golden_registry()
    spec = build_spec("orders", registry)
    for entry, registration in zip(spec["topics"], registry, strict=True):
        assert entry["requestSchema"] is registration.request_schema
        assert entry["responseSchema"] is registration.response_schema


def test_spec_of_an_empty_registry() -> None:
    assert build_spec("empty", Registry()) == {"service": "empty", "topics": []}


# --- descriptor ----------------------------------------------------------------------------------


def expected_hash(document: dict[str, Any]) -> str:
    """Independent canonical form: the stdlib json encoder with sorted keys and no whitespace."""
    hashed = {k: v for k, v in document.items() if k not in {"instanceId", "degraded", "profile", "descriptorHash"}}
    text = json.dumps(hashed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def test_descriptor_key_order_with_every_value_known() -> None:
    descriptor = build_descriptor(
        Identity("orders", "1.0", "i-1", "python", "http", {"cloud": "x"}, ["collector"], {"name": "cloud-service"}),
        golden_registry(),
        [],
    )
    assert list(descriptor.document) == DESCRIPTOR_KEYS


def test_descriptor_omits_unknown_values_and_never_emits_null() -> None:
    descriptor = build_descriptor(Identity("orders"), Registry(), [])
    assert descriptor.document == {
        "service": "orders",
        "runtime": "python",
        "topics": [],
        "produces": [],
        "descriptorHash": descriptor.hash,
    }
    for value in walk_schemas(descriptor.document):
        assert value is not None


def test_descriptor_without_registry_or_produces_is_degraded() -> None:
    document = build_descriptor(Identity("orders", binding="http"), None).document
    assert "topics" not in document
    assert "produces" not in document
    assert document["degraded"] == ["registry", "outbound-registry"]
    assert list(document) == ["service", "runtime", "binding", "degraded", "descriptorHash"]


def test_descriptor_degraded_merges_identity_inputs_without_duplicates() -> None:
    identity = Identity("orders", degraded=["placement", "registry"])
    assert build_descriptor(identity, None, None).document["degraded"] == ["placement", "registry", "outbound-registry"]
    assert build_descriptor(identity, Registry(), []).document["degraded"] == ["placement", "registry"]
    assert "degraded" not in build_descriptor(Identity("orders"), Registry(), []).document
    assert build_descriptor(Identity("orders"), Registry()).document["degraded"] == ["outbound-registry"]


def test_descriptor_produces_is_sorted_and_unique() -> None:
    document = build_descriptor(Identity("orders"), Registry(), GOLDEN_PRODUCES).document
    assert [(t["id"], t.get("version")) for t in document["produces"]] == [
        ("payments:capture", None),
        ("payments:refund", "v2"),
    ]
    with pytest.raises(ValueError, match="twice"):
        build_descriptor(Identity("orders"), Registry(), [ProducedTopic("a:b"), ProducedTopic("a:b")])


def test_descriptor_hash_is_sha256_of_the_sorted_compact_document_without_per_instance_keys() -> None:
    descriptor = build_descriptor(GOLDEN_IDENTITY, golden_registry(), GOLDEN_PRODUCES)
    assert descriptor.hash == expected_hash(descriptor.document)
    assert descriptor.document["descriptorHash"] == descriptor.hash
    assert descriptor.hash.startswith("sha256:")
    assert len(descriptor.hash) == len("sha256:") + 64


def test_descriptor_hash_ignores_instance_id_degraded_and_profile() -> None:
    registry = golden_registry()
    base = build_descriptor(Identity("orders", service_version="1"), registry, []).hash
    variants = [
        Identity("orders", service_version="1", instance_id="other"),
        Identity("orders", service_version="1", degraded=["collector"]),
        Identity("orders", service_version="1", profile={"name": "cloud-service", "missing": ["R1"]}),
    ]
    for identity in variants:
        assert build_descriptor(identity, registry, []).hash == base
    assert build_descriptor(Identity("orders", service_version="2"), registry, []).hash != base
    assert build_descriptor(Identity("orders", service_version="1"), registry, None).hash != base


def test_descriptor_hash_and_bytes_are_stable_across_insertion_orders() -> None:
    first = build_descriptor(GOLDEN_IDENTITY, golden_registry(), GOLDEN_PRODUCES)
    reordered_identity = Identity(
        "orders",
        service_version="1.4.2",
        instance_id="orders-7f9c",
        binding="http",
        placement={"cloud": "self-hosted", "region": "eu-west-1"},
        profile={"name": "cloud-service", "missing": ["R6"]},
    )
    second = build_descriptor(reordered_identity, golden_registry([3, 1, 5, 0, 4, 2]), GOLDEN_PRODUCES[::-1])
    assert second.hash == first.hash
    assert document_bytes(second.document) == document_bytes(first.document)


def test_descriptor_json_text_is_the_compact_document() -> None:
    descriptor = build_descriptor(GOLDEN_IDENTITY, golden_registry(), GOLDEN_PRODUCES)
    assert isinstance(descriptor, Descriptor)
    assert descriptor.json_text == orjson.dumps(descriptor.document).decode()
    assert json.loads(descriptor.json_text) == descriptor.document


# --- operations document: structure --------------------------------------------------------------


def test_openapi_top_level_and_info() -> None:
    document = build_openapi(golden_registry(), title="Orders API", version="2.3.4")
    assert list(document) == ["openapi", "info", "paths", "components"]
    assert document["openapi"] == "3.1.0"
    assert document["info"] == {"title": "Orders API", "version": "2.3.4"}
    assert build_openapi(Registry())["info"] == {"title": "Svc service", "version": "1.0.0"}


def test_one_path_per_topic_with_exactly_one_post() -> None:
    document = build_openapi(golden_registry())
    assert list(document["paths"]) == [
        "/svc/invoke/inventory:ping",
        "/svc/invoke/orders:get",
        "/svc/invoke/orders:place/v1",
        "/svc/invoke/orders:place/v2",
        "/svc/invoke/stock-a:b",
        "/svc/invoke/stock:a-b",
    ]
    for item in document["paths"].values():
        assert list(item) == ["post"]


def test_unversioned_operation_exactly() -> None:
    operation = build_openapi(golden_registry())["paths"]["/svc/invoke/orders:get"]["post"]
    assert list(operation) == ["operationId", "summary", "requestBody", "responses"]
    assert operation["operationId"] == "ordersGet"
    assert operation["summary"] == "Invoke topic orders:get"
    assert operation["requestBody"] == {
        "required": True,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/OrdersGetRequest"}}},
    }
    assert operation["responses"]["200"] == {
        "description": "ok",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/OrdersGetResponse"}}},
    }


def test_versioned_path_names_summary_and_operation_id() -> None:
    document = build_openapi(golden_registry())
    operation = document["paths"]["/svc/invoke/orders:place/v2"]["post"]
    assert operation["operationId"] == "ordersPlace_v2"
    assert operation["summary"] == "Invoke topic orders:place (version v2)"
    assert operation["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/OrdersPlace_v2Request"
    }
    assert operation["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/OrdersPlace_v2Response"
    }
    assert "OrdersPlace_v1Request" in document["components"]["schemas"]


def test_version_is_raw_in_operation_id_and_path_but_slugged_in_component_names() -> None:
    registry = Registry()
    registry.add("orders:place", handle, version="2.0-beta")
    (operation,) = operation_index(r.key for r in registry).values()
    assert operation.operation_id == "ordersPlace_2.0-beta"
    assert operation.path == "/svc/invoke/orders:place/2.0-beta"
    assert operation.request_component == "OrdersPlace_2_0_betaRequest"
    assert operation.response_component == "OrdersPlace_2_0_betaResponse"


def test_registration_summary_becomes_the_operation_description() -> None:
    paths = build_openapi(golden_registry())["paths"]
    assert paths["/svc/invoke/orders:place/v1"]["post"]["description"] == "Place an order"
    assert paths["/svc/invoke/stock-a:b"]["post"]["description"] == "Réserve le stock"
    assert "description" not in paths["/svc/invoke/orders:place/v2"]["post"]


def test_failure_responses_are_every_failure_status_in_code_order() -> None:
    for item in build_openapi(golden_registry())["paths"].values():
        responses = item["post"]["responses"]
        assert [(code, r["description"]) for code, r in responses.items()] == [("200", "ok"), *FAILURE_RESPONSES]
        for code, _ in FAILURE_RESPONSES:
            assert responses[code]["content"] == {
                "application/json": {"schema": {"$ref": "#/components/schemas/SvcError"}}
            }


def test_failure_responses_follow_code_order_not_table_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(openapi_module, "FAILURE_CODES", {"timeout": 504, "bad-request": 400, "conflict": 409})
    assert openapi_module._failure_statuses_by_code() == (
        ("400", "bad-request"),
        ("409", "conflict"),
        ("504", "timeout"),
    )


def test_failure_codes_shared_by_two_statuses_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(openapi_module, "FAILURE_CODES", {"bad-request": 400, "invalid": 400})
    with pytest.raises(RuntimeError, match="share HTTP code 400"):
        openapi_module._failure_statuses_by_code()


def test_svc_error_component_exactly() -> None:
    expected = {
        "type": "object",
        "properties": {"status": {"type": "string"}, "detail": {"type": "string"}},
        "required": ["status", "detail"],
    }
    assert error_schema() == expected
    assert build_openapi(Registry())["components"] == {"schemas": {"SvcError": expected}}


def test_components_are_the_derived_schemas_verbatim() -> None:
    registry = golden_registry()
    schemas = build_openapi(registry)["components"]["schemas"]
    index = operation_index(r.key for r in registry)
    for registration in registry:
        operation = index[registration.key]
        assert schemas[operation.request_component] is registration.request_schema
        assert schemas[operation.response_component] is registration.response_schema
    assert schemas["InventoryPingRequest"] == {}
    assert schemas["OrdersGetResponse"]["type"] == ["object", "null"]


def test_path_and_component_keys_are_sorted_lexicographically() -> None:
    document = build_openapi(golden_registry([5, 3, 1, 0, 2, 4]))
    assert list(document["paths"]) == sorted(document["paths"])
    assert list(document["components"]["schemas"]) == [
        "InventoryPingRequest",
        "InventoryPingResponse",
        "OrdersGetRequest",
        "OrdersGetResponse",
        "OrdersPlace_v1Request",
        "OrdersPlace_v1Response",
        "OrdersPlace_v2Request",
        "OrdersPlace_v2Response",
        "StockABRequest",
        "StockABRequest_2",
        "StockABResponse",
        "StockABResponse_2",
        "SvcError",
    ]


def test_output_is_byte_stable_across_registration_orders() -> None:
    expected = document_bytes(build_openapi(golden_registry()))
    assert document_bytes(build_openapi(golden_registry([5, 4, 3, 2, 1, 0]))) == expected
    assert document_bytes(build_openapi(golden_registry([2, 0, 4, 1, 5, 3]))) == expected


# --- operations document: names and collisions --------------------------------------------------


def test_collision_first_in_sorted_order_keeps_the_clean_name() -> None:
    index = operation_index([TopicKey("stock:a-b"), TopicKey("stock-a:b")])
    clean, second = index[TopicKey("stock-a:b")], index[TopicKey("stock:a-b")]
    assert (clean.operation_id, clean.request_component, clean.response_component) == (
        "stockAB",
        "StockABRequest",
        "StockABResponse",
    )
    assert (second.operation_id, second.request_component, second.response_component) == (
        "stockAB_2",
        "StockABRequest_2",
        "StockABResponse_2",
    )
    assert (clean.path, second.path) == ("/svc/invoke/stock-a:b", "/svc/invoke/stock:a-b")


def test_collision_suffixes_count_up_in_sorted_order() -> None:
    index = operation_index([TopicKey("a:b"), TopicKey("a.b"), TopicKey("a-b"), TopicKey("a_b")])
    assert [(key.id, op.operation_id, op.request_component) for key, op in index.items()] == [
        ("a-b", "aB", "ABRequest"),
        ("a.b", "aB_2", "ABRequest_2"),
        ("a:b", "aB_3", "ABRequest_3"),
        ("a_b", "aB_4", "ABRequest_4"),
    ]


def test_collision_between_versioned_topics() -> None:
    index = operation_index([TopicKey("orders:place", "v2"), TopicKey("orders-place", "v2")])
    assert index[TopicKey("orders-place", "v2")].operation_id == "ordersPlace_v2"
    assert index[TopicKey("orders-place", "v2")].request_component == "OrdersPlace_v2Request"
    assert index[TopicKey("orders:place", "v2")].operation_id == "ordersPlace_v2_2"
    assert index[TopicKey("orders:place", "v2")].request_component == "OrdersPlace_v2Request_2"
    assert index[TopicKey("orders:place", "v2")].path == "/svc/invoke/orders:place/v2"


def test_same_topic_under_two_versions_does_not_collide() -> None:
    index = operation_index([TopicKey("a:b", "v1"), TopicKey("a:b", "v2"), TopicKey("a:b")])
    assert [op.operation_id for op in index.values()] == ["aB", "aB_v1", "aB_v2"]


def test_an_operation_id_only_collision_still_suffixes_both_names() -> None:
    # Case folds away in camelCase only: `ABc:d` and `abc:d` share `abcD` but not their PascalCase names.
    index = operation_index([TopicKey("abc:d"), TopicKey("ABc:d")])
    assert [(op.operation_id, op.request_component) for op in index.values()] == [
        ("abcD", "ABcDRequest"),
        ("abcD_2", "AbcDRequest_2"),
    ]


def test_a_suffixed_name_never_takes_a_name_another_topic_derives() -> None:
    # `ab` version `2` derives `ab_2`, so the colliding `ab.` skips to `_3`.
    index = operation_index([TopicKey("ab"), TopicKey("ab", "2"), TopicKey("ab.")])
    assert [(op.operation_id, op.request_component) for op in index.values()] == [
        ("ab", "AbRequest"),
        ("ab_2", "Ab_2Request"),
        ("ab_3", "AbRequest_3"),
    ]


def test_topic_without_letters_or_digits_gets_a_readable_name() -> None:
    (operation,) = operation_index([TopicKey("::", "v1")]).values()
    assert (operation.operation_id, operation.request_component) == ("topic_v1", "Topic_v1Request")


def test_collision_suffixes_directly() -> None:
    assert collision_suffixes([]) == []
    assert collision_suffixes([("a",), ("b",), ("a",), ("a",), ("a_2",)]) == ["", "", "_3", "_4", ""]
    assert collision_suffixes([("x", "X"), ("y", "X"), ("x", "Y")]) == ["", "_2", "_2"]


def test_handler_slugs_share_the_collision_rule() -> None:
    keys = [TopicKey("orders:place", "v2"), TopicKey("orders-place", "v2"), TopicKey("orders:get"), TopicKey("o:p")]
    assert handler_slugs(keys) == {
        TopicKey("o:p"): "o_p",
        TopicKey("orders-place", "v2"): "orders_place_v2",
        TopicKey("orders:get"): "orders_get",
        TopicKey("orders:place", "v2"): "orders_place_v2_2",
    }
    # a versioned slug and an unversioned topic that spells the version out
    assert handler_slugs([TopicKey("orders:place:v2"), TopicKey("orders:place", "v2")]) == {
        TopicKey("orders:place", "v2"): "orders_place_v2",
        TopicKey("orders:place:v2"): "orders_place_v2_2",
    }


# --- operations document: paths ------------------------------------------------------------------


def test_prefix_is_normalised_and_moves_every_path() -> None:
    default = list(build_openapi(golden_registry())["paths"])
    assert list(build_openapi(golden_registry(), prefix="ops/")["paths"]) == [
        path.replace("/svc/", "/ops/", 1) for path in default
    ]
    root = list(build_openapi(golden_registry(), prefix="/")["paths"])
    assert root == [path.removeprefix("/svc") for path in default]
    assert default[0] == "/svc/invoke/inventory:ping"


def test_paths_keep_the_raw_topic_and_escape_only_non_path_characters() -> None:
    assert invoke_path(TopicKey("stock-a:b")) == "/svc/invoke/stock-a:b"
    assert invoke_path(TopicKey("a.b_c~d@e")) == "/svc/invoke/a.b_c~d@e"
    assert invoke_path(TopicKey("a/b c", "v/1")) == "/svc/invoke/a%2Fb%20c/v%2F1"
    assert invoke_path(TopicKey("{x}%é")) == "/svc/invoke/%7Bx%7D%25%C3%A9"


def test_path_overrides() -> None:
    registry = golden_registry()
    document = build_openapi(registry, paths={TopicKey("orders:get"): "/orders/get"})
    assert document["paths"]["/orders/get"]["post"]["operationId"] == "ordersGet"
    assert "/svc/invoke/orders:get" not in document["paths"]
    assert len(document["paths"]) == len(registry)
    with pytest.raises(ValueError, match="unregistered"):
        build_openapi(registry, paths={TopicKey("orders:gone"): "/x"})
    with pytest.raises(ValueError, match="both map to path"):
        build_openapi(registry, paths={TopicKey("orders:get"): "/svc/invoke/inventory:ping"})
    with pytest.raises(ValueError, match="must start with '/'"):
        build_openapi(registry, paths={TopicKey("orders:get"): "orders/get"})
    with pytest.raises(ValueError, match="templates"):
        build_openapi(registry, paths={TopicKey("orders:get"): "/orders/{id}"})


# --- validity ------------------------------------------------------------------------------------


def test_golden_openapi_is_valid_openapi_3_1() -> None:
    validate(build_openapi(golden_registry()), cls=OpenAPIV31SpecValidator)


def test_empty_registry_openapi_is_valid() -> None:
    document = build_openapi(Registry())
    assert document["paths"] == {}
    validate(document, cls=OpenAPIV31SpecValidator)


def test_every_derived_schema_is_valid_2020_12() -> None:
    for schema in build_openapi(golden_registry())["components"]["schemas"].values():
        Draft202012Validator.check_schema(schema)
    descriptor = build_descriptor(GOLDEN_IDENTITY, golden_registry(), GOLDEN_PRODUCES).document
    for entry in [*descriptor["topics"], *descriptor["produces"]]:
        Draft202012Validator.check_schema(entry["requestSchema"])
        Draft202012Validator.check_schema(entry["responseSchema"])


TYPE_POOL: list[Any] = [Any, str, int | None, list[LineItem], dict[str, Order | None], PlaceOrder, StockQuery, Capture]
topic_ids = st.text(alphabet="abAB1:-._/ é{", min_size=1, max_size=6).filter(lambda t: not t.startswith("svc:"))
versions = st.sampled_from(["", "", "v1", "v2", "2", "1.0", "1-0", "b_c", "v/2"])
topic_keys = st.tuples(topic_ids, versions)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.dictionaries(topic_keys, st.tuples(st.sampled_from(TYPE_POOL), st.sampled_from(TYPE_POOL)), max_size=10),
    st.sampled_from(["/svc", "", "/ops/v1"]),
)
def test_random_registries_give_valid_unambiguous_documents(
    topics: dict[tuple[str, str], tuple[Any, Any]], prefix: str
) -> None:
    registry = Registry()
    for (topic, version), (request, response) in topics.items():
        registry.add(topic, handle, version=version, request=request, response=response)
    document = build_openapi(registry, prefix=prefix)
    validate(document, cls=OpenAPIV31SpecValidator)
    operations = [item["post"] for item in document["paths"].values()]
    assert len(operations) == len(registry)
    operation_ids = [operation["operationId"] for operation in operations]
    assert len(set(operation_ids)) == len(operation_ids)
    schemas = document["components"]["schemas"]
    assert len(schemas) == 2 * len(registry) + 1
    refs = {node["$ref"] for node in walk_schemas(document["paths"]) if isinstance(node, dict) and "$ref" in node}
    assert refs == ({f"#/components/schemas/{name}" for name in schemas} if len(registry) else set())
    for schema in schemas.values():
        Draft202012Validator.check_schema(schema)
    assert document_bytes(build_openapi(registry, prefix=prefix)) == document_bytes(document)
