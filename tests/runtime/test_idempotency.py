"""`Idempotency-Key`: the first answer kept and replayed, 422 for another request, 409 in flight, bounds."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from svcgen.runtime import (
    ApiKeyScheme,
    Context,
    Deprecation,
    Guard,
    HttpApp,
    Identity,
    MemoryIdempotencyStore,
    Registry,
    Result,
    Route,
    Security,
    Service,
)
from svcgen.runtime._idempotency import StoredAnswer


@dataclass
class Order:
    item: str = ""


class Counter:
    def __init__(self) -> None:
        self.calls = 0
        self.answers: list[Result[Any]] = []

    async def place(self, request: Order, context: Context) -> Result[dict[str, Any]]:
        self.calls += 1
        if self.answers:
            return self.answers.pop(0)
        return Result.created({"order": self.calls, "item": request.item}, headers={"location": f"/o/{self.calls}"})

    async def read(self, request: Order, context: Context) -> Result[dict[str, Any]]:
        self.calls += 1
        return Result.ok({"read": self.calls})


def app_for(counter: Counter, store: MemoryIdempotencyStore | None = None) -> HttpApp:
    registry = Registry()
    registry.add("o:place", counter.place, request=Order, response=dict[str, Any], success=["created"])
    registry.add("o:read", counter.read, request=Order, response=dict[str, Any], idempotent=True)
    service = Service(Identity("o"), registry, idempotency=store)
    return HttpApp(service, [Route.parse("POST /orders", "o:place"), Route.parse("GET /orders", "o:read")])


async def calls(app: HttpApp, *requests: tuple[str, str, dict[str, Any]]) -> list[httpx.Response]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://o") as client:
        return [await client.request(method, path, **options) for method, path, options in requests]


KEY = {"idempotency-key": "k-1"}


def test_the_first_answer_is_replayed_with_its_status_headers_and_body() -> None:
    counter = Counter()
    first, again, other_key = asyncio.run(
        calls(
            app_for(counter),
            ("POST", "/orders", {"json": {"item": "a"}, "headers": KEY}),
            ("POST", "/orders", {"json": {"item": "a"}, "headers": KEY}),
            ("POST", "/orders", {"json": {"item": "a"}, "headers": {"idempotency-key": "k-2"}}),
        )
    )
    assert counter.calls == 2
    assert (first.status_code, first.json(), first.headers["location"]) == (201, {"order": 1, "item": "a"}, "/o/1")
    assert (again.status_code, again.content, again.headers["location"]) == (201, first.content, "/o/1")
    assert again.headers["idempotent-replayed"] == "true"
    assert "idempotent-replayed" not in first.headers
    assert other_key.json() == {"order": 2, "item": "a"}


def test_a_deprecated_version_s_replayed_answer_still_says_it_is_deprecated() -> None:
    # The first answer carried `deprecation` and `sunset`; its replay (and a refused key's answer) came without them,
    # so a client that retried stopped being told the version goes away.
    counter = Counter()
    registry = Registry()
    registry.add("o:place", counter.place, request=Order, response=dict[str, Any], success=["created"],
                 deprecated=Deprecation(since="2026-01-01", sunset="2027-01-01"))  # fmt: skip
    app = HttpApp(Service(Identity("o"), registry), [Route.parse("POST /orders", "o:place")])
    first, again, other = asyncio.run(
        calls(
            app,
            ("POST", "/orders", {"json": {"item": "a"}, "headers": KEY}),
            ("POST", "/orders", {"json": {"item": "a"}, "headers": KEY}),
            ("POST", "/orders", {"json": {"item": "b"}, "headers": KEY}),
        )
    )
    told = {name: first.headers[name] for name in ("deprecation", "sunset")}
    assert told == {"deprecation": "@1767225600", "sunset": "Fri, 01 Jan 2027 00:00:00 GMT"}
    assert (again.headers["idempotent-replayed"], {name: again.headers.get(name) for name in told}) == ("true", told)
    assert (other.status_code, {name: other.headers.get(name) for name in told}) == (422, told)
    assert counter.calls == 1


def test_the_same_key_with_another_request_is_422_and_runs_nothing() -> None:
    counter = Counter()
    _, other = asyncio.run(
        calls(
            app_for(counter),
            ("POST", "/orders", {"json": {"item": "a"}, "headers": KEY}),
            ("POST", "/orders", {"json": {"item": "b"}, "headers": KEY}),
        )
    )
    assert (other.status_code, other.json()["status"]) == (422, "validation-error")
    assert counter.calls == 1


def test_a_key_in_flight_is_409_with_retry_after() -> None:
    release = asyncio.Event()
    started = asyncio.Event()

    class Slow(Counter):
        async def place(self, request: Order, context: Context) -> Result[dict[str, Any]]:
            started.set()
            await release.wait()
            return await super().place(request, context)

    counter = Slow()
    app = app_for(counter)

    async def run() -> tuple[httpx.Response, httpx.Response]:
        first = asyncio.create_task(calls(app, ("POST", "/orders", {"json": {}, "headers": KEY})))
        await started.wait()
        (second,) = await calls(app, ("POST", "/orders", {"json": {}, "headers": KEY}))
        release.set()
        return (await first)[0], second

    first, second = asyncio.run(run())
    assert first.status_code == 201
    assert (second.status_code, second.headers["retry-after"]) == (409, "1")
    assert counter.calls == 1


def test_an_answer_a_client_retries_is_not_kept() -> None:
    counter = Counter()
    counter.answers.append(Result.service_unavailable("try again"))
    first, second = asyncio.run(
        calls(
            app_for(counter),
            ("POST", "/orders", {"json": {}, "headers": KEY}),
            ("POST", "/orders", {"json": {}, "headers": KEY}),
        )
    )
    assert (first.status_code, second.status_code, counter.calls) == (503, 201, 2)


def test_idempotent_topics_and_calls_without_a_key_are_not_tracked() -> None:
    counter = Counter()
    store = MemoryIdempotencyStore()
    asyncio.run(
        calls(
            app_for(counter, store),
            ("GET", "/orders", {"headers": KEY}),
            ("GET", "/orders", {"headers": KEY}),
            ("POST", "/orders", {"json": {}}),
            ("POST", "/orders", {"json": {}}),
        )
    )
    assert counter.calls == 4
    assert len(store) == 0


@pytest.mark.parametrize("key", ["", "x" * 256, "tab\there", "ключ"])
def test_a_malformed_key_is_a_bad_request(key: str) -> None:
    counter = Counter()
    app = app_for(counter)

    async def run() -> Any:
        return await app.service.invoke_envelope({"topic": "o:place", "headers": {"idempotency-key": key}})

    assert b'"statusCode":"bad-request"' in asyncio.run(run())
    assert counter.calls == 0


def test_the_memory_store_is_bounded_in_entries_and_bytes_and_expires_answers() -> None:
    now = [0.0]
    store = MemoryIdempotencyStore(max_entries=3, max_bytes=1000, max_answer_bytes=500, ttl=10.0, clock=lambda: now[0])

    def answer(size: int) -> StoredAnswer:
        return StoredAnswer("ok", None, None, {}, b"x" * size, "", size)

    async def keep(key: str, size: int) -> None:
        assert (await store.claim("s", key, "f")).kind == "run"
        await store.complete("s", key, "f", answer(size))

    async def run() -> None:
        for key in "abcd":
            await keep(key, 10)
        assert len(store) == 3 and store.evicted == 1
        assert (await store.claim("s", "a", "f")).kind == "run"  # evicted: runs again
        await store.release("s", "a", "f")
        await keep("big", 600)
        assert store.too_large == 1 and (await store.claim("s", "big", "f")).kind == "run"
        await store.release("s", "big", "f")
        for key in "efg":
            await keep(key, 400)
        assert store.bytes <= 1000
        assert (await store.claim("s", "g", "f")).kind == "replay"
        now[0] = 11.0
        assert (await store.claim("s", "g", "f")).kind == "run"  # expired

    asyncio.run(run())


class Failing(MemoryIdempotencyStore):
    async def complete(self, scope: str, key: str, fingerprint: str, answer: StoredAnswer) -> None:
        raise OSError("disk full")


class Down(MemoryIdempotencyStore):
    async def claim(self, scope: str, key: str, fingerprint: str) -> Any:
        raise OSError("connection refused")


def test_a_store_that_cannot_keep_the_answer_still_answers_and_one_that_is_down_runs_nothing() -> None:
    counter = Counter()
    (created,) = asyncio.run(calls(app_for(counter, Failing()), ("POST", "/orders", {"json": {}, "headers": KEY})))
    assert (created.status_code, counter.calls) == (201, 1)
    (refused,) = asyncio.run(calls(app_for(counter, Down()), ("POST", "/orders", {"json": {}, "headers": KEY})))
    assert (refused.status_code, counter.calls) == (503, 1)


def test_one_caller_s_key_never_answers_another_caller_s_call() -> None:
    counter = Counter()
    registry = Registry()
    registry.add("o:place", counter.place, request=Order, response=dict[str, Any], success=["created"])
    guard = Guard(Security.declare([ApiKeyScheme("partner", "X-Key")], default=["partner"]),
                  api_keys={"partner": {"key-a": "alpha", "key-b": "beta"}})  # fmt: skip
    app = HttpApp(Service(Identity("o"), registry, security=guard), [Route.parse("POST /orders", "o:place")])
    alpha, beta, alpha_again = asyncio.run(
        calls(
            app,
            ("POST", "/orders", {"json": {"item": "a"}, "headers": {**KEY, "x-key": "key-a"}}),
            ("POST", "/orders", {"json": {"item": "a"}, "headers": {**KEY, "x-key": "key-b"}}),
            ("POST", "/orders", {"json": {"item": "a"}, "headers": {**KEY, "x-key": "key-a"}}),
        )
    )
    assert (alpha.json()["order"], beta.json()["order"], alpha_again.json()["order"]) == (1, 2, 1)
    assert "idempotent-replayed" not in beta.headers and alpha_again.headers["idempotent-replayed"] == "true"
