"""Every svcgen process logs each line with a UTC time, the level and the logger; uvicorn's loggers included."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

SCRIPT = """
import logging.config, sys
from svcgen.runtime._logging import logging_config
logging.config.dictConfig(logging_config(access_log=sys.argv[1] == "on"))
logging.getLogger("svcgen.mesh.reporter").warning("%d trace event(s) never reached the collector", 3)
logging.getLogger("uvicorn.error").info("Application startup complete.")
logging.getLogger("uvicorn.access").info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:5000", "GET", "/svc/spec", "1.1", 200)
logging.getLogger("httpx").info("HTTP Request: POST http://collector/svc/invoke")
logging.getLogger("svcgen.pipeline").debug("not at the default level")
"""
LINE = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z) (DEBUG|INFO|WARNING|ERROR|CRITICAL) ([\w.]+): (.*)")


@pytest.mark.parametrize("access_log", ["on", "off"])
def test_log_lines_carry_time_level_and_logger(access_log: str) -> None:
    ran = subprocess.run([sys.executable, "-c", SCRIPT, access_log], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    lines = ran.stderr.splitlines()
    parsed = [LINE.fullmatch(line) for line in lines]
    assert all(parsed), lines
    assert [(m.group(2), m.group(3), m.group(4)) for m in parsed if m] == [
        ("WARNING", "svcgen.mesh.reporter", "3 trace event(s) never reached the collector"),
        ("INFO", "uvicorn.error", "Application startup complete."),
    ] + ([("INFO", "uvicorn.access", '127.0.0.1:5000 - "GET /svc/spec HTTP/1.1" 200')] if access_log == "on" else [])
