"""The semantic status vocabulary and its two-way HTTP table (docs/wire.md, Statuses): the only place it lives."""

from __future__ import annotations

from typing import Final

OK: Final = "ok"
CREATED: Final = "created"
ACCEPTED: Final = "accepted"
UPDATED: Final = "updated"
DELETED: Final = "deleted"
IGNORED: Final = "ignored"
BAD_REQUEST: Final = "bad-request"
UNAUTHORIZED: Final = "unauthorized"
FORBIDDEN: Final = "forbidden"
NOT_FOUND: Final = "not-found"
CONFLICT: Final = "conflict"
VALIDATION_ERROR: Final = "validation-error"
TOO_MANY_REQUESTS: Final = "too-many-requests"
UNEXPECTED_ERROR: Final = "unexpected-error"
NOT_IMPLEMENTED: Final = "not-implemented"
SERVICE_UNAVAILABLE: Final = "service-unavailable"
TIMEOUT: Final = "timeout"

SUCCESS_CODES: Final[dict[str, int]] = {
    OK: 200,
    CREATED: 201,
    ACCEPTED: 202,
    UPDATED: 204,
    DELETED: 204,
    IGNORED: 200,
}

FAILURE_CODES: Final[dict[str, int]] = {
    BAD_REQUEST: 400,
    UNAUTHORIZED: 401,
    FORBIDDEN: 403,
    NOT_FOUND: 404,
    CONFLICT: 409,
    VALIDATION_ERROR: 422,
    TOO_MANY_REQUESTS: 429,
    UNEXPECTED_ERROR: 500,
    NOT_IMPLEMENTED: 501,
    SERVICE_UNAVAILABLE: 503,
    TIMEOUT: 504,
}

STATUS_CODES: Final[dict[str, int]] = {**SUCCESS_CODES, **FAILURE_CODES}

# Where several statuses share a code, the reverse direction needs one answer.
_REVERSE_OVERRIDES: Final[dict[int, str]] = {200: OK, 204: DELETED, 408: TIMEOUT, 502: SERVICE_UNAVAILABLE}

CODE_STATUSES: Final[dict[int, str]] = {
    **{code: status for status, code in reversed(STATUS_CODES.items())},
    **_REVERSE_OVERRIDES,
}

NO_BODY_CODES: Final = frozenset({204, 304})
"""HTTP answers without a body: the HTTP binding drops the payload there, and only there."""
PAYLOAD_OPTIONAL: Final = frozenset({UPDATED, DELETED})
"""Successes a handler may answer without a payload (`Result.deleted()`): then the body is empty."""


def is_success(status: str) -> bool:
    return status in SUCCESS_CODES


def http_code(status: str, successful: bool | None = None) -> int:
    """HTTP code of a status; an unknown one is 200 when successful, else 500."""
    code = STATUS_CODES.get(status)
    if code is not None:
        return code
    return 200 if successful else 500


def status_for_code(code: int) -> str:
    """Semantic status of an HTTP code; an unknown 2xx is `ok`, anything else unknown `unexpected-error`."""
    status = CODE_STATUSES.get(code)
    if status is not None:
        return status
    return OK if 200 <= code < 300 else UNEXPECTED_ERROR
