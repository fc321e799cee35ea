from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import httpx

from svcgen.runtime import Context, HttpSender, Identity, Registry, Result, Service, create_app
from svcgen.runtime._invocation import Invocation, lowered
from svcgen.runtime._mesh.exporters import InMemoryExporter
from svcgen.runtime._mesh.tracecontext import trace_propagating_sender
from svcgen.runtime._mesh.traces import TraceMiddleware
from tests.support.fakes import SequentialIds

OTHER = f"00-{'e' * 32}-{'f' * 16}-01"


@dataclass
class Call:
    traceparent: str | None = None


@dataclass
class Seen:
    traceparent: str | None = None
    tenant: str | None = None


def build_b() -> tuple[Any, InMemoryExporter]:
    async def echo(request: Call, context: Context) -> Result[Seen]:
        return Result.ok(Seen(context.headers.get("traceparent"), context.headers.get("x-tenant")))

    registry = Registry()
    registry.add("b:echo", echo)
    exporter = InMemoryExporter()
    tracer = TraceMiddleware(Identity("b"), exporter)  # real random ids: B never re-mints A's span id
    return create_app(Service(Identity("b"), registry, middleware=[tracer])), exporter


def build_a(sender: HttpSender) -> tuple[Service, InMemoryExporter]:
    async def call(request: Call, context: Context) -> Result[Any]:
        headers = {"traceparent": request.traceparent} if request.traceparent else None
        answer = await sender.send("b:echo", {}, headers)
        return Result.ok(answer.payload) if answer.is_successful else answer

    registry = Registry()
    registry.add("a:call", call)
    exporter = InMemoryExporter()

    class OtherIds(SequentialIds):
        def trace_id(self) -> str:
            return "a" * 32

    tracer = TraceMiddleware(Identity("a"), exporter, ids=OtherIds())
    return Service(Identity("a"), registry, middleware=[tracer]), exporter


def run_a(body: str, headers: dict[str, str] | None = None, **sender_options: Any) -> tuple[Any, Any, Any]:
    b_app, b_events = build_b()
    sender = trace_propagating_sender(
        "http://b.test/svc/invoke", transport=httpx.ASGITransport(app=b_app), **sender_options
    )
    a_service, a_events = build_a(sender)

    async def main() -> Any:
        async with sender:
            return await a_service.invoke(Invocation("a:call", lowered(headers), body))

    outcome = asyncio.run(main())
    assert outcome.result.status == "ok", outcome.body
    return outcome, a_events.events, b_events.events


def test_a_call_made_inside_an_invocation_continues_the_trace_in_b() -> None:
    _, [a_event], [b_event] = run_a("{}")
    assert a_event.parent_span_id is None
    assert b_event.trace_id == a_event.trace_id == "a" * 32
    assert b_event.parent_span_id == a_event.span_id
    assert b_event.span_id != a_event.span_id


def test_three_hops_from_an_inbound_traceparent() -> None:
    inbound = f"00-{'1' * 32}-{'2' * 16}-01"
    _, [a_event], [b_event] = run_a("{}", {"traceparent": inbound})
    assert (a_event.trace_id, a_event.parent_span_id) == ("1" * 32, "2" * 16)
    assert (b_event.trace_id, b_event.parent_span_id) == ("1" * 32, a_event.span_id)


def test_a_traceparent_set_by_the_caller_is_kept() -> None:
    _, [a_event], [b_event] = run_a(f'{{"traceparent": "{OTHER}"}}')
    assert (b_event.trace_id, b_event.parent_span_id) == ("e" * 32, "f" * 16)
    assert b_event.trace_id != a_event.trace_id


def test_an_own_extra_headers_hook_still_runs_and_a_failing_one_keeps_the_trace() -> None:
    outcome, [a_event], _ = run_a("{}", extra_headers=lambda: {"x-tenant": "t-1"})
    assert outcome.body and b'"tenant":"t-1"' in outcome.body

    def broken() -> dict[str, str]:
        raise RuntimeError("no tenant")

    outcome, [a_event], [b_event] = run_a("{}", extra_headers=broken)
    assert b_event.parent_span_id == a_event.span_id


def test_outside_an_invocation_no_traceparent_is_sent() -> None:
    b_app, b_events = build_b()
    sender = trace_propagating_sender("http://b.test/svc/invoke", transport=httpx.ASGITransport(app=b_app))

    async def main() -> Result[Any]:
        async with sender:
            return await sender.send("b:echo", {})

    answer = asyncio.run(main())
    assert answer.payload == {"traceparent": None, "tenant": None}
    [b_event] = b_events.events
    assert b_event.parent_span_id is None
