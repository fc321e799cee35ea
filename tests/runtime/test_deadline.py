"""Deadlines on the serving side: `svc-deadline` and a topic's `timeout` bound the handler, over every face."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from svcgen.runtime import Context, HttpApp, HttpSender, Identity, Registry, Result, Route, Service
from svcgen.runtime._deadline import caller_deadline, deadline_header, remaining


@dataclass
class Ask:
    n: int = 0


def app_with(handler: Any, *, timeout: float | None = None, clock: Any = None) -> HttpApp:
    registry = Registry()
    registry.add("a:ask", handler, request=Ask, response=dict[str, Any], timeout=timeout)
    options = {} if clock is None else {"clock": clock}
    return HttpApp(Service(Identity("a"), registry, **options), [Route.parse("POST /ask", "a:ask")])


async def post(app: HttpApp, path: str, **options: Any) -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://a") as client:
        return await client.post(path, **options)


def test_the_caller_s_deadline_header_is_read_in_milliseconds_and_bad_values_are_ignored() -> None:
    assert caller_deadline({"svc-deadline": "250"}, 10.0) == 10.25
    assert caller_deadline({"svc-deadline": "-5"}, 10.0) == 10.0
    for bad in ("", "1.5", "soon", "١٢", "9" * 20):
        assert caller_deadline({"svc-deadline": bad}, 10.0) is None
    assert caller_deadline({}, 10.0) is None
    assert deadline_header(0.2999) == "299"
    assert deadline_header(-1) == "0"


@pytest.mark.parametrize("bad", ["--5", "-", "-+5", "- 5"])
def test_a_deadline_of_dashes_is_ignored_and_the_call_runs(bad: str) -> None:
    # `svc-deadline: --5` passed the check (all dashes stripped, then digits) and int() raised: the request was a
    # 500 before the handler ran, where a header that is no whole number is ignored, as a bad traceparent is.
    assert caller_deadline({"svc-deadline": bad}, 10.0) is None

    async def handle(request: Ask, context: Context) -> Result[dict[str, Any]]:
        return Result.ok({"n": request.n, "bounded": context.deadline is not None})

    response = asyncio.run(post(app_with(handle), "/ask", json={"n": 1}, headers={"svc-deadline": bad}))
    assert (response.status_code, response.json()) == (200, {"n": 1, "bounded": False})


@pytest.mark.parametrize("path", ["/ask", "/svc/invoke/a:ask"])
def test_a_request_whose_deadline_has_passed_is_not_started(path: str) -> None:
    ran: list[Ask] = []

    async def handle(request: Ask, context: Context) -> Result[dict[str, Any]]:
        ran.append(request)
        return Result.ok({})

    response = asyncio.run(post(app_with(handle), path, json={"n": 1}, headers={"svc-deadline": "0"}))
    assert response.status_code == 504
    assert response.json() == {"status": "timeout", "detail": "the deadline passed before a:ask started"}
    assert ran == []


def test_the_envelope_face_honours_the_deadline_too() -> None:
    ran: list[Ask] = []

    async def handle(request: Ask, context: Context) -> Result[dict[str, Any]]:
        ran.append(request)
        return Result.ok({})

    envelope = {"topic": "a:ask", "headers": {"svc-deadline": "0"}, "body": "{}"}
    response = asyncio.run(post(app_with(handle), "/svc/invoke", json=envelope))
    assert response.json()["statusCode"] == "timeout"
    assert ran == []


def test_a_handler_past_the_topic_s_timeout_is_cancelled_and_answers_timeout() -> None:
    cancelled = asyncio.Event()

    async def handle(request: Ask, context: Context) -> Result[dict[str, Any]]:
        try:
            await asyncio.Event().wait()  # never set: only the deadline ends it
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return Result.ok({})

    async def run() -> httpx.Response:
        response = await post(app_with(handle, timeout=0.05), "/ask", json={})
        assert cancelled.is_set()
        return response

    response = asyncio.run(run())
    assert (response.status_code, response.json()["detail"]) == (504, "a:ask did not finish before its deadline")


def test_the_earlier_of_caller_deadline_and_topic_timeout_wins() -> None:
    now = [50.0]
    seen: list[float | None] = []

    async def handle(request: Ask, context: Context) -> Result[dict[str, Any]]:
        seen.append(context.deadline)
        return Result.ok({})

    app = app_with(handle, timeout=2.0, clock=lambda: now[0])
    asyncio.run(post(app, "/ask", json={}, headers={"svc-deadline": "500"}))
    asyncio.run(post(app, "/ask", json={}, headers={"svc-deadline": "5000"}))
    asyncio.run(post(app, "/ask", json={}))
    assert seen == [50.5, 52.0, 52.0]


def test_outbound_calls_from_a_handler_carry_what_is_left_of_its_deadline() -> None:
    forwarded: list[str | None] = []

    def owner(request: httpx.Request) -> httpx.Response:
        forwarded.append(request.headers.get("svc-deadline"))
        return httpx.Response(200, json={})

    sender = HttpSender("http://b.test/svc/invoke", transport=httpx.MockTransport(owner))
    outside: list[float | None] = []

    async def handle(request: Ask, context: Context) -> Result[dict[str, Any]]:
        await sender.send("b:do", {})
        return Result.ok({})

    async def run() -> None:
        await post(app_with(handle), "/ask", json={}, headers={"svc-deadline": "800"})
        outside.append(remaining())
        await sender.send("b:do", {})  # outside any handler: no deadline, no header

    asyncio.run(run())
    assert outside == [None]
    assert 0 < int(forwarded[0] or 0) <= 800
    assert forwarded[1] is None
