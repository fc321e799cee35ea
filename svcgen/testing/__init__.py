"""Testing a generated service: `TestClient` (sync) and `AsyncTestClient` run the package's app with its
lifespan and wiring, fake owners answer the topics it produces, and dependencies can be overridden
(docs/testing.md).

    from svcgen.testing import TestClient
    import orders_service

    def test_place() -> None:
        with TestClient(orders_service) as client:
            assert client.post("/orders", json={...}).status_code == 201
"""

from ._client import AsyncTestClient, LifespanError, TestClient
from ._owners import FakeOwner, FakeOwners

# The in-memory event broker (svcgen/testing/_events.py, DESIGN §10) is exported here beside these.

__all__ = [
    "AsyncTestClient",
    "FakeOwner",
    "FakeOwners",
    "LifespanError",
    "TestClient",
]
