"""The NATS server fixture (`nats_url`) for the event tests."""

from __future__ import annotations

from tests.support.broker import nats_url

__all__ = ["nats_url"]
