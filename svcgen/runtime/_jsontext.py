"""The JSON text of derived documents: one encoder for committed, served and hashed forms, and the one hash.

Both forms fall back to the standard library only for what orjson refuses (integers beyond 64 bits, which a
verbatim document from elsewhere may carry).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final

import orjson

HASH_PREFIX: Final = "sha256:"

_DOCUMENT_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE


def document_bytes(doc: Any) -> bytes:
    """Reviewable form: 2-space indent, keys in insertion order, `\\n` line endings, final newline, UTF-8. The one
    form of every document written or served: contracts, the HTTP documents, the UI artifacts."""
    try:
        return orjson.dumps(doc, option=_DOCUMENT_OPTIONS)
    except (orjson.JSONEncodeError, TypeError):
        text = json.dumps(doc, indent=2, ensure_ascii=False, default=str) + "\n"
        return text.encode("utf-8", "surrogatepass")


def hash_bytes(doc: Any) -> bytes:
    """Hashed form: sorted keys, no whitespace, UTF-8."""
    try:
        return orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)
    except (orjson.JSONEncodeError, TypeError):
        text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
        return text.encode("utf-8", "surrogatepass")


def content_hash(data: bytes) -> str:
    """`sha256:` + hex SHA-256 of the bytes."""
    return HASH_PREFIX + hashlib.sha256(data).hexdigest()


def document_hash(doc: Any) -> str:
    """`sha256:` + hex SHA-256 of the document's hashed form (`hash_bytes`)."""
    return content_hash(hash_bytes(doc))
