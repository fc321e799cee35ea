from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from svcgen.runtime._mesh.clock import parse_rfc3339, rfc3339


def test_rfc3339_is_utc_with_milliseconds_and_rounds_into_the_next_second() -> None:
    moment = datetime(2026, 11, 22, 10, 0, 0, 123000, tzinfo=UTC).timestamp()
    assert rfc3339(moment) == "2026-11-22T10:00:00.123Z"
    assert rfc3339(moment + 0.8774) == "2026-11-22T10:00:01.000Z"
    assert rfc3339(0.0) == "1970-01-01T00:00:00.000Z"


def test_formatting_alternating_seconds_never_reuses_the_wrong_one() -> None:
    # The formatter keeps the last second it formatted; alternating between two must still be exact.
    first, second = 1_700_000_000.25, 1_800_000_000.5
    assert [rfc3339(value) for value in (first, second, first, first, second)] == [
        "2023-11-14T22:13:20.250Z", "2027-01-15T08:00:00.500Z", "2023-11-14T22:13:20.250Z",
        "2023-11-14T22:13:20.250Z", "2027-01-15T08:00:00.500Z",
    ]


@given(st.integers(min_value=0, max_value=253_402_300_799_000))
def test_rfc3339_reads_back_to_the_same_millisecond(millis: int) -> None:
    assert parse_rfc3339(rfc3339(millis / 1000)) == millis / 1000


def test_a_year_below_1000_keeps_four_digits() -> None:
    # Found by the collector's typed answer schema (firstSeen is a date-time): strftime wrote "68-01-01T...".
    moment = datetime(68, 1, 1, 18, 35, 56, 700000, tzinfo=UTC).timestamp()
    assert rfc3339(moment) == "0068-01-01T18:35:56.700Z"
    assert parse_rfc3339(rfc3339(moment)) == moment
