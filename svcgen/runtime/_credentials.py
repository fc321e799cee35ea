"""Credentials a service attaches when it sends a produced topic: set per topic in wiring.py.

    wiring.credentials["payments:capture"] = BearerToken(fetch_token)      # async () -> token text or (text, exp)
    wiring.credentials["ledger:post"] = ApiKey("x-api-key", wiring.environ["LEDGER_KEY"])

A token provider is called when a send needs a token and none is cached: the token is kept until shortly before
it expires (its `exp` claim, or the expiry the provider returns), so a provider is called about once per token
lifetime, never per request. A header the caller set itself is left alone. A provider that fails costs that send
an `unauthorized` result, never an exception; the token never reaches a log.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeAlias

import orjson

from ._result import Result

TokenProvider: TypeAlias = Callable[[], Awaitable["str | tuple[str, float]"]]
EXPIRY_MARGIN: Final = 30.0
"""Seconds before its expiry a cached token is replaced."""
UNKNOWN_EXPIRY_SECONDS: Final = 300.0
"""How long a token whose expiry cannot be read (not a JWT) is kept."""


class Credential(Protocol):
    async def headers(self) -> Mapping[str, str]:
        """The headers that carry the credential; raises when it cannot be had."""
        ...


@dataclass(frozen=True, slots=True)
class ApiKey:
    header: str
    value: str

    async def headers(self) -> Mapping[str, str]:
        return {self.header.lower(): _text(self.value)}


class BearerToken:
    """`Authorization: Bearer <token>` from `provider`, cached until `EXPIRY_MARGIN` before it expires. `clock`
    gives epoch seconds (a JWT's `exp` is one)."""

    def __init__(self, provider: TokenProvider, *, clock: Callable[[], float] = time.time) -> None:
        self._provider = provider
        self._clock = clock
        self._token = ""
        self._expires = 0.0
        self._lock = asyncio.Lock()
        self.fetches = 0

    async def headers(self) -> Mapping[str, str]:
        return {"authorization": f"Bearer {await self.token()}"}

    async def token(self) -> str:
        if self._token and self._clock() < self._expires - EXPIRY_MARGIN:
            return self._token
        async with self._lock:  # one provider call at a time; the others take its token
            if self._token and self._clock() < self._expires - EXPIRY_MARGIN:
                return self._token
            self.fetches += 1
            answer = await self._provider()
            token = _text(answer[0] if isinstance(answer, tuple) else answer)
            expires = answer[1] if isinstance(answer, tuple) else _expiry(token)
            self._token = token
            self._expires = expires if expires is not None else self._clock() + UNKNOWN_EXPIRY_SECONDS
            return token


def _text(credential: str) -> str:
    """The credential without surrounding whitespace: a token or key has none, but one read from a file or an
    environment variable often ends in a newline, and a header value with one would be dropped by the sender."""
    return credential.strip()


def _expiry(token: str) -> float | None:
    """The `exp` claim of a JWT, read without verifying (the receiver verifies; this only paces refreshes)."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = orjson.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, orjson.JSONDecodeError):
        return None
    expires = claims.get("exp") if isinstance(claims, dict) else None
    return float(expires) if isinstance(expires, int | float) else None


class SenderWithCredentials:
    """Wraps a sender: each topic with a credential in `credentials` goes out with its headers."""

    def __init__(self, sender: Any, credentials: Mapping[str, Credential]) -> None:
        self._sender = sender
        self._credentials = credentials

    async def send(self, topic: str, payload: Any = None, headers: Mapping[str, str] | None = None) -> Result[Any]:
        credential = self._credentials.get(topic)
        if credential is not None:
            try:
                attached = await credential.headers()
            except Exception as error:
                return Result.unauthorized(f"no credential for {topic}: the provider failed ({type(error).__name__})")
            given = {name.lower() for name in headers or {}}
            headers = {**{k: v for k, v in attached.items() if k not in given}, **(headers or {})}
        answer: Result[Any] = await self._sender.send(topic, payload, headers)
        return answer

    async def aclose(self) -> None:
        await self._sender.aclose()
