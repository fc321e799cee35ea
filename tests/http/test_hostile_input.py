"""Bad input never crashes the host: random requests get documented codes, never a binding 500."""

import asyncio
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from svcgen.runtime import HttpApp
from tests.support.asgi import raw_request

from .test_app import make_app

DOCUMENTED = {200, 201, 204, 400, 404, 405, 413, 422, 431, 503}

APP: HttpApp = make_app(max_body_bytes=64 * 1024)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


bodies = st.one_of(
    st.binary(max_size=512),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.dictionaries(st.sampled_from(["customerId", "items", "placedAt", "orderId", "topic", "headers", "body"]),
                    json_values, max_size=5).map(lambda v: json.dumps(v).encode()),
    st.integers(min_value=100, max_value=100_000).map(nested),
    st.integers(min_value=60_000, max_value=70_000).map(lambda n: b'{"customerId": "' + b"x" * n + b'"}'),
    st.just(b'{"topic": "orders:get", "topic": 5}'),
    st.just(b"\xff\xfe\x00garbage"),
)
paths = st.one_of(
    st.sampled_from([b"/orders", b"/v1/orders", b"/v2/orders", b"/v3/orders", b"/orders/x", b"/boom",
                     b"/svc/invoke", b"/svc/health", b"/svc/spec", b"/svc/openapi.json", b"/mesh", b"/"]),
    st.binary(max_size=40).map(lambda b: b"/" + b.replace(b"?", b"")),
    st.lists(st.sampled_from([b"orders", b"%2F", b"%ff", b"..", b"", b"{x}", b"svc"]), max_size=5).map(
        lambda parts: b"/" + b"/".join(parts)
    ),
)
methods = st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "BREW", ""])
headers = st.lists(
    st.tuples(st.one_of(st.sampled_from([b"svc-version", b"version", b"x-version", b"content-type"]),
                        st.binary(min_size=1, max_size=20)),
              st.binary(max_size=60)),
    max_size=6,
)
queries = st.binary(max_size=80)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(method=methods, path=paths, query=queries, header_list=headers, body=bodies)
def test_random_requests_get_documented_codes(
    method: str, path: bytes, query: bytes, header_list: list[tuple[bytes, bytes]], body: bytes
) -> None:
    status, _, payload = asyncio.run(raw_request(APP, method, path, query, header_list, body))
    assert status in DOCUMENTED, (status, payload)
    if status != 204 and method != "HEAD":
        document = json.loads(payload)
        if status >= 400:
            assert set(document) - {"errors"} == {"status", "detail"}
            assert "errors" not in document or status == 422


@settings(max_examples=150, deadline=None)
@given(envelope=st.one_of(bodies, st.fixed_dictionaries(
    {"topic": st.one_of(st.text(max_size=20), st.sampled_from(["orders:get", "orders:place", "svc:mesh",
                                                              "svc:healthcheck", "svc:spec", ""])),
     "headers": st.dictionaries(st.text(max_size=10), st.text(max_size=10), max_size=3),
     "body": st.one_of(st.text(max_size=50), json_values.map(json.dumps))}).map(lambda v: json.dumps(v).encode())))
def test_random_envelopes_are_answered(envelope: bytes) -> None:
    status, _, payload = asyncio.run(raw_request(APP, "POST", b"/svc/invoke", b"", [], envelope))
    assert status in {200, 400, 413, 431}
    answer = json.loads(payload)
    if status == 200:
        assert set(answer) == {"statusCode", "isSuccessful", "headers", "body"}
        assert isinstance(answer["body"], str)


def test_still_serving_after_the_onslaught() -> None:
    status, _, payload = asyncio.run(raw_request(APP, "GET", b"/orders/o-1", b"", [], b""))
    assert status == 200
    assert json.loads(payload)["orderId"] == "o-1"
