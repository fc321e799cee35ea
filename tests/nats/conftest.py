"""The NATS server fixture (`nats_url`) for the NATS binding tests."""

from __future__ import annotations

from tests.support.broker import nats_url

__all__ = ["nats_url"]
