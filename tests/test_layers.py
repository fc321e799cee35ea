"""The layers point one way (docs/architecture.md): read from the import graph of svcgen/, not from memory.

- the runtime is what a generated service imports: it imports nothing of svcgen outside itself (not the
  collector, codegen, the manifest, the contract diff, the CLI, ...);
- nothing imports the CLI but `python -m svcgen`;
- inside the runtime the mesh builds on the core and the bindings, never the reverse, except where a module
  listed below must (each with its reason);
- importing `svcgen.runtime` loads none of the other parts.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from functools import cache
from pathlib import Path

from tests.support.codegen import REPO

PACKAGE = REPO / "svcgen"
RUNTIME = "svcgen.runtime"
MESH = "svcgen.runtime._mesh"
CORE_USES_OF_THE_MESH = {
    RUNTIME: "the public namespace re-exports the mesh's public names",
    "svcgen.runtime._assembly": "it assembles the app a service runs, its mesh included",
    "svcgen.runtime._clients": "a client call carries the caller's trace (propagation_headers)",
    "svcgen.runtime._events": "a published event carries its publish span's trace context to the deliveries (a type)",
}
"""Runtime modules outside `_mesh` that import it, and why they must."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def import_graph() -> dict[str, frozenset[str]]:
    """Module → the svcgen modules it imports (anywhere in it, type-checking imports included). `from pkg import
    sub` is an edge to `pkg.sub` alone: the package itself is imported as every submodule's parent."""
    modules = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, frozenset[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        imported: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join([*base, node.module] if node.module else base)
                else:
                    target = node.module or ""
                submodules = [f"{target}.{alias.name}" for alias in node.names if f"{target}.{alias.name}" in modules]
                imported.update(submodules)
                if len(submodules) < len(node.names):
                    imported.add(target)
        graph[name] = frozenset(target for target in imported if target.split(".")[0] == "svcgen")
    return graph


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def edges(source: str, target: str) -> list[str]:
    return sorted(
        f"{module} -> {imported}"
        for module, imports in import_graph().items()
        if within(module, source)
        for imported in imports
        if within(imported, target)
    )


def test_the_graph_is_read() -> None:
    # A reader that found nothing would pass every rule below.
    assert "svcgen.runtime._mesh.host" in import_graph()[RUNTIME]
    assert "svcgen.runtime._assembly" in import_graph()["svcgen.codegen.contracts"]
    assert edges("svcgen.collector", RUNTIME)


def test_the_runtime_imports_nothing_above_it() -> None:
    above = sorted(module for module in import_graph() if not within(module, RUNTIME) and module != "svcgen")
    assert {"svcgen.collector", "svcgen.codegen", "svcgen.manifest", "svcgen.cli"} <= set(above)
    assert [edge for module in above for edge in edges(RUNTIME, module)] == []


def test_nothing_imports_the_cli_but_main() -> None:
    assert edges("svcgen", "svcgen.cli") == ["svcgen.__main__ -> svcgen.cli"]


def test_the_runtime_core_does_not_import_the_mesh_except_where_it_must() -> None:
    core = [module for module in import_graph() if within(module, RUNTIME) and not within(module, MESH)]
    using = sorted(module for module in core if any(within(imported, MESH) for imported in import_graph()[module]))
    assert using == sorted(CORE_USES_OF_THE_MESH)


def test_importing_the_runtime_loads_nothing_else_of_svcgen() -> None:
    code = "import sys, svcgen.runtime; print(*sorted(m for m in sys.modules if m.startswith('svcgen')))"
    loaded = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60,
                            check=True).stdout.split()  # fmt: skip
    assert loaded, "svcgen.runtime did not load"
    assert [module for module in loaded if not within(module, RUNTIME) and module != "svcgen"] == []
