"""The poller: what a sweep records for each kind of answer, its interval loop, and hostile targets."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
import pytest

from svcgen.collector import Collector, MemoryStore, collector_service
from svcgen.collector.poller import DEFAULT_INTERVAL, FleetEntry, Poll, Poller
from svcgen.collector.snapshot import Json
from svcgen.runtime import HealthCheck, HealthCheckResult, HealthChecks, Identity, Service, create_app
from tests.support.sample import build_registry
from tests.support.server import free_port, running

SPEC = {"service": "orders", "topics": [{"id": "orders:place", "requestSchema": {}, "responseSchema": {}}]}
HEALTHY = {"isHealthy": True, "healthChecks": {"db": {"status": "ok"}}}
UNHEALTHY = {"isHealthy": False, "healthChecks": {"db": {"status": "failed"}}}


@dataclass
class Recorded:
    service: str
    base_url: str
    spec: dict[str, Any] | None
    health: dict[str, Any] | None
    error: str | None


class RecordingSink:
    def __init__(self) -> None:
        self.polls: list[Recorded] = []
        self.prefixes: dict[str, str] = {}

    def record_poll(
        self,
        service: str,
        base_url: str,
        *,
        spec: dict[str, Any] | None,
        health: dict[str, Any] | None,
        error: str | None,
        prefix: str = "/svc",
    ) -> None:
        self.polls.append(Recorded(service, base_url, spec, health, error))
        self.prefixes[service] = prefix

    def by_name(self) -> dict[str, Recorded]:
        return {poll.service: poll for poll in self.polls}


Answer = tuple[int, bytes]


def answering(routes: dict[str, Answer | Exception]) -> httpx.MockTransport:
    """Answers `http://<host>/<path>` from `routes`; an exception value is raised as the transport's failure."""

    def handle(request: httpx.Request) -> httpx.Response:
        answer = routes.get(f"{request.url.host}{request.url.path}", (404, b'{"status":"not-found","detail":"x"}'))
        if isinstance(answer, Exception):
            raise answer
        return httpx.Response(answer[0], content=answer[1])

    return httpx.MockTransport(handle)


def service(
    host: str, spec: Answer | Exception, health: Answer | Exception | None = None
) -> dict[str, Answer | Exception]:
    routes: dict[str, Answer | Exception] = {f"{host}/svc/spec": spec}
    if health is not None:
        routes[f"{host}/svc/health"] = health
    return routes


def ok(doc: Any, status: int = 200) -> Answer:
    return status, orjson.dumps(doc)


def swept(fleet: Any, transport: httpx.AsyncBaseTransport, **options: Any) -> tuple[RecordingSink, list[Poll]]:
    sink = RecordingSink()
    polls = asyncio.run(Poller(sink, fleet, transport=transport, **options).sweep())
    return sink, polls


def test_a_healthy_and_an_unhealthy_service_are_both_recorded_as_data() -> None:
    transport = answering(service("a.test", ok(SPEC), ok(HEALTHY)) | service("b.test", ok(SPEC), ok(UNHEALTHY, 503)))
    sink, polls = swept([("a", "http://a.test/"), ("b", "http://b.test")], transport)
    assert sink.by_name() == {
        "a": Recorded("a", "http://a.test", SPEC, HEALTHY, None),
        "b": Recorded("b", "http://b.test", SPEC, UNHEALTHY, None),
    }
    assert all(poll.ok for poll in polls)


def test_a_service_without_a_health_surface_is_a_successful_poll_without_health() -> None:
    sink, _ = swept([("a", "http://a.test")], answering(service("a.test", ok(SPEC))))
    assert sink.polls == [Recorded("a", "http://a.test", SPEC, None, None)]


@pytest.mark.parametrize(
    ("spec", "health", "error"),
    [
        (ok({"status": "x"}, 500), ok(HEALTHY), "spec: HTTP 500"),
        ((302, b""), ok(HEALTHY), "spec: HTTP 302"),
        ((200, b"<html>"), ok(HEALTHY), "spec: body is not valid JSON"),
        (ok([1, 2]), ok(HEALTHY), "spec: body is not a JSON object"),
        (ok({"service": "a"}), ok(HEALTHY), "spec: not a service spec (no topics array)"),
        (ok(SPEC), ok(HEALTHY, 500), "health: HTTP 500"),
        (ok(SPEC), ok(HEALTHY, 201), "health: HTTP 201"),
        (ok(SPEC), (503, b"down"), "health: body is not valid JSON"),
        (ok(SPEC), ok({"healthChecks": {}}), "health: not a health aggregate (no boolean isHealthy)"),
        (ok(SPEC), ok({"isHealthy": "yes"}), "health: not a health aggregate (no boolean isHealthy)"),
        ((404, b""), (404, b""), "spec: HTTP 404"),
        (ok({}, 500), ok({}, 500), "spec: HTTP 500; health: HTTP 500"),
    ],
)
def test_a_failed_poll_is_recorded_as_an_error_never_as_data(spec: Answer, health: Answer, error: str) -> None:
    sink, polls = swept([("a", "http://a.test")], answering(service("a.test", spec, health)))
    assert sink.polls == [Recorded("a", "http://a.test", None, None, error)]
    assert polls[0].error == error and not polls[0].ok


def test_connection_errors_and_timeouts_are_failed_polls() -> None:
    routes = service("gone.test", httpx.ConnectError("connection refused"), ok(HEALTHY))
    routes |= service("slow.test", httpx.ReadTimeout("slow"), httpx.ReadTimeout("slow"))
    sink, _ = swept([("gone", "http://gone.test"), ("slow", "http://slow.test")], answering(routes), timeout=2)
    recorded = sink.by_name()
    assert recorded["gone"].error == "spec: ConnectError: connection refused"
    assert recorded["slow"].error == "spec: no answer within 2s; health: no answer within 2s"
    assert all(poll.spec is None and poll.health is None for poll in sink.polls)


def test_a_hanging_answer_is_cut_at_the_timeout_and_the_others_are_recorded() -> None:
    async def handle(request: httpx.Request) -> httpx.Response:
        if request.url.host == "hang.test":
            await asyncio.sleep(60)
        path = request.url.path
        return httpx.Response(200, content=orjson.dumps(SPEC if path.endswith("/spec") else HEALTHY))

    started = time.monotonic()
    sink, _ = swept([("hang", "http://hang.test"), ("a", "http://a.test")], httpx.MockTransport(handle), timeout=0.2)
    assert time.monotonic() - started < 2
    assert sink.by_name()["a"].error is None
    assert sink.by_name()["hang"].error == "spec: no answer within 0.2s; health: no answer within 0.2s"


def test_an_oversized_answer_is_a_failed_poll() -> None:
    transport = answering(service("a.test", (200, b" " * 2048 + orjson.dumps(SPEC)), ok(HEALTHY)))
    sink, _ = swept([("a", "http://a.test")], transport, max_body_bytes=1024)
    assert sink.polls[0].error == "spec: answer exceeds 1024 bytes"


def test_the_prefix_is_normalised_and_moves_both_surfaces() -> None:
    seen: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        return httpx.Response(200, content=orjson.dumps(SPEC if request.url.path.endswith("spec") else HEALTHY))

    sink, _ = swept([("a", "http://a.test/base/")], httpx.MockTransport(handle), prefix="ops/")
    assert sorted(seen) == ["/base/ops/health", "/base/ops/spec"]
    assert sink.polls[0].error is None


def test_targets_are_polled_concurrently() -> None:
    async def handle(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0.2)
        return httpx.Response(200, content=orjson.dumps(SPEC if request.url.path.endswith("spec") else HEALTHY))

    fleet = [(f"s{i}", f"http://s{i}.test") for i in range(8)]
    started = time.monotonic()
    sink, _ = swept(fleet, httpx.MockTransport(handle))
    assert time.monotonic() - started < 1.0  # 8 targets x 0.2 s would be 1.6 s one after another
    assert sorted(poll.service for poll in sink.polls if poll.error is None) == [name for name, _ in fleet]


def test_fleet_sources_sync_async_and_broken() -> None:
    transport = answering(service("a.test", ok(SPEC), ok(HEALTHY)))
    target = [("a", "http://a.test")]

    async def async_source() -> Iterable[FleetEntry]:
        return target

    def broken() -> Iterable[FleetEntry]:
        raise RuntimeError("registry down")

    assert len(swept(lambda: target, transport)[0].polls) == 1
    assert len(swept(async_source, transport)[0].polls) == 1
    assert swept(broken, transport)[0].polls == []
    bad_entries: Any = [("a", "http://a.test"), ("only-name",), ("b", 7), ""]
    assert [poll.service for poll in swept(bad_entries, transport)[0].polls] == ["a"]


def test_a_sink_that_raises_does_not_stop_the_sweep() -> None:
    class Flaky(RecordingSink):
        def record_poll(self, service: str, base_url: str, **fields: Any) -> None:
            if service == "a":
                raise RuntimeError("sink broken")
            super().record_poll(service, base_url, **fields)

    sink = Flaky()
    transport = answering(service("a.test", ok(SPEC), ok(HEALTHY)) | service("b.test", ok(SPEC), ok(HEALTHY)))
    polls = asyncio.run(Poller(sink, [("a", "http://a.test"), ("b", "http://b.test")], transport=transport).sweep())
    assert len(polls) == 2 and [poll.service for poll in sink.polls] == ["b"]


def test_a_sink_that_blocks_is_recorded_off_the_event_loop() -> None:
    # The collector on PostgreSQL: a poll recorded on the loop held every HTTP answer for a database round trip (or a
    # connection timeout while the database is away). Here the sink waits until the loop has run something else.
    recording, loop_ran = threading.Event(), threading.Event()

    class Waiting(RecordingSink):
        def record_poll(self, service: str, base_url: str, **fields: Any) -> None:
            recording.set()
            assert loop_ran.wait(10), "the event loop did not run while the poll was recorded"
            super().record_poll(service, base_url, **fields)

    async def sweep_while_the_loop_works() -> list[Poll]:
        transport = answering(service("a.test", ok(SPEC), ok(HEALTHY)))
        poller = Poller(sink, [("a", "http://a.test")], transport=transport, sink_blocks=True)
        sweeping = asyncio.create_task(poller.sweep())
        while not recording.is_set() and not sweeping.done():
            await asyncio.sleep(0.01)
        loop_ran.set()  # only the loop itself, while the sink records
        return await sweeping

    sink = Waiting()
    polls = asyncio.run(sweep_while_the_loop_works())
    assert [poll.service for poll in polls] == [poll.service for poll in sink.polls] == ["a"]


FAILED_B = "poll of b at http://b.test failed: spec: HTTP 500; polled again every 30 s, said again when it answers"


def test_one_log_line_per_failed_poll_and_none_per_success(caplog: pytest.LogCaptureFixture) -> None:
    transport = answering(service("a.test", ok(SPEC), ok(HEALTHY)) | service("b.test", ok({}, 500), ok(HEALTHY)))
    with caplog.at_level(logging.INFO, logger="svcgen.mesh.poller"):
        swept([("a", "http://a.test"), ("b", "http://b.test")], transport)
    lines = [record.getMessage() for record in caplog.records]
    assert lines == [FAILED_B]


def test_a_target_that_keeps_failing_is_said_once_until_it_answers_again(caplog: pytest.LogCaptureFixture) -> None:
    """A dead service logged one line per sweep (2,880 a day at the default interval); now once when its polls
    start failing, with the reason, and once when it answers again, per target. Every poll is still recorded."""
    routes = service("a.test", ok(SPEC), ok(HEALTHY)) | service("b.test", httpx.ConnectError("refused"))
    routes |= service("c.test", ok({}, 500), ok(HEALTHY))
    fleet: list[FleetEntry] = [("a", "http://a.test"), ("b", "http://b.test"), ("c", "http://c.test")]
    sink = RecordingSink()
    poller = Poller(sink, lambda: list(fleet), transport=answering(routes))
    with caplog.at_level(logging.INFO, logger="svcgen.mesh.poller"):
        for _ in range(10):
            asyncio.run(poller.sweep())
        routes |= service("b.test", ok(SPEC), ok(HEALTHY))  # b is back
        for _ in range(3):
            asyncio.run(poller.sweep())
        routes |= service("b.test", ok({}, 503))  # and gone again: a new outage, said again
        asyncio.run(poller.sweep())
        fleet.remove(("c", "http://c.test"))  # c leaves the fleet still failing, then comes back: a new outage
        asyncio.run(poller.sweep())
        fleet.append(("c", "http://c.test"))
        asyncio.run(poller.sweep())
    assert [record.getMessage() for record in caplog.records] == [
        "poll of b at http://b.test failed: spec: ConnectError: refused; polled again every 30 s, said again when it "
        "answers",
        "poll of c at http://c.test failed: spec: HTTP 500; polled again every 30 s, said again when it answers",
        "poll of b at http://b.test answers again, after 10 failed poll(s)",
        "poll of b at http://b.test failed: spec: HTTP 503; polled again every 30 s, said again when it answers",
        "poll of c at http://c.test failed: spec: HTTP 500; polled again every 30 s, said again when it answers",
    ]
    errors = [poll.error for poll in sink.polls if poll.service == "b"]
    assert len(errors) == 16 and all(error is not None for error in errors[:10] + errors[13:])
    assert errors[10:13] == [None, None, None]
    assert [poll.error for poll in sink.polls if poll.service == "c"] == ["spec: HTTP 500"] * 15


def test_the_log_line_of_a_failed_poll_leaves_out_the_urls_credentials(caplog: pytest.LogCaptureFixture) -> None:
    transport = answering(service("b.test", ok({}, 500), ok(HEALTHY)))
    with caplog.at_level(logging.INFO, logger="svcgen.mesh.poller"):
        sink, _ = swept([("b", "http://user:s3cret@b.test")], transport)
    assert [record.getMessage() for record in caplog.records] == [FAILED_B]
    assert sink.polls[0].base_url == "http://user:s3cret@b.test"  # kept whole: the poller authenticates with it


class FakeTime:
    """A clock that sweeps advance, and a sleep that records its delays and parks after `sweeps` of them."""

    def __init__(self, sweeps: int, sweep_cost: float) -> None:
        self.now = 100.0
        self.delays: list[float] = []
        self.sweeps = sweeps
        self.sweep_cost = sweep_cost
        self.parked = asyncio.Event()

    def clock(self) -> float:
        return self.now

    async def sleep(self, delay: float) -> None:
        self.delays.append(delay)
        self.now += delay
        if len(self.delays) >= self.sweeps:
            self.parked.set()
            await asyncio.Event().wait()  # until stop() cancels the loop
        await asyncio.sleep(0)


def test_sweeps_run_on_the_interval_never_overlap_and_survive_failures() -> None:
    fake = FakeTime(sweeps=4, sweep_cost=3.0)
    active = 0
    overlaps: list[int] = []
    calls = 0

    def fleet() -> Iterable[FleetEntry]:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise RuntimeError("fleet source down")  # this sweep polls nothing; the loop goes on
        return [("a", "http://a.test")]

    async def handle(request: httpx.Request) -> httpx.Response:
        nonlocal active
        active += 1
        overlaps.append(active)
        fake.now += fake.sweep_cost / 2  # two requests per sweep
        await asyncio.sleep(0)
        active -= 1
        return httpx.Response(200, content=orjson.dumps(SPEC if request.url.path.endswith("spec") else HEALTHY))

    sink = RecordingSink()

    async def scenario() -> Poller:
        poller = Poller(
            sink, fleet, transport=httpx.MockTransport(handle), interval=10, sleep=fake.sleep, clock=fake.clock
        )
        poller.start()
        poller.start()  # idempotent
        await asyncio.wait_for(fake.parked.wait(), 5)
        assert poller.running
        await poller.stop()
        assert not poller.running
        return poller

    poller = asyncio.run(scenario())
    assert poller.sweeps == 4
    assert len(sink.polls) == 3 and all(poll.error is None for poll in sink.polls)
    # the wait after each sweep is the interval less what the sweep took
    assert fake.delays == [7.0, 10.0, 7.0, 7.0]
    assert max(overlaps) <= 2  # only a sweep's own two requests are ever in flight together


def test_the_default_interval_is_thirty_seconds() -> None:
    assert DEFAULT_INTERVAL == 30.0
    assert Poller(RecordingSink(), []).interval == 30.0


def test_stop_is_bounded_and_cancels_in_flight_requests() -> None:
    cancelled = asyncio.Event()
    entered = asyncio.Event()

    async def handle(request: httpx.Request) -> httpx.Response:
        entered.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return httpx.Response(200)

    async def scenario() -> float:
        poller = Poller(RecordingSink(), [("a", "http://a.test")], transport=httpx.MockTransport(handle), timeout=30)
        poller.start()
        await asyncio.wait_for(entered.wait(), 5)
        started = time.monotonic()
        await poller.stop()
        assert cancelled.is_set()
        await poller.stop()  # stopping twice is harmless
        return time.monotonic() - started

    assert asyncio.run(scenario()) < 1.0


def app_with_health(name: str, *, healthy: bool) -> Any:
    def database() -> HealthCheckResult:
        return HealthCheckResult.ok() if healthy else HealthCheckResult.failed("connection refused")

    checks = HealthChecks([HealthCheck("database", database), HealthCheck("cache", lambda: True)])
    return create_app(Service(Identity(name), build_registry(), health=checks), ["POST /orders -> orders:place"])


async def _hanging_server() -> tuple[asyncio.Server, str]:
    """Accepts connections and reads, but never answers."""

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.read(65536)
            await asyncio.sleep(3600)
        finally:
            writer.close()

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}"


def test_a_real_fleet_over_uvicorn_with_a_hanging_and_a_dead_target() -> None:
    sink = RecordingSink()
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there

    async def sweep(fleet: Callable[[str], Awaitable[list[FleetEntry]]]) -> float:
        server, hanging = await _hanging_server()
        async with server:
            started = time.monotonic()
            await Poller(sink, await fleet(hanging), timeout=1.0).sweep()
            return time.monotonic() - started

    with (
        running(app_with_health("orders", healthy=True)) as orders,
        running(app_with_health("payments", healthy=False)) as payments,
    ):

        async def fleet(hanging: str) -> list[FleetEntry]:
            return [("orders", orders), ("payments", payments), ("hang", hanging), ("dead", dead)]

        elapsed = asyncio.run(sweep(fleet))

    assert elapsed < 3.0  # the hanging target is cut at the 1 s timeout
    recorded = sink.by_name()
    assert recorded["orders"].error is None and recorded["orders"].health is not None
    assert recorded["orders"].spec is not None and recorded["orders"].spec["service"] == "orders"
    assert recorded["orders"].health["isHealthy"] is True
    payments_poll = recorded["payments"]
    assert payments_poll.error is None and payments_poll.health is not None
    assert payments_poll.health["isHealthy"] is False  # a 503 health is unhealthy data, not a failed poll
    assert payments_poll.health["healthChecks"]["database"]["status"] == "failed"
    assert recorded["hang"].error == "spec: no answer within 1s; health: no answer within 1s"
    assert recorded["dead"].error is not None and recorded["dead"].error.startswith("spec: ConnectError")
    assert all(recorded[name].spec is None for name in ("hang", "dead"))


def test_a_sweep_folds_into_the_real_collector() -> None:
    collector_module = pytest.importorskip("svcgen.collector.collector")
    collector = collector_module.Collector()
    transport = answering(service("a.test", ok(SPEC), ok(UNHEALTHY, 503)) | service("b.test", ok({}, 500)))
    asyncio.run(
        Poller(collector, [("orders", "http://a.test"), ("broken", "http://b.test")], transport=transport).sweep()
    )
    fleet = {entry["service"]: entry for entry in collector.query_fleet().payload["services"]}
    assert fleet["orders"]["topics"] == 1  # orders:place
    assert fleet["broken"]["topics"] == 0  # a failed poll is never ingested as data


def test_a_spec_answered_with_the_same_bytes_is_handed_over_as_the_same_document() -> None:
    routes = service("orders", (200, orjson.dumps(SPEC)), (200, orjson.dumps(HEALTHY)))
    sink = RecordingSink()
    poller = Poller(sink, [("orders", "http://orders")], transport=answering(routes))
    asyncio.run(poller.sweep())
    asyncio.run(poller.sweep())
    routes["orders/svc/spec"] = (200, orjson.dumps({**SPEC, "topics": []}))
    asyncio.run(poller.sweep())
    first, second, third = (poll.spec for poll in sink.polls)
    assert first == SPEC and second is first  # not parsed again: the collector sees it is unchanged
    assert third == {**SPEC, "topics": []} and third is not first


class AwayStore(MemoryStore):
    """A memory store whose writes fail with `away` (the reason) while it is set, as a vanished disk's do."""

    away: str | None = None

    def append(self, change: Json) -> None:
        self.problem = self.away
        if self.away is not None:
            raise OSError(self.away)
        super().append(change)


def test_polls_the_store_cannot_take_are_counted_and_said_once_per_outage(caplog: pytest.LogCaptureFixture) -> None:
    """A poll taken while the store was away was dropped with no count and only the feeds' line ("N feed(s) refused",
    though nobody resends a poll); now counted in `polls_lost` and said once when the store starts refusing them
    and once when it takes them again."""
    store = AwayStore()
    collector = Collector(store)
    transport = answering(service("a.test", ok(SPEC), ok(HEALTHY)) | service("b.test", ok({}, 500)))
    poller = Poller(collector, [("orders", "http://a.test"), ("broken", "http://b.test")], transport=transport)
    with caplog.at_level(logging.INFO, logger="svcgen.mesh.collector"):
        store.away = "disk gone"
        for _ in range(5):
            asyncio.run(poller.sweep())
        store.away = None
        asyncio.run(poller.sweep())
        store.away = "disk gone again"
        asyncio.run(poller.sweep())
    assert [record.getMessage() for record in caplog.records if record.name == "svcgen.mesh.collector"] == [
        "collector store cannot persist (disk gone); poll results are dropped until it can (each target is polled "
        "again on the next sweep)",
        "collector store takes poll results again (10 dropped so far)",
        "collector store cannot persist (disk gone again); poll results are dropped until it can (each target is "
        "polled again on the next sweep)",
    ]
    assert (collector.polls_lost, collector.store_failures) == (12, 0)  # polls, not feeds a reporter resends
    answer = collector.query_fleet().payload
    assert answer is not None
    fleet = {entry["service"]: entry for entry in answer["services"]}
    assert fleet["orders"]["topics"] == 1 and fleet["broken"]["topics"] == 0  # the sweep in between was stored


def test_the_store_check_counts_the_polls_lost_beside_the_feeds_refused() -> None:
    """Health said "N feed(s) refused so far" while the polls the store could not take went unmentioned."""
    store = AwayStore()
    collector = Collector(store)
    poller = Poller(collector, [("orders", "http://a.test")], transport=answering(service("a.test", ok(SPEC),
                                                                                         ok(HEALTHY))))  # fmt: skip
    store.away = "disk gone"
    for _ in range(3):
        asyncio.run(poller.sweep())
    assert collector.traces({"events": []}).status == "service-unavailable"

    async def health() -> httpx.Response:
        app = create_app(collector_service(collector))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://collector") as client:
            return await client.get("/svc/health")

    answer = asyncio.run(health())
    assert answer.status_code == 503
    assert answer.json()["healthChecks"]["store"] == {
        "status": "failed", "detail": "disk gone; 1 feed(s) refused and 3 poll(s) lost so far"}  # fmt: skip
