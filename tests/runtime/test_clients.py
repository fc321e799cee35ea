"""`ClientsBase.call`: the one place a generated client's call goes through (encode, version, send, decode)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from svcgen.runtime import ClientCall, ClientsBase, Result, codec_for


@dataclass
class Ping:
    text: str


@dataclass
class Pong:
    reply_text: str


class Recording:
    """A sender that records each send and answers from a script."""

    def __init__(self, *answers: Result[Any]) -> None:
        self.sent: list[tuple[str, Any, dict[str, str]]] = []
        self.answers = list(answers)
        self.closed = False

    async def send(self, topic: str, payload: Any = None, headers: Mapping[str, str] | None = None) -> Result[Any]:
        self.sent.append((topic, payload, dict(headers or {})))
        return self.answers.pop(0)

    async def aclose(self) -> None:
        self.closed = True


# Idempotent, so no Idempotency-Key joins the headers these tests look at (tests/runtime/test_retry.py has the keys).
PING_V2: ClientCall[Ping, Pong] = ClientCall("echo:ping", codec_for(Ping), codec_for(Pong), "v2", idempotent=True)
PING: ClientCall[Ping, Pong] = ClientCall("echo:ping", codec_for(Ping), codec_for(Pong), idempotent=True)


def call(sender: Recording, client_call: ClientCall[Ping, Pong], headers: Mapping[str, str] | None = None
         ) -> Result[Pong]:  # fmt: skip
    async def run() -> Result[Pong]:
        async with ClientsBase(sender) as clients:
            return await clients.call(client_call, Ping("hi"), headers)

    return asyncio.run(run())


def test_a_call_encodes_with_wire_names_selects_its_version_and_decodes_the_answer() -> None:
    sender = Recording(Result.created({"replyText": "hi!"}, headers={"x-id": "1"}))
    answer = call(sender, PING_V2, {"x-trace": "t"})
    assert answer.status == "created" and answer.payload == Pong("hi!") and answer.headers == {"x-id": "1"}
    [(topic, body, headers)] = sender.sent
    assert topic == "echo:ping" and orjson.loads(body) == {"text": "hi"}
    assert headers == {"x-trace": "t", "svc-version": "v2"}


def test_an_unversioned_call_sends_no_version_header() -> None:
    sender = Recording(Result.ok({"replyText": "x"}))
    call(sender, PING)
    assert sender.sent[0][2] == {}


def test_a_failed_answer_comes_back_as_it_is() -> None:
    sender = Recording(Result.not_found("no such order"))
    answer = call(sender, PING)
    assert (answer.status, answer.payload, answer.detail) == ("not-found", None, "no such order")


def test_an_answer_that_does_not_fit_the_response_type_is_unexpected_error_naming_the_topic() -> None:
    sender = Recording(Result.ok({"reply": 3}))
    answer = call(sender, PING)
    assert answer.status == "unexpected-error"
    assert (answer.detail or "").startswith("the response to echo:ping does not fit its type: ")


def test_a_sender_passed_in_stays_open_for_its_owner() -> None:
    sender = Recording(Result.ok({"replyText": "x"}))
    call(sender, PING)
    assert sender.closed is False
