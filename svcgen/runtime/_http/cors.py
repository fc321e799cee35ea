"""CORS for a browser front end on another origin, served by Starlette's `CORSMiddleware` (the `cors` extra).

Set in wiring.py: `wiring.cors = Cors(allow_origins=["https://app.example.com"])`. Preflights (OPTIONS with
`Origin` and `Access-Control-Request-Method`) are answered before anything else runs; other requests get the
CORS response headers. Without `cors` set nothing is added and no cross-origin browser call is allowed. On top of
what `Cors` lists, a browser may always send the headers the service reads (`CALL_REQUEST_HEADERS`, and those its
security schemes read: each API key's header, `authorization` for a JWT) and its script may always read the
headers the service writes (`CALL_RESPONSE_HEADERS`), so what the product offers works from a browser without
listing it again.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

import orjson

from .. import _status as st
from .._deprecation import DEPRECATION_HEADER, SUNSET_HEADER
from .._idempotency import REPLAYED_HEADER, RETRY_AFTER_HEADER
from .._result import JSON_CONTENT_TYPE
from .._security import CALL_REQUEST_HEADERS, WWW_AUTHENTICATE_HEADER, ApiKeyScheme, Security
from .._topics import VERSION_ECHO_HEADER

CORS_MISSING: Final = "CORS needs Starlette's middleware: pip install 'svcgen[cors]'"
CALL_RESPONSE_HEADERS: Final = (
    VERSION_ECHO_HEADER,
    REPLAYED_HEADER,
    RETRY_AFTER_HEADER,
    DEPRECATION_HEADER,
    SUNSET_HEADER,
    WWW_AUTHENTICATE_HEADER,
)
"""The response headers the service writes on an answer: always exposed (`content-type` a browser shows anyway)."""
_NAMED: Final = 3
"""At most this many refused request headers are named in a refused preflight's detail, each cut to `_NAME_CHARS`."""
_NAME_CHARS: Final = 40


@dataclass(frozen=True, slots=True)
class Cors:
    allow_origins: Sequence[str] = ()
    """Exact origins (`https://app.example.com`); `*` allows any, and then no credentials."""
    allow_origin_regex: str | None = None
    allow_methods: Sequence[str] = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
    allow_headers: Sequence[str] = ("authorization", "content-type")
    """Request headers a browser may send besides the service's own (`CALL_REQUEST_HEADERS`) and those its
    security schemes read, which are always allowed."""
    allow_credentials: bool = False
    expose_headers: Sequence[str] = ()
    """Response headers a browser's script may read besides the service's own (`CALL_RESPONSE_HEADERS`), which are
    always exposed: name here the headers your handlers set."""
    max_age: int = 600
    """Seconds a browser may keep a preflight's answer."""

    def __post_init__(self) -> None:
        if self.allow_credentials and "*" in self.allow_origins:
            raise ValueError("Cors: allow_credentials with allow_origins ['*'] would let any site call with the "
                             "user's credentials; list the origins")  # fmt: skip
        for origin in self.allow_origins:
            _check_origin(origin)


def _check_origin(origin: str) -> None:
    """A browser's `Origin` is `scheme://host[:port]`, compared as text: a listed origin with a path (even `/`) or
    a query would never match, silently refusing the front end it was meant for."""
    if origin in ("*", "null"):
        return
    try:
        parts = urlsplit(origin)
    except ValueError:
        parts = None
    if parts is None or not parts.scheme or not parts.netloc or parts.path or parts.query or parts.fragment:
        bare = f"{parts.scheme}://{parts.netloc}" if parts is not None and parts.scheme and parts.netloc else None
        hint = f" (write {bare!r})" if bare else ""
        raise ValueError(f"Cors: origin {origin!r} is not scheme://host[:port], the only form a browser sends, so it "
                         f"would never match{hint}")  # fmt: skip


def security_headers(security: Security | None) -> list[str]:
    """The request headers `security`'s schemes read a credential from: a browser must be allowed to send them."""
    headers: list[str] = []
    for scheme in security.schemes if security is not None else ():
        header = scheme.header.lower() if isinstance(scheme, ApiKeyScheme) else "authorization"  # JWT: bearer
        if header not in headers:
            headers.append(header)
    return headers


def cors_middleware(app: Any, cors: Cors, security: Security | None = None) -> Any:
    """`app` behind Starlette's CORSMiddleware with `cors`, allowing the service's own request headers and those
    `security` reads and exposing its own response headers as well; ImportError naming the extra when it is missing."""
    return _middleware()(
        app,
        allow_origins=list(cors.allow_origins),
        allow_origin_regex=cors.allow_origin_regex,
        allow_methods=list(cors.allow_methods),
        allow_headers=_names(cors.allow_headers, CALL_REQUEST_HEADERS, security_headers(security)),
        allow_credentials=cors.allow_credentials,
        expose_headers=_names(cors.expose_headers, CALL_RESPONSE_HEADERS),
        max_age=cors.max_age,
    )


def _names(*groups: Sequence[str]) -> list[str]:
    """The header names of `groups`, lower-cased, each once, in order."""
    return list(dict.fromkeys(name.lower() for group in groups for name in group))


@functools.cache
def _middleware() -> type[Any]:
    """Starlette's CORSMiddleware, its preflight refusal worded as our failure body; it alone decides."""
    try:
        from starlette.datastructures import Headers
        from starlette.middleware.cors import CORSMiddleware
        from starlette.responses import Response
    except ImportError:
        raise ImportError(CORS_MISSING) from None

    class FailureBodyCors(CORSMiddleware):
        def preflight_response(self, request_headers: Headers) -> Response:
            response = super().preflight_response(request_headers)
            if response.status_code != 400:
                return response
            # Starlette's own text names what it refused: "Disallowed CORS origin, headers".
            refused = bytes(response.body).decode("latin-1").removeprefix("Disallowed CORS ").split(", ")
            headers = {name: value for name, value in response.headers.items() if name.lower() != "content-length"}
            headers["content-type"] = JSON_CONTENT_TYPE
            detail = _refused_detail(refused, request_headers, self.allow_headers)
            body = orjson.dumps({"status": st.BAD_REQUEST, "detail": detail})
            return Response(body, status_code=400, headers=headers)

    return FailureBodyCors


def _refused_detail(refused: list[str], request_headers: Mapping[str, str], allowed: Collection[str]) -> str:
    """What a refused preflight asked for that is not allowed, without the untrusted origin and with at most a
    few requested header names (and the method), each cut short."""
    parts = []
    for what in refused:
        if what == "headers":
            requested = request_headers.get("access-control-request-headers") or ""
            names = [name.strip() for name in requested.lower().split(",") if name.strip() not in allowed]
            shown = [name[:_NAME_CHARS] for name in names if name][:_NAMED]
            parts.append(f"request headers {', '.join(shown)}" if shown else "a request header")
        elif what == "method":
            parts.append(f"method {(request_headers.get('access-control-request-method') or '')[:_NAME_CHARS]}")
        else:
            parts.append(what)  # origin, private-network
    return f"CORS preflight refused, not allowed: {'; '.join(parts)}"
