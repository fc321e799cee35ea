"""The outside-in profile audit: a black-box probe of a running service over HTTP.

It speaks only the spec, health and invoke surfaces, through the one client of them (`wellknown`, the poller's
too). What it cannot observe stays `inconclusive`, never upgraded: R8, the register and heartbeat half of R6, and
R7 under a non-default prefix.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import httpx

from ..runtime._logging import shown
from ..runtime._mesh.profile import REQUIREMENTS
from ..runtime._topics import DEFAULT_PREFIX, MESH_TOPIC, is_reserved_topic, normalize_prefix
from .wellknown import DEFAULT_TIMEOUT as DEFAULT_TIMEOUT  # the CLI's `probe --timeout` default
from .wellknown import (
    SurfaceAnswer,
    SurfaceClient,
    SurfaceProblem,
    descriptor_document,
    envelope_document,
    health_document,
    spec_document,
)

SATISFIED: Final = "satisfied"
NOT_SATISFIED: Final = "not-satisfied"
INCONCLUSIVE: Final = "inconclusive"


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


async def probe(
    base_url: str,
    *,
    prefix: str = DEFAULT_PREFIX,
    timeout: float = DEFAULT_TIMEOUT,
    transport: httpx.AsyncBaseTransport | None = None,
    headers: Mapping[str, str] | None = None,
) -> ProbeReport:
    """The verdicts on the service at `base_url`; `headers` go on every request (a credential for well-known
    surfaces behind `security.wellKnown`)."""
    base = base_url.rstrip("/")
    mount = normalize_prefix(prefix)
    async with httpx.AsyncClient(timeout=timeout, transport=transport) as client:
        surfaces = SurfaceClient(client, timeout=timeout, headers=headers)
        spec, health, mesh = await asyncio.gather(
            surfaces.spec(base, mount), surfaces.health(base, mount), surfaces.descriptor(base, mount)
        )
    verdicts = _Verdicts(spec, health, mesh, mount, default_prefix=mount == DEFAULT_PREFIX)
    # The report is printed and may be kept: the URL's user:password@ (sent as basic auth) stays out of it.
    return ProbeReport(shown(base), mount or "/", tuple(verdicts.judge(requirement) for requirement in REQUIREMENTS))


def _read(read: Callable[[SurfaceAnswer], dict[str, Any] | None], answer: SurfaceAnswer) -> dict[str, Any] | None:
    try:
        return read(answer)
    except SurfaceProblem:
        return None


class _Verdicts:
    def __init__(
        self, spec: SurfaceAnswer, health: SurfaceAnswer, mesh: SurfaceAnswer, mount: str, *, default_prefix: bool
    ) -> None:
        self.spec, self.health, self.mesh = spec, health, mesh
        self.mount = mount
        self.default_prefix = default_prefix
        self.spec_document = _read(spec_document, spec)
        self.health_document = _read(health_document, health)
        self.descriptor = _read(descriptor_document, mesh)
        self.spec_ok = self.spec_document is not None
        self.health_ok = self.health_document is not None
        self.invoke_ok = _read(envelope_document, mesh) is not None

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
        documents = [d for d in (self.spec_document, self.descriptor) if d is not None]
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

    def _surface(self, answer: SurfaceAnswer, ok: bool, expected: str) -> tuple[str, str]:
        if ok:
            detail = ""
            if answer is self.health and self.health_document is not None:
                detail = " (healthy)" if self.health_document["isHealthy"] else " (unhealthy)"
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
