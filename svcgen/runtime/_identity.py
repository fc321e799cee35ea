"""Service identity inputs: what the host knows that the registry cannot derive."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Identity:
    service: str
    service_version: str | None = None
    instance_id: str | None = None
    runtime: str = "python"
    binding: str | None = None
    """The transport in use, for example `http`."""
    placement: Mapping[str, str] | None = None
    degraded: Sequence[str] | None = None
    """Names of inputs missing when the descriptor was built (`registry`, `outbound-registry`)."""
    profile: Mapping[str, Any] | None = field(default=None)

    def __post_init__(self) -> None:
        if not isinstance(self.service, str) or not self.service:
            raise ValueError("identity: service must be a non-empty string")
