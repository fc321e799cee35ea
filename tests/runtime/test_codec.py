"""The codec: strict decoding with exact error paths, wire-name encoding, text fields, and a round-trip property."""

from __future__ import annotations

import copy
import dataclasses
import enum
import functools
import itertools
import typing
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from svcgen.runtime import DecodeError, Meta, codec_for
from svcgen.runtime._codec import RepeatedField, TextFields, rows_encoder
from svcgen.runtime._naming import snake_to_camel
from svcgen.runtime._schema import schema_of

# Aware datetimes at every whole-minute offset RFC 3339 can write.
_offsets = st.integers(-(24 * 60 - 1), 24 * 60 - 1).map(lambda minutes: timezone(timedelta(minutes=minutes)))
_datetimes = st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=_offsets)


def decode_error(tp: Any, value: Any) -> str:
    with pytest.raises(DecodeError) as info:
        codec_for(tp).decode(value)
    return str(info.value)


# ---------------------------------------------------------------------------------------------------
# Record types used below


@dataclass
class Item:
    sku: str
    quantity: int = 1


@dataclass
class Customer:
    customer_id: str
    vip: bool = False


@dataclass
class PlaceOrder:
    order_id: str
    customer: Customer
    items: list[Item]
    placed_at: datetime
    note: str | None = None
    tags: dict[str, int] = field(default_factory=dict)
    external_ref: str = field(default="none", metadata={"wire": "ext-ref"})


@dataclass
class Node:
    name: str
    children: list[Node] = field(default_factory=list)
    parent: Node | None = None


@dataclass
class Ping:
    pong: Pong | None


@dataclass
class Pong:
    ping: Ping


@dataclass(frozen=True, slots=True, kw_only=True)
class FrozenPoint:
    x: int
    y: int = 0


@dataclass
class Positive:
    value: int

    def __post_init__(self) -> None:
        if self.value <= 0:
            raise ValueError("secret internal detail")


@dataclass
class Query:
    order_id: str
    limit: int
    ratio: float
    verbose: bool
    since: datetime | None = None
    cursor: int | None = None
    label: str | None = None
    ids: list[int] = field(default_factory=list)
    filters: dict[str, str] = field(default_factory=dict)
    blob: bytes = b""
    either: int | bool = 0
    anything: Any = None


PLACE = {
    "orderId": "o-1",
    "customer": {"customerId": "c-1"},
    "items": [{"sku": "a", "quantity": 2}, {"sku": "b"}],
    "placedAt": "2026-11-22T10:00:00.250000+02:00",
}


# ---------------------------------------------------------------------------------------------------
# DecodeError


def test_decode_error_carries_path_and_message() -> None:
    err = DecodeError("expected integer", "items[2].quantity")
    assert (err.path, err.message, str(err)) == (
        "items[2].quantity",
        "expected integer",
        "items[2].quantity: expected integer",
    )
    assert isinstance(err, ValueError)
    assert str(DecodeError("expected object")) == "expected object"
    assert DecodeError("expected object").path == ""


# ---------------------------------------------------------------------------------------------------
# Scalars


@pytest.mark.parametrize(
    ("tp", "value", "expected"),
    [
        (str, "x", "x"),
        (str, "", ""),
        (bool, True, True),
        (bool, False, False),
        (int, 3, 3),
        (int, -(2**63), -(2**63)),
        (int, 2**63 - 1, 2**63 - 1),
        (float, 2.5, 2.5),
        (float, 3, 3.0),
        (bytes, "aGVsbG8=", b"hello"),
        (bytes, "", b""),
    ],
)
def test_scalar_decodes(tp: Any, value: Any, expected: Any) -> None:
    decoded = codec_for(tp).decode(value)
    assert decoded == expected
    assert type(decoded) is type(expected)


@pytest.mark.parametrize(
    ("tp", "value", "message"),
    [
        (str, 1, "expected string"),
        (str, None, "expected string"),
        (str, b"x", "expected string"),
        (bool, 1, "expected boolean"),
        (bool, "true", "expected boolean"),
        (bool, None, "expected boolean"),
        (int, True, "expected integer"),
        (int, False, "expected integer"),
        (int, 3.5, "expected integer"),
        (int, 3.0, "expected integer"),
        (int, 1.0e3, "expected integer"),
        (int, 1e19, "integer out of range (signed 64-bit)"),
        (int, 2**63, "integer out of range (signed 64-bit)"),
        (int, -(2**63) - 1, "integer out of range (signed 64-bit)"),
        (int, -(2.0**70), "integer out of range (signed 64-bit)"),
        (int, "3", "expected integer"),
        (int, None, "expected integer"),
        (int, float("inf"), "expected integer"),
        (float, True, "expected number"),
        (float, "1.5", "expected number"),
        (float, float("inf"), "expected number"),
        (float, float("nan"), "expected number"),
        (float, 10**400, "expected number"),
        (bytes, "aGVsbG8", "expected base64"),
        (bytes, "a$b=", "expected base64"),
        (bytes, "-_-_", "expected base64"),
        (bytes, "é", "expected base64"),
        (bytes, 5, "expected base64"),
    ],
)
def test_scalar_rejects(tp: Any, value: Any, message: str) -> None:
    assert decode_error(tp, value) == message


def test_scalar_encodes() -> None:
    assert codec_for(str).encode("x") == "x"
    assert codec_for(int).encode(7) == 7
    assert codec_for(bool).encode(False) is False
    assert codec_for(float).encode(1.5) == 1.5
    assert codec_for(bytes).encode(b"\xff\x00") == "/wA="
    assert codec_for(bytes).encode(b"hello") == "aGVsbG8="


# ---------------------------------------------------------------------------------------------------
# datetime


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-22T10:00:00Z", datetime(2026, 11, 22, 10, tzinfo=UTC)),
        ("2026-11-22t10:00:00z", datetime(2026, 11, 22, 10, tzinfo=UTC)),
        ("2026-11-22T10:00:00+00:00", datetime(2026, 11, 22, 10, tzinfo=UTC)),
        (
            "2026-11-22T10:00:00.123456+02:00",
            datetime(2026, 11, 22, 10, 0, 0, 123456, tzinfo=timezone(timedelta(hours=2))),
        ),
        (
            "2026-11-22T10:00:00.5-05:30",
            datetime(2026, 11, 22, 10, 0, 0, 500000, tzinfo=timezone(timedelta(hours=-5, minutes=-30))),
        ),
    ],
)
def test_datetime_decodes_and_keeps_the_offset(text: str, expected: datetime) -> None:
    decoded = codec_for(datetime).decode(text)
    assert decoded == expected
    assert decoded.utcoffset() == expected.utcoffset()


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("2026-11-22T10:00:00", "expected RFC 3339 date-time with offset"),
        ("2026-11-22T10:00:00.5", "expected RFC 3339 date-time with offset"),
        ("2026-11-22", "expected RFC 3339 date-time"),
        ("2026-11-22 10:00:00Z", "expected RFC 3339 date-time"),
        ("20261122T100000Z", "expected RFC 3339 date-time"),
        ("2026-11-22T10:00:00+0200", "expected RFC 3339 date-time"),
        ("2026-11-22T10:00:00,5Z", "expected RFC 3339 date-time"),
        ("2026-13-22T10:00:00Z", "expected RFC 3339 date-time"),
        ("2026-11-22T10:00:60Z", "expected RFC 3339 date-time"),
        ("2026-11-22T10:00:00+24:00", "expected RFC 3339 date-time"),
        ("٢٠٢٦-11-22T10:00:00Z", "expected RFC 3339 date-time"),
        (1700000000, "expected RFC 3339 date-time"),
        (None, "expected RFC 3339 date-time"),
    ],
)
def test_datetime_rejects(value: Any, message: str) -> None:
    assert decode_error(datetime, value) == message


@pytest.mark.parametrize(
    "value",
    [
        datetime(2026, 11, 22, 10, 0, 0, 123456, tzinfo=timezone(timedelta(hours=2))),
        datetime(2026, 11, 22, 10, tzinfo=UTC),
        datetime(2026, 11, 22, 10, 0, 0, 1, tzinfo=timezone(timedelta(hours=-9, minutes=-30))),
        datetime(5, 1, 1, tzinfo=timezone(timedelta(minutes=1))),
    ],
)
def test_datetime_encodes_as_isoformat_and_round_trips_exactly(value: datetime) -> None:
    codec = codec_for(datetime)
    # Twice: the first sight of a zone and the remembered fast path must give the same text.
    assert codec.encode(value) == value.isoformat()
    assert codec.encode(value) == value.isoformat()
    back = codec.decode(codec.encode(value))
    assert (back, back.utcoffset(), back.microsecond) == (value, value.utcoffset(), value.microsecond)


@settings(max_examples=100, deadline=None)
@given(_datetimes)
def test_datetime_text_is_isoformat_for_any_whole_minute_offset(value: datetime) -> None:
    codec = codec_for(datetime)
    assert [codec.encode(value), codec.encode(value)] == [value.isoformat()] * 2


def test_datetime_with_a_named_zone_encodes_its_offset() -> None:
    value = datetime(2026, 7, 1, 12, tzinfo=ZoneInfo("Europe/Amsterdam"))
    assert codec_for(datetime).encode(value) == "2026-07-01T12:00:00+02:00"


def test_datetime_with_a_seconds_offset_is_encoded_in_utc() -> None:
    historic = datetime(1900, 1, 1, tzinfo=ZoneInfo("Europe/Amsterdam"))  # LMT, +00:19:32
    text = codec_for(datetime).encode(historic)
    assert text == "1899-12-31T23:40:28+00:00"
    assert codec_for(datetime).decode(text) == historic


def test_naive_datetime_does_not_encode() -> None:
    with pytest.raises(ValueError, match="naive"):
        codec_for(datetime).encode(datetime(2026, 1, 1))


# ---------------------------------------------------------------------------------------------------
# Containers, nullable, union, any


def test_list_tuple_set_frozenset_decode_to_their_container() -> None:
    assert codec_for(list[int]).decode([1, 2]) == [1, 2]
    assert codec_for(tuple[int, ...]).decode([1, 2]) == (1, 2)
    assert codec_for(set[str]).decode(["a", "b", "a"]) == {"a", "b"}
    decoded = codec_for(frozenset[int]).decode([3, 3, 1])
    assert (type(decoded), decoded) == (frozenset, frozenset({1, 3}))
    assert codec_for(list[datetime]).decode(["2026-01-01T00:00:00Z"]) == [datetime(2026, 1, 1, tzinfo=UTC)]
    assert codec_for(list[Any]).decode([1, "a", None, {"k": [1]}]) == [1, "a", None, {"k": [1]}]


def test_array_errors_name_the_index() -> None:
    assert decode_error(list[int], [1, 2, "x"]) == "[2]: expected integer"
    assert decode_error(list[list[int]], [[1], [2, True]]) == "[1][1]: expected integer"
    assert decode_error(list[int], {"a": 1}) == "expected array"
    assert decode_error(list[int], "12") == "expected array"
    assert decode_error(set[Any], [[1], [2]]) == "expected array of hashable items"


def test_containers_encode_to_lists() -> None:
    assert codec_for(tuple[int, ...]).encode((3, 1)) == [3, 1]
    assert codec_for(set[int]).encode({3, 1, 2}) == [1, 2, 3]
    assert codec_for(frozenset[str]).encode(frozenset({"b", "a"})) == ["a", "b"]
    assert codec_for(list[bytes]).encode([b"\x00"]) == ["AA=="]
    unsortable = codec_for(set[int | None]).encode({None, 1})
    assert sorted(unsortable, key=repr) == [1, None]


def test_map_decodes_values_and_names_the_key() -> None:
    assert codec_for(dict[str, int]).decode({"a": 1, "b": 2}) == {"a": 1, "b": 2}
    assert decode_error(dict[str, int], {"a": 1, "someKey": "x"}) == "someKey: expected integer"
    assert decode_error(dict[str, int], {"some key": "x"}) == '["some key"]: expected integer'
    assert decode_error(dict[str, int], [1]) == "expected object"
    assert decode_error(dict[str, list[int]], {"k": [0, None]}) == "k[1]: expected integer"
    assert codec_for(dict[str, bytes]).encode({"k": b"hi"}) == {"k": "aGk="}


def test_nullable() -> None:
    codec = codec_for(int | None)
    assert codec.decode(None) is None
    assert codec.decode(4) == 4
    assert decode_error(int | None, "4") == "expected integer"
    assert codec_for(datetime | None).encode(None) is None
    assert codec_for(datetime | None).encode(datetime(2026, 1, 1, tzinfo=UTC)) == "2026-01-01T00:00:00+00:00"


def test_union_tries_members_in_order() -> None:
    assert codec_for(int | str).decode(1) == 1
    assert codec_for(int | str).decode("a") == "a"
    assert decode_error(int | str, 1.5) == "expected integer or string"
    assert decode_error(int | datetime | None, "x") == "expected integer or RFC 3339 date-time"
    decoded = codec_for(float | int).decode(3)
    assert (type(decoded), decoded) == (float, 3.0)
    assert codec_for(Item | Customer).decode({"customerId": "c"}) == Customer("c")
    assert codec_for(Item | Customer).decode({"sku": "s", "customerId": "c"}) == Item("s")


def test_unions_spelt_in_another_order_keep_their_own_order() -> None:
    # `int | str == str | int` (and they hash alike), so a cache keyed by the type alone handed one the other's codec.
    assert decode_error(datetime | int, "x") == "expected RFC 3339 date-time or integer"
    assert decode_error(int | datetime, "x") == "expected integer or RFC 3339 date-time"
    assert decode_error(list[str | int], [1.5]) == "[0]: expected string or integer"
    assert decode_error(list[int | str], [1.5]) == "[0]: expected integer or string"


def test_union_encodes_with_the_member_that_fits() -> None:
    assert codec_for(int | datetime).encode(datetime(2026, 1, 1, tzinfo=UTC)) == "2026-01-01T00:00:00+00:00"
    assert codec_for(int | datetime).encode(5) == 5
    assert codec_for(list[datetime] | list[str]).encode(["x"]) == ["x"]
    assert codec_for(Item | Customer).encode(Customer("c")) == {"customerId": "c", "vip": False}
    with pytest.raises(TypeError):
        codec_for(int | datetime).encode("neither")


def test_any_passes_json_through_and_encodes_typed_values_inside() -> None:
    value: Any = {"a": [1, {"b": None}], "c": 1.5}
    assert codec_for(Any).decode(value) is value
    assert codec_for(Any).encode(value) == value
    mixed: Any = {
        "item": Item("s", 2),
        "when": datetime(2026, 1, 1, tzinfo=UTC),
        "raw": b"\x01",
        "many": (Item("t"),),
        "set": {2, 1},
    }
    encoded = codec_for(Any).encode(mixed)
    assert encoded == {
        "item": {"sku": "s", "quantity": 2},
        "when": "2026-01-01T00:00:00+00:00",
        "raw": "AQ==",
        "many": [{"sku": "t", "quantity": 1}],
        "set": [1, 2],
    }
    assert codec_for(list[Any]).encode([Customer("c")]) == [{"customerId": "c", "vip": False}]


class Colour(enum.StrEnum):
    RED = "red"


class Key(str):
    """A str subclass that prints otherwise: its key is its text, not what str() makes of it."""

    def __str__(self) -> str:
        return "not the key"


def test_any_object_keys_that_are_str_subclasses_go_out_as_their_text() -> None:
    # orjson writes only exact str keys: a StrEnum key failed the whole response.
    value: Any = {Colour.RED: 1, "plain": {Key("k"): [{Colour.RED: Key("v")}]}}
    assert orjson.dumps(codec_for(Any).encode(value)) == b'{"red":1,"plain":{"k":[{"red":"v"}]}}'
    assert orjson.dumps(codec_for(dict[str, Any]).encode({"m": {Colour.RED: True}})) == b'{"m":{"red":true}}'


@pytest.mark.parametrize("key", [1, 1.5, None, (1, 2)])
def test_any_object_keys_that_are_not_text_are_no_json(key: Any) -> None:
    # JSON object keys are text; an `any` value is JSON as it is, so another key is not quietly made into one.
    value: Any = {"outer": {key: 1}}
    with pytest.raises(TypeError):
        orjson.dumps(codec_for(Any).encode(value))


# ---------------------------------------------------------------------------------------------------
# Records


def test_record_decodes_with_wire_names_defaults_and_nesting() -> None:
    order = codec_for(PlaceOrder).decode({**PLACE, "unknownKey": 1})
    assert order == PlaceOrder(
        order_id="o-1",
        customer=Customer("c-1"),
        items=[Item("a", 2), Item("b", 1)],
        placed_at=datetime(2026, 11, 22, 10, 0, 0, 250000, tzinfo=timezone(timedelta(hours=2))),
    )
    assert (order.note, order.tags, order.external_ref) == (None, {}, "none")


def test_record_encodes_with_wire_names() -> None:
    order = codec_for(PlaceOrder).decode({**PLACE, "tags": {"x": 1}, "ext-ref": "r-9", "note": "hi"})
    assert codec_for(PlaceOrder).encode(order) == {
        "orderId": "o-1",
        "customer": {"customerId": "c-1", "vip": False},
        "items": [{"sku": "a", "quantity": 2}, {"sku": "b", "quantity": 1}],
        "placedAt": "2026-11-22T10:00:00.250000+02:00",
        "note": "hi",
        "tags": {"x": 1},
        "ext-ref": "r-9",
    }


def test_default_factory_is_called_per_decode() -> None:
    first = codec_for(PlaceOrder).decode(PLACE)
    second = codec_for(PlaceOrder).decode(PLACE)
    first.tags["k"] = 1
    assert second.tags == {}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"items": [{"sku": "a"}, {"sku": "b"}, {"sku": "c", "quantity": "two"}]},
            "items[2].quantity: expected integer",
        ),
        ({"items": [{"sku": "a"}, {"quantity": 1}]}, "items[1].sku: required"),
        ({"items": [{"sku": "a"}, 7]}, "items[1]: expected object"),
        ({"items": {"sku": "a"}}, "items: expected array"),
        ({"customer": "c-1"}, "customer: expected object"),
        ({"customer": {"customerId": "c", "vip": 1}}, "customer.vip: expected boolean"),
        ({"orderId": None}, "orderId: expected string"),
        ({"note": 5}, "note: expected string"),
        ({"placedAt": "2026-11-22T10:00:00"}, "placedAt: expected RFC 3339 date-time with offset"),
        ({"tags": {"some key": True}}, 'tags["some key"]: expected integer'),
        ({"tags": {"someKey": "1"}}, "tags.someKey: expected integer"),
        ({"ext-ref": 1}, '["ext-ref"]: expected string'),
        # A default does not make null acceptable: the field is not nullable.
        ({"tags": None}, "tags: expected object"),
    ],
)
def test_record_error_paths(change: dict[str, Any], message: str) -> None:
    assert decode_error(PlaceOrder, {**PLACE, **change}) == message


def test_missing_required_field_and_non_object() -> None:
    without = {k: v for k, v in PLACE.items() if k != "placedAt"}
    assert decode_error(PlaceOrder, without) == "placedAt: required"
    assert decode_error(PlaceOrder, {}) == "orderId: required; customer: required; items: required; placedAt: required"
    assert decode_error(PlaceOrder, [PLACE]) == "expected object"
    assert decode_error(PlaceOrder, None) == "expected object"
    assert decode_error(list[PlaceOrder], [PLACE, {**PLACE, "orderId": 1}]) == "[1].orderId: expected string"


def test_frozen_slots_kw_only_record() -> None:
    codec = codec_for(FrozenPoint)
    assert codec.decode({"x": 1}) == FrozenPoint(x=1, y=0)
    assert codec.encode(FrozenPoint(x=1, y=2)) == {"x": 1, "y": 2}
    assert codec_for(set[FrozenPoint]).decode([{"x": 1}, {"x": 1}]) == {FrozenPoint(x=1)}


def test_post_init_refusal_is_a_decode_error_without_its_text() -> None:
    assert codec_for(Positive).decode({"value": 1}) == Positive(1)
    message = decode_error(list[Positive], [{"value": 1}, {"value": 0}])
    assert message == "[1]: rejected by Positive"
    assert "secret" not in message


def test_recursive_record() -> None:
    tree = {"name": "root", "children": [{"name": "a", "children": [{"name": "a1"}]}, {"name": "b"}]}
    node = codec_for(Node).decode(tree)
    assert node == Node("root", [Node("a", [Node("a1")]), Node("b")])
    assert codec_for(Node).encode(node) == {
        "name": "root",
        "children": [
            {"name": "a", "children": [{"name": "a1", "children": [], "parent": None}], "parent": None},
            {"name": "b", "children": [], "parent": None},
        ],
        "parent": None,
    }
    bad = {"name": "root", "children": [{"name": "a", "children": [{"name": "a1"}, {"name": 2}]}]}
    assert decode_error(Node, bad) == "children[0].children[1].name: expected string"
    assert decode_error(Node, {"name": "x", "parent": {"name": "p", "parent": {}}}) == "parent.parent.name: required"


def test_mutually_recursive_records() -> None:
    value = {"pong": {"ping": {"pong": {"ping": {"pong": None}}}}}
    ping = codec_for(Ping).decode(value)
    assert ping == Ping(Pong(Ping(Pong(Ping(None)))))
    assert codec_for(Ping).encode(ping) == value
    assert codec_for(Pong).decode({"ping": {"pong": None}}) == Pong(Ping(None))
    assert decode_error(Ping, {"pong": {"ping": {"pong": {"ping": 3}}}}) == "pong.ping.pong.ping: expected object"


def test_codec_is_compiled_once_and_does_no_reflection_per_call(monkeypatch: pytest.MonkeyPatch) -> None:
    codec = codec_for(PlaceOrder)
    assert codec_for(PlaceOrder) is codec
    order = codec.decode(PLACE)

    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("reflection on the request path")

    monkeypatch.setattr(dataclasses, "fields", forbidden)
    monkeypatch.setattr(typing, "get_type_hints", forbidden)
    monkeypatch.setattr(typing, "get_origin", forbidden)
    assert codec.decode(PLACE) == order
    assert codec.encode(order)["orderId"] == "o-1"
    assert codec_for(Node).decode({"name": "n", "children": [{"name": "c"}]}) == Node("n", [Node("c")])


# ---------------------------------------------------------------------------------------------------
# Text fields (HTTP path and query)


def text_fields(fields: TextFields, tp: Any = Query) -> dict[str, Any]:
    return codec_for(tp).decode_text_fields(fields)


def text_error(fields: TextFields, tp: Any = Query) -> str:
    with pytest.raises(DecodeError) as info:
        codec_for(tp).decode_text_fields(fields)
    return str(info.value)


def test_text_fields_convert_to_the_field_types() -> None:
    converted = text_fields(
        {
            "orderId": "42",
            "limit": "42",
            "ratio": "2.5",
            "verbose": "true",
            "since": "2026-01-01T00:00:00Z",
            "blob": "AQ==",
            "extra": "7",
        }
    )
    assert converted == {
        "orderId": "42",
        "limit": 42,
        "ratio": 2.5,
        "verbose": True,
        "since": "2026-01-01T00:00:00Z",
        "blob": "AQ==",
        "extra": "7",
    }
    query = codec_for(Query).decode({**converted})
    assert query == Query("42", 42, 2.5, True, since=datetime(2026, 1, 1, tzinfo=UTC), blob=b"\x01")


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"limit": "-7"}, {"limit": -7}),
        ({"ratio": "3"}, {"ratio": 3}),
        ({"ratio": "-1.5e3"}, {"ratio": -1500.0}),
        # As a JSON body reads it: an integer within 64 bits stays one, past them it is a float.
        ({"ratio": "18446744073709551615"}, {"ratio": 18446744073709551615}),
        ({"ratio": "-9223372036854775808"}, {"ratio": -9223372036854775808}),
        ({"ratio": "18446744073709551616"}, {"ratio": 1.8446744073709552e19}),
        ({"ratio": "-" + "9" * 25}, {"ratio": -1e25}),
        ({"verbose": "false"}, {"verbose": False}),
        ({"cursor": ""}, {"cursor": None}),
        ({"cursor": "null"}, {"cursor": None}),
        ({"cursor": "5"}, {"cursor": 5}),
        ({"since": ""}, {"since": None}),
        ({"label": "null"}, {"label": "null"}),
        ({"label": ""}, {"label": ""}),
        ({"ids": "1,2,3"}, {"ids": [1, 2, 3]}),
        ({"ids": ""}, {"ids": []}),
        ({"filters": '{"a": "b"}'}, {"filters": {"a": "b"}}),
        ({"either": "4"}, {"either": 4}),
        ({"either": "true"}, {"either": True}),
        ({"anything": "[1]"}, {"anything": "[1]"}),
    ],
)
def test_text_field_conversions(fields: dict[str, str], expected: dict[str, Any]) -> None:
    assert text_fields(fields) == expected


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"limit": "4.2"}, "limit: expected integer"),
        ({"limit": "abc"}, "limit: expected integer"),
        ({"limit": " 4"}, "limit: expected integer"),
        ({"limit": "4_000"}, "limit: expected integer"),
        ({"limit": ""}, "limit: expected integer"),
        ({"ratio": "nan"}, "ratio: expected number"),
        ({"ratio": "1e999"}, "ratio: expected number"),
        ({"ratio": "9" * 5000}, "ratio: expected number"),  # past int()'s 4300 digits: was a ValueError
        ({"verbose": "True"}, "verbose: expected boolean"),
        ({"verbose": "1"}, "verbose: expected boolean"),
        ({"cursor": "x"}, "cursor: expected integer"),
        ({"ids": "1,x"}, "ids[1]: expected integer"),
        ({"filters": "{nope"}, "filters: expected JSON object"),
        ({"either": "maybe"}, "either: expected integer or boolean"),
    ],
)
def test_text_field_errors_name_the_field(fields: dict[str, str], message: str) -> None:
    assert text_error(fields) == message


@dataclass
class TextValued:
    data: bytes | None = None
    name: str | None = None
    either: str | int | None = None


def test_nullable_text_field_whose_type_takes_any_text_keeps_it() -> None:
    fields = {"data": "", "name": "null", "either": ""}
    assert text_fields(fields, TextValued) == fields
    assert codec_for(TextValued).decode(text_fields(fields, TextValued)) == TextValued(b"", "null", "")


def test_text_fields_of_a_non_record_are_unchanged() -> None:
    fields = {"a": "1", "b": "true"}
    assert text_fields(fields, dict[str, Any]) == {"a": "1", "b": "true"}
    assert text_fields(fields, list[int]) == fields


def test_text_fields_of_a_record_with_nested_fields() -> None:
    converted = text_fields({"customer": '{"customerId": "c"}', "items": '[{"sku": "s"}]'}, PlaceOrder)
    assert converted == {"customer": {"customerId": "c"}, "items": [{"sku": "s"}]}
    assert text_error({"items": "sku"}, PlaceOrder) == "items: expected JSON array"


@dataclass
class Repeatable:
    names: list[str] | None = None
    tags: set[str] = field(default_factory=set)


def test_a_list_field_given_several_times_takes_every_value() -> None:
    # Each value is read as one value is (comma-separated, "" empty), the items in the order given.
    assert text_fields({"ids": ("1,2", "", "3")}) == {"ids": [1, 2, 3]}
    assert text_error({"ids": ("1", "2,x")}) == "ids[2]: expected integer"
    assert text_fields({"names": ("a", "b"), "tags": ("x", "x,y")}, Repeatable) == {
        "names": ["a", "b"],
        "tags": ["x", "x", "y"],
    }
    assert codec_for(Query).decode({"orderId": "o", "limit": 1, "ratio": 1, "verbose": True,
                                    **text_fields({"ids": ("4", "5")})}).ids == [4, 5]


@pytest.mark.parametrize("name", ["limit", "orderId", "cursor", "label", "anything", "either", "filters", "since"])
def test_a_field_of_one_value_given_several_times_is_refused_by_name(name: str) -> None:
    with pytest.raises(RepeatedField) as info:
        text_fields({"limit": "1", name: ("1", "2")})
    assert str(info.value) == f"query parameter {name!r} is given 2 times; it takes one value"
    assert not isinstance(info.value, DecodeError)  # a bad request, not values that do not fit


def test_a_name_given_several_times_that_is_no_field_keeps_its_values() -> None:
    assert text_fields({"utm": ("a", "b")}) == {"utm": ["a", "b"]}
    assert text_fields({"a": ("1", "2")}, dict[str, Any]) == {"a": ["1", "2"]}


# ---------------------------------------------------------------------------------------------------
# Property: random record types and values round-trip, and the encoded value fits the derived schema

TypeAndValues = tuple[Any, st.SearchStrategy[Any]]

_names = itertools.count()
_text = st.text(st.characters(codec="utf-8"), max_size=8)

SCALARS: list[TypeAndValues] = [
    (str, _text),
    (int, st.integers(-(2**63), 2**63 - 1)),
    (float, st.floats(allow_nan=False, allow_infinity=False)),
    (bool, st.booleans()),
    (datetime, _datetimes),
    (bytes, st.binary(max_size=8)),
]


def _nullable(child: TypeAndValues) -> TypeAndValues:
    return child[0] | None, st.none() | child[1]


def _list(child: TypeAndValues) -> TypeAndValues:
    return list[child[0]], st.lists(child[1], max_size=3)  # type: ignore[valid-type]


def _tuple(child: TypeAndValues) -> TypeAndValues:
    return tuple[child[0], ...], st.lists(child[1], max_size=3).map(tuple)  # type: ignore[valid-type]


def _map(child: TypeAndValues) -> TypeAndValues:
    return dict[str, child[0]], st.dictionaries(_text, child[1], max_size=3)  # type: ignore[valid-type]


def _set(scalar: TypeAndValues) -> TypeAndValues:
    return set[scalar[0]], st.sets(scalar[1], max_size=3)  # type: ignore[valid-type]


def _frozenset(scalar: TypeAndValues) -> TypeAndValues:
    return frozenset[scalar[0]], st.frozensets(scalar[1], max_size=3)  # type: ignore[valid-type]


@st.composite
def records(draw: st.DrawFn, children: st.SearchStrategy[TypeAndValues]) -> TypeAndValues:
    """A fresh dataclass with random fields, some defaulted, some with a wire-name override."""
    members = draw(st.lists(children, max_size=4))
    required: list[Any] = []
    defaulted: list[Any] = []
    strategies: dict[str, st.SearchStrategy[Any]] = {}
    for index, (tp, values) in enumerate(members):
        attr = f"field_{index}_value"
        metadata = {"wire": f"w {index}"} if draw(st.booleans()) else {}
        strategies[attr] = values
        if draw(st.booleans()):
            default = draw(values)
            try:
                hash(default)
                spec = field(default=default, metadata=metadata)
            except TypeError:
                spec = field(default_factory=functools.partial(copy.deepcopy, default), metadata=metadata)
            defaulted.append((attr, tp, spec))
        else:
            required.append((attr, tp, field(metadata=metadata)))
    cls = dataclasses.make_dataclass(f"Random{next(_names)}", required + defaulted)
    return cls, st.builds(cls, **strategies)


def _extend(children: st.SearchStrategy[TypeAndValues]) -> st.SearchStrategy[TypeAndValues]:
    scalars = st.sampled_from(SCALARS)
    return st.one_of(
        children.map(_nullable),
        children.map(_list),
        children.map(_tuple),
        children.map(_map),
        scalars.map(_set),
        scalars.map(_frozenset),
        records(children),
    )


field_types = st.recursive(st.sampled_from(SCALARS), _extend, max_leaves=6)


@st.composite
def record_values(draw: st.DrawFn) -> tuple[Any, Any]:
    cls, values = draw(records(field_types))
    return cls, draw(values)


def _missing_defaults(cls: Any) -> dict[str, Any]:
    defaults = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            defaults[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            defaults[f.name] = f.default_factory()
    return defaults


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record_values())
def test_random_records_round_trip_and_fit_their_schema(case: tuple[Any, Any]) -> None:
    cls, value = case
    codec = codec_for(cls)
    encoded = codec.encode(value)
    as_json = orjson.loads(orjson.dumps(encoded))
    assert as_json == encoded
    assert codec.decode(as_json) == value
    Draft202012Validator(schema_of(cls), format_checker=Draft202012Validator.FORMAT_CHECKER).validate(as_json)

    # Leaving out every field that has a default gives the defaults.
    defaults = _missing_defaults(cls)
    wire_of = {f.name: f.metadata.get("wire") or snake_to_camel(f.name) for f in dataclasses.fields(cls)}
    trimmed = {key: item for key, item in as_json.items() if key not in {wire_of[name] for name in defaults}}
    assert codec.decode(trimmed) == dataclasses.replace(value, **defaults)


@dataclass
class _Bounded:
    name: typing.Annotated[str, Meta(min_length=1, max_length=3)] | None = None
    share: typing.Annotated[float, Meta(minimum=0, maximum=1.5)] | None = None


@pytest.mark.parametrize(
    ("body", "violation"),
    [
        ({"name": "abc", "share": 1.5}, None),
        ({"name": "a", "share": 0}, None),
        ({"name": None, "share": None}, None),
        ({"name": ""}, ["name", "expected at least 1 character"]),
        ({"name": "abcd"}, ["name", "expected at most 3 characters"]),
        ({"name": 7}, ["name", "expected string"]),
        ({"share": -0.5}, ["share", "expected at least 0"]),
        ({"share": 2.0}, ["share", "expected at most 1.5"]),
        ({"share": float("inf")}, ["share", "expected number"]),
        ({"share": float("nan")}, ["share", "expected number"]),
        ({"share": True}, ["share", "expected number"]),
    ],
)
def test_bounded_text_and_numbers_checked_inline_decide_as_the_full_decoder(body: Any, violation: Any) -> None:
    # Length and range bounds are checked inline in a record's decoder; a miss goes to the full decoder.
    codec = codec_for(_Bounded)
    if violation is None:
        assert codec.decode(body) == _Bounded(body.get("name"), None if body.get("share") is None else body["share"])
        return
    with pytest.raises(DecodeError) as info:
        codec.decode(body)
    assert info.value.violations == [violation]


@dataclasses.dataclass
class _WithInitVar:
    first: int
    scale: dataclasses.InitVar[int] = 1
    last: int = 0

    def __post_init__(self, scale: int) -> None:
        self.first *= scale


@dataclasses.dataclass(kw_only=True)
class _KeywordOnly:
    first: int
    last: int = 0


@dataclasses.dataclass
class _Plain:
    first: int
    last: int = 0


@pytest.mark.parametrize("cls", [_WithInitVar, _KeywordOnly, _Plain])
def test_each_decoded_value_lands_in_its_own_field_however_the_constructor_takes_them(cls: type) -> None:
    decoded: Any = codec_for(cls).decode({"first": 5, "last": 7})
    assert (decoded.first, decoded.last) == (5, 7)


# ---------------------------------------------------------------------------------------------------
# Writing from rows of values, many in one call, by the record's own rule


@dataclass
class _Stamped:
    __svcgen_meta__: typing.ClassVar[Meta] = Meta(omit_null=True, utc_millis=True)
    name_text: str
    at: datetime | None = None
    count: int | None = None
    tags: list[str] = field(default_factory=list)


@dataclass
class _One:
    only_field: int


@dataclass
class _Nothing:
    pass


@pytest.mark.parametrize("rows", [
    [("a", datetime(2026, 11, 27, 1, 2, 3, 456000, tzinfo=UTC), 3, ["x"]), ("b", None, None, []), ("c", None, 0, [])],
    [],
])
def test_rows_are_written_as_the_record_would_be(rows: list[tuple[Any, ...]]) -> None:
    expected = [codec_for(_Stamped).encode(_Stamped(*row)) for row in rows]
    assert rows_encoder(_Stamped)(rows) == expected
    assert all("at" not in entry for entry, row in zip(expected, rows, strict=True) if row[1] is None)
    if rows:
        assert expected[0]["at"] == "2026-11-27T01:02:03.456Z"
        # Epoch seconds, as the mesh's clocks read them, write the same time.
        assert rows_encoder(_Stamped)([("a", rows[0][1].timestamp(), 3, ["x"])]) == expected[:1]


def test_records_of_one_field_or_none_are_written_from_rows_too() -> None:
    assert rows_encoder(_One)([(1,), (2,)]) == [{"onlyField": 1}, {"onlyField": 2}]
    assert rows_encoder(_Nothing)([(), ()]) == [{}, {}]


Code = typing.Annotated[str, Meta(min_length=2, max_length=6, pattern="^[a-z]+-[0-9]$")]


@dataclass
class _Coded:
    code: Code
    maybe: Code | None = None
    many: list[Code] = field(default_factory=list)


@pytest.mark.parametrize("value", ["ab-1", "a-1", "ab-12", "AB-1", "ab-1\x00", "abcde-1", "", 7, None, ["ab-1"]])
def test_text_with_a_pattern_is_decided_inline_as_the_schema_decides_it_in_a_field_an_optional_and_a_list(
    value: Any,
) -> None:
    decode = codec_for(_Coded).decode
    validator = Draft202012Validator(schema_of(_Coded))
    documents: list[dict[str, Any]] = [{"code": value}, {"code": "ab-1", "maybe": value},
                                       {"code": "ab-1", "many": ["ab-1", value]}]  # fmt: skip
    for document in documents:
        valid = validator.is_valid(document)
        try:
            decoded = decode(document)
        except DecodeError as exc:
            assert not valid, (document, str(exc))
            assert any(word in str(exc) for word in ("matching", "character", "string")), str(exc)
        else:
            assert valid, document
            assert decoded == _Coded(**{key: document[key] for key in document})
