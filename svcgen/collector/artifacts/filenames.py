"""File names for services/<name>.json: a service name is never a path.

The rule, so a dashboard can find a service's file from manifest.json alone:

1. Sanitise: every run of characters other than ASCII letters, digits, `.`, `_` and `-` becomes `_`;
   leading dots are dropped (no `.`, `..` or hidden files); the result is cut to 100 characters; an
   empty result is `_`; a Windows device name (`con`, `prn`, `aux`, `nul`, `com1`-`com9`, `lpt1`-`lpt9`,
   any case, alone or before a `.`) gets a leading `_` (`con` → `_con`), since Windows opens the device
   whatever the extension. Any other manifest-valid name (`[a-z][a-z0-9-]*`) is unchanged.
2. Names claim files in this order, each group in sorted name order: manifest-valid names, other
   names that sanitise to themselves, then the rest. A name whose file is already taken (compared
   case-insensitively, for case-insensitive file systems) gets the smallest free suffix `_2`, `_3`, ...
   So a manifest-valid service is always at `services/<name>.json`, an odd name never displaces a
   well-formed one, and two names never share a file.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

MAX_STEM_LENGTH: Final = 100
_UNSAFE_RUN: Final = re.compile(r"[^A-Za-z0-9._-]+", re.ASCII)
_MANIFEST_NAME: Final = re.compile(r"[a-z][a-z0-9-]*", re.ASCII)
_DEVICE_NAME: Final = re.compile(r"(?:con|prn|aux|nul|com[1-9]|lpt[1-9])(?:\..*)?", re.ASCII | re.IGNORECASE)


def sanitise(name: str) -> str:
    stem = _UNSAFE_RUN.sub("_", name).lstrip(".")[:MAX_STEM_LENGTH]
    if _DEVICE_NAME.fullmatch(stem):
        stem = "_" + stem[: MAX_STEM_LENGTH - 1]
    return stem or "_"


def service_file_names(names: Iterable[str]) -> dict[str, str]:
    """Service name → file name (`orders.json`) inside services/, unique per directory."""
    taken: set[str] = set()
    files: dict[str, str] = {}
    for name in sorted(set(names), key=lambda name: (_claim_order(name), name)):
        stem = sanitise(name)
        candidate, n = stem, 2
        while candidate.casefold() in taken:
            candidate, n = f"{stem}_{n}", n + 1
        taken.add(candidate.casefold())
        files[name] = f"{candidate}.json"
    return dict(sorted(files.items()))


def _claim_order(name: str) -> int:
    if _MANIFEST_NAME.fullmatch(name):
        return 0
    return 1 if sanitise(name) == name else 2
