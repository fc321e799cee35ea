import asyncio
import json
from typing import Any

import pytest

from svcgen.runtime import Context, Identity, Next, Registry, Result, Service
from svcgen.runtime._invocation import Invocation, lowered
from svcgen.runtime._pipeline import BindingFailure
from svcgen.runtime._versioning import requested_version
from tests.support.sample import GetOrder, Order, build_service

PLACE_BODY = {"customerId": "c-1", "items": [{"sku": "a", "quantity": 2}, {"sku": "b"}],
              "placedAt": "2026-11-22T10:00:00+02:00"}


def invoke(service: Service, topic: str, body: Any = None, headers: dict[str, str] | None = None) -> Any:
    text = body if isinstance(body, str) or body is None else json.dumps(body)
    return asyncio.run(service.invoke(Invocation(topic, lowered(headers), text)))


def test_typed_handler_round_trip() -> None:
    outcome = invoke(build_service(), "orders:place", PLACE_BODY, {"svc-version": "v1"})
    assert outcome.result.status == "created"
    assert json.loads(outcome.body) == {"orderId": "o-1", "customerId": "c-1", "totalItems": 3}
    assert outcome.version == "v1"
    assert outcome.headers()["svc-version"] == "v1"
    assert outcome.headers()["x-handled-by"] == "v1"


def test_empty_topic_is_validation_error() -> None:
    outcome = invoke(build_service(), "", {})
    assert (outcome.result.status, outcome.result.detail) == ("validation-error", "topic is required")


def test_unknown_topic_is_not_found() -> None:
    outcome = invoke(build_service(), "orders:nope", {})
    assert outcome.result.status == "not-found"
    assert json.loads(outcome.body) == {"status": "not-found", "detail": "no handler for topic orders:nope"}


def test_validation_error_names_the_field_path() -> None:
    body = {**PLACE_BODY, "items": [{"sku": "a"}, {"sku": "b"}, {"sku": "c", "quantity": "two"}]}
    outcome = invoke(build_service(), "orders:place", body, {"svc-version": "v1"})
    assert outcome.result.status == "validation-error"
    assert outcome.result.detail == "items[2].quantity: expected integer"


def test_missing_required_field() -> None:
    outcome = invoke(build_service(), "orders:get", {})
    assert outcome.result.status == "validation-error"
    assert outcome.result.detail == "orderId: required"


def test_invalid_json_is_bad_request() -> None:
    outcome = invoke(build_service(), "orders:get", "{not json")
    assert outcome.result.status == "bad-request"


@pytest.mark.parametrize("body", ["[1, 2]", "42", '"text"', "null"])
def test_record_request_needs_an_object(body: str) -> None:
    outcome = invoke(build_service(), "orders:get", body)
    assert (outcome.result.status, outcome.result.detail) == ("bad-request", "body must be a JSON object")


def test_handler_exception_is_service_unavailable_without_its_text(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[Result[Any]] = []

    async def capture(context: Context, call_next: Next) -> Result[Any]:
        seen.append(await call_next(context))
        return seen[-1]

    outcome = invoke(build_service(middleware=[capture]), "orders:explode", {})
    assert outcome.result.status == "service-unavailable"
    assert b"hunter2" not in outcome.body
    assert b"SecretError" not in outcome.body
    assert isinstance(seen[0], BindingFailure) and seen[0].exception_type == "SecretError"


def test_sync_handlers_work() -> None:
    outcome = invoke(build_service(), "orders:get", {"orderId": "o-9", "verbose": True})
    assert json.loads(outcome.body) == {"orderId": "o-9", "customerId": "c-verbose", "totalItems": 0}


def test_failed_result_drops_payload_and_carries_failure_body() -> None:
    outcome = invoke(build_service(), "orders:get", {"orderId": "missing"})
    assert json.loads(outcome.body) == {"status": "not-found", "detail": "order missing does not exist"}


def test_no_body_statuses_encode_nothing() -> None:
    outcome = invoke(build_service(), "orders:delete", {"orderId": "o-1"})
    assert (outcome.result.status, outcome.body) == ("deleted", b"")


def test_non_result_return_is_unexpected_error() -> None:
    registry = Registry()

    async def sloppy(request: GetOrder, context: Context) -> Any:
        return {"orderId": "x"}

    registry.add("a:b", sloppy)
    outcome = invoke(Service(Identity("s"), registry), "a:b", {"orderId": "1"})
    assert outcome.result.status == "unexpected-error"


def test_payload_that_does_not_encode_is_unexpected_error() -> None:
    registry = Registry()

    async def wrong(request: GetOrder, context: Context) -> Result[Order]:
        return Result.ok("not an order")  # type: ignore[arg-type]

    registry.add("a:b", wrong)
    outcome = invoke(Service(Identity("s"), registry), "a:b", {"orderId": "1"})
    assert outcome.result.status == "unexpected-error"


def test_middleware_order_first_registered_is_outermost() -> None:
    calls: list[str] = []

    def tracer(name: str) -> Any:
        async def middleware(context: Context, call_next: Next) -> Result[Any]:
            calls.append(f"{name}>")
            result = await call_next(context)
            calls.append(f"<{name}")
            return result

        return middleware

    invoke(build_service(middleware=[tracer("a"), tracer("b")]), "orders:get", {"orderId": "1"})
    assert calls == ["a>", "b>", "<b", "<a"]


def test_middleware_that_does_not_call_next_ends_the_chain() -> None:
    reached: list[str] = []

    async def gate(context: Context, call_next: Next) -> Result[Any]:
        return Result.forbidden("closed")

    async def inner(context: Context, call_next: Next) -> Result[Any]:
        reached.append("inner")
        return await call_next(context)

    outcome = invoke(build_service(middleware=[gate, inner]), "orders:get", {"orderId": "1"})
    assert outcome.result.status == "forbidden"
    assert reached == []


class TestVersionSelection:
    def test_header_selects_version(self) -> None:
        service = build_service()
        for header in ("svc-version", "version", "x-version", "X-Version"):
            outcome = invoke(service, "orders:place", {"customerId": "c"}, {header: "v2"})
            assert outcome.version == "v2", header
            assert json.loads(outcome.body)["orderId"] == "o-2"

    def test_svc_version_beats_other_headers(self) -> None:
        outcome = invoke(build_service(), "orders:place", {"customerId": "c"}, {"svc-version": "v2", "version": "v1"})
        assert outcome.version == "v2"

    def test_unknown_version_is_not_found_and_lists_versions(self) -> None:
        outcome = invoke(build_service(), "orders:place", {}, {"svc-version": "v9"})
        assert outcome.result.status == "not-found"
        assert "versions: v1, v2" in (outcome.result.detail or "")

    def test_no_version_with_several_registered_is_not_found(self) -> None:
        outcome = invoke(build_service(), "orders:place", {})
        assert outcome.result.status == "not-found"

    def test_single_versioned_registration_serves_an_unversioned_call(self) -> None:
        registry = Registry()

        async def handle(request: GetOrder, context: Context) -> Result[Order]:
            return Result.ok(Order(request.order_id, context.version, 0))

        registry.add("a:b", handle, version="v3")
        outcome = invoke(Service(Identity("s"), registry), "a:b", {"orderId": "1"})
        assert json.loads(outcome.body)["customerId"] == "v3"
        assert outcome.version == "v3"

    def test_unversioned_topic_echoes_no_version(self) -> None:
        outcome = invoke(build_service(), "orders:get", {"orderId": "1"})
        assert "svc-version" not in outcome.headers()


def test_context_headers_are_lowercased_and_read_only() -> None:
    seen: list[Context] = []

    async def capture(context: Context, call_next: Next) -> Result[Any]:
        seen.append(context)
        return await call_next(context)

    invoke(build_service(middleware=[capture]), "orders:get", {"orderId": "1"}, {"X-Correlation-Id": "abc"})
    assert seen[0].headers["x-correlation-id"] == "abc"
    with pytest.raises(TypeError):
        seen[0].headers["x"] = "y"  # type: ignore[index]


def test_middleware_sees_the_selected_version_and_the_pipeline_writes_nothing_back() -> None:
    seen: list[tuple[str, bool, str, bool]] = []

    async def watch(context: Context, call_next: Next) -> Result[Any]:
        before = (context.version, context.registration is not None)
        result = await call_next(context)
        seen.append((*before, context.version, context.registration is not None))
        return result

    service = build_service(middleware=[watch])
    invoke(service, "orders:place", {"customerId": "c"}, headers={"SVC-Version": "v2"})
    invoke(service, "orders:place", {"customerId": "c"}, headers={"svc-version": "v9"})
    invoke(service, "orders:get", {"orderId": "o-1"})
    assert seen == [("v2", True, "v2", True), ("v9", False, "v9", False), ("", True, "", True)]


def test_a_path_version_beats_a_header_which_beats_a_static_version() -> None:
    def version(**sources: Any) -> str:
        return requested_version(Invocation("orders:place", **sources))

    header = lowered({"X-Version": " v2 "})
    assert version(headers=header, path_version="v1", static_version="v3") == "v1"
    assert version(headers=header, static_version="v3") == "v2"
    assert version(static_version="v3") == "v3"
