"""Trace propagation on outbound calls: an `HttpSender` that forwards the current `traceparent`.

Made inside an invocation, a call carries the caller's span as the callee's parent, so the trace continues in
the next service; outside one it carries nothing. A `traceparent` the caller set on the message is never
overwritten: `HttpSender` adds hook headers only where the caller set none of that name.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from .._http.sender import HeaderHook, HttpSender, Target
from .tracecontext import propagation_headers

logger = logging.getLogger("svcgen.mesh.propagation")


def trace_propagating_sender(target: Target, *, extra_headers: HeaderHook | None = None, **options: Any) -> HttpSender:
    """`HttpSender(target, **options)` whose outbound calls carry the current trace.

    An `extra_headers` hook of your own still runs; its headers win over the trace's, and if it raises the trace
    header still goes out.
    """
    hook = propagation_headers if extra_headers is None else _with_trace(extra_headers)
    return HttpSender(target, extra_headers=hook, **options)


def _with_trace(own: HeaderHook) -> HeaderHook:
    def headers() -> Mapping[str, str]:
        merged = dict(propagation_headers())
        try:
            merged.update(own())
        except Exception as exc:
            logger.warning("extra_headers hook failed (%s); sending the trace header only", type(exc).__name__)
        return merged

    return headers
