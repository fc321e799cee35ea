"""Input limits of the HTTP binding: each defined once here, with the answer a request over it gets.

| Limit | Default | Answer |
|---|---|---|
| body size | 1 MiB | 413, `{status: bad-request, detail}` |
| header count | 100 | 431, `{status: bad-request, detail}` |
| JSON nesting depth | 64 | 400 `bad-request` (inside the envelope: `statusCode: bad-request`) |
| duplicate object key | refused | 400 `bad-request`, detail `... has duplicate key "<name>"` |
| body not UTF-8 | refused | 400 `bad-request`, detail `... is not valid UTF-8` |
| JSON arrays and objects in one body | 10,000 | 400 `bad-request`, detail `... has more than N arrays and objects` |
| a complete request (head and body) | within 5 s of opening or of the previous response | connection closed |

The status vocabulary has no entry for 413 or 431, so their failure bodies say `bad-request`, the
nearest status, while the HTTP code says which limit it was. The JSON rules live in the runtime core
(`svcgen.runtime._jsonlimits`) because the invoke envelope's `body` is parsed there, past this layer;
this module carries them to it through `Limits.json`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from .. import _status as st
from .._jsonlimits import DEFAULT_MAX_JSON_CONTAINERS, DEFAULT_MAX_JSON_DEPTH, JsonLimits
from .requests import AsgiScope

DEFAULT_MAX_BODY_BYTES: Final = 1024 * 1024
DEFAULT_MAX_HEADERS: Final = 100
DEFAULT_IDLE_TIMEOUT: Final = 5.0
"""Seconds a connection has, after opening or after its previous response, to deliver a complete request (head
and body); then it is closed."""

BODY_TOO_LARGE_CODE: Final = 413
TOO_MANY_HEADERS_CODE: Final = 431
LIMIT_STATUS: Final = st.BAD_REQUEST
"""Status text of the 413 and 431 failure bodies (the vocabulary has no closer one)."""

__all__ = [
    "BODY_TOO_LARGE_CODE",
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_HEADERS",
    "DEFAULT_MAX_JSON_CONTAINERS",
    "DEFAULT_MAX_JSON_DEPTH",
    "LIMIT_STATUS",
    "TOO_MANY_HEADERS_CODE",
    "LimitExceeded",
    "Limits",
    "check_headers",
    "server_options",
]


class LimitExceeded(Exception):
    """A request over a transport-level limit; answered with `code` and the failure body."""

    def __init__(self, code: int, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


@dataclass(frozen=True, slots=True)
class Limits:
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_headers: int = DEFAULT_MAX_HEADERS
    max_json_depth: int = DEFAULT_MAX_JSON_DEPTH
    reject_duplicate_keys: bool = True
    """False documents "last value wins" instead of refusing a repeated key."""
    max_json_containers: int = DEFAULT_MAX_JSON_CONTAINERS
    json: JsonLimits = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.max_body_bytes < 0 or self.max_headers < 1:
            raise ValueError("max_body_bytes must be >= 0 and max_headers >= 1")
        # Built once: every request hands the same object to the core.
        json_limits = JsonLimits(self.max_json_depth, self.reject_duplicate_keys, self.max_json_containers)
        object.__setattr__(self, "json", json_limits)

    def body_too_large(self) -> LimitExceeded:
        return LimitExceeded(BODY_TOO_LARGE_CODE, f"body exceeds {self.max_body_bytes} bytes")


def server_options(idle_timeout: float = DEFAULT_IDLE_TIMEOUT, *, access_log: bool = False) -> dict[str, Any]:
    """uvicorn settings every server of a svcgen app is started with (`uvicorn.run(app, **server_options())`,
    `uvicorn.Config(app, **server_options())`): httptools and uvloop when installed (`svcgen` depends on both),
    the connection deadline (see `_http.deadlines`), and logs with time and level."""
    import importlib.util

    from .._logging import logging_config
    from .deadlines import protocol_class

    return {
        "http": protocol_class(),
        "loop": "uvloop" if importlib.util.find_spec("uvloop") else "asyncio",
        "timeout_keep_alive": idle_timeout,
        "access_log": access_log,
        "log_config": logging_config(access_log=access_log),
    }


def check_headers(scope: AsgiScope, limits: Limits) -> None:
    """Raises `LimitExceeded` (431) when the request carries more header lines than allowed."""
    count = len(scope.get("headers") or ())
    if count > limits.max_headers:
        raise LimitExceeded(TOO_MANY_HEADERS_CODE, f"request has {count} headers; at most {limits.max_headers} allowed")
