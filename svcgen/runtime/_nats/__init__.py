"""The NATS binding: topics served over NATS request/reply beside HTTP, and produced topics sent over NATS.

`subjects` names the subjects, `connections` holds the one connection per server of a process, `responder` is the
serving side (`NatsBinding`) and `requester` the sending side (`NatsSender`). nats-py is the `svcgen[nats]` extra:
it is imported only when a connection is opened.
"""
