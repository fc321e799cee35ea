from __future__ import annotations

import asyncio
import os
import re
import threading
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from svcgen.runtime import TraceContext, current_trace, propagation_headers
from svcgen.runtime._invocation import Invocation
from svcgen.runtime._mesh.tracecontext import (
    SAMPLED,
    PendingTrace,
    _IdKey,
    activate,
    continue_trace,
    deactivate,
    format_traceparent,
    parse_traceparent,
    pending_trace,
    resolve,
)
from tests.support.fakes import SequentialIds, traced_service

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"
VALID = f"00-{TRACE}-{PARENT}-01"

# (label, header value or None, joined)
CASES: list[tuple[str, str | None, bool]] = [
    ("valid", VALID, True),
    ("valid-unsampled", f"00-{TRACE}-{PARENT}-00", True),
    ("valid-future-version-exact-shape", f"01-{TRACE}-{PARENT}-01", True),
    ("surrounding-ows", f" {VALID}\t", True),
    ("absent", None, False),
    ("empty", "", False),
    ("three-segments", f"00-{TRACE}-{PARENT}", False),
    ("five-segments", f"00-{TRACE}-{PARENT}-01-extra", False),
    ("version-ff", f"ff-{TRACE}-{PARENT}-01", False),
    ("version-one-digit", f"0-{TRACE}-{PARENT}-01", False),
    ("trace-id-short", f"00-{TRACE[:-1]}-{PARENT}-01", False),
    ("trace-id-long", f"00-{TRACE}0-{PARENT}-01", False),
    ("parent-id-short", f"00-{TRACE}-{PARENT[:-1]}-01", False),
    ("parent-id-long", f"00-{TRACE}-{PARENT}0-01", False),
    ("flags-one-digit", f"00-{TRACE}-{PARENT}-0", False),
    ("flags-non-hex", f"00-{TRACE}-{PARENT}-zz", False),
    ("uppercase", f"00-{TRACE.upper()}-{PARENT}-01", False),
    ("non-hex-trace", f"00-{TRACE[:-1]}g-{PARENT}-01", False),
    ("all-zero-trace", f"00-{'0' * 32}-{PARENT}-01", False),
    ("all-zero-parent", f"00-{TRACE}-{'0' * 16}-01", False),
    ("newline-suffix", VALID + "\n", False),
    ("garbage", "not a traceparent", False),
]


@pytest.mark.parametrize(("label", "value", "joined"), CASES, ids=[case[0] for case in CASES])
def test_traceparent_is_joined_only_in_its_exact_shape(label: str, value: str | None, joined: bool) -> None:
    parsed = parse_traceparent(value)
    if joined:
        assert parsed is not None
        assert parsed[:2] == (TRACE, PARENT)
    else:
        assert parsed is None


@pytest.mark.parametrize(("label", "value", "joined"), CASES, ids=[case[0] for case in CASES])
def test_a_bad_traceparent_starts_a_new_trace_and_the_call_goes_on(label: str, value: str | None, joined: bool) -> None:
    traced = traced_service()
    headers = {"traceparent": value} if value is not None else {}
    outcome = asyncio.run(traced.service.invoke(Invocation("orders:get", headers=headers, body='{"orderId": "o-1"}')))
    assert outcome.result.status == "ok"
    [event] = traced.exporter.events
    if joined:
        assert (event.trace_id, event.parent_span_id) == (TRACE, PARENT)
        assert event.span_id == f"{1:016x}"  # only a span id was minted
    else:
        assert (event.trace_id, event.parent_span_id) == (f"{1:032x}", None)
        assert event.span_id == f"{2:016x}"


def test_flags_keep_only_the_sampled_bit() -> None:
    assert parse_traceparent(f"00-{TRACE}-{PARENT}-03") == (TRACE, PARENT, 1)
    assert parse_traceparent(f"00-{TRACE}-{PARENT}-00") == (TRACE, PARENT, 0)


def test_format_is_version_00_with_the_span_as_parent() -> None:
    context = TraceContext(TRACE, "a" * 16, PARENT, 1)
    assert format_traceparent(context) == f"00-{TRACE}-{'a' * 16}-01"
    assert context.traceparent == format_traceparent(context)
    joined = continue_trace(f"7f-{TRACE}-{PARENT}-ff", SequentialIds())
    assert format_traceparent(joined) == f"00-{TRACE}-{1:016x}-01"


def test_propagation_headers_follow_the_current_trace() -> None:
    assert current_trace() is None
    assert propagation_headers() == {}
    context = TraceContext(TRACE, PARENT)
    token = activate(context)
    try:
        assert current_trace() is context
        assert propagation_headers() == {"traceparent": f"00-{TRACE}-{PARENT}-01"}
    finally:
        deactivate(token)
    assert current_trace() is None


@given(st.text(max_size=80))
def test_parse_never_raises_and_joins_only_the_exact_shape(value: str) -> None:
    parsed = parse_traceparent(value)
    if parsed is not None:
        assert re.fullmatch(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}", value.strip(" \t"))


@given(st.from_regex(r"\A[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}\Z"))
def test_every_exact_shape_with_nonzero_ids_and_a_known_version_joins(value: str) -> None:
    version, trace_id, parent_id, _ = value.split("-")
    expected = version != "ff" and trace_id != "0" * 32 and parent_id != "0" * 16
    assert (parse_traceparent(value) is not None) == expected


def test_a_non_string_header_value_starts_a_new_trace() -> None:
    assert parse_traceparent(b"00-" + TRACE.encode()) is None
    assert continue_trace(42, SequentialIds()).parent_span_id is None


def test_derived_ids_are_valid_w3c_ids_unique_per_invocation() -> None:
    roots = [resolve(pending_trace(None)) for _ in range(2000)]
    assert len({root.trace_id for root in roots}) == 2000 and len({root.span_id for root in roots}) == 2000
    for root in roots:
        assert re.fullmatch(r"[0-9a-f]{32}", root.trace_id) and root.trace_id != "0" * 32
        assert re.fullmatch(r"[0-9a-f]{16}", root.span_id) and root.span_id != "0" * 16
        assert root.parent_span_id is None and root.flags == SAMPLED
        assert parse_traceparent(format_traceparent(root)) == (root.trace_id, root.span_id, SAMPLED)


def test_ids_stay_the_same_across_blocks_and_after_their_block_was_let_go() -> None:
    key = _IdKey()
    numbers = [1, key.BLOCK - 1, key.BLOCK, key.BLOCK + 1, 5 * key.BLOCK + 7]
    first = [key.ids(number) for number in numbers]
    assert len({trace_id for trace_id, _ in first}) == len(numbers)
    for block in range(100, 100 + 2 * key.KEPT_BLOCKS):  # push every block above out of the cache
        key.ids(block * key.BLOCK)
    assert len(key.blocks) <= key.KEPT_BLOCKS
    assert [key.ids(number) for number in numbers] == first
    assert _IdKey().ids(1) != first[0]  # another key, other ids


class _ZeroBlocks:
    """A stream whose blocks read all zeros (never in practice): the retry must still give valid ids."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.retrying = False

    def copy(self) -> _ZeroBlocks:
        copied = _ZeroBlocks(self.real.copy())
        return copied

    def update(self, data: bytes) -> None:
        self.retrying = data.startswith(b"retry")
        self.real.update(data)

    def hexdigest(self, length: int) -> str:
        return self.real.hexdigest(length) if self.retrying else "0" * (2 * length)


def test_an_all_zero_id_in_the_stream_is_never_given_out() -> None:
    key = _IdKey()
    key.hasher = _ZeroBlocks(key.hasher)  # type: ignore[assignment]
    trace_id, span_id = key.ids(3)
    assert re.fullmatch(r"[0-9a-f]{32}", trace_id) and trace_id != "0" * 32
    assert re.fullmatch(r"[0-9a-f]{16}", span_id) and span_id != "0" * 16
    assert key.ids(3) == (trace_id, span_id) and key.ids(4) != (trace_id, span_id)


def test_a_pending_trace_joins_a_valid_inbound_trace_with_a_span_of_its_own() -> None:
    joined = resolve(pending_trace(VALID))
    assert (joined.trace_id, joined.parent_span_id, joined.flags) == (TRACE, PARENT, SAMPLED)
    assert joined.span_id != PARENT and re.fullmatch(r"[0-9a-f]{16}", joined.span_id)
    started = resolve(pending_trace(f"ff-{TRACE}-{PARENT}-01"))
    assert started.trace_id != TRACE and started.parent_span_id is None


def test_a_pending_trace_reads_the_same_ids_every_time_from_any_thread() -> None:
    for _ in range(20):
        trace = pending_trace(VALID)
        barrier = threading.Barrier(8)
        seen: list[TraceContext] = []

        def read(
            trace: PendingTrace = trace, barrier: threading.Barrier = barrier, seen: list[TraceContext] = seen
        ) -> None:
            barrier.wait()
            seen.append(resolve(trace))

        threads = [threading.Thread(target=read) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(seen) == 8 and all(context == seen[0] for context in seen)
        # Ids come from the invocation's number alone, not from who reads first: a copy reads the same.
        assert resolve((trace[0], trace[1])) == seen[0]


def test_the_current_pending_trace_is_read_as_what_it_resolves_to() -> None:
    trace = pending_trace(VALID)
    token = activate(trace)
    try:
        current = current_trace()
        assert current == resolve(trace)
        assert current is not None and current.parent_span_id == PARENT
        assert propagation_headers() == {"traceparent": current.traceparent}
    finally:
        deactivate(token)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX")
def test_a_forked_child_derives_other_ids_than_its_parent_for_the_same_invocation_number() -> None:
    trace = pending_trace(None)
    parent_ids = resolve(trace)
    reading, writing = os.pipe()
    child = os.fork()
    if child == 0:  # the child: report what the same pending trace resolves to, then leave at once
        try:
            derived = resolve(trace)
            os.write(writing, f"{derived.trace_id}{derived.span_id}".encode())
        finally:
            os._exit(0)
    os.close(writing)
    with os.fdopen(reading, "rb") as pipe:
        child_ids = pipe.read().decode()
    os.waitpid(child, 0)
    assert re.fullmatch(r"[0-9a-f]{48}", child_ids)
    assert child_ids != parent_ids.trace_id + parent_ids.span_id
    assert resolve(trace) == parent_ids  # the parent's own key is unchanged
