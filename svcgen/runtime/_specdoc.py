"""The service spec `{service, topics}`: answered on `svc:spec` and served at `{prefix}/spec`."""

from __future__ import annotations

from typing import Any

from ._registry import Registry
from ._topics import topic_descriptors


def build_spec(service: str, registry: Registry) -> dict[str, Any]:
    return {"service": service, "topics": topic_descriptors(registry)}
