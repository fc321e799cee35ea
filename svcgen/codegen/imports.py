"""The import block of a generated module: collected while its parts are rendered, written isort-style.

The layout is what ruff's isort rules expect with the repository's settings: sections future, standard
library, third party, first party (`svcgen`), local (relative); plain imports before `from` imports;
natural, case-insensitive order; members ordered constants, classes, then the rest; a `from` import
longer than WRAP_AT columns is wrapped one member per line with a trailing comma.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field

WRAP_AT = 88
FIRST_PARTY = frozenset({"svcgen"})

_DIGITS = re.compile(r"(\d+)")
_SECTIONS = ("future", "stdlib", "thirdparty", "firstparty", "local")


@dataclass
class Imports:
    _from: dict[str, set[tuple[str, str | None]]] = field(default_factory=dict)
    _plain: set[tuple[str, str | None]] = field(default_factory=set)

    def name(self, module: str, name: str, alias: str | None = None) -> str:
        """Import `name` from `module` (`..models` for relative); returns the name to use in code."""
        self._from.setdefault(module, set()).add((name, alias))
        return alias or name

    def module(self, module: str, alias: str | None = None) -> str:
        """`import module [as alias]`; returns the name to use in code."""
        self._plain.add((module, alias))
        return alias or module

    def update(self, other: Imports) -> None:
        for module, names in other._from.items():
            self._from.setdefault(module, set()).update(names)
        self._plain.update(other._plain)

    def names(self) -> set[str]:
        """Every name the imports bind."""
        bound = {alias or name for names in self._from.values() for name, alias in names}
        return bound | {alias or module.split(".")[0] for module, alias in self._plain}

    def lines(self) -> list[str]:
        """The import block: sections separated by one empty line, no trailing empty line."""
        sections: dict[str, list[str]] = {section: [] for section in _SECTIONS}
        for module, alias in sorted(self._plain, key=lambda item: (_natural(item[0]), item[1] or "")):
            sections[_section(module)].append(f"import {module}" + (f" as {alias}" if alias else ""))
        for module in sorted(self._from, key=_module_key):
            sections[_section(module)].extend(_from_lines(module, self._from[module]))
        block: list[str] = []
        for section in _SECTIONS:
            if sections[section]:
                if block:
                    block.append("")
                block.extend(sections[section])
        return block


def _section(module: str) -> str:
    if module.startswith("."):
        return "local"
    top = module.split(".")[0]
    if top == "__future__":
        return "future"
    if top in FIRST_PARTY:
        return "firstparty"
    return "stdlib" if top in sys.stdlib_module_names else "thirdparty"


def _module_key(module: str) -> tuple[int, list[str | int]]:
    level = len(module) - len(module.lstrip("."))
    # Relative imports go furthest to closest: `from .. import` before `from . import`.
    return -level, _natural(module.lstrip("."))


def _from_lines(module: str, names: set[tuple[str, str | None]]) -> list[str]:
    # isort's default keeps each `name as alias` on its own line, after the plain members.
    plain = sorted((item for item in names if item[1] is None), key=_member_key)
    aliased = sorted((item for item in names if item[1] is not None), key=_member_key)
    lines = _wrapped(module, [name for name, _ in plain]) if plain else []
    for name, alias in aliased:
        lines.extend(_wrapped(module, [f"{name} as {alias}"]))
    return lines


def _wrapped(module: str, members: list[str]) -> list[str]:
    line = f"from {module} import {', '.join(members)}"
    if len(line) <= WRAP_AT:
        return [line]
    return [f"from {module} import (", *(f"    {member}," for member in members), ")"]


def _member_key(item: tuple[str, str | None]) -> tuple[int, list[str | int], str, str]:
    name, alias = item
    if len(name) > 1 and name.isupper():
        kind = 0  # constant
    elif name[:1].isupper():
        kind = 1  # class
    else:
        kind = 2
    return kind, _natural(name), name, alias or ""


def _natural(text: str) -> list[str | int]:
    parts: list[str | int] = []
    for index, part in enumerate(_DIGITS.split(text.lower())):
        parts.append(int(part) if index % 2 else part)
    return parts
