"""`Outcome`: a finished invocation as every transport frames it: the result, its encoded body, the version."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._reserved import VERSION_ECHO_HEADER
from ._result import Result

JSON_CONTENT_TYPE = "application/json"


# Not frozen, as every call builds one (see Invocation); treat it as read-only.
@dataclass(slots=True)
class Outcome:
    result: Result[Any]
    body: bytes
    """JSON text of the payload on success, of the failure body `{status, detail}` otherwise; empty for 204."""
    version: str = ""
    """The version that was selected; echoed as `svc-version` when non-empty."""

    def headers(self) -> dict[str, str]:
        headers = {"content-type": JSON_CONTENT_TYPE}
        if self.version:
            headers[VERSION_ECHO_HEADER] = self.version
        if self.result.headers:
            headers.update(self.result.headers)
        return headers
