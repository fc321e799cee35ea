"""The JSON bytes of the artifacts: sorted keys, 2-space indent, `\\n`, final newline, UTF-8.

Sorted keys make the bytes independent of the order the collector happened to store things in. orjson
first (it writes NaN as null, keeping the file valid JSON); the standard library only for what orjson
refuses (integers beyond 64 bits, which a verbatim descriptor may carry).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final

import orjson

_DOCUMENT: Final = orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE | orjson.OPT_SORT_KEYS
_HASH_PREFIX: Final = "sha256:"


def document_bytes(doc: Any) -> bytes:
    try:
        return orjson.dumps(doc, option=_DOCUMENT)
    except (orjson.JSONEncodeError, TypeError):
        return (json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False, default=str) + "\n").encode()


def canonical_text(doc: Any) -> str:
    """Sorted keys, no whitespace: the form the collector hashes a spec in."""
    try:
        return orjson.dumps(doc, option=orjson.OPT_SORT_KEYS).decode()
    except (orjson.JSONEncodeError, TypeError):
        return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def text_hash(text: str) -> str:
    return _HASH_PREFIX + hashlib.sha256(text.encode()).hexdigest()
