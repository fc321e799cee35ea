from typing import Any

import pytest

from svcgen.runtime._context import Context
from svcgen.runtime._registry import Registry, RegistryError, TopicKey
from svcgen.runtime._result import Result

from .sample import GetOrder, Order, PlaceOrder, build_registry, place_order


def test_types_are_inferred_from_annotations() -> None:
    registration = build_registry().get("orders:place", "v1")
    assert registration is not None
    assert registration.request_type is PlaceOrder
    assert registration.response_type is Order
    assert registration.summary == "Place an order"


def test_explicit_types_win_over_annotations() -> None:
    registry = Registry()
    registration = registry.add("a:b", place_order, request=GetOrder, response=dict[str, int])
    assert registration.request_type is GetOrder
    assert registration.response_type == dict[str, int]


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
    assert "tests.runtime.sample.place_order" in message
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
