"""Typed handler binding and what build and check say about the user's files as the manifest changes."""

from __future__ import annotations

import asyncio
import importlib
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from svcgen.cli import main
from svcgen.runtime import HandlerBindingError
from tests.support.codegen import REPO, imported

PACKAGE = "shelf_service"
MANIFEST = """\
svcgen: 1
service: shelf
types:
  Book:
    fields:
      isbn: string
  Shelf:
    fields:
      books: list[Book]
  Query:
    fields:
      text: string
topics:
  - id: shelf:add
    request: Book
    response: Shelf
  - id: shelf:find
    request: Query
    response: Shelf
"""

ADD = """\
from __future__ import annotations

from svcgen.runtime import Context, Result

from ..models import {request}, {response}


async def handle(request: {request}, context: Context) -> Result[{response}]:
    return {body}
"""


def add_handler(request: str = "Book", response: str = "Shelf") -> str:
    implemented = (request, response) == ("Book", "Shelf")
    body = "Result.ok(Shelf(books=[request]))" if implemented else 'Result.not_implemented("")'
    imports = ", ".join(sorted({request, response}))
    return ADD.format(request=request, response=response, body=body).replace(f"{request}, {response}", imports, 1)


def cli(project: Path, *args: str) -> tuple[int, str, str]:
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(project)
        result = CliRunner().invoke(main, [*args[:1], "m.yaml", "-o", "out", *args[1:]], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "m.yaml").write_text(MANIFEST)
    assert cli(tmp_path, "build")[0] == 0
    return tmp_path


def handler(project: Path, name: str) -> Path:
    return project / "out/shelf_service/handlers" / name


def test_mypy_rejects_a_handler_annotated_with_other_types(project: Path) -> None:
    handler(project, "shelf_add.py").write_text(add_handler(request="Query"))
    handler(project, "shelf_find.py").write_text(add_handler(request="Query", response="Book"))
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--config-file", os.devnull, "-p", PACKAGE],
        cwd=project / "out", env={**os.environ, "MYPYPATH": str(REPO)}, capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip
    assert checked.returncode == 1, checked.stdout
    errors = [line for line in checked.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 2, checked.stdout
    request_error, response_error = errors
    assert request_error.startswith("shelf_service/service.py:")
    assert '"Callable[[Query, Context], Coroutine[Any, Any, Result[Shelf]]]"' in request_error
    assert '"Callable[[Book, Context], Awaitable[Result[Shelf]] | Result[Shelf]]"' in request_error
    assert '"Callable[[Query, Context], Coroutine[Any, Any, Result[Book]]]"' in response_error
    assert '"Callable[[Query, Context], Awaitable[Result[Shelf]] | Result[Shelf]]"' in response_error


def test_the_service_refuses_to_start_naming_the_handler_file_and_the_expected_types(project: Path) -> None:
    handler(project, "shelf_find.py").write_text(add_handler(request="Book", response="Shelf"))
    with imported(project / "out", PACKAGE), pytest.raises(HandlerBindingError) as refused:
        importlib.import_module(f"{PACKAGE}.service").create_app()
    assert str(refused.value) == (
        "handlers/shelf_find.py: handle(request: Book, context) -> Result[Shelf] cannot serve shelf:find, which "
        "expects handle(request: Query, context: Context) -> Result[Shelf]; change the handler's annotations "
        "(and code) to the manifest's types"
    )


def test_build_and_check_report_a_kept_handler_whose_manifest_types_changed(project: Path) -> None:
    handler(project, "shelf_add.py").write_text(add_handler())
    assert cli(project, "check") == (0, "out/shelf_service is up to date with m.yaml\n", "")
    (project / "m.yaml").write_text(MANIFEST.replace("request: Book", "request: Query"))
    note = (
        "handlers/shelf_add.py: handle(request: Book, context) -> Result[Shelf] no longer matches the manifest, "
        "which declares handle(request: Query, context) -> Result[Shelf]; update the handler (the service refuses "
        "to start until then)"
    )
    code, _, stderr = cli(project, "check")
    assert code == 1 and f"out/shelf_service/{note}\n" in stderr
    code, stdout, _ = cli(project, "build")
    assert code == 0 and stdout.endswith(f"note: {note}\n")
    code, stdout, stderr = cli(project, "check")
    assert code == 1 and stdout == "" and stderr == f"out/shelf_service/{note}\n"
    handler(project, "shelf_add.py").write_text(add_handler(request="Query", response="Shelf"))
    assert cli(project, "check")[0] == 0


def test_a_renamed_topic_is_reported_with_the_mv_that_keeps_its_handler(project: Path) -> None:
    handler(project, "shelf_add.py").write_text(add_handler())
    (project / "m.yaml").write_text(MANIFEST.replace("id: shelf:add", "id: shelf:put"))
    hint = (
        "handlers/shelf_add.py: likely renamed to handlers/shelf_put.py (same request and response types); keep the "
        "implementation with: mv out/shelf_service/handlers/shelf_add.py out/shelf_service/handlers/shelf_put.py"
    )
    code, _, stderr = cli(project, "check")
    assert code == 1
    assert "out/shelf_service/handlers/shelf_add.py: orphaned: its topic or check left the manifest" in stderr
    assert f"out/shelf_service/{hint}\n" in stderr
    code, stdout, _ = cli(project, "build")
    assert code == 0
    assert "created: handlers/shelf_put.py\n" in stdout and "orphaned: handlers/shelf_add.py (" in stdout
    assert stdout.endswith(f"note: {hint}\n")
    code, _, stderr = cli(project, "check")  # the fresh stub does not hide the rename
    assert code == 1 and f"out/shelf_service/{hint}\n" in stderr
    handler(project, "shelf_add.py").rename(handler(project, "shelf_put.py"))
    assert cli(project, "check")[0] == 0


def test_a_health_check_added_later_gets_its_module_and_check_insists_on_it(project: Path) -> None:
    (project / "m.yaml").write_text(MANIFEST.replace("types:\n", "health: [database]\ntypes:\n"))
    code, stdout, stderr = cli(project, "check")
    assert code == 1 and "+++ b/out/shelf_service/health/database.py" in stdout
    assert "out/shelf_service/health/database.py: missing; svcgen build creates its stub\n" in stderr
    code, stdout, _ = cli(project, "build")
    assert code == 0 and "created: health/database.py\n" in stdout
    assert cli(project, "check")[0] == 0
    with imported(project / "out", PACKAGE):
        answer = asyncio.run(served_health(importlib.import_module(f"{PACKAGE}.service").create_app()))
    assert answer == {"isHealthy": True, "healthChecks": {"database": {"status": "ok"}}}


async def served_health(app: object) -> object:
    transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url="http://service") as client:
        return (await client.get("/svc/health")).json()
