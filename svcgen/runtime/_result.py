"""`Result`: what a handler returns, a semantic status plus an optional payload, detail and headers.

`Outcome`: a finished invocation as every transport frames it: the result, its encoded body, the version.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, Generic, Protocol, TypeVar

from . import _status as st
from ._topics import VERSION_ECHO_HEADER

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

_NO_HEADERS: Mapping[str, str] = MappingProxyType({})


class _SuccessFactory(Protocol):
    def __call__(self, payload: T = ..., *, headers: Mapping[str, str] | None = None) -> Result[T]: ...


class _FailureFactory(Protocol):
    def __call__(self, detail: str = ..., *, headers: Mapping[str, str] | None = None) -> Result[Any]: ...


def _success(status: str) -> _SuccessFactory:
    def factory(payload: Any = None, *, headers: Mapping[str, str] | None = None) -> Result[Any]:
        # _freeze inlined for the common case: a handler's answer is built on every invocation.
        return _result(status, payload, None, _freeze(headers) if headers else _NO_HEADERS, None)

    return factory


def _failure(status: str) -> _FailureFactory:
    def factory(detail: str = status, *, headers: Mapping[str, str] | None = None) -> Result[Any]:
        return _result(status, None, detail, _freeze(headers), None)

    return factory


def _freeze(headers: Mapping[str, str] | None) -> Mapping[str, str]:
    return MappingProxyType(dict(headers)) if headers else _NO_HEADERS


@dataclass(frozen=True, slots=True)
class Result(Generic[T]):
    status: str
    payload: T | None = None
    detail: str | None = None
    headers: Mapping[str, str] = field(default_factory=lambda: _NO_HEADERS)
    successful: bool | None = None
    """Set only for a status outside the table; a known status decides for itself."""

    @property
    def is_successful(self) -> bool:
        successful = self.successful
        # st.is_success inlined: this runs on every invocation, for the HTTP code and the trace.
        return self.status in st.SUCCESS_CODES if successful is None else successful

    @property
    def http_code(self) -> int:
        code = st.STATUS_CODES.get(self.status)  # the table's statuses first: every transport asks, every call
        return code if code is not None else st.http_code(self.status, self.is_successful)

    def failure_body(self) -> dict[str, str]:
        return {"status": self.status, "detail": self.detail or self.status}

    def with_headers(self, headers: Mapping[str, str]) -> Result[T]:
        merged = {**self.headers, **headers}
        return Result(self.status, self.payload, self.detail, _freeze(merged), self.successful)

    @staticmethod
    def of(
        status: str,
        payload: Any = None,
        detail: str | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        successful: bool | None = None,
    ) -> Result[Any]:
        known = status in st.STATUS_CODES
        return _result(status, payload, detail, _freeze(headers), None if known else bool(successful))

    ok = staticmethod(_success(st.OK))
    created = staticmethod(_success(st.CREATED))
    accepted = staticmethod(_success(st.ACCEPTED))
    updated = staticmethod(_success(st.UPDATED))
    deleted = staticmethod(_success(st.DELETED))
    ignored = staticmethod(_success(st.IGNORED))
    bad_request = staticmethod(_failure(st.BAD_REQUEST))
    unauthorized = staticmethod(_failure(st.UNAUTHORIZED))
    forbidden = staticmethod(_failure(st.FORBIDDEN))
    not_found = staticmethod(_failure(st.NOT_FOUND))
    conflict = staticmethod(_failure(st.CONFLICT))
    validation_error = staticmethod(_failure(st.VALIDATION_ERROR))
    too_many_requests = staticmethod(_failure(st.TOO_MANY_REQUESTS))
    unexpected_error = staticmethod(_failure(st.UNEXPECTED_ERROR))
    not_implemented = staticmethod(_failure(st.NOT_IMPLEMENTED))
    service_unavailable = staticmethod(_failure(st.SERVICE_UNAVAILABLE))
    timeout = staticmethod(_failure(st.TIMEOUT))


# From the class's own fields, in order: a field added to Result fails this unpacking at import, not later.
_set_status, _set_payload, _set_detail, _set_headers, _set_successful = (
    Result.__dict__[f.name].__set__ for f in fields(Result)
)
_new = object.__new__


def _result(
    status: str, payload: Any, detail: str | None, headers: Mapping[str, str], successful: bool | None
) -> Result[Any]:
    """`Result(...)` without the frozen dataclass's `__init__` (a frame and five `object.__setattr__` calls): every
    handler answer is built through a factory, so this halves what building one costs. Same fields, same
    immutability."""
    result: Result[Any] = _new(Result)
    _set_status(result, status)
    _set_payload(result, payload)
    _set_detail(result, detail)
    _set_headers(result, headers)
    _set_successful(result, successful)
    return result


JSON_CONTENT_TYPE = "application/json"


# Not frozen, as every call builds one (see Invocation); treat it as read-only.
@dataclass(slots=True)
class Outcome:
    result: Result[Any]
    body: bytes
    """JSON text of the payload on success, of the failure body `{status, detail}` otherwise; empty for 204."""
    version: str = ""
    """The version that was selected; echoed as `svc-version` when non-empty."""
    fixed: tuple[tuple[str, str], ...] = ()
    """The registration's own headers (a deprecated version's `deprecation` and `sunset`)."""

    def headers(self) -> dict[str, str]:
        """The answer's headers: the result's, then the binding's own (the version echo, a deprecated version's), which
        win: a handler answering with a Result it got from another service answers with this service's version."""
        headers = {"content-type": JSON_CONTENT_TYPE}
        if self.result.headers:
            headers.update(self.result.headers)
        if self.version:
            headers[VERSION_ECHO_HEADER] = self.version
        if self.fixed:
            headers.update(self.fixed)
        return headers
