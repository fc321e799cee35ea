"""`Meta`: the constraints and annotations a field (or a record) declares, read once when a type is compiled.

A field carries it as `typing.Annotated[T, Meta(...)]`; a record as `__svcgen_meta__: ClassVar[Meta]`
(`closed`, `deprecated`, `omit_null`, `utc_millis`). The keyword arguments are JSON Schema's keywords in snake_case:
the codec enforces the constraints on input, the schema deriver publishes them under their JSON Schema names.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

FORMATS = ("email", "uuid", "uri", "date", "ipv4", "ipv6")
"""String formats the codec enforces (`format=`)."""

RECORD_META_ATTRIBUTE = "__svcgen_meta__"
"""The class attribute holding a record's own `Meta` (`closed`, `deprecated`)."""

# Meta's attribute → the JSON Schema keyword it stands for; `closed` is `additionalProperties: false`.
_KEYWORDS = {
    "min_length": "minLength",
    "max_length": "maxLength",
    "pattern": "pattern",
    "format": "format",
    "minimum": "minimum",
    "maximum": "maximum",
    "exclusive_minimum": "exclusiveMinimum",
    "exclusive_maximum": "exclusiveMaximum",
    "multiple_of": "multipleOf",
    "min_items": "minItems",
    "max_items": "maxItems",
    "description": "description",
    "examples": "examples",
    "deprecated": "deprecated",
}
META_ARGUMENTS = {keyword: argument for argument, keyword in _KEYWORDS.items()}
"""JSON Schema keyword → `Meta` argument (`minLength` → `min_length`)."""
CONSTRAINT_KEYWORDS = frozenset(
    keyword for keyword in _KEYWORDS.values() if keyword not in ("description", "examples", "deprecated")
)
"""The JSON Schema keywords that constrain values (the rest only annotate)."""


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Meta:
    """Constraints and annotations of a field, as `Annotated[T, Meta(min_length=1, description="...")]`.

    Compared by identity (examples may hold unhashable JSON values); each annotation makes its own.
    """

    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None
    format: str | None = None
    """One of `FORMATS`."""
    minimum: int | float | None = None
    maximum: int | float | None = None
    exclusive_minimum: int | float | None = None
    exclusive_maximum: int | float | None = None
    multiple_of: int | float | None = None
    min_items: int | None = None
    max_items: int | None = None
    description: str | None = None
    examples: Sequence[Any] | None = None
    deprecated: bool = False
    closed: bool = False
    """A record refusing properties it does not declare (`additionalProperties: false`)."""
    omit_null: bool = False
    """A record leaving out an optional field whose value is None instead of writing null (the mesh's feeds: a
    value that is not known is omitted)."""
    utc_millis: bool = False
    """A record writing its datetime fields in the mesh's one time form, UTC to the millisecond with `Z`
    (`2026-11-22T10:00:00.123Z`), rather than `isoformat()`'s `+00:00`; read back as any RFC 3339 date-time."""

    def keywords(self) -> dict[str, Any]:
        """The JSON Schema keywords this declares, in declaration order (`closed` not included)."""
        declared: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            keyword = _KEYWORDS.get(f.name)
            if keyword is None or value is None or value is False:
                continue
            declared[keyword] = list(value) if keyword == "examples" else value
        return declared

    @property
    def constrains(self) -> bool:
        return any(keyword in CONSTRAINT_KEYWORDS for keyword in self.keywords())
