"""The canonical JSON text of derived documents: one encoder for committed, served and hashed forms."""

from __future__ import annotations

from typing import Any

import orjson

_DOCUMENT_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE


def document_bytes(doc: Any) -> bytes:
    """Reviewable form: 2-space indent, keys in insertion order, `\\n` line endings, final newline, UTF-8."""
    return orjson.dumps(doc, option=_DOCUMENT_OPTIONS)


def hash_bytes(doc: Any) -> bytes:
    """Hashed form: sorted keys, no whitespace, UTF-8."""
    return orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)
