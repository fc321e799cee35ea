"""Input limits on both faces (application routes and the invoke surface): exact codes, clear details,
and the server keeps serving afterwards."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from svcgen.runtime import HttpApp, JsonLimits, Limits
from svcgen.runtime._http.limits import DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_HEADERS
from svcgen.runtime._http.requests import BodyTooLarge, ClientDisconnected, read_body
from svcgen.runtime._jsonlimits import (
    COUNT_DIRECTLY_BELOW,
    DEFAULT_MAX_JSON_CONTAINERS,
    DEFAULT_MAX_JSON_DEPTH,
    JsonRefused,
    parse_json,
)
from tests.support.asgi import raw_request
from tests.support.server import running

from .test_app import PLACE, make_app

APP: HttpApp = make_app()
GOOD_ENVELOPE = {"topic": "orders:place", "headers": {"svc-version": "v1"}, "body": json.dumps(PLACE)}


def request(
    app: HttpApp, path: bytes, body: bytes = b"", headers: list[tuple[bytes, bytes]] | None = None
) -> tuple[int, Any]:
    method = "GET" if path.startswith(b"/orders/") else "POST"
    status, _, payload = asyncio.run(raw_request(app, method, path, b"", headers or [], body))
    return status, json.loads(payload) if payload else None


def still_serving(app: HttpApp) -> None:
    assert request(app, b"/orders/o-1")[0] == 200
    status, answer = request(app, b"/svc/invoke", json.dumps(GOOD_ENVELOPE).encode())
    assert status == 200 and answer["statusCode"] == "created"


def nested(levels: int) -> str:
    """A PLACE body whose own object plus `levels - 1` arrays nest exactly `levels` deep."""
    inner = "[" * (levels - 1) + "]" * (levels - 1)
    return json.dumps(PLACE)[:-1] + f', "extra": {inner}}}'


def envelope(body: str, **extra: Any) -> bytes:
    return json.dumps({"topic": "orders:place", "headers": {"svc-version": "v1"}, "body": body, **extra}).encode()


def inner_failure(app: HttpApp, body: str) -> dict[str, Any]:
    """The failure body an envelope carries when its payload is refused (HTTP 200: the envelope was processed)."""
    status, answer = request(app, b"/svc/invoke", envelope(body))
    assert status == 200, answer
    assert answer["statusCode"] == "bad-request" and answer["isSuccessful"] is False
    failure: dict[str, Any] = json.loads(answer["body"])
    return failure


# --- body size: 413, status text bad-request ---------------------------------------------------


def test_defaults() -> None:
    limits = Limits()
    assert (limits.max_body_bytes, limits.max_headers, limits.max_json_depth, limits.reject_duplicate_keys) == (
        DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_HEADERS, DEFAULT_MAX_JSON_DEPTH, True,
    )  # fmt: skip
    assert (DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_HEADERS, DEFAULT_MAX_JSON_DEPTH) == (1024 * 1024, 100, 64)
    assert APP.limits == limits


@pytest.mark.parametrize("path", [b"/orders", b"/svc/invoke", b"/svc/invoke/orders:place/v1"])
def test_an_oversized_body_is_413_on_every_face(path: bytes) -> None:
    app = make_app(limits=Limits(max_body_bytes=1000))
    assert request(app, path, b" " * 1001) == (413, {"status": "bad-request", "detail": "body exceeds 1000 bytes"})
    assert request(app, path, json.dumps(PLACE).encode().ljust(1000))[0] != 413  # exactly at the limit: read
    still_serving(app)


def _messages(*chunks: bytes, leave: bool = False) -> Any:
    incoming: list[dict[str, Any]] = [
        {"type": "http.request", "body": chunk, "more_body": leave or index < len(chunks) - 1}
        for index, chunk in enumerate(chunks)
    ]
    if leave:
        incoming.append({"type": "http.disconnect"})

    async def receive() -> dict[str, Any]:
        return incoming.pop(0)

    return receive


def test_a_body_in_several_messages_is_read_whole_and_limited_across_them() -> None:
    async def read(receive: Any, limit: int) -> bytes:
        return await read_body(receive, limit)

    assert asyncio.run(read(_messages(b"ab", b"", b"cd"), 4)) == b"abcd"
    assert asyncio.run(read(_messages(b"abcd"), 4)) == b"abcd"
    with pytest.raises(BodyTooLarge):
        asyncio.run(read(_messages(b"ab", b"cd", b"e"), 4))
    with pytest.raises(ClientDisconnected):
        asyncio.run(read(_messages(b"ab", leave=True), 4))
    # Served: the same body in three messages answers as in one; over the limit across them, 413.
    app = make_app(limits=Limits(max_body_bytes=1000))
    body = json.dumps(PLACE).encode()
    whole = asyncio.run(_answer(app, _messages(body)))
    assert asyncio.run(_answer(app, _messages(body[:5], body[5:9], body[9:]))) == whole
    assert whole[0] == 201
    assert asyncio.run(_answer(app, _messages(body, b" " * (1001 - len(body)))))[0] == 413


async def _answer(app: HttpApp, receive: Any) -> tuple[int, bytes]:
    sent: list[Any] = []

    async def send(message: Any) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/orders", "raw_path": b"/orders", "query_string": b"",
             "headers": [(b"content-type", b"application/json")]}  # fmt: skip
    await app(scope, receive, send)
    return sent[0]["status"], sent[1]["body"]


def test_max_body_bytes_option_is_kept_as_a_shortcut() -> None:
    app = make_app(max_body_bytes=10)
    assert app.limits.max_body_bytes == 10 and app.max_body_bytes == 10
    assert request(app, b"/orders", b"x" * 11)[0] == 413


# --- header count: 431, status text bad-request --------------------------------------------------


@pytest.mark.parametrize("path", [b"/orders", b"/svc/invoke", b"/svc/health", b"/nowhere"])
def test_too_many_headers_is_431_on_every_face(path: bytes) -> None:
    headers = [(f"x-h{i}".encode(), b"v") for i in range(DEFAULT_MAX_HEADERS + 1)]
    status, answer = request(APP, path, json.dumps(PLACE).encode(), headers)
    assert (status, answer) == (
        431,
        {"status": "bad-request", "detail": "request has 101 headers; at most 100 allowed"},
    )
    assert request(APP, b"/orders", json.dumps(PLACE).encode(), headers[:DEFAULT_MAX_HEADERS])[0] == 201
    still_serving(APP)


def test_the_header_limit_is_configurable() -> None:
    app = make_app(limits=Limits(max_headers=2))
    assert request(app, b"/orders/o-1", headers=[(b"a", b"1"), (b"b", b"2")])[0] == 200
    assert request(app, b"/orders/o-1", headers=[(b"a", b"1"), (b"a", b"2"), (b"b", b"3")])[0] == 431


# --- JSON nesting depth: 400 bad-request ---------------------------------------------------------


def test_depth_at_the_limit_is_served_and_one_deeper_is_400_on_routes() -> None:
    assert request(APP, b"/orders", nested(64).encode())[0] == 201
    assert request(APP, b"/orders", nested(65).encode()) == (
        400, {"status": "bad-request", "detail": "body is nested deeper than 64 levels"},
    )  # fmt: skip
    assert request(APP, b"/svc/invoke/orders:place/v1", nested(65).encode())[0] == 400
    still_serving(APP)


@pytest.mark.parametrize("levels", [1000, 1025])
def test_depth_beyond_orjsons_own_ceiling_gets_the_same_detail(levels: int) -> None:
    body = ("[" * levels + "]" * levels).encode()
    assert request(APP, b"/orders", body) == (
        400, {"status": "bad-request", "detail": "body is nested deeper than 64 levels"},
    )  # fmt: skip
    still_serving(APP)


# --- arrays and objects in one body: 400 bad-request ---------------------------------------------


def with_containers(count: int) -> bytes:
    """A PLACE body holding exactly `count` arrays and objects (PLACE itself has 3), brackets in strings aside."""
    extra = ",".join(["[]"] * (count - 4))
    return (json.dumps({**PLACE, "note": "[{[{ not counted }]}]"})[:-1] + f', "extra": [{extra}]}}').encode()


def test_more_arrays_and_objects_than_allowed_is_400_before_parsing() -> None:
    assert DEFAULT_MAX_JSON_CONTAINERS == 10_000
    assert request(APP, b"/orders", with_containers(10_000))[0] == 201
    refused = (400, {"status": "bad-request", "detail": "body has more than 10000 arrays and objects"})
    assert request(APP, b"/orders", with_containers(10_001)) == refused
    assert request(APP, b"/orders", b"[" * 100_000 + b"]" * 100_000) == refused  # however deep
    assert inner_failure(APP, with_containers(10_001).decode())["detail"] == refused[1]["detail"]
    app = make_app(limits=Limits(max_json_containers=10))
    assert request(app, b"/orders", with_containers(10))[0] == 201
    assert request(app, b"/orders", with_containers(11))[1]["detail"] == "body has more than 10 arrays and objects"
    still_serving(APP)


def test_depth_on_the_invoke_surface_envelope_and_inner_body() -> None:
    # the envelope itself: malformed, transport-level 400
    deep_envelope = json.dumps({"topic": "orders:place", "headers": {}, "x": json.loads(nested(65))}).encode()
    assert request(APP, b"/svc/invoke", deep_envelope) == (
        400, {"status": "bad-request", "detail": "envelope is nested deeper than 64 levels"},
    )  # fmt: skip
    # the payload inside `body`: a processed envelope whose outcome is bad-request
    assert inner_failure(APP, nested(65)) == {"status": "bad-request", "detail": "body is nested deeper than 64 levels"}
    status, answer = request(APP, b"/svc/invoke", envelope(nested(64)))
    assert status == 200 and answer["statusCode"] == "created"
    still_serving(APP)


def test_the_depth_limit_is_configurable() -> None:
    app = make_app(limits=Limits(max_json_depth=3))
    assert request(app, b"/orders", nested(3).encode())[0] == 201
    assert request(app, b"/orders", nested(4).encode())[1]["detail"] == "body is nested deeper than 3 levels"
    assert inner_failure(app, nested(4))["detail"] == "body is nested deeper than 3 levels"
    with pytest.raises(ValueError):
        Limits(max_json_depth=2000)


# --- duplicate keys: 400 "duplicate key <name>" --------------------------------------------------

DUPLICATE = b'{"customerId": "c-1", "items": [], "placedAt": "2026-11-22T10:00:00Z", "customerId": "c-2"}'
NESTED_DUPLICATE = b'{"customerId": "c-1", "items": [{"sku": "a", "sku": "b"}], "placedAt": "2026-11-22T10:00:00Z"}'


@pytest.mark.parametrize(
    ("body", "key"), [(DUPLICATE, "customerId"), (NESTED_DUPLICATE, "sku"), (b'{"a": 1, "\\u0061": 2}', "a")]
)
def test_a_duplicate_key_is_400_on_routes(body: bytes, key: str) -> None:
    detail = f'body has duplicate key "{key}"'
    assert request(APP, b"/orders", body) == (400, {"status": "bad-request", "detail": detail})
    assert request(APP, b"/svc/invoke/orders:place/v1", body)[1]["detail"] == detail
    still_serving(APP)


def test_a_duplicate_key_on_the_invoke_surface_envelope_and_inner_body() -> None:
    assert request(APP, b"/svc/invoke", b'{"topic": "orders:get", "topic": "svc:mesh"}') == (
        400, {"status": "bad-request", "detail": 'envelope has duplicate key "topic"'},
    )  # fmt: skip
    assert inner_failure(APP, DUPLICATE.decode()) == {
        "status": "bad-request", "detail": 'body has duplicate key "customerId"',
    }  # fmt: skip
    still_serving(APP)


def test_colons_and_repeated_keys_in_different_objects_are_not_duplicates() -> None:
    body = json.dumps({**PLACE, "note": 'a "quoted": {text}: here', "items": [{"sku": "a:b"}, {"sku": "c"}]})
    assert request(APP, b"/orders", body.encode())[0] == 201
    assert request(APP, b"/svc/invoke", envelope(body))[1]["statusCode"] == "created"


def test_last_value_wins_when_duplicates_are_allowed() -> None:
    app = make_app(limits=Limits(reject_duplicate_keys=False))
    status, answer = request(app, b"/orders", DUPLICATE)
    assert status == 201 and answer["customerId"] == "c-2"
    status, answer = request(app, b"/svc/invoke", b'{"topic": "orders:get", "topic": "svc:spec"}')
    assert status == 200 and json.loads(answer["body"])["service"] == "orders"


# --- non-UTF-8: 400 bad-request ------------------------------------------------------------------


def test_a_body_that_is_not_utf8_is_400_on_every_face() -> None:
    latin1 = '{"customerId": "café"}'.encode("latin-1")
    assert request(APP, b"/orders", latin1) == (400, {"status": "bad-request", "detail": "body is not valid UTF-8"})
    assert request(APP, b"/svc/invoke/orders:place/v1", b"\xff\xfe{}")[1]["detail"] == "body is not valid UTF-8"
    assert request(APP, b"/svc/invoke", b'{"topic": "\xff"}') == (
        400, {"status": "bad-request", "detail": "envelope is not valid UTF-8"},
    )  # fmt: skip
    # An envelope's body is a JSON string, so it is UTF-8 by construction; a lone surrogate escape is refused
    # with the envelope.
    assert request(APP, b"/svc/invoke", b'{"topic": "orders:place", "body": "\\ud800"}')[0] == 400
    assert request(APP, b"/orders", b"{bad")[1]["detail"] == "body is not valid JSON"
    still_serving(APP)


# --- the core parser on its own ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "detail"),
    [
        (b'{"a": 1, "b": {"c": 1, "c": 2}}', 'x has duplicate key "c"'),
        ('{"é": 1, "é": 2}', 'x has duplicate key "é"'),
        ("[" * 3 + "]" * 3, "x is nested deeper than 2 levels"),
        ('{"a": {"b": {}}}', "x is nested deeper than 2 levels"),
        ("\ud800", "x is not valid UTF-8"),
        (b"", "x is not valid JSON"),
    ],
)
def test_parse_json_refusals(raw: bytes | str, detail: str) -> None:
    with pytest.raises(JsonRefused) as refused:
        parse_json(raw, JsonLimits(max_depth=2), "x")
    assert str(refused.value) == detail


@pytest.mark.parametrize(
    "raw",
    [b"3", b'"{[{[:"', b'{"t": "10:00:00", "u": "http://x"}', b'[{"a": 1}, {"a": 2}]', b'{"a": "\\":"}', b"[[]]"],
)
def test_parse_json_accepts(raw: bytes) -> None:
    assert parse_json(raw, JsonLimits(max_depth=2)) == json.loads(raw)


# --- over a real server --------------------------------------------------------------------------


def test_limits_over_uvicorn() -> None:
    app = make_app(limits=Limits(max_body_bytes=4096))
    with running(app) as base, httpx.Client(base_url=base, timeout=5) as client:
        assert client.post("/orders", content=b" " * 5000).status_code == 413
        assert client.post("/orders", content=DUPLICATE).json()["detail"] == 'body has duplicate key "customerId"'
        assert client.post("/orders", content=nested(65)).status_code == 400
        many = {f"x-h{i}": "v" for i in range(150)}
        assert client.post("/svc/invoke", json=GOOD_ENVELOPE, headers=many).status_code == 431
        answer = client.post("/svc/invoke", json=GOOD_ENVELOPE)
        assert answer.status_code == 200 and answer.json()["statusCode"] == "created"
        assert client.get("/orders/o-1").status_code == 200


# --- the fast checks agree with a plain reference on arbitrary texts -----------------------------

_keys = st.sampled_from(['"a"', '"b"', '"a:b"', '"\\u0061"', '"\\u003a"', '":"', '"[{"', '"\\""'])
_scalars = st.sampled_from(["1", '"x"', '"10:00"', '"]}"', '"\\u003a"', "null", '"\\\\u003a"', "2.5e3", '"{[:"'])
_texts = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4).map(lambda items: "[" + ", ".join(items) + "]")
        | st.lists(st.tuples(_keys, inner), max_size=4).map(
            lambda pairs: "{" + ",".join(f"{key}: {value}" for key, value in pairs) + "}"
        )
    ),
    max_leaves=30,
)


class _Pairs(list[Any]):
    """An object's values, repeated keys included: the text's structure, before any value is dropped."""


def _reference(text: str, max_depth: int, max_containers: int) -> str | None:
    """What the limits must say, from the standard parser: container count and depth (of the text) first, then
    duplicates."""
    duplicate = False

    def pairs(items: list[tuple[str, Any]]) -> _Pairs:
        nonlocal duplicate
        duplicate = duplicate or len({key for key, _ in items}) < len(items)
        return _Pairs(value for _, value in items)

    def depth(value: Any) -> int:
        return 1 + max((depth(child) for child in value), default=0) if isinstance(value, list) else 0

    def containers(value: Any) -> int:
        return 1 + sum(containers(child) for child in value) if isinstance(value, list) else 0

    value = json.loads(text, object_pairs_hook=pairs)
    if containers(value) > max_containers:
        return "containers"
    if depth(value) > max_depth:
        return "deep"
    return "duplicate" if duplicate else None


@settings(max_examples=400, deadline=None)
@given(text=_texts, max_depth=st.integers(1, 5), max_containers=st.integers(1, 12), wrap=st.integers(0, 3),
       as_bytes=st.booleans(), padded=st.booleans())  # fmt: skip
def test_parse_json_agrees_with_the_reference(
    text: str, max_depth: int, max_containers: int, wrap: int, as_bytes: bool, padded: bool
) -> None:
    # Padded past COUNT_DIRECTLY_BELOW, the text's marks are taken out before counting: both ways must agree.
    text = "[" * wrap + text + "]" * wrap + (" " * COUNT_DIRECTLY_BELOW if padded else "")
    expected = _reference(text, max_depth, max_containers)
    limits = JsonLimits(max_depth=max_depth, max_containers=max_containers)
    try:
        parse_json(text.encode() if as_bytes else text, limits)
        got = None
    except JsonRefused as refused:
        got = "deep" if "nested deeper" in str(refused) else "containers" if "arrays and" in str(refused) \
            else "duplicate"
    assert got == expected, text
