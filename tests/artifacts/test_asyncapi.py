"""asyncapi.json: an AsyncAPI 3.0.0 document of the domain topics, every reference resolvable."""

from __future__ import annotations

import re
from typing import Any

from svcgen.collector.artifacts import build_asyncapi
from tests.support.snapshots import (
    CAPTURE_PAYMENT,
    PLACE_ORDER_V2,
    catalog_entry,
    descriptor,
    empty_snapshot,
    sample_snapshot,
    topic,
)

_COMPONENT_KEY = re.compile(r"^[A-Za-z0-9.\-_]+$")


def _resolve(document: dict[str, Any], ref: str) -> Any:
    assert ref.startswith("#/")
    node: Any = document
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [ref for value in node.values() for ref in _refs(value)]
    if isinstance(node, list):
        return [ref for value in node for ref in _refs(value)]
    return []


def test_basic_structure() -> None:
    document = build_asyncapi(sample_snapshot())
    assert document["asyncapi"] == "3.0.0"
    assert set(document["info"]) >= {"title", "version"}
    assert isinstance(document["channels"], dict) and isinstance(document["operations"], dict)
    assert set(document["components"]) == {"schemas", "messages"}
    for section in ("schemas", "messages"):
        assert all(_COMPONENT_KEY.match(key) for key in document["components"][section])
    for key in [*document["channels"], *document["operations"]]:
        assert _COMPONENT_KEY.match(key)


def test_domain_topics_only() -> None:
    document = build_asyncapi(sample_snapshot())
    addresses = sorted(channel["address"] for channel in document["channels"].values())
    assert addresses == [
        "inventory:stock",
        "notifications:send",
        "orders:get",
        "orders:place",
        "orders:place",
        "payments:capture",
        "payments:refund",
    ]


def test_every_reference_resolves_and_operations_use_their_channel() -> None:
    document = build_asyncapi(sample_snapshot())
    for ref in _refs(document):
        _resolve(document, ref)
    for key, operation in document["operations"].items():
        assert operation["action"] == "receive"
        assert operation["channel"] == {"$ref": f"#/channels/{key}"}
        channel_messages = document["channels"][key]["messages"]
        for message in operation["messages"] + operation["reply"]["messages"]:
            assert message["$ref"].rsplit("/", 1)[1] in channel_messages


def test_names_follow_the_operations_document_and_schemas_are_embedded() -> None:
    document = build_asyncapi(sample_snapshot())
    schemas = document["components"]["schemas"]
    assert schemas["OrdersPlace_v2Request"] == PLACE_ORDER_V2
    assert schemas["PaymentsCaptureRequest"] == CAPTURE_PAYMENT
    assert document["channels"]["ordersPlace_v2"]["address"] == "orders:place"
    message = document["components"]["messages"]["OrdersPlace_v2Request"]
    assert message["payload"] == {"$ref": "#/components/schemas/OrdersPlace_v2Request"}


def test_colliding_names_get_a_suffix() -> None:
    snapshot = empty_snapshot()
    snapshot["catalog"] = [
        catalog_entry("a", descriptor=descriptor("a", "1", [topic("stock-a:b", {}, {}), topic("stock:a-b", {}, {})]))
    ]
    document = build_asyncapi(snapshot)
    assert sorted(document["channels"]) == ["stockAB", "stockAB_2"]
    assert sorted(document["components"]["schemas"]) == [
        "StockABRequest",
        "StockABRequest_2",
        "StockABResponse",
        "StockABResponse_2",
    ]


def test_empty_estate_is_a_valid_empty_document() -> None:
    document = build_asyncapi(empty_snapshot())
    assert document["channels"] == {} and document["operations"] == {}
    assert document["components"] == {"schemas": {}, "messages": {}}
