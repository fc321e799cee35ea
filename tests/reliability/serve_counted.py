"""`svcgen serve` in this process, then what its mesh host counted, written as JSON once the server has stopped.

Usage: python serve_counted.py REPORT.json OUT/PACKAGE --port N

The service runs exactly as `svcgen serve OUT/PACKAGE` runs it (the same CLI function, uvicorn, one worker, the
lifespan's final feed flush on SIGTERM, then exit status 0); the only addition is a note of every MeshHost built,
so the test can read the trace queue's `dropped` and the reporter's `lost_trace_events` of the process it measured,
and, when SVCGEN_TEST_TRACE_QUEUE_CAP is set, a smaller trace queue cap.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from svcgen.runtime._mesh import host

QUEUE_CAP_ENV = "SVCGEN_TEST_TRACE_QUEUE_CAP"
"""Test-only: the trace queue's cap, which the manifest does not set."""
hosts: list[host.MeshHost] = []
_init = host.MeshHost.__init__


def _noting_init(self: host.MeshHost, identity: Any, settings: host.MeshSettings, **kwargs: Any) -> None:
    cap = os.environ.get(QUEUE_CAP_ENV)
    if cap:
        settings = dataclasses.replace(settings, trace_queue_cap=int(cap))
    _init(self, identity, settings, **kwargs)
    hosts.append(self)


def _stopped(signum: int, frame: object) -> None:
    # uvicorn re-raises the SIGTERM it handled once its graceful shutdown is over; end normally then.
    raise SystemExit(0)


def main() -> None:
    report, *argv = sys.argv[1:]
    host.MeshHost.__init__ = _noting_init  # type: ignore[method-assign]
    signal.signal(signal.SIGTERM, _stopped)
    from svcgen.cli import main as svcgen

    try:
        svcgen(["serve", *argv], standalone_mode=False)
    finally:
        counted = [
            {
                "service": mesh.identity.service,
                "queueCap": mesh.queue.cap,
                "dropped": mesh.queue.dropped,
                "leftInQueue": len(mesh.queue),
                "lostTraceEvents": mesh.reporter.lost_trace_events if mesh.reporter else None,
                "beats": mesh.reporter.beats if mesh.reporter else None,
            }
            for mesh in hosts
        ]
        Path(report).write_text(json.dumps(counted))


if __name__ == "__main__":
    main()
