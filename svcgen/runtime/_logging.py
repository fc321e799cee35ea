"""One logging setup for every svcgen process (services, the collector): each line carries a UTC time, the
level and the logger's name.

`logging_config()` is a `logging.config.dictConfig` document that also takes over uvicorn's own loggers, so it
is what a server is started with (`uvicorn.run(..., log_config=logging_config())`; `server_options` includes
it); `configure_logging()` applies it directly, for a process that logs before or without uvicorn.
"""

from __future__ import annotations

import logging
import logging.config
import time
from typing import Any, Final

LOG_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"
"""`2026-11-22T10:00:00.123Z WARNING svcgen.mesh.reporter: ...`"""
QUIET_LOGGERS: Final = ("httpx", "httpcore")
"""One line per outbound request (feeds, polls) is noise: warnings only."""


class UtcFormatter(logging.Formatter):
    """RFC 3339 UTC times with milliseconds, whatever the machine's zone."""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"


def logging_config(level: str = "INFO", *, access_log: bool = False) -> dict[str, Any]:
    """`access_log`: uvicorn's line per request, off unless asked for."""
    handler = {"class": "logging.StreamHandler", "formatter": "svcgen", "stream": "ext://sys.stderr"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
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
