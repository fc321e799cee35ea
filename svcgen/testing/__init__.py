"""Testing a generated service (docs/testing.md): `TestClient` (sync) and `AsyncTestClient` run the package's app
with its lifespan and wiring, fake owners answer the topics it produces, dependencies can be overridden, and its
events go through `MemoryBroker`, which carries them in the process with the delivery rules of JetStream
(docs/events.md; `setup.event_broker = MemoryBroker()` before `create_app(setup=setup)` outside the test client).

    from svcgen.testing import TestClient
    import orders_service

    def test_place() -> None:
        with TestClient(orders_service) as client:
            assert client.post("/orders", json={...}).status_code == 201
"""

from ._client import AsyncTestClient, LifespanError, TestClient
from ._events import MemoryBroker, MemoryDeadLetter, StoredEvent
from ._owners import FakeOwner, FakeOwners

__all__ = [
    "AsyncTestClient",
    "FakeOwner",
    "FakeOwners",
    "LifespanError",
    "MemoryBroker",
    "MemoryDeadLetter",
    "StoredEvent",
    "TestClient",
]
