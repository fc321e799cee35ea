"""Name helpers for diagnostics: did-you-mean suggestions and the canonical form of a name."""

from __future__ import annotations

import difflib
import keyword
import re
from collections.abc import Iterable

from ..runtime._naming import is_canonical_camel

_ACRONYM_END = re.compile(r"([A-Z]+)([A-Z][a-z])")
_CAMEL_BOUNDARY = re.compile(r"([a-z0-9])([A-Z])")
_SEPARATORS = re.compile(r"[^A-Za-z0-9]+")
_PASCAL = re.compile(r"^[A-Z][A-Za-z0-9]*$")


def did_you_mean(word: str, candidates: Iterable[str]) -> str | None:
    """The closest candidate (case-insensitive first), or None when nothing is close."""
    options = list(dict.fromkeys(candidates))
    folded = {option.lower(): option for option in options}
    if word.lower() in folded:
        return folded[word.lower()]
    matches = difflib.get_close_matches(word.lower(), list(folded), n=1, cutoff=0.7)
    if matches:
        return folded[matches[0]]
    # An abbreviation (`desc` for `description`) is close even when difflib's ratio is not.
    prefixed = [option for lowered, option in folded.items() if len(word) >= 3 and lowered.startswith(word.lower())]
    return prefixed[0] if len(prefixed) == 1 else None


def suggestion(word: str, candidates: Iterable[str]) -> str:
    """`; did you mean 'x'?` or the empty string."""
    match = did_you_mean(word, candidates)
    return f"; did you mean {match!r}?" if match is not None and match != word else ""


def _tokens(name: str) -> list[str]:
    spaced = _CAMEL_BOUNDARY.sub(r"\1_\2", _ACRONYM_END.sub(r"\1_\2", name))
    return [token.lower() for token in _SEPARATORS.split(spaced.replace("_", " ")) if token]


def canonical_camel(name: str) -> str | None:
    """`orderID` → `orderId`, `order_id` → `orderId`; None when no canonical form exists (`2fa`)."""
    tokens = _tokens(name)
    if not tokens:
        return None
    candidate = tokens[0] + "".join(token[:1].upper() + token[1:] for token in tokens[1:])
    return candidate if is_canonical_camel(candidate) else None


def is_pascal_identifier(name: str) -> bool:
    """`LineItem`: starts upper-case, letters and digits only, and usable as a Python class name."""
    return bool(_PASCAL.match(name)) and not keyword.iskeyword(name)


def pascal_case(name: str) -> str | None:
    """`line_item` → `LineItem`; None when no PascalCase identifier can be made."""
    candidate = "".join(token[:1].upper() + token[1:] for token in _tokens(name))
    return candidate if is_pascal_identifier(candidate) else None
