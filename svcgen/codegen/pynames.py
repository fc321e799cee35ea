"""Python names for manifest things: handler modules, health functions (record attributes: runtime._naming)."""

from __future__ import annotations

import keyword


def is_module_name(name: str) -> bool:
    """Whether `name` can be imported as a module (`from .handlers import name`)."""
    return name.isidentifier() and not keyword.iskeyword(name)
