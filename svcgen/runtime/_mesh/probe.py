"""The outside-in profile audit: a black-box probe of a running service over HTTP.

It speaks only the spec, health and invoke surfaces. What it cannot observe stays `inconclusive`,
never upgraded: R8, the register and heartbeat half of R6, and R7 under a non-default prefix.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Final

import httpx
import orjson

from .. import _status as st
from .._reserved import DEFAULT_PREFIX, MESH_TOPIC, is_reserved_topic, normalize_prefix
from .profile import REQUIREMENTS

SATISFIED: Final = "satisfied"
NOT_SATISFIED: Final = "not-satisfied"
INCONCLUSIVE: Final = "inconclusive"
DEFAULT_TIMEOUT: Final = 5.0


@dataclass(frozen=True)
class Verdict:
    id: str
    verdict: str
    reason: str

    def document(self) -> dict[str, str]:
        return {"id": self.id, "verdict": self.verdict, "reason": self.reason}


@dataclass(frozen=True)
class ProbeReport:
    base_url: str
    prefix: str
    requirements: tuple[Verdict, ...]

    @property
    def not_satisfied(self) -> list[str]:
        return [v.id for v in self.requirements if v.verdict == NOT_SATISFIED]

    @property
    def inconclusive(self) -> list[str]:
        return [v.id for v in self.requirements if v.verdict == INCONCLUSIVE]

    @property
    def is_clean(self) -> bool:
        return not self.not_satisfied

    def document(self) -> dict[str, Any]:
        return {
            "baseUrl": self.base_url,
            "prefix": self.prefix,
            "requirements": [v.document() for v in self.requirements],
            "notSatisfied": self.not_satisfied,
            "inconclusive": self.inconclusive,
            "isClean": self.is_clean,
        }


@dataclass(frozen=True)
class _Answer:
    """One surface's answer: an HTTP status and its JSON object, or why there is none."""

    url: str
    status: int | None = None
    body: dict[str, Any] | None = None
    error: str | None = None

    @property
    def unreachable(self) -> bool:
        return self.status is None

    @property
    def absent(self) -> bool:
        return self.status in (404, 405)

    def says(self) -> str:
        if self.status is None:
            return f"{self.url}: {self.error}"
        if self.body is None:
            return f"{self.url} answered {self.status} without a JSON object"
        return f"{self.url} answered {self.status}"


async def probe(
    base_url: str,
    *,
    prefix: str = DEFAULT_PREFIX,
    timeout: float = DEFAULT_TIMEOUT,
    transport: httpx.AsyncBaseTransport | None = None,
) -> ProbeReport:
    base = base_url.rstrip("/")
    mount = normalize_prefix(prefix)
    async with httpx.AsyncClient(timeout=timeout, transport=transport) as client:
        spec, health, mesh = await asyncio.gather(
            _fetch(client, "GET", f"{base}{mount}/spec"),
            _fetch(client, "GET", f"{base}{mount}/health"),
            _fetch(client, "POST", f"{base}{mount}/invoke", {"topic": MESH_TOPIC}),
        )
    descriptor = _descriptor(mesh)
    verdicts = _Verdicts(spec, health, mesh, descriptor, mount, default_prefix=mount == DEFAULT_PREFIX)
    return ProbeReport(base, mount or "/", tuple(verdicts.judge(requirement) for requirement in REQUIREMENTS))


async def _fetch(client: httpx.AsyncClient, method: str, url: str, payload: Any = None) -> _Answer:
    try:
        response = await client.request(method, url, json=payload)
    except httpx.TimeoutException:
        return _Answer(url, error="no answer within the timeout")
    except httpx.HTTPError as exc:
        return _Answer(url, error=f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
    try:
        body = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        body = None
    return _Answer(url, response.status_code, body if isinstance(body, dict) else None)


def _descriptor(mesh: _Answer) -> dict[str, Any] | None:
    """The descriptor from a `svc:mesh` response envelope, or None."""
    if mesh.status != 200 or mesh.body is None or mesh.body.get("statusCode") != st.OK:
        return None
    body = mesh.body.get("body")
    try:
        document = orjson.loads(body) if isinstance(body, str) else None
    except orjson.JSONDecodeError:
        return None
    return document if isinstance(document, dict) and isinstance(document.get("service"), str) else None


class _Verdicts:
    def __init__(
        self,
        spec: _Answer,
        health: _Answer,
        mesh: _Answer,
        descriptor: dict[str, Any] | None,
        mount: str,
        *,
        default_prefix: bool,
    ) -> None:
        self.spec, self.health, self.mesh, self.descriptor = spec, health, mesh, descriptor
        self.mount = mount
        self.default_prefix = default_prefix
        self.spec_ok = spec.status == 200 and spec.body is not None and isinstance(spec.body.get("topics"), list)
        self.health_ok = health.status in (200, 503) and health.body is not None and isinstance(
            health.body.get("isHealthy"), bool
        )
        self.invoke_ok = (
            mesh.status == 200
            and mesh.body is not None
            and isinstance(mesh.body.get("statusCode"), str)
            and isinstance(mesh.body.get("isSuccessful"), bool)
        )

    def judge(self, requirement: str) -> Verdict:
        verdict, reason = getattr(self, f"_{requirement.lower()}")()
        return Verdict(requirement, verdict, reason)

    def _r1(self) -> tuple[str, str]:
        if self.invoke_ok:
            return SATISFIED, "the invoke surface applies envelopes through the pipeline"
        answers = (self.spec, self.health, self.mesh)
        if all(answer.unreachable for answer in answers):
            return NOT_SATISFIED, f"no answer from the service: {self.mesh.error}"
        if self.spec_ok or self.health_ok:
            return SATISFIED, "well-known surfaces answer over HTTP"
        return NOT_SATISFIED, f"no well-known surface answers under {self.mount or '/'}"

    def _r2(self) -> tuple[str, str]:
        documents = [d for d in (self.spec.body if self.spec_ok else None, self.descriptor) if d is not None]
        if not documents:
            return INCONCLUSIVE, "neither the spec nor the descriptor could be read"
        topics = {
            topic["id"]
            for document in documents
            for topic in document.get("topics") or ()
            if isinstance(topic, dict) and isinstance(topic.get("id"), str) and not is_reserved_topic(topic["id"])
        }
        if topics:
            return SATISFIED, f"{len(topics)} application topic(s): {', '.join(sorted(topics)[:5])}"
        return NOT_SATISFIED, "the service lists no application topic"

    def _r3(self) -> tuple[str, str]:
        return self._surface(self.health, self.health_ok, "a health aggregate")

    def _r4(self) -> tuple[str, str]:
        return self._surface(self.mesh, self.invoke_ok, "a response envelope")

    def _r5(self) -> tuple[str, str]:
        return self._surface(self.spec, self.spec_ok, "a spec document")

    def _surface(self, answer: _Answer, ok: bool, expected: str) -> tuple[str, str]:
        if ok:
            detail = ""
            if answer is self.health and answer.body is not None:
                detail = " (healthy)" if answer.body["isHealthy"] else " (unhealthy)"
            return SATISFIED, f"{answer.says()} with {expected}{detail}"
        if answer.unreachable:
            return INCONCLUSIVE, answer.says()
        return NOT_SATISFIED, f"{answer.says()}, not {expected}"

    def _r6(self) -> tuple[str, str]:
        if self.descriptor is not None:
            return INCONCLUSIVE, (
                f"{MESH_TOPIC} answers the descriptor; register and heartbeat are not observable from outside"
            )
        if self.invoke_ok:
            return NOT_SATISFIED, f"{MESH_TOPIC} does not answer the service descriptor"
        return INCONCLUSIVE, f"{MESH_TOPIC} could not be asked: {self.mesh.says()}"

    def _r7(self) -> tuple[str, str]:
        if self.mesh.unreachable and self.spec.unreachable and self.health.unreachable:
            return INCONCLUSIVE, "the service did not answer"
        if not self.default_prefix:
            return INCONCLUSIVE, f"probed under the non-default prefix {self.mount or '/'}; not judged from outside"
        if self.spec_ok or self.health_ok or self.invoke_ok:
            return SATISFIED, f"well-known surfaces answer under the default prefix {DEFAULT_PREFIX}"
        return NOT_SATISFIED, f"no well-known surface answers under the default prefix {DEFAULT_PREFIX}"

    def _r8(self) -> tuple[str, str]:
        return INCONCLUSIVE, "propagation needs a second service or a collector to observe"
