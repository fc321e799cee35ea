"""The one client of a service's well-known surfaces: `{prefix}/spec`, `{prefix}/health` and its descriptor (the
`svc:mesh` topic over `{prefix}/invoke`), shared by the poller and the probe.

Each exchange is bounded by one deadline for the whole of it (httpx's timeout is per phase, so a trickling body could
otherwise hold it far longer) and by a cap on the body's bytes. What a spec document, a health aggregate and a
descriptor are is decided here, once: a spec is a 2xx JSON object with a `topics` array; a health aggregate is a
200 or 503 (unhealthy, still data) JSON object with a boolean `isHealthy`, and 404 or 405 means the service serves
no health surface; a descriptor is the `ok` body of the `svc:mesh` response envelope, an object with a `service`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import httpx
import orjson

from ..runtime._status import OK
from ..runtime._topics import MESH_TOPIC

DEFAULT_TIMEOUT: Final = 5.0
DEFAULT_MAX_BODY_BYTES: Final = 4 * 1024 * 1024
NO_SURFACE: Final = frozenset({404, 405})
"""Health statuses of a service that serves no health surface (it has no checks)."""


class SurfaceProblem(Exception):
    """A surface's answer that is not the document it should be; the message says why."""


@dataclass(frozen=True, slots=True)
class SurfaceAnswer:
    """One surface's answer: its HTTP status and bytes, or why there is none."""

    url: str
    status: int | None = None
    content: bytes = b""
    error: str | None = None
    """Why nothing was answered (unreachable, no answer within the deadline, too large)."""

    @property
    def unreachable(self) -> bool:
        return self.status is None

    def json_object(self) -> dict[str, Any]:
        """The body as a JSON object; raises SurfaceProblem."""
        if self.status is None:
            raise SurfaceProblem(self.error or "no answer")
        try:
            document = orjson.loads(self.content)
        except orjson.JSONDecodeError:
            raise SurfaceProblem("body is not valid JSON") from None
        if not isinstance(document, dict):
            raise SurfaceProblem("body is not a JSON object")
        return document

    def says(self) -> str:
        """What the surface answered, for a reason or a log line."""
        if self.status is None:
            return f"{self.url}: {self.error}"
        try:
            self.json_object()
        except SurfaceProblem:
            return f"{self.url} answered {self.status} without a JSON object"
        return f"{self.url} answered {self.status}"


def spec_document(answer: SurfaceAnswer) -> dict[str, Any]:
    """The spec document answered; raises SurfaceProblem."""
    if answer.status is not None and not 200 <= answer.status < 300:
        raise SurfaceProblem(f"HTTP {answer.status}")
    document = answer.json_object()
    if not isinstance(document.get("topics"), list):
        raise SurfaceProblem("not a service spec (no topics array)")
    return document


def health_document(answer: SurfaceAnswer) -> dict[str, Any] | None:
    """The health aggregate answered, None when the service serves no health surface; raises SurfaceProblem."""
    if answer.status in NO_SURFACE:
        return None
    if answer.status is not None and answer.status not in (200, 503):
        raise SurfaceProblem(f"HTTP {answer.status}")
    document = answer.json_object()
    if not isinstance(document.get("isHealthy"), bool):
        raise SurfaceProblem("not a health aggregate (no boolean isHealthy)")
    return document


def envelope_document(answer: SurfaceAnswer) -> dict[str, Any]:
    """The response envelope the invoke surface answered; raises SurfaceProblem."""
    if answer.status is not None and answer.status != 200:
        raise SurfaceProblem(f"HTTP {answer.status}")
    envelope = answer.json_object()
    if not isinstance(envelope.get("statusCode"), str) or not isinstance(envelope.get("isSuccessful"), bool):
        raise SurfaceProblem("not a response envelope")
    return envelope


def descriptor_document(answer: SurfaceAnswer) -> dict[str, Any]:
    """The service descriptor the `svc:mesh` envelope carries; raises SurfaceProblem."""
    envelope = envelope_document(answer)
    if envelope["statusCode"] != OK:
        raise SurfaceProblem(f"{MESH_TOPIC} answered {envelope['statusCode']}")
    body = envelope.get("body")
    try:
        document = orjson.loads(body) if isinstance(body, str) else None
    except orjson.JSONDecodeError:
        document = None
    if not isinstance(document, dict) or not isinstance(document.get("service"), str):
        raise SurfaceProblem(f"{MESH_TOPIC} does not answer a service descriptor")
    return document


class SurfaceClient:
    """Fetches the well-known surfaces of services through one `httpx.AsyncClient` (the caller's, so a sweep
    shares its connections); `headers` go on every request (a collector's bearer token)."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.client = client
        self.timeout = timeout
        self.max_body_bytes = max_body_bytes
        self.headers = {"accept": "application/json", **(headers or {})}

    async def spec(self, base: str, mount: str) -> SurfaceAnswer:
        """`GET {base}{mount}/spec` (`mount`: the normalised prefix)."""
        return await self.fetch("GET", f"{base}{mount}/spec")

    async def health(self, base: str, mount: str) -> SurfaceAnswer:
        return await self.fetch("GET", f"{base}{mount}/health")

    async def descriptor(self, base: str, mount: str) -> SurfaceAnswer:
        """The `svc:mesh` envelope posted to `{base}{mount}/invoke`."""
        return await self.fetch("POST", f"{base}{mount}/invoke", {"topic": MESH_TOPIC})

    async def fetch(self, method: str, url: str, payload: Any = None) -> SurfaceAnswer:
        try:
            async with asyncio.timeout(self.timeout):
                async with self.client.stream(method, url, json=payload, headers=self.headers) as response:
                    chunks: list[bytes] = []
                    size = 0
                    async for chunk in response.aiter_bytes():
                        size += len(chunk)
                        if size > self.max_body_bytes:
                            return SurfaceAnswer(url, error=f"answer exceeds {self.max_body_bytes} bytes")
                        chunks.append(chunk)
                    return SurfaceAnswer(url, response.status_code, b"".join(chunks))
        except (TimeoutError, httpx.TimeoutException):
            return SurfaceAnswer(url, error=f"no answer within {self.timeout:g}s")
        except httpx.HTTPError as exc:
            return SurfaceAnswer(url, error=f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
