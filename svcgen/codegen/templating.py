"""The jinja2 environment over the `templates/` directory (installed as the package `svcgen.templates`)."""

from __future__ import annotations

import importlib.resources
import re
from functools import cache
from pathlib import Path
from typing import Any

import jinja2

from .literals import docstring, py_str, py_value

_BLANK_RUN = re.compile(r"\n{4,}")


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters["py"] = _py
    env.filters["docstring"] = docstring
    return env


def templates_dir() -> Path:
    try:
        root = importlib.resources.files("svcgen.templates")
    except ModuleNotFoundError:
        # A source checkout that was not installed: the templates sit beside the package.
        return Path(__file__).resolve().parents[2] / "templates"
    return Path(str(root))


def render(template: str, **context: Any) -> str:
    """Render a template; the text is normalised: no trailing spaces, at most two empty lines in a row,
    exactly one final newline."""
    text = environment().get_template(template).render(**context)
    lines = "\n".join(line.rstrip() for line in text.splitlines())
    return _BLANK_RUN.sub("\n\n\n", lines).strip("\n") + "\n"


def _py(value: Any) -> str:
    return py_str(value) if isinstance(value, str) else py_value(value)
