"""Values at the wire's edges, decided per JSON text and per path byte: signed 64-bit integers both ways, float
literals are not integers, and a path or query that is not UTF-8 is refused, never silently replaced."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import json
import math
from collections.abc import Callable
from typing import Any

import pytest

from svcgen.runtime import Context, Identity, Registry, Result, Service, create_app
from svcgen.runtime._http.sender import payload_bytes
from tests.support.asgi import raw_request

from .test_app import make_app

APP = make_app()


def place(quantities: str) -> tuple[int, Any]:
    """POST /orders with items whose quantities are the given JSON number texts, written as they are."""
    items = ", ".join(f'{{"sku": "a", "quantity": {text}}}' for text in quantities.split())
    body = f'{{"customerId": "c", "items": [{items}], "placedAt": "2026-11-22T10:00:00Z"}}'.encode()
    status, _, payload = asyncio.run(raw_request(APP, "POST", b"/orders", b"", [], body))
    return status, json.loads(payload)


@pytest.mark.parametrize(
    ("text", "detail"),
    [
        ("-9223372036854775809", "items[0].quantity: integer out of range (signed 64-bit)"),
        ("9223372036854775808", "items[0].quantity: integer out of range (signed 64-bit)"),
        ("18446744073709551615", "items[0].quantity: integer out of range (signed 64-bit)"),
        ("123456789012345678901234567890", "items[0].quantity: integer out of range (signed 64-bit)"),
        ("1e19", "items[0].quantity: integer out of range (signed 64-bit)"),
        ("1.0e3", "items[0].quantity: expected integer"),
        ("3.0", "items[0].quantity: expected integer"),
    ],
)
def test_integers_outside_signed_64_bits_and_float_literals_are_refused(text: str, detail: str) -> None:
    path, _, message = detail.partition(": ")
    errors = [{"path": path, "message": message}]
    assert place(text) == (422, {"status": "validation-error", "detail": detail, "errors": errors})


def test_the_signed_64_bit_extremes_are_taken_exactly() -> None:
    assert place("9223372036854775807") == (201, {"orderId": "o-1", "customerId": "c", "totalItems": 2**63 - 1})
    assert place("-9223372036854775808") == (201, {"orderId": "o-1", "customerId": "c", "totalItems": -(2**63)})


def test_a_response_integer_outside_signed_64_bits_is_a_clear_failure_not_an_altered_number() -> None:
    # The handler sums the quantities: 2**63 - 1 + 1 does not fit the response's integer field.
    assert place("9223372036854775807 1") == (500, {
        "status": "unexpected-error",
        "detail": "orders:place produced a response that does not fit its type (OverflowError)",
    })  # fmt: skip


@dataclasses.dataclass
class Numbers:
    """A response of number fields: required, nullable and a list."""

    value: float
    spread: float | None = None
    samples: list[float] = dataclasses.field(default_factory=list)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_response_number_that_is_not_finite_is_a_clear_failure_not_a_null(value: float) -> None:
    # orjson writes nan and the infinities as null: a required number field would answer null.
    async def ratio(request: None, context: Context) -> Result[Numbers]:
        where = context.headers.get("x-where", "value")
        return Result.ok(Numbers(value if where == "value" else 1.0, value if where == "spread" else None,
                               [value] if where == "samples" else []))  # fmt: skip

    answer = one_topic_get("stats:ratio", ratio, "x-where")
    for where in ("value", "spread", "samples"):
        assert answer(where) == (500, {
            "status": "unexpected-error",
            "detail": "stats:ratio produced a response that does not fit its type (ValueError)",
        }), where  # fmt: skip


@pytest.mark.parametrize("path", [b"/orders/%ff", b"/orders/%C3%28", b"/orders/\xff", b"/orders/a%ED%A0%80"])
def test_a_path_that_is_not_utf8_is_a_bad_request(path: bytes) -> None:
    status, _, payload = asyncio.run(raw_request(APP, "GET", path, b"", [], b""))
    assert (status, json.loads(payload)) == (400, {"status": "bad-request", "detail": "path is not valid UTF-8"})


def test_a_query_that_is_not_utf8_is_a_bad_request() -> None:
    status, _, payload = asyncio.run(raw_request(APP, "GET", b"/orders/o-1", b"verbose=%ff", [], b""))
    assert (status, json.loads(payload)) == (400, {"status": "bad-request", "detail": "query is not valid UTF-8"})


def test_utf8_in_a_path_is_decoded() -> None:
    status, _, payload = asyncio.run(raw_request(APP, "GET", b"/orders/z%C3%BCrich", b"", [], b""))
    assert (status, json.loads(payload)["orderId"]) == (200, "zürich")
    status, _, payload = asyncio.run(raw_request(APP, "GET", "/orders/zürich".encode(), b"", [], b""))
    assert (status, json.loads(payload)["orderId"]) == (200, "zürich")


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_number_that_is_not_finite_inside_an_any_value_fails_as_a_typed_number_does(value: float) -> None:
    # The same rule as a typed number field: never a null the handler did not return.
    @dataclasses.dataclass
    class Report:
        data: Any
        extras: dict[str, Any] = dataclasses.field(default_factory=dict)

    shapes: dict[str, Any] = {
        "bare": lambda: Report(value),
        "nested": lambda: Report({"series": [1.0, {"point": value}]}),
        "map": lambda: Report(None, {"ratio": value}),
    }

    async def report(request: None, context: Context) -> Result[Report]:
        return Result.ok(shapes[context.headers["x-where"]]())

    registry = Registry()
    registry.add("stats:report", report)
    app = create_app(Service(Identity("stats"), registry), ["GET /report -> stats:report"])
    for where in shapes:
        status, _, payload = asyncio.run(raw_request(app, "GET", b"/report", b"", [(b"x-where", where.encode())], b""))
        assert (status, json.loads(payload)) == (500, {
            "status": "unexpected-error",
            "detail": "stats:report produced a response that does not fit its type (ValueError)",
        }), where  # fmt: skip
    shapes["nested"] = lambda: Report({"series": [1.5, {"point": 2.5}]}, {"n": 3})
    status, _, payload = asyncio.run(raw_request(app, "GET", b"/report", b"", [(b"x-where", b"nested")], b""))
    assert (status, json.loads(payload)) == (200, {"data": {"series": [1.5, {"point": 2.5}]}, "extras": {"n": 3}})


@dataclasses.dataclass
class Find:
    q: str
    limit: int = 10
    tags: list[str] = dataclasses.field(default_factory=list)
    sizes: list[int] = dataclasses.field(default_factory=list)


async def find(request: Find, context: Context) -> Result[Find]:
    return Result.ok(request)


def test_a_query_parameter_given_several_times_goes_to_a_list_field_or_is_refused() -> None:
    registry = Registry()
    registry.add("shop:find", find)
    app = create_app(Service(Identity("shop"), registry), ["GET /find/{q} -> shop:find"])

    def get(query: bytes) -> tuple[int, Any]:
        status, _, payload = asyncio.run(raw_request(app, "GET", b"/find/x", query, [], b""))
        return status, json.loads(payload)

    every = {"q": "x", "limit": 10, "tags": ["a", "b", "c"], "sizes": [1, 2]}
    assert get(b"tags=a&tags=b,c&sizes=1&sizes=2") == (200, every)
    assert get(b"tags=a&limit=1&limit=2") == (400, {
        "status": "bad-request", "detail": "query parameter 'limit' is given 2 times; it takes one value"})  # fmt: skip
    # The path's field is the path's, whatever the query says (path, then query, then body).
    assert get(b"q=y&q=z&tags=a")[1]["q"] == "x"
    errors = [{"path": "sizes[1]", "message": "expected integer"}]
    assert get(b"sizes=1&sizes=x") == (422, {"status": "validation-error", "detail": "sizes[1]: expected integer",
                                             "errors": errors})  # fmt: skip


def one_topic_get(topic: str, handler: Any, header: str) -> Callable[[str], tuple[int, Any]]:
    """GET of a service with `handler` on `GET /<name>`: given the text of `header`, its (status, JSON body)."""
    registry = Registry()
    registry.add(topic, handler)
    path = "/" + topic.partition(":")[2]
    app = create_app(Service(Identity(topic.partition(":")[0]), registry), [f"GET {path} -> {topic}"])

    def answer(text: str) -> tuple[int, Any]:
        status, _, payload = asyncio.run(raw_request(app, "GET", path.encode(), b"", [(header.encode(), text.encode())],
                                                     b""))  # fmt: skip
        return status, json.loads(payload)

    return answer


class Ratio(float):
    """A float subclass, as numpy.float64 is one."""


class Count(int):
    pass


class Label(str):
    pass


class Shade(enum.StrEnum):
    DARK = "dark"


def test_a_subclass_of_a_json_scalar_inside_an_any_value_goes_out_as_its_base_type() -> None:
    # A handler's numbers often come from numpy (numpy.float64 is a float subclass): its value, by the number rule.
    @dataclasses.dataclass
    class Report:
        data: Any

    shapes: dict[str, Any] = {
        "bare": lambda: Report(Ratio(0.25)),
        "nested": lambda: Report({"series": [Ratio(1.5), {"n": Count(3), "label": Label("x"), "shade": Shade.DARK}]}),
        "not finite": lambda: Report([Ratio(math.nan)]),
        "infinite": lambda: Report({"r": Ratio(math.inf)}),
    }

    async def report(request: None, context: Context) -> Result[Report]:
        return Result.ok(shapes[context.headers["x-where"]]())

    answer = one_topic_get("stats:report", report, "x-where")

    assert answer("bare") == (200, {"data": 0.25})
    assert answer("nested") == (200, {"data": {"series": [1.5, {"n": 3, "label": "x", "shade": "dark"}]}})
    for where in ("not finite", "infinite"):  # the number rule holds for the subclass too
        assert answer(where) == (500, {
            "status": "unexpected-error",
            "detail": "stats:report produced a response that does not fit its type (ValueError)",
        }), where  # fmt: skip


def test_an_object_key_that_is_a_str_subclass_inside_an_any_value_goes_out_as_its_text() -> None:
    # Counts by a StrEnum (a common handler shape) failed the response: orjson writes only exact str keys.
    @dataclasses.dataclass
    class Report:
        data: Any

    shapes: dict[str, Any] = {
        "enum keys": lambda: Report({Shade.DARK: 2, "light": 1}),
        "nested": lambda: Report([{"by": {Label("x"): {Shade.DARK: Count(1)}}}]),
        "int keys": lambda: Report({1: "one"}),
    }

    async def report(request: None, context: Context) -> Result[Report]:
        return Result.ok(shapes[context.headers["x-where"]]())

    answer = one_topic_get("stats:report", report, "x-where")

    assert answer("enum keys") == (200, {"data": {"dark": 2, "light": 1}})
    assert answer("nested") == (200, {"data": [{"by": {"x": {"dark": 1}}}]})
    # JSON keys are text and an `any` value is JSON as it is: an int key is not quietly made into one.
    assert answer("int keys") == (500, {
        "status": "unexpected-error",
        "detail": "stats:report produced a response that does not fit its type (TypeError)",
    })  # fmt: skip


def test_a_float_subclass_in_a_typed_number_field_goes_out_as_its_value() -> None:
    # numpy.float64 in a `float` field failed the response: orjson writes no float subclass by itself.
    async def summary(request: None, context: Context) -> Result[Numbers]:
        value = Ratio(float(context.headers["x-value"]))
        return Result.ok(Numbers(value, value, [value, Ratio(2.0)]))

    answer = one_topic_get("stats:summary", summary, "x-value")

    assert answer("0.5") == (200, {"value": 0.5, "spread": 0.5, "samples": [0.5, 2.0]})
    assert answer("nan") == (500, {
        "status": "unexpected-error",
        "detail": "stats:summary produced a response that does not fit its type (ValueError)",
    })  # fmt: skip
    # An outbound request body goes by the same rule.
    assert payload_bytes({"mean": Ratio(0.5)}) == b'{"mean":0.5}'
