"""Python names for manifest things: record attributes, handler modules, health functions."""

from __future__ import annotations

import keyword

from ..runtime._naming import camel_to_snake


def attribute(wire: str) -> str:
    """`customerId` → `customer_id`; a keyword gets a trailing `_` (`from` → `from_`), which converts back too."""
    name = camel_to_snake(wire)
    return name + "_" if keyword.iskeyword(name) else name


def is_module_name(name: str) -> bool:
    """Whether `name` can be imported as a module (`from .handlers import name`)."""
    return name.isidentifier() and not keyword.iskeyword(name)
