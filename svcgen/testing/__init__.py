"""Testing services made with svcgen (docs/testing.md).

`MemoryBroker` carries a service's events in the process with the delivery rules of JetStream (docs/events.md):
`setup.event_broker = MemoryBroker()` before `create_app(setup=setup)`.
"""

from ._events import MemoryBroker, MemoryDeadLetter, StoredEvent

__all__ = [
    "MemoryBroker",
    "MemoryDeadLetter",
    "StoredEvent",
]
