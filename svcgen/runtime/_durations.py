"""Durations as a manifest writes them (a topic's `timeout`, a subscription's `backoff` and `ackWait`): one rule.

The manifest stage and the generator read them through `parse_duration`, so every key that takes a duration
accepts the same texts and refuses the others in the same words (docs/manifest.md).
"""

from __future__ import annotations

import re
from typing import Final

# Spaces around and inside (`2 s`) are kept: subscriptions always took them, and DESIGN (§10, §14) does not forbid them.
_DURATION: Final = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)\s*$")
_UNIT_SECONDS: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
DURATION_EXAMPLES: Final = "500ms, 10s, 5m or 1h"
"""What a duration looks like, for messages that say what would be right."""


def parse_duration(text: str) -> float:
    """`500ms`, `10s`, `1.5m`, `1h` → seconds; ValueError (saying what is right) for anything else, zero included."""
    match = _DURATION.match(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"{text!r} is not a duration; write a number and a unit: {DURATION_EXAMPLES}")
    seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    if seconds <= 0:
        raise ValueError(f"{text!r} is not a positive duration; write one above zero, like {DURATION_EXAMPLES}")
    return seconds
