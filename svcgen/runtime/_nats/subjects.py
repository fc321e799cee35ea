"""NATS subjects of a service (docs/nats.md):

- `svc.invoke.<service>`: the message envelope in, the response envelope out (the NATS face of `POST
  {prefix}/invoke`);
- `svc.topic.<service>.<topic>[.<version>]`: the request payload in (headers as NATS headers), the response
  envelope out (the NATS face of `POST {prefix}/invoke/<topic>[/<version>]`).

A topic or version is one subject token: `.`, `*`, `>` and `%` in it are percent-encoded (`%2E`, `%2A`, `%3E`,
`%25`), so every topic id has exactly one subject and back (`orders:place` stays as it is).
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import unquote

SUBJECT_ROOT: Final = "svc"
_ESCAPES: Final = {"%": "%25", ".": "%2E", "*": "%2A", ">": "%3E"}
_NEEDS_ESCAPE: Final = re.compile(r"[%.*>]")


def invoke_subject(service: str) -> str:
    return f"{SUBJECT_ROOT}.invoke.{service}"


def topic_prefix(service: str) -> str:
    """`svc.topic.<service>`: every per-topic subject of `service` starts with it and a dot."""
    return f"{SUBJECT_ROOT}.topic.{service}"


def topic_subject(service: str, topic: str, version: str = "") -> str:
    subject = f"{topic_prefix(service)}.{token(topic)}"
    return f"{subject}.{token(version)}" if version else subject


def token(text: str) -> str:
    """`text` as one subject token."""
    return _NEEDS_ESCAPE.sub(lambda match: _ESCAPES[match.group()], text) if _NEEDS_ESCAPE.search(text) else text


def topic_of(subject: str, prefix: str) -> tuple[str, str | None] | None:
    """(topic, version or None) of a per-topic subject under `prefix` (`topic_prefix(service)`), else None."""
    if not subject.startswith(prefix) or subject[len(prefix) : len(prefix) + 1] != ".":
        return None
    tokens = subject[len(prefix) + 1 :].split(".")
    if len(tokens) > 2 or not all(tokens):
        return None
    topic = unquote(tokens[0])
    return (topic, unquote(tokens[1])) if len(tokens) == 2 else (topic, None)
