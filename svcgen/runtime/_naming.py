"""Name rules shared by the runtime and the generator: wire names, operation names, module slugs."""

from __future__ import annotations

import keyword
import re
from functools import lru_cache

_TOKEN_SPLIT = re.compile(r"[^A-Za-z0-9]+")
_SLUG_RUN = re.compile(r"[^a-z0-9]+")
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_CANONICAL_CAMEL = re.compile(r"^[a-z][a-z0-9]*(?:[A-Z][a-z0-9]*)*$")


@lru_cache(maxsize=4096)
def snake_to_camel(name: str) -> str:
    """`order_id` → `orderId`: the wire name of a record attribute."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


@lru_cache(maxsize=4096)
def camel_to_snake(name: str) -> str:
    """`orderId` → `order_id`: the attribute name of a wire field."""
    return _CAMEL_BOUNDARY.sub("_", name).lower()


def attribute(wire: str) -> str:
    """`customerId` → `customer_id`: the Python attribute of a wire field. A keyword gets a trailing `_`
    (`from` → `from_`), which converts back too; a JSON Schema's other names are made identifiers (`zip-code` →
    `zip_code`, `2fa` → `_2fa`), their wire name kept beside them."""
    name = re.sub(r"\W", "_", camel_to_snake(wire))
    if name[:1].isdigit():
        name = "_" + name
    return name + "_" if keyword.iskeyword(name) else name


def is_canonical_camel(name: str) -> bool:
    """True when the name converts to snake_case and back to itself (`orderId`, not `orderID`)."""
    return bool(_CANONICAL_CAMEL.match(name)) and snake_to_camel(camel_to_snake(name)) == name


def topic_tokens(topic: str) -> list[str]:
    return [token for token in _TOKEN_SPLIT.split(topic) if token]


def pascal_name(topic: str) -> str:
    """`stock-a:b` → `StockAB`."""
    return "".join(token[:1].upper() + token[1:] for token in topic_tokens(topic))


def camel_name(topic: str) -> str:
    """`stock-a:b` → `stockAB`."""
    tokens = topic_tokens(topic)
    if not tokens:
        return ""
    first, *rest = tokens
    return first.lower() + "".join(token[:1].upper() + token[1:] for token in rest)


def slug(text: str) -> str:
    """Lowercase, every run of other characters than ASCII letters and digits turned into `_`."""
    return _SLUG_RUN.sub("_", text.lower()).strip("_")


def topic_slug(topic: str, version: str = "") -> str:
    """`orders:place` v2 → `orders_place_v2`: the handler module name."""
    base = slug(topic)
    return f"{base}_{slug(version)}" if version else base
