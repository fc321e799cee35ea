"""Python names for manifest things: record attributes, handler modules, health functions."""

from __future__ import annotations

import keyword
import re

from ..runtime._naming import camel_to_snake


def attribute(wire: str) -> str:
    """`customerId` → `customer_id`; a keyword gets a trailing `_` (`from` → `from_`), which converts back too."""
    name = re.sub(r"\W", "_", camel_to_snake(wire))  # `zip-code` (a JSON Schema's name) → `zip_code`
    if name[:1].isdigit():
        name = "_" + name
    return name + "_" if keyword.iskeyword(name) else name


def is_module_name(name: str) -> bool:
    """Whether `name` can be imported as a module (`from .handlers import name`)."""
    return name.isidentifier() and not keyword.iskeyword(name)
