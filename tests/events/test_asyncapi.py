"""contracts/asyncapi.json is valid AsyncAPI 3.0.0 (the official JSON Schema, vendored in tests/support/asyncapi,
validated with jsonschema), byte-stable, and names every published and subscribed event."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft7Validator

from svcgen.runtime import Context, EventSpec, Result, Subscriptions
from svcgen.runtime._asyncapi import build_asyncapi
from svcgen.runtime._jsontext import document_bytes
from tests.support.codegen import GOLDEN

SCHEMA = Path(__file__).resolve().parents[1] / "support" / "asyncapi" / "asyncapi-3.0.0.schema.json"


@pytest.fixture(scope="module")
def validator() -> Draft7Validator:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    Draft7Validator.check_schema(schema)
    return Draft7Validator(schema)


def _problems(validator: Draft7Validator, document: Any) -> list[str]:
    return [f"{list(error.absolute_path)}: {error.message}" for error in validator.iter_errors(document)]


@pytest.mark.parametrize("example", ["bookings", "notifications"])
def test_committed_documents_are_valid_asyncapi(validator: Draft7Validator, example: str) -> None:
    path = GOLDEN / example / f"{example}_service" / "contracts" / "asyncapi.json"
    document = json.loads(path.read_text(encoding="utf-8"))
    assert _problems(validator, document) == []
    assert path.read_bytes() == document_bytes(document)  # canonical: sorted as derived, 2-space, final newline


def test_the_validator_refuses_a_broken_document(validator: Draft7Validator) -> None:
    path = GOLDEN / "bookings" / "bookings_service" / "contracts" / "asyncapi.json"
    document = json.loads(path.read_text(encoding="utf-8"))
    document["operations"]["publishBookingsBooked"]["action"] = "publish"  # AsyncAPI 2's word, not 3's
    del document["info"]["version"]
    assert len(_problems(validator, document)) >= 2


@dataclass
class Shipped:
    order_id: str
    carrier: str = "post"


def test_published_subscribed_and_versioned_events_in_one_document(validator: Draft7Validator) -> None:
    async def handle(event: Shipped, context: Context) -> Result[None]:
        return Result.ok()

    subscriptions = Subscriptions()
    subscriptions.add("orders:shipped", handle, publisher="orders", payload=Shipped, version="v2")
    subscriptions.add("stock:moved", handle, publisher="stock-keeper", payload=Shipped)
    published = [EventSpec("orders:shipped", Shipped, "v2", key="orderId"), EventSpec("orders:shipped", Shipped)]
    document = build_asyncapi("orders", published, subscriptions, title="Orders", version="2.0.0")
    assert _problems(validator, document) == []
    assert document == build_asyncapi("orders", published, subscriptions, title="Orders", version="2.0.0")
    channels = document["channels"]
    assert {key: channel["address"] for key, channel in channels.items()} == {
        "ordersShipped": "svc.event.orders.orders_shipped",
        "ordersShipped_v2": "svc.event.orders.orders_shipped.v2",
        "stockMoved": "svc.event.stock-keeper.stock_moved",
    }
    actions = {key: operation["action"] for key, operation in document["operations"].items()}
    assert actions == {"publishOrdersShipped": "send", "publishOrdersShipped_v2": "send",
                       "receiveOrdersShipped_v2": "receive", "receiveStockMoved": "receive"}  # fmt: skip
    message = document["components"]["messages"]["OrdersShipped_v2Event"]
    assert message["correlationId"] == {"location": "$message.payload#/orderId"}
    assert document["components"]["schemas"]["StockMovedEvent"]["properties"]["orderId"] == {"type": "string"}
