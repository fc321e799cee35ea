"""Dependency providers (singleton, scoped, transient) and the per-invocation `Scope`."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Literal, TypeVar, cast, overload

T = TypeVar("T")
Lifetime = Literal["singleton", "scoped", "transient"]
Factory = Callable[[], Any]


class DependencyError(LookupError):
    pass


class Dependencies:
    """What can be provided, and for how long. Keys are types (or any hashable name)."""

    def __init__(self) -> None:
        self._providers: dict[Any, tuple[Lifetime, Factory]] = {}
        self._singletons: dict[Any, Any] = {}

    def singleton(self, key: Any, factory: Factory) -> None:
        self._providers[key] = ("singleton", factory)

    def scoped(self, key: Any, factory: Factory) -> None:
        self._providers[key] = ("scoped", factory)

    def transient(self, key: Any, factory: Factory) -> None:
        self._providers[key] = ("transient", factory)

    def value(self, key: Any, instance: Any) -> None:
        self._providers[key] = ("singleton", lambda: instance)
        self._singletons[key] = instance

    def __contains__(self, key: Any) -> bool:
        return key in self._providers

    def open_scope(self) -> Scope:
        return Scope(self)

    def _provider(self, key: Any) -> tuple[Lifetime, Factory]:
        try:
            return self._providers[key]
        except KeyError:
            name = getattr(key, "__qualname__", repr(key))
            raise DependencyError(f"no provider registered for {name}") from None


class Scope:
    """One invocation's instances. Scoped instances with `close`/`aclose` are closed with the scope."""

    __slots__ = ("_dependencies", "_instances")

    def __init__(self, dependencies: Dependencies | None = None) -> None:
        self._dependencies = dependencies
        self._instances: dict[Any, Any] | None = None

    @property
    def holds_instances(self) -> bool:
        """Whether `close` has anything to do."""
        return bool(self._instances)

    @overload
    def get(self, key: type[T]) -> T: ...
    @overload
    def get(self, key: Any) -> Any: ...
    def get(self, key: Any) -> Any:
        if self._dependencies is None:
            raise DependencyError("no dependencies are configured")
        lifetime, factory = self._dependencies._provider(key)
        if lifetime == "transient":
            return factory()
        if lifetime == "singleton":
            cache = self._dependencies._singletons
        else:
            if self._instances is None:
                self._instances = {}
            cache = self._instances
        if key not in cache:
            cache[key] = factory()
        return cache[key]

    async def close(self) -> None:
        if not self._instances:
            return
        instances, self._instances = self._instances, None
        for instance in reversed(list(instances.values())):
            closer = getattr(instance, "aclose", None) or getattr(instance, "close", None)
            if closer is None:
                continue
            outcome = cast(Callable[[], Any], closer)()
            if inspect.isawaitable(outcome):
                await outcome
