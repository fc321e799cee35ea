"""`RetryingSender`: which answers are tried again, how long it waits, the Idempotency-Key, the deadline."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import httpx
import pytest

from svcgen.runtime import (
    ClientCall,
    ClientsBase,
    Context,
    HttpApp,
    HttpSender,
    Identity,
    Registry,
    Result,
    Retry,
    RetryingSender,
    Service,
    Wiring,
    WiringError,
    codec_for,
    deadline,
)
from tests.support.server import running


class Scripted:
    """A sender answering from a script, recording what it was sent."""

    def __init__(self, *answers: Result[Any]) -> None:
        self.answers = list(answers)
        self.sent: list[tuple[str, dict[str, str]]] = []

    async def send(self, topic: str, payload: Any = None, headers: Mapping[str, str] | None = None) -> Result[Any]:
        self.sent.append((topic, dict(headers or {})))
        return self.answers.pop(0)


class Sleeps:
    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def retrying(inner: Scripted, sleeps: Sleeps, **options: Any) -> RetryingSender:
    options.setdefault("jitter", lambda: 1.0)  # the whole backoff, so the waits are exact
    return RetryingSender(inner, sleep=sleeps, new_key=lambda: "key-1", **options)


UNAVAILABLE = Result.service_unavailable("down")


@pytest.mark.parametrize("failure", [UNAVAILABLE, Result.timeout("slow"), Result.too_many_requests("busy")])
def test_a_retriable_failure_is_tried_again_with_doubling_backoff(failure: Result[Any]) -> None:
    inner, sleeps = Scripted(failure, failure, Result.ok({"n": 1})), Sleeps()
    answer = asyncio.run(retrying(inner, sleeps, idempotent={"a:get"}).send("a:get", {}))
    assert answer.payload == {"n": 1}
    assert sleeps.waits == [0.5, 1.0]
    assert len(inner.sent) == 3


def test_backoff_is_jittered_between_half_and_all_of_it_and_capped() -> None:
    policy = Retry(retries=6, backoff=0.5, max_backoff=8.0)
    assert [policy.delay(n, 1.0) for n in range(1, 8)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert policy.delay(3, 0.0) == 1.0
    assert policy.delay(3, 0.5) == 1.5


def test_retries_stop_after_the_policy_s_count_and_the_last_answer_is_returned() -> None:
    inner, sleeps = Scripted(UNAVAILABLE, UNAVAILABLE, Result.service_unavailable("still down")), Sleeps()
    answer = asyncio.run(retrying(inner, sleeps, idempotent={"a:get"}).send("a:get"))
    assert (answer.status, answer.detail, len(inner.sent)) == ("service-unavailable", "still down", 3)


FINAL = [Result.not_found("no"), Result.validation_error("bad"), Result.unexpected_error("500"), Result.conflict("c")]


@pytest.mark.parametrize("failure", FINAL)
def test_a_final_answer_is_not_tried_again(failure: Result[Any]) -> None:
    inner, sleeps = Scripted(failure), Sleeps()
    answer = asyncio.run(retrying(inner, sleeps).send("a:put"))
    assert answer is failure
    assert sleeps.waits == []


def test_retry_after_is_honoured_and_a_long_one_ends_the_retries() -> None:
    inner, sleeps = Scripted(UNAVAILABLE.with_headers({"retry-after": "3"}), Result.ok(None)), Sleeps()
    asyncio.run(retrying(inner, sleeps).send("a:put"))
    assert sleeps.waits == [3.0]
    too_long = Result.too_many_requests("busy", headers={"retry-after": "120"})
    inner, sleeps = Scripted(too_long), Sleeps()
    assert asyncio.run(retrying(inner, sleeps).send("a:put")) is too_long
    assert sleeps.waits == []


def test_retry_after_as_an_http_date_counts_from_the_wall_clock() -> None:
    dated = UNAVAILABLE.with_headers({"retry-after": "Wed, 21 Oct 2026 07:28:04 GMT"})
    inner, sleeps = Scripted(dated, Result.ok(None)), Sleeps()
    asyncio.run(retrying(inner, sleeps, wall_clock=lambda: 1792567680.0).send("a:put"))
    assert sleeps.waits == [4.0]


@pytest.mark.parametrize("retry_after", ["\u00b2", "\u2460", "12\u00b3"])
def test_a_retry_after_that_is_no_number_is_ignored_not_raised(retry_after: str) -> None:
    # Digits Python's isdigit() takes but float() refuses (a superscript two, a circled one) raised ValueError out
    # of the call: an owner's odd header broke the handler that called it. Now it is no Retry-After: the backoff.
    def owner(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, json={"status": "service-unavailable", "detail": "down"},
                              headers=[(b"retry-after", retry_after.encode())])  # fmt: skip

    sender = HttpSender("http://owner.test/svc/invoke", transport=httpx.MockTransport(owner))
    sleeps = Sleeps()
    answer = asyncio.run(RetryingSender(sender, sleep=sleeps, jitter=lambda: 1.0).send("a:get"))
    assert (answer.status, sleeps.waits) == ("service-unavailable", [0.5, 1.0])


def test_a_topic_that_is_not_idempotent_carries_one_key_on_every_try() -> None:
    inner, sleeps = Scripted(UNAVAILABLE, Result.ok(None)), Sleeps()
    asyncio.run(retrying(inner, sleeps, idempotent={"a:get"}).send("a:put", {}, {"x-trace": "1"}))
    assert [headers for _, headers in inner.sent] == [{"x-trace": "1", "idempotency-key": "key-1"}] * 2
    inner = Scripted(Result.ok(None))
    asyncio.run(retrying(inner, sleeps, idempotent={"a:get"}).send("a:get"))
    assert inner.sent == [("a:get", {})]
    inner = Scripted(Result.ok(None))
    asyncio.run(retrying(inner, sleeps).send("a:put", None, {"Idempotency-Key": "mine"}))
    assert inner.sent == [("a:put", {"Idempotency-Key": "mine"})]


def test_a_key_in_flight_is_waited_out_only_for_a_keyed_call() -> None:
    in_flight = Result.conflict("in flight", headers={"retry-after": "1"})
    inner, sleeps = Scripted(in_flight, Result.ok({"done": True})), Sleeps()
    assert asyncio.run(retrying(inner, sleeps).send("a:put")).payload == {"done": True}
    inner, sleeps = Scripted(in_flight), Sleeps()
    assert asyncio.run(retrying(inner, sleeps, idempotent={"a:put"}).send("a:put")) is in_flight


def test_per_topic_policies_override_the_default() -> None:
    inner, sleeps = Scripted(UNAVAILABLE, Result.ok(None)), Sleeps()
    sender = retrying(inner, sleeps, policy=Retry(retries=0), policies={"a:put": Retry(retries=1, backoff=0.1)})
    assert asyncio.run(sender.send("a:put")).status == "ok"
    assert sleeps.waits == [0.1]
    inner.answers.append(UNAVAILABLE)
    assert asyncio.run(sender.send("b:put")).status == "service-unavailable"
    assert sleeps.waits == [0.1] and len(inner.sent) == 3


def test_no_retry_waits_past_the_current_deadline() -> None:
    now = [100.0]
    inner, sleeps = Scripted(UNAVAILABLE, UNAVAILABLE, Result.ok(None)), Sleeps()
    sender = retrying(inner, sleeps, clock=lambda: now[0])

    async def call() -> Result[Any]:
        with deadline(0.8, clock=lambda: now[0]):
            return await sender.send("a:put")

    answer = asyncio.run(call())
    assert answer.status == "service-unavailable"
    assert sleeps.waits == [0.5]  # the second wait (1 s) would end after the deadline: the caller has gone


def test_wiring_retries_a_produced_topic_per_its_settings() -> None:
    codes = iter([503, 503, 200])
    seen: list[httpx.Request] = []

    def owner(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(next(codes), json={"ok": True}, headers={"retry-after": "0"})

    wiring = Wiring(environ={}, transport=httpx.MockTransport(owner))
    wiring.targets["a:put"] = "http://a.test/svc/invoke"
    sender = wiring.sender(["a:put"])
    assert asyncio.run(sender.send("a:put", {})).status == "ok"
    keys = {request.headers["idempotency-key"] for request in seen}
    assert len(seen) == 3 and len(keys) == 1

    wiring.retries["a:put"] = Retry(retries=0)
    codes = iter([503])
    seen.clear()
    assert asyncio.run(wiring.sender(["a:put"]).send("a:put", {})).status == "service-unavailable"
    assert len(seen) == 1


def test_wiring_refuses_retries_for_a_topic_it_does_not_produce() -> None:
    wiring = Wiring(environ={})
    wiring.targets["a:put"] = "http://127.0.0.1:1/svc/invoke"
    wiring.retries["a:putt"] = Retry(retries=0)  # a typo: as credentials, refused, not silently ignored
    with pytest.raises(WiringError, match=r"retries in wiring.py name a:putt, which this service does not produce"):
        wiring.sender(["a:put"])


def test_an_http_sender_sends_what_is_left_of_the_deadline_and_waits_no_longer() -> None:
    seen: list[str] = []

    async def slow(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers["svc-deadline"])
        await asyncio.sleep(30)
        return httpx.Response(200)

    async def call() -> Result[Any]:
        async with HttpSender("http://a.test/i", transport=httpx.MockTransport(slow)) as sender:
            with deadline(0.2):
                return await sender.send("a:get")

    answer = asyncio.run(call())
    assert answer.status == "timeout"
    assert 0 < int(seen[0]) <= 200


def test_a_generated_client_call_carries_a_key_unless_its_topic_is_idempotent() -> None:
    inner = Scripted(Result.ok({}), Result.ok({}), Result.ok({}))
    clients = ClientsBase(inner)
    codec = codec_for(dict[str, int])
    asyncio.run(clients.call(ClientCall("a:put", codec, codec), {"n": 1}))
    asyncio.run(clients.call(ClientCall("a:get", codec, codec, idempotent=True), {"n": 1}))
    asyncio.run(clients.call(ClientCall("a:put", codec, codec), {"n": 1}, {"Idempotency-Key": "mine"}))
    (_, put), (_, get), (_, own) = inner.sent
    assert len(put["idempotency-key"]) == 32 and "idempotency-key" not in get
    assert own == {"Idempotency-Key": "mine"}


def test_a_client_made_from_a_url_retries_with_one_key() -> None:
    seen: list[dict[str, str]] = []

    async def flaky(request: dict[str, Any], context: Context) -> Result[dict[str, Any]]:
        seen.append(dict(context.headers))
        if len(seen) < 2:
            return Result.service_unavailable("warming up", headers={"retry-after": "0"})
        return Result.ok({"tries": len(seen)})

    registry = Registry()
    registry.add("a:put", flaky, request=dict[str, Any], response=dict[str, Any])
    codec = codec_for(dict[str, Any])

    async def call(url: str) -> Result[Any]:
        async with ClientsBase(f"{url}/svc/invoke") as clients:
            return await clients.call(ClientCall("a:put", codec, codec), {})

    with running(HttpApp(Service(Identity("a"), registry))) as url:
        answer = asyncio.run(call(url))
    assert answer.payload == {"tries": 2}
    assert seen[0]["idempotency-key"] == seen[1]["idempotency-key"]
