import asyncio
import itertools
import json
from typing import Any

import pytest

from svcgen.runtime import Context, Dependencies, DependencyError, Identity, Registry, Result, Service
from svcgen.runtime._invocation import Invocation


class Connection:
    closed = 0

    def __init__(self, number: int) -> None:
        self.number = number

    async def aclose(self) -> None:
        Connection.closed += 1


def test_lifetimes() -> None:
    counter = itertools.count()
    deps = Dependencies()
    deps.singleton("settings", lambda: next(counter))
    deps.scoped(Connection, lambda: Connection(next(counter)))
    deps.transient("id", lambda: next(counter))
    first, second = deps.open_scope(), deps.open_scope()
    assert first.get("settings") == second.get("settings")
    assert first.get(Connection) is first.get(Connection)
    assert first.get(Connection) is not second.get(Connection)
    assert first.get("id") != first.get("id")


def test_unknown_key_names_itself() -> None:
    with pytest.raises(DependencyError, match="Connection"):
        Dependencies().open_scope().get(Connection)


def test_one_scope_per_invocation_closed_afterwards() -> None:
    counter = itertools.count()
    deps = Dependencies()
    deps.scoped(Connection, lambda: Connection(next(counter)))
    registry = Registry()

    async def handle(request: dict[str, Any], context: Context) -> Result[dict[str, int]]:
        first = context.scope.get(Connection)
        assert context.scope.get(Connection) is first
        return Result.ok({"connection": first.number})

    registry.add("a:b", handle)
    service = Service(Identity("s"), registry, dependencies=deps)
    Connection.closed = 0
    answers = [json.loads(asyncio.run(service.invoke(Invocation("a:b", body="{}"))).body) for _ in range(3)]
    assert answers == [{"connection": 0}, {"connection": 1}, {"connection": 2}]
    assert Connection.closed == 3
