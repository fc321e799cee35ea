"""annotations.json: an empty read model; nothing in the snapshot feeds it yet."""

from __future__ import annotations

from ..snapshot import Json


def build_annotations(*, generated_at: str) -> Json:
    return {"generatedAtUtc": generated_at, "annotations": []}
