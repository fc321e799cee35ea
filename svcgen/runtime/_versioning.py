"""Which version of a topic a call selects (spec "Versioning" 4–5)."""

from __future__ import annotations

from collections.abc import Mapping

from ._reserved import VERSION_HEADERS


def requested_version(
    headers: Mapping[str, str], *, path_version: str | None = None, static_version: str = ""
) -> str:
    """A `{version}` path segment beats the caller's version header, which beats the route's static version.

    `headers` must already be lower-cased.
    """
    if path_version is not None:
        return path_version
    for name in VERSION_HEADERS:
        value = headers.get(name)
        if value:
            return value.strip()
    return static_version
