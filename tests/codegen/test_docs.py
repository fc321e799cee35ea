"""The user docs keep up with the code: every public runtime name has its line in docs/runtime.md."""

from __future__ import annotations

import svcgen.runtime
from tests.support.codegen import REPO


def test_every_public_runtime_name_is_documented() -> None:
    text = (REPO / "docs" / "runtime.md").read_text(encoding="utf-8")
    missing = [name for name in svcgen.runtime.__all__ if f"| `{name}` |" not in text]
    assert missing == [], f"add a line per name to docs/runtime.md: {missing}"
