"""Outbound contracts: the topics a service sends (manifest `produces`), typed like registrations."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ._schema import JsonSchema, schema_of


@dataclass(frozen=True)
class ProducedTopic:
    topic: str
    version: str = ""
    request_type: Any = Any
    response_type: Any = Any

    def __post_init__(self) -> None:
        if not isinstance(self.topic, str) or not self.topic:
            raise ValueError(f"produced topic id must be a non-empty string, got {self.topic!r}")

    @cached_property
    def request_schema(self) -> JsonSchema:
        """Shared with every other user of the type: never mutate it."""
        return schema_of(self.request_type)

    @cached_property
    def response_schema(self) -> JsonSchema:
        """Shared with every other user of the type: never mutate it."""
        return schema_of(self.response_type)
