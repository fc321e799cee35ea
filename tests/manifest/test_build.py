"""Model building: the full example manifest (docs/manifest.md) becomes the expected `Manifest`."""

from __future__ import annotations

from pathlib import Path

import pytest

from svcgen.manifest import ManifestError, load_manifest, load_manifest_text
from svcgen.manifest.model import NO_DEFAULT, FieldDef, Manifest, MeshDef, RecordDef, RouteDef, TopicDef
from svcgen.manifest.typeexpr import parse_type
from tests.support.manifests import MINIMAL, load_ok

DESIGN_EXAMPLE = """\
svcgen: 1                      # format version, required
service: orders                # required; [a-z][a-z0-9-]*
serviceVersion: 1.4.2          # optional identity
package: orders_service        # optional; default: service with '-' -> '_' plus '_service'
title: Orders API              # OpenAPI info.title, default "Svc service"
apiVersion: 1.0.0              # OpenAPI info.version, default "1.0.0"
prefix: /svc                   # well-known prefix, default /svc
placement: {cloud: self-hosted}
health: [database, cache]      # named health checks; stubs generated in health.py
mesh:                          # optional; absent = no feeds
  collector: http://127.0.0.1:8700   # collector base URL; feeds go to {collector}{prefix}/invoke
  heartbeatSeconds: 30
  issues: true
types:
  LineItem:
    description: One line of an order.
    fields:
      sku: string
      quantity: {type: integer, default: 1, description: How many}
  PlaceOrder:
    fields:
      customerId: string
      items: list[LineItem]
      note: string?            # nullable, defaults to null, so not required
      placedAt: datetime
      shipTo: Address
  Address:
    jsonSchema: schemas/address.json   # an external JSON Schema; its dataclass is generated for it
  Order:
    fields:
      orderId: string
      items: list[LineItem]
      total: {type: float, default: 0}
  PlaceOrderV2:
    fields:
      customerId: string
      items: list[LineItem]
      tags: {type: 'set[string]', default: [new]}
  CapturePayment:
    fields:
      orderId: string
      amount: float
  Capture:
    fields:
      captureId: string
      capturedAt: datetime?
topics:
  - id: orders:place
    version: v1                # optional, default ""
    summary: Place an order
    request: PlaceOrder
    response: Order
    routes: ["POST /orders", "POST /{version}/orders"]   # {version} serves every version of the topic
  - id: orders:place
    version: v2
    request: PlaceOrderV2
    response: Order
produces:                      # topics this service sends (typed outbound clients)
  - id: payments:capture
    request: CapturePayment
    response: Capture
"""

ADDRESS_SCHEMA = '{"type": "object", "properties": {"street": {"type": "string"}}, "required": ["street"]}\n'


EXPECTED = Manifest(
    path="examples/orders.yaml",
    service="orders",
    package="orders_service",
    title="Orders API",
    api_version="1.0.0",
    prefix="/svc",
    service_version="1.4.2",
    placement={"cloud": "self-hosted"},
    health=("database", "cache"),
    mesh=MeshDef(collector="http://127.0.0.1:8700", heartbeat_seconds=30.0, issues=True),
    types=(
        RecordDef(
            "LineItem",
            (
                FieldDef("sku", parse_type("string")),
                FieldDef("quantity", parse_type("integer"), 1, "How many"),
            ),
            description="One line of an order.",
        ),
        RecordDef(
            "PlaceOrder",
            (
                FieldDef("customerId", parse_type("string")),
                FieldDef("items", parse_type("list[LineItem]")),
                FieldDef("note", parse_type("string?"), None),
                FieldDef("placedAt", parse_type("datetime")),
                FieldDef("shipTo", parse_type("Address")),
            ),
        ),
        RecordDef("Address", (FieldDef("street", parse_type("string")),), json_schema="schemas/address.json"),
        RecordDef(
            "Order",
            (
                FieldDef("orderId", parse_type("string")),
                FieldDef("items", parse_type("list[LineItem]")),
                FieldDef("total", parse_type("float"), 0),
            ),
        ),
        RecordDef(
            "PlaceOrderV2",
            (
                FieldDef("customerId", parse_type("string")),
                FieldDef("items", parse_type("list[LineItem]")),
                FieldDef("tags", parse_type("set[string]"), ["new"]),
            ),
        ),
        RecordDef(
            "CapturePayment", (FieldDef("orderId", parse_type("string")), FieldDef("amount", parse_type("float")))
        ),
        RecordDef(
            "Capture",
            (FieldDef("captureId", parse_type("string")), FieldDef("capturedAt", parse_type("datetime?"), None)),
        ),
    ),
    topics=(
        TopicDef(
            "orders:place",
            "v1",
            parse_type("PlaceOrder"),
            parse_type("Order"),
            "Place an order",
            (RouteDef("POST", "/orders"), RouteDef("POST", "/{version}/orders")),
        ),
        TopicDef("orders:place", "v2", parse_type("PlaceOrderV2"), parse_type("Order")),
    ),
    produces=(TopicDef("payments:capture", "", parse_type("CapturePayment"), parse_type("Capture")),),
)


@pytest.fixture
def example_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "examples" / "schemas").mkdir(parents=True)
    (tmp_path / "examples" / "schemas" / "address.json").write_text(ADDRESS_SCHEMA)
    (tmp_path / "examples" / "orders.yaml").write_text(DESIGN_EXAMPLE)
    return tmp_path


def test_design_example_builds_the_expected_model(example_dir: Path) -> None:
    assert load_manifest("examples/orders.yaml") == EXPECTED


def test_path_is_kept_as_given_with_forward_slashes(example_dir: Path) -> None:
    assert load_manifest(Path("examples") / "orders.yaml").path == "examples/orders.yaml"
    assert load_manifest_text(DESIGN_EXAMPLE, "examples\\orders.yaml").path == "examples/orders.yaml"


def test_field_defaults_and_attributes(example_dir: Path) -> None:
    manifest = load_manifest("examples/orders.yaml")
    place = manifest.types[1]
    assert [(f.attr, f.has_default) for f in place.fields] == [
        ("customer_id", False),
        ("items", False),
        ("note", True),
        ("placed_at", False),
        ("ship_to", False),
    ]
    assert place.fields[0].default is NO_DEFAULT


def test_defaults_of_optional_keys() -> None:
    manifest = load_ok(MINIMAL.replace("service: orders", "service: order-desk"))
    assert manifest.package == "order_desk_service"
    assert (manifest.title, manifest.api_version, manifest.prefix) == ("Svc service", "1.0.0", "/svc")
    assert (manifest.service_version, manifest.placement, manifest.health, manifest.mesh) == (None, None, (), None)
    assert manifest.produces == ()
    assert manifest.topics[0].version == ""
    assert manifest.topics[0].summary is None


def test_an_explicit_default_on_a_nullable_field_wins() -> None:
    manifest = load_ok(MINIMAL.replace("orderId: string", "orderId: {type: 'string?', default: x}"))
    assert manifest.types[0].fields[0].default == "x"


@pytest.mark.parametrize(("given", "stored"), [("svc", "/svc"), ("/api/svc/", "/api/svc"), ("/", ""), ("", "")])
def test_prefix_is_normalized(given: str, stored: str) -> None:
    assert load_ok(MINIMAL + f"prefix: '{given}'\n").prefix == stored


def test_mesh_over_nats() -> None:
    manifest = load_ok(MINIMAL + "mesh: {transport: nats, nats: 'nats://127.0.0.1:4222', heartbeatSeconds: 5}\n")
    assert manifest.mesh == MeshDef(None, 5.0, True, transport="nats", nats="nats://127.0.0.1:4222")


def test_mesh_defaults_and_trailing_slash() -> None:
    manifest = load_ok(MINIMAL + "mesh: {collector: 'https://c.example/'}\n")
    assert manifest.mesh == MeshDef("https://c.example", 30.0, True)


def test_topics_keep_manifest_order() -> None:
    text = MINIMAL + "".join(f"  - {{id: t{n}, request: Order, response: Order}}\n" for n in (3, 1, 2))
    assert [topic.id for topic in load_ok(text).topics] == ["orders:get", "t3", "t1", "t2"]


def test_missing_manifest_file_is_a_diagnostic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ManifestError) as info:
        load_manifest("nope.yaml")
    assert str(info.value) == "nope.yaml:1:1: manifest file not found"
    Path("latin.yaml").write_bytes(b"service: \xe9\n")
    with pytest.raises(ManifestError) as info:
        load_manifest("latin.yaml")
    assert str(info.value) == "latin.yaml:1:1: manifest is not UTF-8 text (byte 9: invalid continuation byte)"


def test_a_byte_order_mark_is_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("m.yaml").write_text("\ufeff" + MINIMAL, encoding="utf-8")
    assert load_manifest("m.yaml").service == "orders"
