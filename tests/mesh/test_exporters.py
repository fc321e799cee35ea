from __future__ import annotations

import threading

import pytest

from svcgen.runtime import TraceContext
from svcgen.runtime._mesh.exporters import Exporter, InMemoryExporter, QueueExporter
from svcgen.runtime._mesh.traces import TraceEvent, TraceRecord


def event(n: int) -> TraceRecord:
    trace = TraceContext(f"{n:032x}", f"{n:016x}")
    return TraceEvent(trace, "orders", "orders:get", "ok", duration_ms=1.0).to_record()


def test_queue_drops_the_oldest_when_full_and_counts() -> None:
    queue = QueueExporter(cap=3)
    for n in range(1, 6):
        queue.export(event(n))
    assert queue.dropped == 2
    assert [e.trace_id for e in queue.drain()] == [f"{n:032x}" for n in (3, 4, 5)]
    assert queue.drain() == []


def test_queue_drains_in_batches_oldest_first() -> None:
    queue = QueueExporter(cap=10)
    for n in range(1, 6):
        queue.export(event(n))
    assert [e.span_id for e in queue.drain(2)] == [f"{1:016x}", f"{2:016x}"]
    assert queue.drain_wire(1) == [
        {"traceId": f"{3:032x}", "spanId": f"{3:016x}", "service": "orders", "topic": "orders:get", "status": "ok",
         "durationMs": 1.0, "startedAt": "1970-01-01T00:00:00.000Z"}
    ]
    assert len(queue) == 2
    assert queue.drain(0) == []
    assert len(queue.drain(100)) == 2


def test_in_memory_keeps_the_newest_cap_events_and_clears() -> None:
    memory = InMemoryExporter(cap=2)
    for n in range(1, 5):
        memory.export(event(n))
    assert [e.trace_id for e in memory.events] == [f"{3:032x}", f"{4:032x}"]
    assert memory.events == memory.events  # reading does not consume
    assert memory.dropped == 2
    memory.clear()
    assert memory.events == []


def test_caps_must_be_positive() -> None:
    with pytest.raises(ValueError):
        QueueExporter(cap=0)


def test_export_from_worker_threads_keeps_exact_counts() -> None:
    queue = QueueExporter(cap=100)
    one = event(1)

    def work() -> None:
        for _ in range(5000):
            queue.export(one)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(queue) == 100
    assert queue.dropped == 4 * 5000 - 100


def test_both_satisfy_the_protocol() -> None:
    exporters: list[Exporter] = [InMemoryExporter(), QueueExporter()]
    for exporter in exporters:
        exporter.export(event(1))
