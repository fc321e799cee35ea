import asyncio
import json
from typing import Any

import pytest

from svcgen.runtime import Context, Identity, Next, Registry, Result, Service
from svcgen.runtime._envelope import EnvelopeError
from tests.support.sample import GetOrder, build_service


def apply(service: Service, envelope: Any) -> dict[str, Any]:
    raw = envelope if isinstance(envelope, (bytes, str)) else json.dumps(envelope)
    answer: dict[str, Any] = json.loads(asyncio.run(service.invoke_envelope(raw)))
    return answer


def test_success_envelope() -> None:
    answer = apply(build_service(), {"topic": "orders:get", "headers": {}, "body": '{"orderId": "o-7"}'})
    assert answer == {
        "statusCode": "ok",
        "isSuccessful": True,
        "headers": {"content-type": "application/json"},
        "body": '{"orderId":"o-7","customerId":"c","totalItems":0}',
    }


def test_failure_envelope_drops_payload() -> None:
    answer = apply(build_service(), {"topic": "orders:get", "body": '{"orderId": "missing"}'})
    assert answer["statusCode"] == "not-found"
    assert answer["isSuccessful"] is False
    assert json.loads(answer["body"]) == {"status": "not-found", "detail": "order missing does not exist"}


def test_headers_and_body_are_optional() -> None:
    answer = apply(build_service(), {"topic": "orders:get"})
    assert answer["statusCode"] == "validation-error"
    assert json.loads(answer["body"]) == {
        "status": "validation-error",
        "detail": "orderId: required",
        "errors": [{"path": "orderId", "message": "required"}],
    }


def test_selected_version_is_echoed() -> None:
    answer = apply(build_service(), {"topic": "orders:place", "headers": {"svc-version": "v2"},
                                     "body": '{"customerId": "c"}'})
    assert answer["headers"]["svc-version"] == "v2"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("not json", "envelope is not valid JSON"),
        ("[]", "envelope must be a JSON object"),
        ('{"headers": {}}', "envelope topic must be a string"),
        ('{"topic": 5}', "envelope topic must be a string"),
        ('{"topic": "a", "headers": []}', "envelope headers must be an object of strings"),
        ('{"topic": "a", "headers": {"x": 1}}', "envelope headers must be an object of strings"),
        ('{"topic": "a", "body": {"x": 1}}', "envelope body must be a string"),
    ],
)
def test_malformed_envelopes_raise(raw: str, message: str) -> None:
    with pytest.raises(EnvelopeError, match=message):
        asyncio.run(build_service().invoke_envelope(raw))


class TestReservedTopics:
    def test_mesh_answers_the_descriptor_before_routing_whatever_the_version(self) -> None:
        reached: list[str] = []

        async def spy(context: Context, call_next: Next) -> Result[Any]:
            reached.append(context.topic)
            return await call_next(context)

        service = build_service(middleware=[spy])
        for headers in ({}, {"svc-version": "v9"}):
            answer = apply(service, {"topic": "svc:mesh", "headers": headers, "body": "garbage"})
            assert answer["statusCode"] == "ok"
            descriptor = json.loads(answer["body"])
            assert descriptor["service"] == "orders"
            assert descriptor == service.descriptor.document
        assert reached == []
        # other topics still route normally
        assert apply(service, {"topic": "orders:get", "body": '{"orderId": "1"}'})["statusCode"] == "ok"
        assert reached == ["orders:get"]

    def test_spec_topic(self) -> None:
        service = build_service()
        answer = apply(service, {"topic": "svc:spec"})
        spec = json.loads(answer["body"])
        assert spec["service"] == "orders"
        assert [t["id"] for t in spec["topics"]] == [
            "orders:delete", "orders:explode", "orders:get", "orders:place", "orders:place"
        ]

    def test_healthcheck_ok(self) -> None:
        answer = apply(build_service(), {"topic": "svc:healthcheck"})
        assert answer["statusCode"] == "ok"
        assert json.loads(answer["body"]) == {
            "isHealthy": True,
            "healthChecks": {
                "database": {"status": "ok"},
                "cache": {"status": "ok"},
                "disk": {"status": "warning", "detail": "running hot"},
            },
        }

    def test_healthcheck_unhealthy_names_the_failing_checks(self) -> None:
        answer = apply(build_service(database_ok=False), {"topic": "svc:healthcheck"})
        assert answer["statusCode"] == "service-unavailable"
        assert json.loads(answer["body"]) == {"status": "service-unavailable", "detail": "unhealthy: database"}


def test_updated_and_deleted_keep_their_payload_in_the_envelope() -> None:
    async def archive(request: GetOrder, context: Context) -> Result[GetOrder]:
        return Result.deleted(GetOrder(order_id=request.order_id, verbose=True))

    async def touch(request: GetOrder, context: Context) -> Result[GetOrder]:
        return Result.updated(request)

    registry = Registry()
    registry.add("orders:archive", archive)
    registry.add("orders:touch", touch)
    service = Service(Identity("orders"), registry)
    archived = apply(service, {"topic": "orders:archive", "body": '{"orderId": "o-1"}'})
    touched = apply(service, {"topic": "orders:touch", "body": '{"orderId": "o-2"}'})
    assert (archived["statusCode"], json.loads(archived["body"])) == ("deleted", {"orderId": "o-1", "verbose": True})
    assert (touched["statusCode"], json.loads(touched["body"])) == ("updated", {"orderId": "o-2", "verbose": False})


def test_deleted_without_a_payload_has_an_empty_body() -> None:
    answer = apply(build_service(), {"topic": "orders:delete", "body": '{"orderId": "o-1"}'})
    assert (answer["statusCode"], answer["body"]) == ("deleted", "")
