"""The collision rule for derived names (docs/wire.md, Derived documents): walked in sorted (id, version) order, the
first item deriving a name keeps it clean; later ones get `_2`, `_3`, ... after the whole name.

One function decides it for the operations document and for handler module slugs alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ._naming import topic_slug
from ._registry import TopicKey


def collision_suffixes(names: Sequence[Sequence[str]]) -> list[str]:
    """The suffix (`""`, `"_2"`, `"_3"`, ...) of each item, given in walk order.

    Each item derives one name per namespace (position `p` of every item is the same namespace, for
    example operation ids or component names). An item keeps its clean names only when it is the first
    to derive every one of them; otherwise all its names take the same suffix, the smallest n >= 2 for
    which none of its suffixed names equals a name already derived or assigned in that namespace, so
    the final names are unique per namespace even when a suffixed name looks like another clean one.
    """
    width = max((len(item) for item in names), default=0)
    derived: list[set[str]] = [set() for _ in range(width)]
    clean: list[bool] = []
    for item in names:
        first = all(name not in derived[p] for p, name in enumerate(item))
        clean.append(first)
        for p, name in enumerate(item):
            derived[p].add(name)
    suffixes: list[str] = []
    for item, is_clean in zip(names, clean, strict=True):
        if is_clean:
            suffixes.append("")
            continue
        n = 2
        while any(f"{name}_{n}" in derived[p] for p, name in enumerate(item)):
            n += 1
        suffix = f"_{n}"
        for p, name in enumerate(item):
            derived[p].add(name + suffix)
        suffixes.append(suffix)
    return suffixes


def handler_slugs(keys: Iterable[TopicKey]) -> dict[TopicKey, str]:
    """Handler module name per topic (`orders:place` v2 → `orders_place_v2`), colliding slugs suffixed."""
    ordered = sorted(set(keys))
    suffixes = collision_suffixes([(topic_slug(key.id, key.version),) for key in ordered])
    return {key: topic_slug(key.id, key.version) + suffix for key, suffix in zip(ordered, suffixes, strict=True)}
