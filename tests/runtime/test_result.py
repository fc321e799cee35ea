from dataclasses import dataclass

import pytest

from svcgen.runtime import Result
from svcgen.runtime import _status as st


@dataclass
class Order:
    order_id: str


@pytest.mark.parametrize("status", sorted(st.SUCCESS_CODES))
def test_success_factories_carry_payload(status: str) -> None:
    factory = getattr(Result, status.replace("-", "_"))
    result = factory(Order("o-1"), headers={"x-a": "1"})
    assert result.status == status
    assert result.payload == Order("o-1")
    assert result.is_successful
    assert dict(result.headers) == {"x-a": "1"}
    assert result.http_code == st.STATUS_CODES[status]


@pytest.mark.parametrize("status", sorted(st.FAILURE_CODES))
def test_failure_factories_carry_detail(status: str) -> None:
    factory = getattr(Result, status.replace("-", "_"))
    result = factory("went wrong")
    assert result.status == status
    assert result.payload is None
    assert result.detail == "went wrong"
    assert not result.is_successful
    assert result.failure_body() == {"status": status, "detail": "went wrong"}


def test_failure_without_detail_uses_the_status_as_detail() -> None:
    assert Result.not_found().failure_body() == {"status": "not-found", "detail": "not-found"}


def test_of_builds_any_status() -> None:
    result = Result.of("created", {"a": 1}, None, headers={"location": "/x"})
    assert (result.status, result.payload, result.http_code) == ("created", {"a": 1}, 201)
    assert result.headers["location"] == "/x"


def test_headers_are_read_only_and_merge() -> None:
    result = Result.ok(1, headers={"a": "1"}).with_headers({"b": "2"})
    assert dict(result.headers) == {"a": "1", "b": "2"}
    with pytest.raises(TypeError):
        result.headers["c"] = "3"  # type: ignore[index]
