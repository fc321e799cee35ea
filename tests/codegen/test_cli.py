"""The CLI surface: build, check, validate, serve and init, their help, and clean user errors."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from svcgen.cli import main
from tests.support.codegen import REPO, manifest_path

ORDERS = manifest_path("orders")


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
def in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)


def assert_user_error(result: Result, *fragments: str) -> None:
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert result.stderr.strip(), "the error goes to stderr"
    for fragment in fragments:
        assert fragment in result.stderr


@pytest.mark.parametrize("command", ["build", "check", "validate", "serve", "init"])
def test_every_command_has_help(command: str) -> None:
    result = run(command, "--help")
    assert result.exit_code == 0 and "Usage:" in result.output


def test_validate(in_repo: None, tmp_path: Path) -> None:
    ok = run("validate", ORDERS)
    assert ok.exit_code == 0 and ok.stdout == f"{ORDERS}: valid (10 types, 3 topics)\n"
    bad = tmp_path / "bad.yaml"
    bad.write_text("svcgen: 1\nservice: Orders\n")
    assert_user_error(run("validate", str(bad)), f"{bad}:2:10: ")


def test_missing_manifest_is_a_clean_error(tmp_path: Path) -> None:
    assert_user_error(run("build", str(tmp_path / "nope.yaml"), "-o", str(tmp_path)), "manifest file not found")


def test_build_check_cycle(in_repo: None, tmp_path: Path) -> None:
    out = str(tmp_path / "out")
    stale = run("check", ORDERS, "-o", out)
    assert stale.exit_code == 1 and "+++ " in stale.stdout and "is stale" in stale.stderr
    built = run("build", ORDERS, "-o", out)
    assert built.exit_code == 0
    assert built.stdout.splitlines()[1:] == [
        "written: __init__.py, app.py, clients.py, contracts/descriptor.json, contracts/http-api.json, "
        "contracts/openapi.json, contracts/spec.json, handlers/__init__.py, health/__init__.py, models.py, service.py, "
        "tests/__init__.py, tests/test_contracts.py, tests/test_service.py",
        "created: handlers/orders_get.py, handlers/orders_place_v1.py, handlers/orders_place_v2.py, health/cache.py, "
        "health/database.py, wiring.py",
        "kept: none",
        "orphaned: none",
    ]
    fresh = run("check", ORDERS, "-o", out)
    assert fresh.exit_code == 0 and fresh.stdout.endswith("is up to date with examples/manifests/orders.yaml\n")
    models = tmp_path / "out/orders_service/models.py"
    models.write_text(models.read_text() + "# tweak\n")
    assert_user_error(run("build", ORDERS, "-o", out), f"{models}: generated file edited by hand", "--force")
    assert run("check", ORDERS, "-o", out).exit_code == 1
    assert run("build", ORDERS, "-o", out, "--force").exit_code == 0
    assert run("check", ORDERS, "-o", out).exit_code == 0


def test_check_names_a_hand_edited_generated_file_as_build_does(in_repo: None, tmp_path: Path) -> None:
    # check sending the user to a build that refuses the file, without saying why, is check disagreeing with build.
    out = tmp_path / "out"
    assert run("build", ORDERS, "-o", str(out)).exit_code == 0
    models = out / "orders_service" / "models.py"
    models.write_text(models.read_text() + "# tweak\n")
    checked = run("check", ORDERS, "-o", str(out))
    assert checked.exit_code == 1
    edited = [line for line in checked.stderr.splitlines() if line.startswith(f"{models.as_posix()}: ")]
    assert len(edited) == 1 and "generated file edited by hand" in edited[0] and "--force" in edited[0], checked.stderr


def test_codegen_error_is_a_clean_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "m.yaml").write_text(
        "svcgen: 1\nservice: art\ntypes:\n  Job:\n    fields:\n      id: string\n"
        "topics:\n  - id: 3d:render\n    request: Job\n    response: Job\n"
    )
    monkeypatch.chdir(tmp_path)
    assert_user_error(run("build", "m.yaml", "-o", "out"), "m.yaml: topic 3d:render gives the handler module name")
    assert not (tmp_path / "out").exists()


def test_init_writes_a_manifest_that_builds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    created = run("init", "order-desk")
    assert created.exit_code == 0 and "svcgen serve out/order_desk_service" in created.stdout
    assert run("validate", "order-desk.yaml").exit_code == 0
    assert run("build", "order-desk.yaml", "-o", "out").exit_code == 0
    assert (tmp_path / "out/order_desk_service/handlers/order_desk_greet.py").is_file()
    assert_user_error(run("init", "order-desk"), "order-desk.yaml: already exists")
    assert_user_error(run("init", "Order_Desk"), "must be lower-case letters")


def test_serve_refuses_a_directory_without_a_package(tmp_path: Path) -> None:
    assert_user_error(run("serve", str(tmp_path)), "no generated package here")


def test_serve_refuses_manifest_without_reload(in_repo: None, tmp_path: Path) -> None:
    # --manifest only says what --reload rebuilds from: taken silently, it suggests a build that never happens.
    out = tmp_path / "out"
    assert run("build", ORDERS, "-o", str(out)).exit_code == 0
    # A subprocess, bounded: without the refusal it would serve.
    try:
        done = subprocess.run([sys.executable, "-m", "svcgen", "serve", str(out / "orders_service"), "--manifest",
                               ORDERS, "--port", "0"], capture_output=True, text=True, timeout=30, cwd=REPO)
    except subprocess.TimeoutExpired:
        pytest.fail("svcgen serve --manifest without --reload served instead of refusing")
    assert done.returncode == 1
    assert done.stderr.splitlines() == ["--manifest names the manifest --reload rebuilds from; add --reload"]


INTERRUPTED_WHILE_LOADING = """
import runpy, sys


class CtrlC:
    # Ctrl-C arriving while the command line is still being imported, the first ~0.3 s of every command.
    def find_spec(self, name, path=None, target=None):
        if name == "svcgen.cli":
            raise KeyboardInterrupt
        return None


sys.meta_path.insert(0, CtrlC())
sys.argv = ["svcgen", "--version"]
runpy.run_module("svcgen", run_name="__main__", alter_sys=True)
"""


def test_ctrl_c_while_the_command_line_loads_is_aborted_not_a_traceback() -> None:
    done = subprocess.run([sys.executable, "-c", INTERRUPTED_WHILE_LOADING], capture_output=True, text=True,
                          timeout=60, cwd=REPO)
    assert "Traceback" not in done.stderr
    assert (done.returncode, done.stderr.splitlines()) == (1, ["", "Aborted!"])  # as click says it once running


def test_build_into_an_unwritable_place_is_a_clean_error(in_repo: None, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert_user_error(run("build", ORDERS, "-o", str(blocker / "out")), "cannot write the package")
    shutil.rmtree(tmp_path / "file", ignore_errors=True)


def test_a_file_of_the_package_that_cannot_be_written_is_named(in_repo: None, tmp_path: Path) -> None:
    # Something in the way of one file (here a directory where models.py goes; a read-only file or an immutable
    # directory fails alike): the line says which file, not only that the package could not be written.
    (tmp_path / "out" / "orders_service" / "models.py").mkdir(parents=True)
    result = run("build", ORDERS, "-o", str(tmp_path / "out"))
    assert_user_error(result, "cannot write")
    assert result.stderr.splitlines() == [
        f"{(tmp_path / 'out' / 'orders_service' / 'models.py').as_posix()}: cannot write the package: Is a directory"
    ]
