"""`deprecated: {since, sunset, successor}` on topic versions and fields: read into the model, real dates in order,
a successor this manifest serves (a warning otherwise); a field's schema still says `deprecated: true`."""

from __future__ import annotations

from svcgen.manifest.model import Deprecation
from tests.support.manifests import errors, load_ok, manifest, warnings

BASE = """\
svcgen: 1
service: orders
types:
  Order:
    fields:
      orderId: string
      legacyRef: {type: string?, deprecated: {since: 2026-01-01, sunset: 2026-06-30}}
topics:
  - id: orders:get
    version: v1
    request: Order
    response: Order
    deprecated: {since: 2026-01-01, sunset: 2027-01-01, successor: orders:get@v2}
  - id: orders:get
    version: v2
    request: Order
    response: Order
"""


def test_the_lifecycle_is_read_into_the_model() -> None:
    model = load_ok(BASE)
    v1, v2 = model.topics
    assert v1.deprecated == Deprecation("2026-01-01", "2027-01-01", "orders:get@v2")
    assert v2.deprecated is None
    (record,) = model.types
    legacy = record.fields[1]
    assert legacy.deprecation == Deprecation("2026-01-01", "2026-06-30", None)
    assert legacy.contract["deprecated"] is True  # what the schema and the models publish


def test_dates_must_be_real_and_in_order() -> None:
    text = BASE.replace("sunset: 2027-01-01", "sunset: 2025-12-31").replace("since: 2026-01-01, sunset: 2026-06-30",
                                                                           "since: 2026-02-30")
    assert errors(text) == [
        "m.yaml:7:54: since '2026-02-30' is not a calendar date (YYYY-MM-DD)",
        "m.yaml:13:45: sunset 2025-12-31 is before since 2026-01-01; the sunset comes after",
    ]


def test_a_date_must_be_written_as_one() -> None:
    assert errors(BASE.replace("sunset: 2027-01-01", "sunset: next year")) == [
        "m.yaml:13:45: 'sunset' must be an ISO date, like 2026-07-01, got 'next year'"]


def test_a_successor_this_manifest_does_not_serve_is_a_warning() -> None:
    assert warnings(BASE.replace("successor: orders:get@v2", "successor: orders:get@v3")) == [
        "m.yaml:13:68: warning: successor 'orders:get@v3' is not a topic version of this manifest; "
        "did you mean 'orders:get@v2'?"
    ]


def test_a_field_may_still_say_just_true() -> None:
    model = load_ok(manifest(BASE.replace("{since: 2026-01-01, sunset: 2026-06-30}", "true")))
    assert model.types[0].fields[1].deprecation is None
    assert model.types[0].fields[1].contract["deprecated"] is True
