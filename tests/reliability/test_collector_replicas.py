"""Collector replicas on one PostgreSQL database (`svcgen collector serve --store postgresql://...`, real processes
on 127.0.0.1): fed at once through different replicas with overlapping and repeated batches, every replica answers
every query alike and every counter, edge and issue count equals the ground truth computed here; a replica killed
with SIGKILL mid-stream loses nothing acknowledged and counts nothing twice while the reporters retry on another."""

from __future__ import annotations

import asyncio
import random
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

from svcgen.runtime._mesh.feeds import EnvelopeSender, FeedSender
from svcgen.runtime._status import STATUS_CODES, is_success
from tests.support.reliability import CollectorProcess, invoke, report

SERVICES = ("shop", "pay", "ship")
STATUSES = ("ok", "ok", "ok", "unexpected-error", "timeout", "made-up")
"""`made-up` is outside the spec's status table: counted under `other`."""
START = "2027-01-15T08:00:00.000Z"


def trace_events(count: int, seed: int) -> list[dict[str, Any]]:
    """`count` traces of a shop → pay → ship call chain; some spans fail."""
    chooser = random.Random(seed)
    events = []
    for number in range(count):
        trace_id = f"{seed:08x}{number:024x}"
        parent = None
        for depth, service in enumerate(SERVICES):
            span = f"{number:012x}{depth:04x}"
            event: dict[str, Any] = {"traceId": trace_id, "spanId": span, "service": service,
                                     "topic": f"{service}:call", "status": chooser.choice(STATUSES),
                                     "durationMs": chooser.randint(1, 50), "startedAt": START}  # fmt: skip
            if parent is not None:
                event["parentSpanId"] = parent
            events.append(event)
            parent = span
    chooser.shuffle(events)  # a child often arrives before its parent, in another batch, at another replica
    return events


def overlapping_batches(events: list[dict[str, Any]], size: int, seed: int) -> list[dict[str, Any]]:
    """Batches of `size` events each repeating some of the previous batch's, a batchId on most of them."""
    chooser = random.Random(seed)
    batches = []
    for start in range(0, len(events), size):
        overlap = events[max(0, start - 5) : start] if chooser.random() < 0.5 else []
        body: dict[str, Any] = {"events": overlap + events[start : start + size]}
        if chooser.random() < 0.8:
            body["batchId"] = f"traces-{seed}-{start}"
        batches.append(body)
    return batches


def issue_batches(seed: int) -> list[dict[str, Any]]:
    chooser = random.Random(seed)
    batches = []
    for number in range(30):
        service = SERVICES[number % len(SERVICES)]
        issues = [{"fingerprint": f"{service}-{kind}".ljust(32, "0"), "classification": "exception",
                   "service": service, "topic": f"{service}:call", "status": "internal-error",
                   "count": chooser.randint(1, 9), "firstSeen": START, "lastSeen": START,
                   "exemplarTraceIds": []} for kind in range(chooser.randint(1, 3))]  # fmt: skip
        batches.append({"service": service, "issues": issues, "batchId": f"issues-{seed}-{number}"})
    return batches


def ground_truth(trace_batches: list[dict[str, Any]], issues: list[dict[str, Any]]) -> dict[str, Any]:
    unique = {(event["traceId"], event["spanId"]): event for batch in trace_batches for event in batch["events"]}
    invocations: Counter[str] = Counter()
    statuses: Counter[tuple[str, str]] = Counter()
    for event in unique.values():
        invocations[event["topic"]] += 1
        status = event["status"] if event["status"] in STATUS_CODES else "other"
        statuses[(event["topic"], status)] += 1
    service_of = {span: event["service"] for (_, span), event in unique.items()}
    edges: Counter[tuple[str, str]] = Counter()
    errors: Counter[tuple[str, str]] = Counter()
    for event in unique.values():
        if "parentSpanId" in event:
            pair = (service_of[event["parentSpanId"]], event["service"])
            edges[pair] += 1
            errors[pair] += not is_success(event["status"])
    issue_counts: Counter[str] = Counter()
    for batch in {batch["batchId"]: batch for batch in issues}.values():
        for issue in batch["issues"]:
            issue_counts[issue["fingerprint"]] += issue["count"]
    return {"invocations": invocations, "statuses": statuses, "edges": edges, "errors": errors,
            "issues": issue_counts}  # fmt: skip


@contextmanager
def replicas(count: int, database: str, workdir: Path) -> Iterator[list[CollectorProcess]]:
    started: list[CollectorProcess] = []
    try:
        for _ in range(count):
            replica = CollectorProcess(store=workdir / "unused.json", workdir=workdir, database=database)
            replica.start()
            started.append(replica)
        yield started
    finally:
        for replica in started:
            replica.stop()


def every_answer(base: str, traces: list[str]) -> dict[str, Any]:
    answers: dict[str, Any] = {"fleet": invoke(base, "svc:mesh:query:fleet", {})}
    for service in SERVICES:
        answers[f"service {service}"] = invoke(base, "svc:mesh:query:service", {"service": service})
        answers[f"topic {service}"] = invoke(base, "svc:mesh:query:topic", {"topic": f"{service}:call"})
    for trace_id in traces:
        answers[f"trace {trace_id}"] = invoke(base, "svc:mesh:query:trace", {"traceId": trace_id})
    return answers


def assert_exact(answers: dict[str, Any], truth: dict[str, Any], database: str) -> None:
    for service in SERVICES:
        status, topic = answers[f"topic {service}"]
        assert status == "ok"
        assert topic["invocations"] == truth["invocations"][f"{service}:call"]
        expected = {status: count for (name, status), count in truth["statuses"].items() if name == f"{service}:call"}
        assert topic["statusCounts"] == dict(sorted(expected.items()))
    _, fleet = answers["fleet"]
    assert {issue["fingerprint"]: issue["count"] for issue in fleet["issues"]} == dict(truth["issues"])
    with psycopg.connect(database) as connection:
        rows = connection.execute("SELECT client, server, count, errors FROM collector_edges").fetchall()
    assert {(client, server): count for client, server, count, _ in rows} == dict(truth["edges"])
    assert {(client, server): errors for client, server, _, errors in rows} == {
        pair: truth["errors"][pair] for pair in truth["edges"]}
    # The time buckets add exactly too: every call once in its minute's cell, per status and per edge.
    with psycopg.connect(database) as connection:
        cells = connection.execute("SELECT kind, a, b, status, cell[1] FROM collector_buckets").fetchall()
    topic_calls: Counter[tuple[str, str]] = Counter()
    edge_calls: Counter[tuple[str, str]] = Counter()
    for kind, a, b, status, calls in cells:
        if kind == "t":
            topic_calls[(b, status)] += int(calls)
        else:
            edge_calls[(a, b)] += int(calls)
    assert topic_calls == truth["statuses"]
    assert edge_calls == truth["edges"]


@pytest.mark.parametrize("count", [2, 3])
def test_replicas_fed_at_once_answer_alike_and_count_exactly(count: int, postgres_url: str, tmp_path: Path) -> None:
    """Starts `count` replicas on one fresh database; four threads send 1,200 trace events (400 traces of three
    spans, shuffled, in overlapping batches, most with a batchId) and 30 issue batches, each batch through one
    replica and again (same batchId) through the next, registers and heartbeats through every replica; then asks
    every replica the fleet, service, topic and trace queries and compares the answers and the edge table with the
    ground truth."""
    events = trace_events(400, seed=count)
    trace_batches = overlapping_batches(events, 20, seed=count)
    issues = issue_batches(seed=count)
    truth = ground_truth(trace_batches, issues)
    work: list[tuple[str, dict[str, Any]]] = [("svc:mesh:traces", batch) for batch in trace_batches]
    work += [("svc:mesh:issues", batch) for batch in issues]
    random.Random(count).shuffle(work)
    with replicas(count, postgres_url, tmp_path) as running:
        bases = [replica.base for replica in running]
        for number, service in enumerate(SERVICES):
            base = bases[number % count]
            assert invoke(base, "svc:mesh:register", {"service": service, "instanceId": f"{service}-1",
                                                      "topics": [{"id": f"{service}:call"}]})[0] == "ok"  # fmt: skip
        failures: list[str] = []

        def send(share: list[tuple[str, dict[str, Any]]], first: int) -> None:
            for index, (topic, body) in enumerate(share):
                for attempt in range(2 if "batchId" in body else 1):  # a batch with an id is sent twice
                    status, answer = invoke(bases[(first + index + attempt) % count], topic, body)
                    if status != "ok":
                        failures.append(f"{topic}: {status} {answer}")

        threads = [threading.Thread(target=send, args=(work[part::4], part)) for part in range(4)]
        for thread in threads:
            thread.start()
        for number, service in enumerate(SERVICES):
            invoke(bases[(number + 1) % count], "svc:mesh:heartbeat",
                   {"service": service, "instanceId": f"{service}-1"})  # fmt: skip
        for thread in threads:
            thread.join(timeout=300)
            assert not thread.is_alive()
        assert not failures, failures[:5]
        traces = sorted({event["traceId"] for event in events})[:10]
        answers = [every_answer(base, traces) for base in bases]
        for other in answers[1:]:
            assert other == answers[0]
        assert_exact(answers[0], truth, postgres_url)
        for trace_id in traces:
            status, found = answers[0][f"trace {trace_id}"]
            assert status == "ok" and len(found["events"]) == len(SERVICES)
    report(f"{count} replicas", events=len(events), batches=len(work), queries=len(answers[0]))


def test_a_replica_killed_mid_stream_loses_nothing_acknowledged_and_counts_nothing_twice(
    postgres_url: str, tmp_path: Path
) -> None:
    """Two replicas; three reporters (the runtime's FeedSender over EnvelopeSender) send trace and issue
    batches, each to its replica, and resend an unanswered or refused batch, same batchId, to the other; after a
    third of the batches the first replica is SIGKILLed. Every batch ends acknowledged and the counts equal the
    ground truth: nothing lost, nothing counted twice."""
    events = trace_events(300, seed=11)
    trace_batches = overlapping_batches(events, 15, seed=11)
    for number, batch in enumerate(trace_batches):
        batch["batchId"] = f"kill-{number}"  # a reporter always sends one
    issues = issue_batches(seed=12)
    truth = ground_truth(trace_batches, issues)
    work: list[tuple[str, dict[str, Any]]] = [("traces", batch) for batch in trace_batches]
    work += [("issues", batch) for batch in issues]
    random.Random(13).shuffle(work)
    sent = threading.Semaphore(0)
    with replicas(2, postgres_url, tmp_path) as running:
        bases = [replica.base for replica in running]
        resent = Counter[str]()

        async def reporter(share: list[tuple[str, dict[str, Any]]]) -> None:
            senders = [FeedSender(EnvelopeSender(base, timeout=5.0)) for base in bases]
            try:
                for feed, body in share:
                    for attempt in range(40):
                        sender = senders[0 if attempt == 0 else 1]
                        if feed == "traces":
                            answer = await sender.traces(body["events"], body["batchId"])
                        else:
                            answer = await sender.issues(body)
                        if answer.is_successful:
                            break
                        resent[feed] += 1
                        await asyncio.sleep(0.05)
                    else:
                        raise AssertionError(f"{feed} {body['batchId']} never acknowledged")
                    sent.release()
            finally:
                for sender in senders:
                    await sender.sender.aclose()  # type: ignore[attr-defined]

        threads = [threading.Thread(target=asyncio.run, args=(reporter(work[part::3]),)) for part in range(3)]
        for thread in threads:
            thread.start()
        for _ in range(len(work) // 3):
            assert sent.acquire(timeout=120)
        running[0].kill()
        for thread in threads:
            thread.join(timeout=300)
            assert not thread.is_alive()
        answers = every_answer(bases[1], [])
        assert_exact(answers, truth, postgres_url)
    assert sum(resent.values()) > 0, "the kill should have made some reporter resend"
    report("replica killed", batches=len(work), resent=dict(resent))
