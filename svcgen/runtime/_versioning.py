"""Which version of a topic a call selects (spec "Versioning" 4–5): the one place it is decided."""

from __future__ import annotations

from typing import Any

from ._invocation import Invocation
from ._registry import Registration, Registry
from ._result import Result
from ._topics import VERSION_HEADERS


def requested_version(invocation: Invocation) -> str:
    """A `{version}` path segment beats the caller's version header, which beats the route's static version."""
    if invocation.path_version is not None:
        return invocation.path_version
    headers = invocation.headers
    for name in VERSION_HEADERS:
        value = headers.get(name)
        if value:
            return value.strip()
    return invocation.static_version


class VersionSelector:
    """Resolves (topic, requested version) to a registration; a topic with one version serves calls naming none."""

    def __init__(self, registry: Registry) -> None:
        self._registry = registry
        self._selected: dict[tuple[str, str], Registration] = {}

    def select(self, topic: str, requested: str) -> Registration | Result[Any]:
        """The registration, or the `not-found` (`validation-error` for no topic) the caller gets instead."""
        key = (topic, requested)
        selected = self._selected.get(key)
        if selected is not None:
            return selected
        if not topic:
            return Result.validation_error("topic is required")
        registration = self._registry.get(topic, requested)
        if registration is None:
            versions = self._registry.versions(topic)
            if not versions:
                return Result.not_found(f"no handler for topic {topic}")
            if requested or len(versions) > 1:
                listed = ", ".join(v or '""' for v in versions)
                asked = f"version {requested}" if requested else "no version"
                return Result.not_found(
                    f"topic {topic} has no handler for {asked}; versions: {listed} (select one with svc-version)"
                )
            registration = self._registry.get(topic, versions[0])
            assert registration is not None
        self._selected[key] = registration
        return registration
