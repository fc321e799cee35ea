"""Message envelopes: request `{topic, headers, body}`, response `{statusCode, isSuccessful, headers, body}`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from ._jsonlimits import DEFAULT_JSON_LIMITS, JsonLimits, JsonRefused, parse_json
from ._result import Outcome


class EnvelopeError(ValueError):
    """A malformed envelope: a transport-level error (HTTP 400), not a domain outcome."""


@dataclass(frozen=True, slots=True)
class Envelope:
    topic: str
    headers: dict[str, str]
    body: str | None


def parse_envelope(raw: bytes | str, limits: JsonLimits = DEFAULT_JSON_LIMITS) -> Envelope:
    try:
        value = parse_json(raw, limits, "envelope")
    except JsonRefused as exc:
        raise EnvelopeError(str(exc)) from None
    return envelope_from(value)


def envelope_from(value: Any) -> Envelope:
    if not isinstance(value, dict):
        raise EnvelopeError("envelope must be a JSON object")
    topic = value.get("topic")
    if not isinstance(topic, str):
        raise EnvelopeError("envelope topic must be a string")
    headers = value.get("headers")
    if headers is None:
        headers = {}
    elif not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        raise EnvelopeError("envelope headers must be an object of strings")
    body = value.get("body")
    if body is not None and not isinstance(body, str):
        raise EnvelopeError("envelope body must be a string")
    return Envelope(topic, headers, body)


def response_envelope(outcome: Outcome) -> dict[str, Any]:
    result = outcome.result
    return {
        "statusCode": result.status,
        "isSuccessful": result.is_successful,
        "headers": outcome.headers(),
        "body": outcome.body.decode(),
    }


def response_envelope_bytes(outcome: Outcome) -> bytes:
    return orjson.dumps(response_envelope(outcome))
