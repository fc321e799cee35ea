"""Fault: hostile feeds (values at every edge) against `svcgen collector serve --store FILE`, killed with SIGKILL
and started again at random. Whatever was acknowledged is still there and counted; the store always reloads."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.support.reliability import CollectorProcess, invoke, report

FUZZ_SECONDS = 25.0
ENOUGH_KILLS, ENOUGH_ACKNOWLEDGED = 3, 30
"""Past FUZZ_SECONDS the fuzzing goes on until it has this much evidence (a loaded machine sends less in 25 s),
up to LAST_SECONDS."""
LAST_SECONDS = 180.0
KILL_GAP = 3.0
"""Seconds of feeding at least between two kills."""
MAX_EXAMPLES = 150
"""Examples past FUZZ_SECONDS are drawn but not sent; this bounds the drawing."""
MAX_COUNT = 2**63 - 1
MAX_DURATION_MS = 2**53

EDGE_NUMBERS = st.sampled_from([
    0, 1, -1, 0.5, 1.7e308, -1.7e308, 5e-324, 2**53, 2**53 + 1, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63) - 1,
    float("nan"), float("inf"), float("-inf"), True, False,
])
NUMBERS = st.one_of(EDGE_NUMBERS, st.floats(), st.integers(min_value=-(2**70), max_value=2**70))
TEXTS = st.one_of(
    st.text(max_size=12),
    st.integers(min_value=250, max_value=300).map(lambda n: "ж" * n),  # drawn whole: long draws are slow
    st.sampled_from(["", "\u0000", "\u202e", "\ufeff", "🙂" * 300, "é" * 257, "x" * 10_000, "\ud800"]),
)
JSON = st.recursive(
    st.none() | st.booleans() | NUMBERS | TEXTS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXTS, inner, max_size=4),
    max_leaves=16,
)
STATUSES = st.one_of(st.sampled_from(["ok", "created", "timeout", "not-found", "unexpected-error"]), TEXTS)


def nested(depth: int) -> Any:
    document: Any = {}
    for _ in range(depth - 1):
        document = {"a": document}
    return document


DEEP = st.integers(min_value=1, max_value=300).map(nested)


@dataclass
class Model:
    """What the collector acknowledged, as the fuzzer expects to find it."""

    traces: dict[str, int] = field(default_factory=dict)
    """Topic (one per batch) → events acknowledged."""
    issues: dict[str, int] = field(default_factory=dict)
    """Fingerprint (one per batch) → merged count expected."""
    registered: set[str] = field(default_factory=set)
    refused_registers: set[str] = field(default_factory=set)
    heartbeats: set[str] = field(default_factory=set)
    batches: dict[str, tuple[str, dict[str, Any], Any]] = field(default_factory=dict)
    """batchId → (topic, body, first answer), to send again."""
    sent: int = 0
    acknowledged: int = 0
    unstorable_skipped: int = 0
    kills: int = 0
    serial: int = 0
    started: float = 0.0
    """When the collector last started (monotonic)."""

    def next(self) -> int:
        self.serial += 1
        return self.serial


def send(base: str, topic: str, body: Any) -> tuple[str, Any]:
    """(statusCode, body) of one envelope; the body goes out as Python's json writes it (NaN and all), so a
    value JSON cannot carry is the server's to refuse. ("transport", None) when no envelope came back."""
    try:
        text = json.dumps(body)
        answer = httpx.post(f"{base}/svc/invoke", json={"topic": topic, "body": text}, timeout=10)
    except (httpx.HTTPError, ValueError):
        return "transport", None
    if answer.status_code != 200:
        return f"http-{answer.status_code}", None
    envelope = answer.json()
    decoded = envelope.get("body")
    return envelope["statusCode"], json.loads(decoded) if decoded else None


def counts_valid(count: Any) -> bool:
    return isinstance(count, int) and not isinstance(count, bool) and 1 <= count <= MAX_COUNT


@st.composite
def trace_batch(draw: st.DrawFn) -> tuple[list[dict[str, Any]], bool]:
    events = []
    for index in range(draw(st.integers(min_value=0, max_value=8))):
        event: dict[str, Any] = {"traceId": f"{index + 1:032x}", "spanId": draw(st.text("0123456789abcdef", min_size=16,
                                 max_size=16)), "service": "fuzz", "status": draw(STATUSES)}  # fmt: skip
        if draw(st.booleans()):
            event["durationMs"] = draw(NUMBERS)
        if draw(st.booleans()):
            event[draw(TEXTS)] = draw(JSON)  # a key outside the spec, ignored
        events.append(event)
    batched = draw(st.booleans())
    return events, batched


@st.composite
def issue_batch(draw: st.DrawFn) -> list[Any]:
    return [draw(st.one_of(NUMBERS, st.integers(min_value=1, max_value=100)))
            for _ in range(draw(st.integers(min_value=0, max_value=4)))]  # fmt: skip


OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("traces"), trace_batch()),
        st.tuples(st.just("issues"), issue_batch()),
        st.tuples(st.just("register"), st.one_of(JSON, DEEP)),
        st.tuples(st.just("heartbeat"), st.one_of(JSON, DEEP)),
        st.tuples(st.just("retry"), st.integers(min_value=0)),
        st.tuples(st.just("kill"), st.none()),
    ),
    max_size=12,
)


def run(collector: CollectorProcess, model: Model, operation: tuple[str, Any]) -> None:
    kind, data = operation
    base = collector.base
    n = model.next()
    if kind == "kill":
        if time.monotonic() - model.started < KILL_GAP:
            return  # a start takes seconds on a busy machine: leave time to feed between kills
        collector.kill()
        model.kills += 1
        collector.start()
        model.started = time.monotonic()
        return
    if kind == "retry":
        if model.batches:
            batch_id = sorted(model.batches)[data % len(model.batches)]
            topic, body, first = model.batches[batch_id]
            model.sent += 1
            assert send(base, topic, body) == ("ok", first), f"a retried batch {batch_id} answered differently"
        return
    if kind == "traces":
        events, batched = data
        topic = f"fuzz:t{n}"
        # Each event its own (traceId, spanId): the collector counts an event it holds already once, and this
        # model counts every acknowledged event.
        body = {"events": [{**event, "traceId": f"{n:016x}{index:016x}", "topic": topic}
                                           for index, event in enumerate(events)]}  # fmt: skip
        if batched:
            body["batchId"] = f"b{n}"
        status, answer = send(base, "svc:mesh:traces", body)
        unstorable = sum(isinstance(e.get("durationMs"), float) and MAX_DURATION_MS < e["durationMs"] < float("inf")
                         for e in events)  # fmt: skip
        if status == "ok":
            # An event the counters cannot sum is skipped, never the batch refused (nor the event counted).
            assert answer["accepted"] <= len(events) - unstorable, f"an unsummable duration was counted: {body}"
            model.traces[topic] = answer["accepted"]
            if batched:
                model.batches[body["batchId"]] = ("svc:mesh:traces", body, answer)
        model.unstorable_skipped += unstorable if status == "ok" else 0
    elif kind == "issues":
        fingerprint = f"{n:032x}"
        entries = [{"fingerprint": fingerprint, "classification": "exception", "topic": "fuzz:t", "status": "timeout",
                    "count": count, "firstSeen": "2027-01-15T08:00:00.000Z", "lastSeen": "2027-01-15T08:00:00.000Z",
                    "exemplarTraceIds": []} for count in data]  # fmt: skip
        body = {"service": "fuzz", "issues": entries, "batchId": f"i{n}"}
        status, answer = send(base, "svc:mesh:issues", body)
        # Past 64 bits a JSON integer is read as a float (a malformed count); in between the store could not hold
        # it: skipped and counted either way, never the batch refused.
        too_big = sum(isinstance(c, int) and not isinstance(c, bool) and MAX_COUNT < c < 2**64 for c in data)
        if status == "ok":
            valid = [count for count in data if counts_valid(count)]
            assert answer["accepted"] == len(valid)
            if valid:
                model.issues[fingerprint] = min(sum(valid), MAX_COUNT)
            model.batches[body["batchId"]] = ("svc:mesh:issues", body, answer)
        model.unstorable_skipped += too_big if status == "ok" else 0
    elif kind == "register":
        service = f"fuzz-r{n}"
        status, _ = send(base, "svc:mesh:register", {"service": service, "topics": [], "extra": data})
        (model.registered if status == "ok" else model.refused_registers).add(service)
    else:
        service = f"fuzz-h{n}"
        body = {"service": service, "instanceId": "i-1", "health": {"isHealthy": True, "healthChecks": {"c": data}}}
        status, _ = send(base, "svc:mesh:heartbeat", body)
        if status == "ok":
            model.heartbeats.add(service)
    model.sent += 1
    model.acknowledged += status == "ok"


def verify(collector: CollectorProcess, model: Model) -> None:
    """Everything acknowledged is there and counted, nothing refused is; the store reloaded (no corrupt file)."""
    base = collector.base
    aside = [path.name for path in collector.store.parent.iterdir() if ".corrupt-" in path.name]
    assert aside == [], f"the store did not reload: {aside}; see {collector.log}"
    health = httpx.get(base + "/svc/health", timeout=10)
    assert health.status_code == 200, health.text
    for topic, accepted in model.traces.items():
        status, answer = invoke(base, "svc:mesh:query:topic", {"topic": topic})
        found = answer["invocations"] if status == "ok" else 0
        assert found == accepted, f"{topic}: {accepted} acknowledged, {found} counted"
    _, fleet = invoke(base, "svc:mesh:query:fleet", {"limit": 1000})  # the whole (small) fleet
    counted = {issue["fingerprint"]: issue["count"] for issue in fleet["issues"]}
    assert {fp: counted.get(fp) for fp in model.issues} == model.issues
    services = {entry["service"] for entry in fleet["services"]}
    assert model.registered <= services, model.registered - services
    assert not model.refused_registers & services, model.refused_registers & services
    assert model.heartbeats <= services, model.heartbeats - services
    assert fleet["dropped"]["counters"] == fleet["dropped"]["edges"] == fleet["dropped"]["catalog"] == 0


@pytest.mark.slow
def test_hostile_feeds_with_kills_and_restarts_lose_nothing_acknowledged(tmp_path: Path) -> None:
    """Starts `svcgen collector serve --store FILE` on a free port. Hypothesis (derandomised, no shrinking) draws
    sequences of traces batches (statuses, durations and extra keys at every edge, with and without batchId),
    issue batches (counts at every edge), registers and heartbeats carrying arbitrary JSON (NaN, infinities,
    integers past 64 bits, long and odd unicode strings, nesting up to 300 levels), retries of acknowledged
    batches, and SIGKILL + restart of the collector; for 25 s. Measures: feeds sent, acknowledged, refused as
    unstorable, kills. Asserts after every example and after a final SIGKILL and restart: every acknowledged
    trace event and issue count is counted exactly once (retries included), every acknowledged register and
    heartbeat is in the fleet, no refused register is, nothing unstorable was counted, the store reloads
    every time (no file moved aside, health 200)."""
    collector = CollectorProcess(store=tmp_path / "state" / "collector.json", workdir=tmp_path)
    collector.store.parent.mkdir()
    model = Model()
    deadline, last = time.monotonic() + FUZZ_SECONDS, time.monotonic() + LAST_SECONDS

    def done() -> bool:
        now = time.monotonic()
        enough = model.kills >= ENOUGH_KILLS and model.acknowledged >= ENOUGH_ACKNOWLEDGED
        return now > last or (now > deadline and enough)

    @settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(OPERATIONS)
    def fuzz(operations: list[tuple[str, Any]]) -> None:
        if done():
            return
        for operation in operations:
            run(collector, model, operation)
        verify(collector, model)

    try:
        collector.start()
        started = model.started = time.monotonic()
        fuzz()
        fuzzed = time.monotonic() - started
        collector.kill()
        model.kills += 1
        collector.start()
        verify(collector, model)
    finally:
        collector.stop()
    figures = report("feed fuzz", seconds=f"{fuzzed:.1f}", sent=model.sent, acknowledged=model.acknowledged,
                     unstorable_skipped=model.unstorable_skipped, kills=model.kills, batches=len(model.batches),
                     trace_topics=len(model.traces), issues=len(model.issues))  # fmt: skip
    assert model.kills >= ENOUGH_KILLS and model.acknowledged >= ENOUGH_ACKNOWLEDGED, figures


def test_a_feed_acknowledged_right_before_sigkill_is_there_after_the_restart(tmp_path: Path) -> None:
    """Starts `svcgen collector serve --store FILE`; sends a register and a traces batch and, as soon as the
    traces answer arrives, kills the collector with SIGKILL; starts it again on the same store. Asserts: the
    register and the events are there (the durability promise: acknowledged means in the store's log)."""
    collector = CollectorProcess(store=tmp_path / "collector.json", workdir=tmp_path)
    events = [{"traceId": f"{n + 1:032x}", "spanId": f"{n + 1:016x}", "service": "orders", "topic": "orders:place",
               "status": "ok"} for n in range(50)]  # fmt: skip
    try:
        collector.start()
        assert invoke(collector.base, "svc:mesh:register", {"service": "orders", "topics": [
            {"id": "orders:place", "requestSchema": {}, "responseSchema": {}}]})[0] == "ok"
        assert invoke(collector.base, "svc:mesh:traces", {"events": events}) == ("ok", {"accepted": 50})
        collector.kill()
        collector.start()
        _, topic = invoke(collector.base, "svc:mesh:query:topic", {"topic": "orders:place"})
        _, fleet = invoke(collector.base, "svc:mesh:query:fleet", {})
    finally:
        collector.stop()
    assert topic["invocations"] == 50
    assert [entry["service"] for entry in fleet["services"]] == ["orders"]
