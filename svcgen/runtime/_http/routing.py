"""Routes (method + path pattern → topic and version) matched through a segment trie.

Literal segments are dictionary lookups, so matching cost follows the path's depth, not the route
count. Where several routes match, the first registered wins (spec "Application routes").

A method with few routes also gets them compiled into one regular expression, one alternative per route in
registration order, so the first registered still wins: `find_path` matches a raw path with no escapes through it
in one C call instead of splitting the path and walking the trie. Past `COMPILED_ROUTES_MAX` routes an alternation
costs more than the walk, and the method keeps the trie alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import unquote

from .._topics import VERSION_PATH_PARAM

PLACEHOLDER = re.compile(r"^\{([A-Za-z_][A-Za-z0-9_]*)\}$")
METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})
COMPILED_ROUTES_MAX = 8
"""Routes of one method matched by one regular expression; more walk the trie. An alternation's cost grows with the
routes tried before the match: in-process, the eighth of eight costs what the trie's walk does (bench/http.py)."""

Found = tuple["Route", dict[str, str], "str | None"]
"""(route, path parameters without `version`, the `{version}` segment or None)."""


class RouteError(ValueError):
    """A route that can never work: raised when the app is built, never per request."""


@dataclass(frozen=True, slots=True)
class Route:
    method: str
    path: str
    topic: str
    version: str = ""
    """The route's static version; a `{version}` segment or a caller header overrides it."""
    params: tuple[tuple[int, str], ...] = field(default=(), compare=False)
    """(segment index, name) of each placeholder."""

    @classmethod
    def parse(cls, spec: str, topic: str, version: str = "") -> Route:
        """`"POST /orders/{orderId}"` → a Route."""
        method, _, path = spec.strip().partition(" ")
        return cls.create(method, path.strip(), topic, version)

    @classmethod
    def create(cls, method: str, path: str, topic: str, version: str = "") -> Route:
        method = method.upper()
        if method not in METHODS:
            raise RouteError(f"route {method} {path}: unknown method {method!r}")
        if not path.startswith("/"):
            raise RouteError(f"route {method} {path}: path must start with '/'")
        params: list[tuple[int, str]] = []
        for index, segment in enumerate(split_path(path)):
            if "{" in segment or "}" in segment:
                match = PLACEHOLDER.match(segment)
                if match is None:
                    raise RouteError(f"route {method} {path}: a placeholder must be a whole segment like {{name}}")
                name = match.group(1)
                if any(existing == name for _, existing in params):
                    raise RouteError(f"route {method} {path}: placeholder {{{name}}} appears twice")
                params.append((index, name))
        return cls(method, path, topic, version, tuple(params))

    def could_match(self, leading: list[str], extra: tuple[int, ...]) -> bool:
        """Whether some path made of the literal `leading` segments plus `extra` more could match this route."""
        pattern = split_path(self.path)
        if len(pattern) - len(leading) not in extra:
            return False
        placeholders = {index for index, _ in self.params}
        return all(i in placeholders or pattern[i] == segment for i, segment in enumerate(leading))

    @property
    def has_version_segment(self) -> bool:
        return any(name == VERSION_PATH_PARAM for _, name in self.params)

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


@dataclass(slots=True)
class RouteMatch:
    route: Route
    params: dict[str, str]
    """Captured path parameters, without `version`."""
    path_version: str | None


class _Node:
    __slots__ = ("literals", "param", "routes")

    def __init__(self) -> None:
        self.literals: dict[str, _Node] = {}
        self.param: _Node | None = None
        self.routes: dict[str, tuple[int, Route]] = {}


@dataclass(frozen=True, slots=True)
class _Compiled:
    """One method's routes as one expression: `routes[m.lastindex]` is the route whose alternative matched, with
    (group, name) of its placeholders other than `{version}` and the group of that one (0: none)."""

    pattern: re.Pattern[str]
    routes: dict[int, tuple[Route, tuple[tuple[int, str], ...], int]]


class Router:
    def __init__(self, routes: Iterable[Route] = ()) -> None:
        self._root = _Node()
        self._count = 0
        self._by_method: dict[str, list[Route]] = {}
        self._compiled: dict[str, _Compiled] = {}
        for route in routes:
            self.add(route)

    def __len__(self) -> int:
        return self._count

    def add(self, route: Route) -> None:
        node = self._root
        placeholders = {index for index, _ in route.params}
        for index, segment in enumerate(split_path(route.path)):
            if index in placeholders:
                if node.param is None:
                    node.param = _Node()
                node = node.param
            else:
                node = node.literals.setdefault(segment, _Node())
        # The first registration of an identical method+shape keeps its place; later ones can never win.
        node.routes.setdefault(route.method, (self._count, route))
        self._count += 1
        same_method = self._by_method.setdefault(route.method, [])
        same_method.append(route)
        if len(same_method) <= COMPILED_ROUTES_MAX:
            self._compiled[route.method] = _compile(same_method)
        else:
            self._compiled.pop(route.method, None)

    def match(self, method: str, segments: list[str]) -> RouteMatch | None:
        found = self.find(method, segments)
        return None if found is None else RouteMatch(*found)

    def find_path(self, method: str, raw_path: bytes) -> Found | None:
        """`find` for a raw (still percent-encoded) path: through the method's compiled expression when the path
        has no escapes, else split (`split_raw_path`, which raises `PathNotUtf8`) and walked. Both give the same
        answer for every path."""
        compiled = self._compiled.get(method)
        if compiled is None or b"%" in raw_path or not raw_path.startswith(b"/"):
            return self.find(method, split_raw_path(raw_path))
        try:
            matched = compiled.pattern.fullmatch(raw_path.decode("utf-8"))
        except UnicodeDecodeError:
            raise PathNotUtf8("path is not valid UTF-8") from None
        if matched is None:
            return None
        route, groups, version_group = compiled.routes[matched.lastindex or 0]
        params: dict[str, str] = {}
        for group, name in groups:
            params[name] = matched.group(group)
        return route, params, matched.group(version_group) if version_group else None

    def find(self, method: str, segments: list[str]) -> Found | None:
        """`match` as a plain tuple (route, params, path version)."""
        best = _best(self._root, method, segments, 0)
        if best is None:
            return None
        route = best[1]
        params: dict[str, str] = {}
        path_version: str | None = None
        for index, name in route.params:
            value = segments[index]
            if name == VERSION_PATH_PARAM:
                path_version = value
            else:
                params[name] = value
        return route, params, path_version


def _best(node: _Node, method: str, segments: list[str], depth: int) -> tuple[int, Route] | None:
    end = len(segments)
    # Walk down while there is one way on; only a segment both a literal and a placeholder take branches.
    while depth < end:
        segment = segments[depth]
        literal = node.literals.get(segment)
        following = node.param if segment else None
        if literal is not None and following is not None:
            break
        way_on = literal if literal is not None else following
        if way_on is None:
            return None
        node = way_on
        depth += 1
    if depth == end:
        return node.routes.get(method)
    segment = segments[depth]
    best: tuple[int, Route] | None = None
    literal = node.literals.get(segment)
    if literal is not None:
        best = _best(literal, method, segments, depth + 1)
    if node.param is not None and segment:
        candidate = _best(node.param, method, segments, depth + 1)
        if candidate is not None and (best is None or candidate[0] < best[0]):
            best = candidate
    return best


def _compile(routes: list[Route]) -> _Compiled:
    """Each route an alternative `(/seg/([^/]+).../?)`, in registration order: the segments `split_path` gives, a
    placeholder taking one non-empty segment as in the trie."""
    alternatives: list[str] = []
    table: dict[int, tuple[Route, tuple[tuple[int, str], ...], int]] = {}
    group = 0
    for route in routes:
        group += 1
        outer = group
        names = dict(route.params)
        parts: list[str] = []
        groups: list[tuple[int, str]] = []
        version_group = 0
        for index, segment in enumerate(split_path(route.path)):
            if index in names:
                group += 1
                if names[index] == VERSION_PATH_PARAM:
                    version_group = group
                else:
                    groups.append((group, names[index]))
                parts.append("([^/]+)")
            else:
                parts.append(re.escape(segment))
        joined = "/".join(parts)
        # One trailing slash is dropped from the path before it is split: a route whose last segment is empty
        # matches only with that slash there, any other with or without it.
        alternatives.append(f"(/{joined}/)" if joined.endswith("/") else f"(/{joined}/?)")
        table[outer] = (route, tuple(groups), version_group)
    return _Compiled(re.compile("|".join(alternatives)), table)


def split_path(path: str) -> list[str]:
    """Segments of a path, without the leading slash; one trailing slash is ignored."""
    trimmed = path[1:] if path.startswith("/") else path
    if trimmed.endswith("/"):
        trimmed = trimmed[:-1]
    return trimmed.split("/") if trimmed else []


class PathNotUtf8(ValueError):
    """A path whose bytes, raw or percent-encoded, are not UTF-8: refused, never silently replaced."""


def split_raw_path(raw_path: bytes) -> list[str]:
    """Segments of a raw (still percent-encoded) path: `%2F` stays inside its segment. Raises `PathNotUtf8`."""
    try:
        text = raw_path.decode("utf-8")
        if "%" not in text:
            return split_path(text)
        return [unquote(segment, errors="strict") for segment in split_path(text)]
    except UnicodeDecodeError:
        raise PathNotUtf8("path is not valid UTF-8") from None
