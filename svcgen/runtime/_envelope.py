"""Message envelopes: request `{topic, headers, body}`, response `{statusCode, isSuccessful, headers, body}`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

from ._context import CORRELATION_HEADER, TRACEPARENT
from ._deadline import DEADLINE_HEADER
from ._jsonlimits import DEFAULT_JSON_LIMITS, JsonLimits, JsonRefused, parse_json
from ._result import Outcome

CARRIED_HEADERS: Final[tuple[str, ...]] = (TRACEPARENT, CORRELATION_HEADER, DEADLINE_HEADER)
"""Headers of the HTTP request carrying an envelope that count where the envelope's own `headers` lack them: the
call's place in a trace, its correlation id and its deadline, which a proxy or tracer sets on the request."""


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


def with_carried_headers(envelope: Envelope, carried: Mapping[str, str]) -> dict[str, Any]:
    """The envelope as a value with `carried` (lower-cased names) laid under its own headers: its own win."""
    headers = {**carried, **{name.lower(): value for name, value in envelope.headers.items()}}
    return {"topic": envelope.topic, "headers": headers, "body": envelope.body}


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
