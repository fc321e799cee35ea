"""CORS for a browser front end on another origin, served by Starlette's `CORSMiddleware` (the `cors` extra).

Set in wiring.py: `wiring.cors = Cors(allow_origins=["https://app.example.com"])`. Preflights (OPTIONS with
`Origin` and `Access-Control-Request-Method`) are answered before anything else runs; other requests get the
CORS response headers. Without `cors` set nothing is added and no cross-origin browser call is allowed. The headers
the service's security schemes read (each API key's header, `authorization` for a JWT) are always allowed, so
the declared security works from a browser without listing them again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from .._security import ApiKeyScheme, Security

CORS_MISSING: Final = "CORS needs Starlette's middleware: pip install 'svcgen[cors]'"


@dataclass(frozen=True, slots=True)
class Cors:
    allow_origins: Sequence[str] = ()
    """Exact origins (`https://app.example.com`); `*` allows any, and then no credentials."""
    allow_origin_regex: str | None = None
    allow_methods: Sequence[str] = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
    allow_headers: Sequence[str] = ("authorization", "content-type", "svc-version", "traceparent")
    """Request headers a browser may send; the headers the service's security schemes read are added to them."""
    allow_credentials: bool = False
    expose_headers: Sequence[str] = ("svc-version", "www-authenticate")
    max_age: int = 600
    """Seconds a browser may keep a preflight's answer."""

    def __post_init__(self) -> None:
        if self.allow_credentials and "*" in self.allow_origins:
            raise ValueError("Cors: allow_credentials with allow_origins ['*'] would let any site call with the "
                             "user's credentials; list the origins")  # fmt: skip


def security_headers(security: Security | None) -> list[str]:
    """The request headers `security`'s schemes read a credential from: a browser must be allowed to send them."""
    headers: list[str] = []
    for scheme in security.schemes if security is not None else ():
        header = scheme.header.lower() if isinstance(scheme, ApiKeyScheme) else "authorization"  # JWT: bearer
        if header not in headers:
            headers.append(header)
    return headers


def cors_middleware(app: Any, cors: Cors, security: Security | None = None) -> Any:
    """`app` behind Starlette's CORSMiddleware with `cors`, allowing the headers `security` reads as well;
    ImportError naming the extra when it is missing."""
    try:
        from starlette.middleware.cors import CORSMiddleware
    except ImportError:
        raise ImportError(CORS_MISSING) from None
    return CORSMiddleware(
        app,
        allow_origins=list(cors.allow_origins),
        allow_origin_regex=cors.allow_origin_regex,
        allow_methods=list(cors.allow_methods),
        allow_headers=[*cors.allow_headers, *security_headers(security)],
        allow_credentials=cors.allow_credentials,
        expose_headers=list(cors.expose_headers),
        max_age=cors.max_age,
    )
