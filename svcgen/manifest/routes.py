"""Manifest routes: `METHOD /path` with whole-segment `{name}` placeholders, route shadowing, and routes on
the well-known prefix.

Path splitting and the method set follow the runtime router (svcgen.runtime._http.routing), which
matches in registration order; the manifest check rejects what that router could never serve.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from ..runtime._http import routing
from ..runtime._http.app import shadowed_surface
from ..runtime._http.routing import PLACEHOLDER, Route, Router, split_path
from ..runtime._topics import VERSION_PATH_PARAM
from .spelling import did_you_mean

METHODS = tuple(sorted(routing.METHODS))
T = TypeVar("T")


class RouteSyntaxError(ValueError):
    """A route string that is not `METHOD /path`; the message is a complete diagnostic."""


@dataclass(frozen=True)
class ParsedRoute:
    method: str
    path: str
    segments: tuple[str, ...]
    placeholders: tuple[str | None, ...]
    """Per segment: the placeholder name, or None for a literal."""

    @property
    def params(self) -> tuple[str, ...]:
        return tuple(name for name in self.placeholders if name is not None)

    @property
    def has_version(self) -> bool:
        return VERSION_PATH_PARAM in self.params

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


def parse_route(text: str) -> ParsedRoute:
    """Parse `"POST /orders/{orderId}"`; raises RouteSyntaxError saying what is wrong."""
    parts = text.split()
    if len(parts) != 2:
        raise RouteSyntaxError(f'route {text!r} must be "METHOD /path", like "POST /orders"')
    method, path = parts
    if method not in METHODS:
        match = did_you_mean(method, METHODS)
        hint = f"did you mean {match!r}?" if match is not None else "use one of " + ", ".join(METHODS)
        raise RouteSyntaxError(f"unknown method {method!r} in route {text!r}; {hint}")
    if not path.startswith("/"):
        raise RouteSyntaxError(f"route path {path!r} must start with '/', like '/{path}'")
    if "?" in path or "#" in path:
        raise RouteSyntaxError(f"route path {path!r} must not contain a query or fragment ('?' or '#')")
    segments = split_path(path)
    placeholders: list[str | None] = []
    for segment in segments:
        if segment == "":
            raise RouteSyntaxError(f"route path {path!r} has an empty segment ('//')")
        if "{" in segment or "}" in segment:
            found = PLACEHOLDER.match(segment)
            if found is None:
                raise RouteSyntaxError(
                    f"route path {path!r}: {segment!r} is not a placeholder; "
                    "a placeholder is a whole segment like {name}"
                )
            name = found.group(1)
            if name in placeholders:
                raise RouteSyntaxError(f"route path {path!r} uses placeholder {{{name}}} twice")
            placeholders.append(name)
        else:
            placeholders.append(None)
    return ParsedRoute(method, path, tuple(segments), tuple(placeholders))


def well_known_collision(route: ParsedRoute, prefix: str) -> str | None:
    """The runtime's well-known surface under `prefix` that `route` would collide with at startup, or None."""
    return shadowed_surface(Route.create(route.method, route.path, ""), prefix)


def shadows(earlier: ParsedRoute, later: ParsedRoute) -> bool:
    """True when every request `later` matches is matched by `earlier` first (so `later` never wins)."""
    index: ShadowIndex[bool] = ShadowIndex()
    index.add(earlier, True)
    return index.shadowing(later) is not None


class ShadowIndex(Generic[T]):
    """Routes in manifest order, asking which earlier route (if any) serves every request of a later one.

    It is the runtime's own router matched against the later route's pattern text: a literal segment can
    only be taken by an equal literal or a placeholder, and a `{name}` segment only by a placeholder.
    """

    def __init__(self) -> None:
        self._router = Router()
        self._owners: list[T] = []

    def add(self, route: ParsedRoute, owner: T) -> None:
        self._router.add(Route.create(route.method, route.path, str(len(self._owners))))
        self._owners.append(owner)

    def shadowing(self, route: ParsedRoute) -> T | None:
        match = self._router.match(route.method, list(route.segments))
        return None if match is None else self._owners[int(match.route.topic)]
