import pytest

from svcgen.runtime import Result
from svcgen.runtime import _status as st

DESIGN_TABLE = [
    ("ok", 200), ("created", 201), ("accepted", 202), ("updated", 204), ("deleted", 204), ("ignored", 200),
    ("bad-request", 400), ("unauthorized", 401), ("forbidden", 403), ("not-found", 404), ("conflict", 409),
    ("validation-error", 422), ("too-many-requests", 429), ("unexpected-error", 500),
    ("not-implemented", 501), ("service-unavailable", 503), ("timeout", 504),
]


@pytest.mark.parametrize(("status", "code"), DESIGN_TABLE)
def test_status_maps_to_its_code(status: str, code: int) -> None:
    assert st.http_code(status) == code


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (200, "ok"), (201, "created"), (202, "accepted"), (204, "deleted"), (400, "bad-request"),
        (401, "unauthorized"), (403, "forbidden"), (404, "not-found"), (408, "timeout"), (409, "conflict"),
        (422, "validation-error"), (429, "too-many-requests"), (500, "unexpected-error"),
        (501, "not-implemented"), (502, "service-unavailable"), (503, "service-unavailable"), (504, "timeout"),
        (299, "ok"), (207, "ok"), (418, "unexpected-error"), (302, "unexpected-error"), (599, "unexpected-error"),
    ],
)
def test_code_maps_back_to_status(code: int, status: str) -> None:
    assert st.status_for_code(code) == status


def test_unknown_statuses_fall_back_by_success() -> None:
    assert st.http_code("brand-new-failure") == 500
    assert st.http_code("brand-new-success", successful=True) == 200
    assert Result.of("brand-new-failure").http_code == 500
    assert Result.of("brand-new-success", successful=True).http_code == 200
    assert Result.of("brand-new-success", successful=True).is_successful


def test_success_and_failure_sets_partition_the_table() -> None:
    assert set(st.SUCCESS_CODES) | set(st.FAILURE_CODES) == {s for s, _ in DESIGN_TABLE}
    assert not set(st.SUCCESS_CODES) & set(st.FAILURE_CODES)
    assert len(st.FAILURE_CODES) == 11
    # The operations document keys failure responses by code: no two failures may share one.
    assert len(set(st.FAILURE_CODES.values())) == 11
