"""The contract language at run time: `Meta` constraints, formats, enums and closed records, enforced by the codec
with every violation in one error, and published by the schema deriver under the JSON Schema names."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar

import pytest

from svcgen.runtime import Codec, DecodeError, Meta, codec_for
from svcgen.runtime._schema import schema_of


class Country(enum.StrEnum):
    """Where it ships."""

    DE = "DE"
    FR = "FR"
    NL = "NL"


@dataclass(kw_only=True)
class Line:
    sku: Annotated[str, Meta(min_length=1)]
    quantity: Annotated[int, Meta(minimum=1, maximum=1000)] = 1


@dataclass(kw_only=True)
class Order:
    """What a customer sends."""

    __svcgen_meta__: ClassVar[Meta] = Meta(closed=True)

    customer_id: Annotated[str, Meta(min_length=1, max_length=8, pattern="^c-[0-9]+$")]
    email: Annotated[str, Meta(format="email", description="Where receipts go")]
    items: Annotated[list[Line], Meta(min_items=1, max_items=3)]
    country: Country = Country.DE
    price: Annotated[float, Meta(exclusive_minimum=0, exclusive_maximum=100, multiple_of=0.5)] = 1.0
    note: Annotated[str | None, Meta(min_length=2, deprecated=True)] = None
    tags: Annotated[set[str], Meta(max_items=2)] = field(default_factory=set)


VALID = {"customerId": "c-1", "email": "a@b.de", "items": [{"sku": "x"}]}


def violations(codec: Codec[Any], value: Any) -> str:
    with pytest.raises(DecodeError) as caught:
        codec.decode(value)
    return str(caught.value)


def test_a_valid_value_decodes_to_members_and_defaults() -> None:
    order = codec_for(Order).decode({**VALID, "country": "FR", "note": None})
    assert order.country is Country.FR and order.items == [Line(sku="x", quantity=1)] and order.price == 1.0


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"customerId": ""}, "customerId: expected at least 1 character"),
        ({"customerId": "c-123456789"}, "customerId: expected at most 8 characters"),
        ({"customerId": "x-1"}, "customerId: expected text matching ^c-[0-9]+$"),
        ({"email": "nope"}, "email: expected an email address"),
        ({"items": []}, "items: expected at least 1 item"),
        ({"items": [{"sku": "a"}] * 4}, "items: expected at most 3 items"),
        ({"items": [{"sku": "a", "quantity": 0}]}, "items[0].quantity: expected at least 1"),
        ({"items": [{"sku": "a", "quantity": 1001}]}, "items[0].quantity: expected at most 1000"),
        ({"country": "US"}, "country: expected one of DE, FR, NL"),
        ({"country": 1}, "country: expected one of DE, FR, NL"),
        ({"price": 0}, "price: expected more than 0"),
        ({"price": 100}, "price: expected less than 100"),
        ({"price": 1.25}, "price: expected a multiple of 0.5"),
        ({"note": "x"}, "note: expected at least 2 characters"),
        ({"tags": ["a", "a", "b"]}, "tags: expected at most 2 items"),  # counted as sent, before the set
        ({"extra": 1}, "extra: unexpected property"),
    ],
)
def test_each_keyword_is_enforced(change: dict[str, Any], expected: str) -> None:
    assert violations(codec_for(Order), {**VALID, **change}) == expected


def test_one_error_lists_every_violation_in_field_order() -> None:
    value = {"customerId": "", "email": "nope", "items": [{"quantity": 0}, {"sku": ""}], "country": "US", "x": 1}
    assert violations(codec_for(Order), value) == (
        "customerId: expected at least 1 character; email: expected an email address; items[0].sku: required; "
        "items[0].quantity: expected at least 1; items[1].sku: expected at least 1 character; "
        "country: expected one of DE, FR, NL; x: unexpected property"
    )


def test_missing_required_fields_are_all_listed() -> None:
    assert violations(codec_for(Order), {}) == "customerId: required; email: required; items: required"


def test_the_list_stops_at_twenty_and_counts_the_rest() -> None:
    @dataclass
    class Many:
        values: list[Annotated[int, Meta(minimum=0)]]

    error = violations(codec_for(Many), {"values": [-1] * 25})
    assert error.count("expected at least 0") == 20 and error.endswith("; and 5 more")
    with pytest.raises(DecodeError) as caught:
        codec_for(Many).decode({"values": [-1] * 25})
    assert len(caught.value.violations) == 25 and caught.value.path == "values[0]"


@pytest.mark.parametrize(
    ("form", "good", "bad"),
    [
        ("email", ["a@b.de", "first.last+tag@sub.example.org"], ["a@b", "@b.de", "a b@c.de", "a@@b.de", "a"]),
        ("uuid", ["123e4567-e89b-12d3-a456-426614174000"], ["123e4567e89b12d3a456426614174000", "x", ""]),
        ("uri", ["https://example.org/a?b#c", "urn:isbn:0451450523"], ["/relative", "no scheme", "http://a b", ""]),
        ("date", ["2024-02-29"], ["2023-02-29", "2024-1-01", "2024-01-01T00:00:00Z", "٢٠٢٤-٠١-٠١"]),
        ("ipv4", ["192.168.0.1"], ["256.0.0.1", "01.2.3.4", "::1"]),
        ("ipv6", ["::1", "2001:db8::8a2e:370:7334"], ["fe80::1%eth0", "1.2.3.4", "gggg::"]),
    ],
)
def test_formats(form: str, good: list[str], bad: list[str]) -> None:
    codec = codec_for(Annotated[str, Meta(format=form)])
    assert [codec.decode(text) for text in good] == good
    for text in bad:
        with pytest.raises(DecodeError, match=r"^expected an? "):
            codec.decode(text)


def test_constraints_hold_for_text_fields_too() -> None:
    @dataclass
    class Query:
        page: Annotated[int, Meta(minimum=1)]
        country: Country | None = None

    codec = codec_for(Query)
    assert codec.decode(codec.decode_text_fields({"page": "2", "country": "NL"})) == Query(2, Country.NL)
    assert codec.decode(codec.decode_text_fields({"page": "2", "country": ""})) == Query(2, None)
    assert violations(codec, codec.decode_text_fields({"page": "0", "country": "XX"})) == (
        "page: expected at least 1; country: expected one of DE, FR, NL"
    )
    with pytest.raises(DecodeError, match=r"^page: expected integer; other: expected integer$"):

        @dataclass
        class Two:
            page: int
            other: int

        codec_for(Two).decode_text_fields({"page": "x", "other": "y"})


def test_enum_members_encode_as_their_wire_values() -> None:
    order = Order(customer_id="c-1", email="a@b.de", items=[Line(sku="x")], country=Country.NL)
    assert codec_for(Order).encode(order)["country"] == "NL"


def test_derived_schema_carries_the_keywords_under_json_schema_names() -> None:
    schema = schema_of(Order)
    properties = schema["properties"]
    assert properties["customerId"] == {"type": "string", "minLength": 1, "maxLength": 8, "pattern": "^c-[0-9]+$"}
    assert properties["email"] == {"type": "string", "format": "email", "description": "Where receipts go"}
    assert properties["country"] == {"type": "string", "enum": ["DE", "FR", "NL"], "description": "Where it ships."}
    assert properties["price"] == {
        "type": "number",
        "exclusiveMinimum": 0,
        "exclusiveMaximum": 100,
        "multipleOf": 0.5,
        "default": 1.0,
    }
    assert properties["note"] == {"type": ["string", "null"], "minLength": 2, "deprecated": True, "default": None}
    assert properties["tags"] == {"type": "array", "items": {"type": "string"}, "maxItems": 2, "default": []}
    assert schema["required"] == ["customerId", "email", "items"]
    assert schema["additionalProperties"] is False and schema["description"] == "What a customer sends."


def test_a_nullable_enum_admits_null_in_its_schema() -> None:
    assert schema_of(Country | None) == {
        "type": ["string", "null"],
        "enum": ["DE", "FR", "NL", None],
        "description": "Where it ships.",
    }


def test_a_field_without_contract_details_derives_the_plain_row() -> None:
    @dataclass
    class Plain:
        """Documented."""

        name: str
        count: int = 3

    assert schema_of(Plain) == {
        "type": "object",
        "properties": {"name": {"type": "string"}, "count": {"type": "integer"}},
        "required": ["name"],
        "description": "Documented.",
    }


def test_a_dataclass_without_a_docstring_has_no_description() -> None:
    @dataclass
    class Bare:
        name: str

    assert "description" not in schema_of(Bare)
