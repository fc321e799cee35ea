"""One logging setup for every svcgen process (services, the collector): each line carries a UTC time, the
level and the logger's name, and a line written during a traced invocation ends with its ids
(` trace=<trace id> span=<span id>`), so a log line leads to its trace and back.

`logging_config()` is a `logging.config.dictConfig` document that also takes over uvicorn's own loggers, so it
is what a server is started with (`uvicorn.run(..., log_config=logging_config())`; `server_options` includes
it); `configure_logging()` applies it directly, for a process that logs before or without uvicorn.
"""

from __future__ import annotations

import logging
import logging.config
import re
import time
from collections.abc import Callable
from typing import Any, Final

LOG_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s%(trace)s"
"""`2026-11-22T10:00:00.123Z WARNING svcgen.mesh.reporter: ...`, then ` trace=... span=...` inside an invocation."""
QUIET_LOGGERS: Final = ("httpx", "httpcore")
"""One line per outbound request (feeds, polls) is noise: warnings only."""


_CREDENTIALS: Final = re.compile(r"^((?:[A-Za-z][A-Za-z0-9+.-]*:)?//)?[^/?#]*@")
"""The user information of a URL (`user:password@`, `token@`), with or without its scheme."""


def shown(url: str) -> str:
    """A URL (a NATS server, an HTTP base, a target with its path), well-formed or not, for a log line, an error or
    a report: no credentials (`nats://user:password@host`, `http://user:password@host` as docs/nats.md and
    docs/collector.md allow them)."""
    return _CREDENTIALS.sub(lambda match: match.group(1) or "", url.strip(), count=1)


TraceIds = Callable[[], "tuple[str, str] | None"]
"""(trace id, span id) of the invocation running now, or None outside one."""


def _no_trace() -> tuple[str, str] | None:
    return None


_trace_ids: TraceIds = _no_trace


def read_trace_ids_from(source: TraceIds) -> None:
    """Where log lines find the running invocation's ids: the tracing layer registers itself here (it builds on
    this module, not the other way round)."""
    global _trace_ids
    _trace_ids = source


class TraceFields(logging.Filter):
    """Sets `record.trace` to ` trace=<id> span=<id>` during a traced invocation, else to ""; passes every record.
    A lookup that fails leaves the line without ids rather than losing it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "trace"):
            try:
                ids = _trace_ids()
            except Exception:
                ids = None
            record.trace = "" if ids is None else f" trace={ids[0]} span={ids[1]}"
        return True


class UtcFormatter(logging.Formatter):
    """RFC 3339 UTC times with milliseconds, whatever the machine's zone; a record no `TraceFields` saw gets no
    ids rather than failing the format."""

    def format(self, record: logging.LogRecord) -> str:
        if not hasattr(record, "trace"):
            record.trace = ""
        return super().format(record)

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"


def logging_config(level: str = "INFO", *, access_log: bool = False) -> dict[str, Any]:
    """`access_log`: uvicorn's line per request, off unless asked for."""
    handler = {"class": "logging.StreamHandler", "formatter": "svcgen", "stream": "ext://sys.stderr",
               "filters": ["trace"]}  # fmt: skip
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"trace": {"()": f"{__name__}.TraceFields"}},
        "formatters": {"svcgen": {"()": f"{__name__}.UtcFormatter", "format": LOG_FORMAT}},
        "handlers": {"stderr": handler},
        "root": {"handlers": ["stderr"], "level": level},
        "loggers": {
            # uvicorn's loggers write through the root handler, in the same format.
            "uvicorn": {"handlers": [], "propagate": True},
            "uvicorn.error": {"handlers": [], "propagate": True},
            "uvicorn.access": {"handlers": [], "propagate": True, "level": "INFO" if access_log else "WARNING"},
            **{name: {"level": "WARNING"} for name in QUIET_LOGGERS},
        },
    }


def configure_logging(level: str = "INFO") -> None:
    logging.config.dictConfig(logging_config(level))
