"""What build and check say about the user's files, read with `ast` (nothing imported).

- a handler or health module whose topic or check left the manifest: orphaned (never deleted); when an
  orphaned handler has the request and response types of a topic whose handler is new (missing or still the
  untouched stub), that is a likely rename, with the `mv` that keeps the implementation;
- a kept handler whose `handle` annotations differ from the manifest's types, or that does not parse or binds no
  `handle`, and a health module that does not parse or binds no `check` (the service would refuse it at startup);
- a `health.py` from an older build, with the move to make: one module per check under health/;
- (check only) a user file that is missing: build creates its stub.

Every finding is one line; `check` exits 1 when there is any.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .files import GeneratedFile

HANDLERS_DIR = "handlers/"
HEALTH_DIR = "health/"
LEGACY_HEALTH = "health.py"
_TYPING_ALIASES = {"List": "list", "Dict": "dict", "Set": "set", "FrozenSet": "frozenset", "Tuple": "tuple"}


@dataclass(frozen=True)
class Signature:
    """The normalised annotation texts of a handler's `handle`: its request and the `T` of `Result[T]`."""

    request: str | None
    response: str | None

    @property
    def complete(self) -> bool:
        return self.request is not None and self.response is not None

    def describe(self) -> str:
        return f"handle(request: {self.request or '...'}, context) -> Result[{self.response or '...'}]"


@dataclass(frozen=True)
class Findings:
    orphaned: list[str]
    notes: list[str]
    """Every finding but the plain orphan statements (build's summary has its own orphaned line)."""

    def problems(self) -> list[str]:
        """Every finding, one line each: what check prints."""
        orphan = "orphaned: its topic or check left the manifest; svcgen never deletes it"
        return [f"{path}: {orphan}" for path in self.orphaned] + self.notes


def user_findings(files: Sequence[GeneratedFile], package_dir: Path, *, missing: bool) -> Findings:
    """Findings about the user's files in `package_dir`; `missing` adds one per user file not on disk."""
    label = package_dir.as_posix()
    stubs = {f.relpath: f for f in files if f.owner == "user"}
    orphaned = _orphans({f.relpath for f in files}, package_dir)
    lines: list[str] = []
    handler_stubs = {path: stub for path, stub in stubs.items() if path.startswith(HANDLERS_DIR)}
    fresh = {path: stub for path, stub in handler_stubs.items() if _is_fresh(package_dir / path, stub)}
    for path in orphaned:
        if path.startswith(HANDLERS_DIR):
            lines.extend(_rename_hints(path, package_dir, fresh, label))
    for path, stub in sorted(handler_stubs.items()):
        if path not in fresh:
            lines.extend(_unbindable(path, package_dir, "handle") or _type_change(path, package_dir, stub))
    for path in sorted(path for path in stubs if path.startswith(HEALTH_DIR)):
        lines.extend(_unbindable(path, package_dir, "check"))
    lines.extend(_legacy_health(stubs, package_dir))
    if missing:
        absent = [path for path in sorted(stubs) if not (package_dir / path).exists()]
        lines.extend(f"{path}: missing; svcgen build creates its stub" for path in absent)
    return Findings(orphaned, lines)


def handler_signature(source: str) -> Signature | None:
    """The signature of `handle` in a handler module's source; None when it defines no `handle` or does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "handle":
            parameters = [*node.args.posonlyargs, *node.args.args]
            first = parameters[0].annotation if parameters else None
            return Signature(_claim(_normal(first) if first is not None else None), _claim(_payload(node.returns)))
    return None


def _orphans(expected: set[str], package_dir: Path) -> list[str]:
    """Handler and health modules no topic or check of the manifest has: a module there that defines no `handle`
    (no `check`) is a helper of the user's, not an orphan; one that does not parse is reported, as it may be one."""
    found: list[str] = []
    for directory, entry in ((HANDLERS_DIR, "handle"), (HEALTH_DIR, "check")):
        if not (package_dir / directory).is_dir():
            continue
        for path in sorted((package_dir / directory).glob("*.py")):
            relpath = f"{directory}{path.name}"
            if relpath not in expected and path.name != "__init__.py" and _defines(path, entry) is not False:
                found.append(relpath)
    return found


def _defines(path: Path, name: str) -> bool | None:
    """Whether the module defines function `name` at its top level; None when it cannot be read or parsed."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return None
    return any(isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name for node in tree.body)


def _is_fresh(path: Path, stub: GeneratedFile) -> bool:
    """A handler nobody has written yet: missing, or still exactly its stub."""
    try:
        return path.read_bytes() == stub.data
    except FileNotFoundError:
        return True
    except OSError:
        return False


def _rename_hints(orphan: str, package_dir: Path, fresh: dict[str, GeneratedFile], label: str) -> list[str]:
    signature = _signature_of(package_dir / orphan)
    if signature is None or not signature.complete:
        return []
    matches = [path for path, stub in sorted(fresh.items()) if handler_signature(stub.text) == signature]
    if not matches:
        return []
    if len(matches) > 1:
        return [f"{orphan}: has the types of the new {', '.join(matches)}; mv it onto the one it implements"]
    (target,) = matches
    return [
        f"{orphan}: likely renamed to {target} (same request and response types); keep the implementation with: "
        f"mv {label}/{orphan} {label}/{target}"
    ]


def _unbindable(path: str, package_dir: Path, entry: str) -> list[str]:
    """A kept handler (health module) the service cannot bind: it does not parse, or binds no `entry` (`handle`,
    `check`) at its top level. A missing one is not this finding."""
    try:
        tree = ast.parse((package_dir / path).read_text(encoding="utf-8"))
    except SyntaxError as error:
        return [f"{path}:{error.lineno}: SyntaxError: {error.msg}; the service refuses to start until it parses"]
    except (OSError, UnicodeDecodeError, ValueError):
        return []
    if _binds(tree, entry) is False:
        return [f"{path}: defines no {entry}; the service refuses to start until it does"]
    return []


def _binds(tree: ast.Module, name: str) -> bool | None:
    """Whether the module binds `name` outside its functions and classes (a def, an assignment, an import); None
    when a star import might."""
    pending: list[ast.AST] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.name == name:
                return True
            continue  # their bodies bind in their own scope
        if isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    return None
                if (alias.asname or alias.name.partition(".")[0]) == name:
                    return True
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id == name:
            return True
        pending.extend(ast.iter_child_nodes(node))
    return False


def _type_change(path: str, package_dir: Path, stub: GeneratedFile) -> list[str]:
    have = _signature_of(package_dir / path)
    want = handler_signature(stub.text)
    if have is None or want is None:
        return []
    request_differs = have.request is not None and have.request != want.request
    response_differs = have.response is not None and have.response != want.response
    if not (request_differs or response_differs):
        return []
    return [
        f"{path}: {have.describe()} no longer matches the manifest, which declares {want.describe()}; update the "
        "handler (the service refuses to start until then)"
    ]


def _legacy_health(stubs: dict[str, GeneratedFile], package_dir: Path) -> list[str]:
    legacy = package_dir / LEGACY_HEALTH
    if not legacy.is_file():
        return []
    modules = [path[len(HEALTH_DIR) : -len(".py")] for path in sorted(stubs) if path.startswith(HEALTH_DIR)]
    try:
        defined = {
            node.name
            for node in ast.parse(legacy.read_text(encoding="utf-8")).body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        }
    except (OSError, UnicodeDecodeError, SyntaxError):
        defined = set()
    moves = [f"the body of {name}() into check() in health/{name}.py" for name in modules if name in defined]
    what = "; ".join(moves) if moves else "each check into check() of its module health/<check>.py"
    return [
        f"{LEGACY_HEALTH}: from an older svcgen, no longer used: health checks are now one module each; move {what}; "
        f"then delete {LEGACY_HEALTH} (svcgen never deletes it)"
    ]


def _signature_of(path: Path) -> Signature | None:
    try:
        return handler_signature(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return None


def _claim(text: str | None) -> str | None:
    """`Any` claims nothing, like no annotation."""
    return None if text == "Any" else text


def _payload(returns: ast.expr | None) -> str | None:
    """The `T` of a `Result[T]` return annotation (also inside `Awaitable[...]`), else the whole annotation."""
    if returns is None:
        return None
    node = _Normalise().visit(_parsed(returns))
    while isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        if node.value.id == "Result":
            return ast.unparse(node.slice)
        if node.value.id not in ("Awaitable", "Coroutine"):
            break
        node = node.slice.elts[-1] if isinstance(node.slice, ast.Tuple) else node.slice
    return ast.unparse(node)


def _normal(annotation: ast.expr) -> str:
    return ast.unparse(_Normalise().visit(_parsed(annotation)))


def _parsed(annotation: ast.expr) -> ast.expr:
    """A string annotation as the expression it spells."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            return _parsed(ast.parse(annotation.value, mode="eval").body)
        except SyntaxError:
            return annotation
    return annotation


class _Normalise(ast.NodeTransformer):
    """One spelling per type: no module qualifiers (`models.X` → `X`), builtin generics, `X | None` for
    `Optional[X]`, union members sorted."""

    def visit_Attribute(self, node: ast.Attribute) -> ast.expr:
        return ast.Name(node.attr)

    def visit_Constant(self, node: ast.Constant) -> ast.expr:
        parsed = _parsed(node)
        return node if parsed is node else self.visit(parsed)

    def visit_Name(self, node: ast.Name) -> ast.expr:
        return ast.Name(_TYPING_ALIASES.get(node.id, node.id))

    def visit_Subscript(self, node: ast.Subscript) -> ast.expr:
        node = ast.Subscript(self.visit(node.value), self.visit(node.slice))
        if isinstance(node.value, ast.Name) and node.value.id in ("Optional", "Union"):
            members = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if node.value.id == "Optional":
                members = [*members, ast.Constant(None)]
            return _union(members)
        return node

    def visit_BinOp(self, node: ast.BinOp) -> ast.expr:
        if isinstance(node.op, ast.BitOr):
            return _union([self.visit(node.left), self.visit(node.right)])
        return node


def _union(members: list[ast.expr]) -> ast.expr:
    flat = {ast.unparse(leaf): leaf for member in members for leaf in _leaves(member)}
    ordered = [flat[text] for text in sorted(flat)]
    union = ordered[0]
    for member in ordered[1:]:
        union = ast.BinOp(union, ast.BitOr(), member)
    return union


def _leaves(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return [*_leaves(node.left), *_leaves(node.right)]
    return [node]
