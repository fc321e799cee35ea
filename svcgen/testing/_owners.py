"""`FakeOwners`: in-memory owners for the topics a service produces, so a handler test needs no other service.

A fake owner is a function of the produced topic's typed request returning a `Result` of its typed response
(sync or async). The generated `Clients` send through `FakeOwners` as through any `Sender`: the request is
encoded and decoded by the topic's own codecs on the way in, the response on the way out, so a fake sees and
answers exactly the types the owner would.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

import orjson

from svcgen.runtime import DecodeError, ProducedTopic, Result, codec_for, propagation_headers

Req = TypeVar("Req")
Resp = TypeVar("Resp")
FakeOwner = Callable[[Req], Result[Resp] | Awaitable[Result[Resp]]]
"""`FakeOwner[Req, Resp]`: what answers a produced topic in a test."""


class FakeOwners:
    """The owners of `produces` (the generated package's `PRODUCES`), faked in memory.

    `add(topic, owner)` (or `@owners.owner(topic)`) sets the owner of a topic; a topic without one answers
    `not-implemented`, naming it. `calls[topic]` lists the typed requests each topic received, in order.
    """

    def __init__(self, produces: Iterable[ProducedTopic] = ()) -> None:
        self.produces = {produced.topic: produced for produced in produces}
        self.owners: dict[str, FakeOwner[Any, Any]] = {}
        self.calls: dict[str, list[Any]] = {topic: [] for topic in self.produces}
        self.headers: dict[str, list[Mapping[str, str]]] = {topic: [] for topic in self.produces}

    def add(self, topic: str, owner: FakeOwner[Any, Any]) -> None:
        if topic not in self.produces:
            known = ", ".join(sorted(self.produces)) or "none"
            raise KeyError(f"{topic!r} is not a topic this service produces (it produces: {known})")
        self.owners[topic] = owner

    def owner(self, topic: str) -> Callable[[FakeOwner[Req, Resp]], FakeOwner[Req, Resp]]:
        """Decorator form of `add`."""

        def register(owner: FakeOwner[Req, Resp]) -> FakeOwner[Req, Resp]:
            self.add(topic, owner)
            return owner

        return register

    async def send(self, topic: str, payload: Any = None, headers: Mapping[str, str] | None = None) -> Result[Any]:
        produced = self.produces.get(topic)
        if produced is None:
            return Result.not_found(f"no target for topic {topic!r}")
        try:
            value = orjson.loads(payload) if isinstance(payload, bytes | str) and payload else payload
            request = codec_for(produced.request_type).decode(value)
        except (DecodeError, orjson.JSONDecodeError) as error:
            return Result.validation_error(f"the request to {topic} does not fit its type: {error}")
        self.calls[topic].append(request)
        self.headers[topic].append(_with_trace(headers))
        owner = self.owners.get(topic)
        if owner is None:
            return Result.not_implemented(f"no fake owner for {topic}: add one with owners.add({topic!r}, ...)")
        answer = owner(request)
        result = await answer if inspect.isawaitable(answer) else answer
        if not isinstance(result, Result):
            raise TypeError(f"the fake owner of {topic} returned {type(result).__name__}, not a Result")
        if not result.is_successful or result.payload is None:
            return result
        # On the wire, as the real owner would answer: the client decodes it back into the response type.
        try:
            wire = codec_for(produced.response_type).encode(result.payload)
        except Exception as error:  # what the owner's binding answers a handler's misfit response with
            return Result.unexpected_error(
                f"the fake owner of {topic} answered a response that does not fit its type ({type(error).__name__})")
        return Result(result.status, wire, result.detail, result.headers, result.successful)


def _with_trace(headers: Mapping[str, str] | None) -> dict[str, str]:
    """The caller's headers and, where it set none, the current trace's `traceparent`: what the sender `create_app`
    makes (`extra_headers=propagation_headers`) puts on the wire to a real owner."""
    sent = dict(headers or {})
    present = {name.lower() for name in sent}
    sent.update({name: value for name, value in propagation_headers().items() if name.lower() not in present})
    return sent
