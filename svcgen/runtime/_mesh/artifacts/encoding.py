"""The JSON bytes of the artifacts: sorted keys, 2-space indent, `\\n`, final newline, UTF-8.

Sorted keys make the bytes independent of the order the collector happened to store things in. orjson
first (it writes NaN as null, keeping the file valid JSON); the standard library only for what orjson
refuses (integers beyond 64 bits, which a verbatim descriptor may carry).
"""

from __future__ import annotations

import json
from typing import Any, Final

import orjson

_DOCUMENT: Final = orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE | orjson.OPT_SORT_KEYS


def document_bytes(doc: Any) -> bytes:
    try:
        return orjson.dumps(doc, option=_DOCUMENT)
    except (orjson.JSONEncodeError, TypeError):
        return (json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False, default=str) + "\n").encode()
