"""Python source literals: strings, docstrings and JSON values written into generated code."""

from __future__ import annotations

import math
import textwrap
from typing import Any

DOCSTRING_WIDTH = 100
"""Docstring lines are wrapped here, so generated files stay within the repository's line length."""

_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def py_str(text: str) -> str:
    """A double-quoted string literal; anything unprintable is escaped."""
    return '"' + "".join(_escape(char) for char in text) + '"'


def _escape(char: str) -> str:
    if char in _ESCAPES:
        return _ESCAPES[char]
    return char if char.isprintable() else repr(char)[1:-1]


def py_value(value: Any) -> str:
    """A JSON value (as parsed from YAML) as a Python expression."""
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, str):
        return py_str(value)
    if isinstance(value, int):
        return repr(value)
    if isinstance(value, float):
        return py_float(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(py_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{py_str(str(key))}: {py_value(item)}" for key, item in value.items()) + "}"
    raise TypeError(f"not a JSON value: {value!r}")


def py_float(value: float) -> str:
    if math.isnan(value):
        return 'float("nan")'
    if math.isinf(value):
        return 'float("inf")' if value > 0 else 'float("-inf")'
    return repr(float(value))


def docstring(text: str, indent: int = 0) -> str:
    """A triple-quoted docstring, wrapped to DOCSTRING_WIDTH; continuation lines carry `indent` spaces."""
    width = max(DOCSTRING_WIDTH - indent, 40)
    lines: list[str] = []
    for paragraph_line in text.strip().splitlines():
        stripped = paragraph_line.rstrip()
        wrapped = textwrap.wrap(stripped, width=width, break_long_words=False, break_on_hyphens=False)
        lines.extend(wrapped or [""])
    body = [_escape_doc(line) for line in lines] or [""]
    if body[-1].endswith('"'):
        body[-1] = body[-1][:-1] + '\\"'
    pad = " " * indent
    if len(body) == 1:
        return f'"""{body[0]}"""'
    rest = "\n".join(f"{pad}{line}" if line else "" for line in body[1:])
    return f'"""{body[0]}\n{rest}\n{pad}"""'


def _escape_doc(line: str) -> str:
    escaped = "".join(
        "\\\\" if char == "\\" else char if char.isprintable() or char == "\t" else repr(char)[1:-1] for char in line
    )
    return escaped.replace('"""', '\\"\\"\\"')
