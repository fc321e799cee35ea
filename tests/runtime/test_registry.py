from typing import Any

import pytest

from svcgen.runtime import Context, HandlerBindingError, Registry, RegistryError, Result, TopicKey
from tests.support.sample import GetOrder, Order, PlaceOrder, build_registry, place_order


def test_types_are_inferred_from_annotations() -> None:
    registration = build_registry().get("orders:place", "v1")
    assert registration is not None
    assert registration.request_type is PlaceOrder
    assert registration.response_type is Order
    assert registration.summary == "Place an order"


def test_explicit_types_serve_an_unannotated_handler() -> None:
    async def handle(request, context):  # type: ignore[no-untyped-def]
        return Result.ok()

    registration = Registry().add("a:b", handle, request=GetOrder, response=dict[str, int])
    assert registration.request_type is GetOrder
    assert registration.response_type == dict[str, int]


def test_explicit_types_agreeing_with_the_annotations_bind() -> None:
    registration = Registry().add("a:b", place_order, request=PlaceOrder, response=Order, source="handlers/a_b.py")
    assert registration.request_type is PlaceOrder and registration.origin == "handlers/a_b.py"


def test_a_handler_annotated_with_other_types_is_refused_in_one_line_naming_it_and_the_expected_types() -> None:
    with pytest.raises(HandlerBindingError) as wrong_request:
        Registry().add("a:b", place_order, version="v1", request=GetOrder, response=Order, source="handlers/a_b_v1.py")
    assert str(wrong_request.value) == (
        "handlers/a_b_v1.py: place_order(request: PlaceOrder, context) -> Result[Order] cannot serve a:b (version "
        "v1), which expects place_order(request: GetOrder, context: Context) -> Result[Order]; change the handler's "
        "annotations (and code) to the manifest's types"
    )
    expected_list = r"-> Result\[Order\] cannot serve a:b, .* -> Result\[list\[Order\]\]"
    with pytest.raises(HandlerBindingError, match=expected_list):
        Registry().add("a:b", place_order, request=PlaceOrder, response=list[Order])

    def bare(request: PlaceOrder, context: Context) -> Order:
        return Order("o", "c", 0)

    with pytest.raises(HandlerBindingError, match=r"bare\(request: PlaceOrder, context\) -> Order cannot serve"):
        Registry().add("a:b", bare, request=PlaceOrder, response=Order)  # type: ignore[arg-type]


def test_a_request_annotation_wider_than_the_declared_type_binds() -> None:
    def handle(request: object, context: Context) -> Result[Any]:
        return Result.ok()

    assert Registry().add("a:b", handle, request=PlaceOrder, response=Order).request_type is PlaceOrder


def test_unannotated_handler_gets_open_types() -> None:
    registry = Registry()

    async def handle(request, context):  # type: ignore[no-untyped-def]
        return Result.ok()

    registration = registry.add("a:b", handle)
    assert registration.request_type is Any
    assert registration.request_schema == {}


def test_duplicate_pair_names_both_registrations() -> None:
    registry = Registry()
    registry.add("orders:place", place_order, version="v1")

    async def other(request: PlaceOrder, context: Context) -> Result[Order]:
        return Result.ok()

    with pytest.raises(RegistryError) as error:
        registry.add("orders:place", other, version="v1")
    message = str(error.value)
    assert "orders:place (version v1)" in message
    assert "tests.support.sample.place_order" in message
    assert "test_duplicate_pair_names_both_registrations.<locals>.other" in message


def test_same_id_under_several_versions() -> None:
    registry = build_registry()
    assert registry.versions("orders:place") == ["v1", "v2"]
    assert registry.versions("orders:get") == [""]
    assert registry.versions("nope") == []


@pytest.mark.parametrize("topic", ["svc:mesh", "svc:custom", "svc:mesh:register"])
def test_reserved_topics_are_refused(topic: str) -> None:
    with pytest.raises(RegistryError, match="reserved"):
        Registry().add(topic, place_order)
    assert Registry(allow_reserved=True).add(topic, place_order).topic == topic


@pytest.mark.parametrize("topic", ["", None, 3])
def test_topic_must_be_a_non_empty_string(topic: Any) -> None:
    with pytest.raises(RegistryError):
        Registry().add(topic, place_order)


def test_iteration_is_sorted_by_id_then_version() -> None:
    registry = Registry()
    for topic, version in [("b", "v2"), ("a", ""), ("b", ""), ("b", "v1"), ("a:z", "")]:
        registry.add(topic, place_order, version=version)
    assert [r.key for r in registry] == [
        TopicKey("a"), TopicKey("a:z"), TopicKey("b"), TopicKey("b", "v1"), TopicKey("b", "v2")
    ]


def test_decorator_registers() -> None:
    registry = Registry()

    @registry.handler("greet:say", version="v1")
    async def say(request: GetOrder, context: Context) -> Result[Order]:
        return Result.ok()

    assert registry.get("greet:say", "v1") is not None
    assert registry.get("greet:say") is None
