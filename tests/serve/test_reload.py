"""`svcgen serve --reload`: a manifest change rebuilds and restarts, a broken manifest prints the build's
diagnostics while the last good build keeps serving, a handler change restarts; one line per reload."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from svcgen.serving import Package, Reloader
from tests.support.processes import wait_for
from tests.support.serving import ECHO, build_echo, serving, write_atomically

SHOUT = ECHO + '  - {id: "echo:shout", request: Note, response: Note, routes: ["POST /shout"]}\n'
BROKEN = SHOUT.replace("response: Note, routes: [\"POST /shout\"]", "response: Nope, routes: [\"POST /shout\"]")
HANDLER = '''from svcgen.runtime import Context, Result

from ..models import Note


async def handle(request: Note, context: Context) -> Result[Note]:
    return Result.ok(Note(text=request.text.upper()))
'''
RELOAD_TIMEOUT = 30.0


def topics(base: str) -> list[str] | None:
    try:
        return [topic["id"] for topic in httpx.get(base + "/svc/spec", timeout=5).json()["topics"]]
    except httpx.TransportError:
        return None


def spec_text(base: str) -> str:
    """The spec document, "" while no server answers (a request caught by a restart is cut off)."""
    try:
        return httpx.get(base + "/svc/spec", timeout=5).text
    except httpx.TransportError:
        return ""


def reload_lines(log: Path) -> list[str]:
    return [line for line in log.read_text().splitlines() if line.startswith("reload:")]


def said(base: str) -> Any:
    try:
        return httpx.post(base + "/say", json={"text": "hi"}, timeout=5).json()
    except httpx.TransportError:
        return None


def test_reload_rebuilds_survives_a_broken_manifest_and_restarts_on_a_handler_change(tmp_path: Path) -> None:
    package = build_echo(tmp_path)
    manifest = tmp_path / "echo.yaml"
    with serving(package, "--reload") as (base, process, log):
        assert topics(base) == ["echo:say"]

        write_atomically(manifest, SHOUT)
        wait_for(lambda: topics(base) == ["echo:say", "echo:shout"], RELOAD_TIMEOUT, "the new topic")
        assert (package / "handlers" / "echo_shout.py").is_file()

        write_atomically(manifest, BROKEN)
        wait_for(lambda: len(reload_lines(log)) >= 2, RELOAD_TIMEOUT, "the failed build")
        assert "Nope" in log.read_text()
        assert topics(base) == ["echo:say", "echo:shout"]
        assert process.poll() is None

        write_atomically(package / "handlers" / "echo_say.py", HANDLER)
        wait_for(lambda: said(base) == {"text": "HI"}, RELOAD_TIMEOUT, "the new handler")
        assert process.poll() is None

    first, failed, restarted = reload_lines(log)
    assert first == "reload: echo.yaml changed; rebuilt handlers/echo_shout.py, service.py; server restarted"
    assert failed == "reload: echo.yaml changed; the build failed, still serving the last good build:"
    assert restarted == "reload: handlers/echo_say.py changed; server restarted"
    diagnostics = log.read_text().split(failed, 1)[1].splitlines()[1]
    assert diagnostics.startswith("  ") and "echo.yaml:" in diagnostics and "Nope" in diagnostics


def test_manifest_option_names_the_manifest(tmp_path: Path) -> None:
    package = build_echo(tmp_path)
    moved = tmp_path / "elsewhere.yaml"
    (tmp_path / "echo.yaml").rename(moved)
    with serving(package, "--reload", "--manifest", str(moved)) as (base, _, log):
        write_atomically(moved, SHOUT)
        wait_for(lambda: topics(base) == ["echo:say", "echo:shout"], RELOAD_TIMEOUT, "the new topic")
    assert reload_lines(log)[0].startswith("reload: elsewhere.yaml changed; rebuilt")


def test_a_manifest_of_another_package_is_refused_and_never_built(tmp_path: Path) -> None:
    package = build_echo(tmp_path)
    other = tmp_path / "other.yaml"
    other.write_text(ECHO.replace("service: echo", "service: other"))
    done = subprocess.run([sys.executable, "-m", "svcgen", "serve", str(package), "--reload", "--manifest", str(other),
                           "--port", "0"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"{other} builds the package other_service, not echo_service, which this server runs; serve "
        f"{(package.parent / 'other_service').as_posix()} instead, or name the manifest of echo_service with --manifest"
    ]
    assert not (package.parent / "other_service").exists()


def test_a_package_renamed_in_the_manifest_is_reported_not_built_elsewhere(tmp_path: Path) -> None:
    package = build_echo(tmp_path)
    manifest = tmp_path / "echo.yaml"
    with serving(package, "--reload") as (base, process, log):
        write_atomically(manifest, SHOUT + "package: renamed_service\n")
        wait_for(lambda: len(reload_lines(log)) >= 1, RELOAD_TIMEOUT, "the refused build")
        assert "builds the package renamed_service, not echo_service" in log.read_text()
        assert topics(base) == ["echo:say"]
        assert process.poll() is None
    assert not (package.parent / "renamed_service").exists()


OWNER = """svcgen: 1
service: shared
types:
  Note:
    fields:
      text: string
"""
TAKER = """svcgen: 1
service: echo
imports: {shared: ../shared/shared.yaml}
topics:
  - {id: "echo:say", request: shared.Note, response: shared.Note, routes: ["POST /say"]}
"""


def test_an_edit_of_an_imported_owners_manifest_outside_the_directory_rebuilds(tmp_path: Path) -> None:
    # The owner's types are in the built package (models.py), so an edit of its manifest is an edit of this one.
    owner = tmp_path / "shared" / "shared.yaml"
    owner.parent.mkdir()
    owner.write_text(OWNER)
    later = tmp_path / "tags" / "tags.yaml"  # an owner imported while serving, in a directory not watched before
    later.parent.mkdir()
    later.write_text(OWNER.replace("service: shared", "service: tags"))
    (tmp_path / "svc").mkdir()
    package = build_echo(tmp_path / "svc", TAKER)
    with serving(package, "--reload") as (base, process, log):
        write_atomically(owner, OWNER + "      loud: boolean?\n")
        wait_for(lambda: "loud" in (package / "models.py").read_text(), RELOAD_TIMEOUT, "the owner's new field")
        wait_for(lambda: "loud" in spec_text(base), RELOAD_TIMEOUT, "the restart")

        write_atomically(tmp_path / "svc" / "echo.yaml", TAKER.replace(
            "{shared: ../shared/shared.yaml}", "{shared: ../shared/shared.yaml, tags: ../tags/tags.yaml}")
            + '  - {id: "echo:tag", request: tags.Note, response: tags.Note, routes: ["POST /tag"]}\n')
        wait_for(lambda: len(reload_lines(log)) >= 2, RELOAD_TIMEOUT, "the taker's rebuild")
        write_atomically(later, OWNER.replace("service: shared", "service: tags") + "      colour: string?\n")
        wait_for(lambda: "colour" in (package / "models.py").read_text(), RELOAD_TIMEOUT, "the new owner's field")
        assert process.poll() is None
    assert reload_lines(log)[0] == "reload: shared.yaml changed; rebuilt models.py; server restarted"
    assert reload_lines(log)[2] == "reload: tags.yaml changed; rebuilt models.py; server restarted"


class Unwatched:
    """A Reloader run in this process on a built package, with a stand-in build that records what it read
    (the manifest's text, then the owner's): `on_line` and `on_build` make an edit at an exact moment."""

    def __init__(self, tmp_path: Path) -> None:
        (tmp_path / "svc").mkdir()
        self.package = build_echo(tmp_path / "svc")
        self.manifest = tmp_path / "svc" / "echo.yaml"
        self.owner = tmp_path / "tags" / "tags.yaml"  # outside every watched directory until the manifest names it
        self.owner.parent.mkdir()
        self.owner.write_text("tags\n")
        self.builds: list[tuple[str, str]] = []
        self.lines: list[str] = []
        self.on_line: Callable[[str], None] = lambda line: None
        self.on_build: Callable[[], None] = lambda: None
        self.reloader = Reloader(Package.at(self.package), self.manifest, self.rebuild, self.inputs, self.echo)

    def inputs(self) -> list[Path]:
        return [self.owner] if "tags" in self.manifest.read_text() else []

    def rebuild(self) -> list[str]:
        self.builds.append((self.manifest.read_text(), self.owner.read_text()))
        self.on_build()
        return []

    def echo(self, line: str) -> None:
        self.lines.append(line)
        self.on_line(line)

    def import_the_owner(self) -> None:
        write_atomically(self.manifest, ECHO + "# imports tags\n")
        wait_for(lambda: any(line.startswith("reload: echo.yaml changed") for line in self.lines), RELOAD_TIMEOUT,
                 "the rebuild that names the owner")

    def run(self, check: Callable[[], None]) -> None:
        thread = threading.Thread(target=self.reloader.run, args=("127.0.0.1", 0))
        thread.start()
        try:
            wait_for(lambda: any(line.startswith("serving") for line in self.lines), RELOAD_TIMEOUT, "the first build")
            check()
        finally:
            self.reloader.stop()
            thread.join(RELOAD_TIMEOUT)
        assert not thread.is_alive()


@pytest.mark.parametrize("moment", ["before the first watch", "while the build reads the new owner",
                                    "after the reload line", "a handler, after the reload line"])
def test_an_edit_made_while_the_watch_is_not_armed_is_still_picked_up(tmp_path: Path, moment: str) -> None:
    """The supervisor (re)arms its watch after the first build and after a rebuild that adds a directory to
    watch; an edit made before the watch was armed went unseen, and the dev loop served stale code silently."""
    test = Unwatched(tmp_path)
    handler = test.package / "handlers" / "echo_say.py"

    def edit_once(path: Path, text: str) -> None:
        if path.read_text() != text:
            write_atomically(path, text)

    def on_line(line: str) -> None:
        if moment == "before the first watch" and line.startswith("serving"):
            edit_once(test.manifest, ECHO + "# loud\n")
        elif moment == "after the reload line" and line.startswith("reload: echo.yaml changed"):
            edit_once(test.owner, "tags\ncolour\n")
        elif moment.startswith("a handler") and line.startswith("reload: echo.yaml changed"):
            edit_once(handler, "# edited\n" + HANDLER)

    def on_build() -> None:
        if moment == "while the build reads the new owner" and "tags" in test.builds[-1][0]:
            edit_once(test.owner, "tags\ncolour\n")

    def last_read(which: int) -> str:
        return test.builds[-1][which] if test.builds else ""

    def check() -> None:
        if moment == "before the first watch":
            wait_for(lambda: last_read(0).endswith("# loud\n"), RELOAD_TIMEOUT, "the rebuild")
            return
        test.import_the_owner()
        if moment.startswith("a handler"):
            wait_for(lambda: "reload: handlers/echo_say.py changed; server restarted" in test.lines, RELOAD_TIMEOUT,
                     "the restart")
        else:
            wait_for(lambda: last_read(1).endswith("colour\n"), RELOAD_TIMEOUT, "the owner's rebuild")

    test.on_line, test.on_build = on_line, on_build
    test.run(check)


def answered(base: str) -> httpx.Response | None:
    try:
        return httpx.post(base + "/say", json={"text": "hi"}, timeout=5)
    except httpx.TransportError:
        return None


def test_while_the_server_cannot_start_requests_are_answered_503_at_once_until_it_is_fixed(tmp_path: Path) -> None:
    """The supervisor kept the port with no server behind it: a client connected and hung until its own timeout.
    Now the port answers 503 at once, saying why, and serves again once the handler is fixed."""
    package = build_echo(tmp_path)
    handler = package / "handlers" / "echo_say.py"
    with serving(package, "--reload") as (base, process, log):
        assert said(base) is not None  # the stub's answer
        write_atomically(handler, "import no_such_module_anywhere\n" + HANDLER)
        refused = wait_for(lambda: (answer := answered(base)) is not None and answer.status_code == 503 and answer,
                           RELOAD_TIMEOUT, "a 503 answer")  # fmt: skip
        failure = refused.json()
        assert failure["status"] == "service-unavailable"
        assert "handlers/echo_say.py:1: ModuleNotFoundError: No module named 'no_such_module_anywhere'" in (
            failure["detail"])  # fmt: skip
        started = time.monotonic()
        assert httpx.get(base + "/svc/spec", timeout=5).status_code == 503
        assert time.monotonic() - started < 1  # answered, not left waiting
        write_atomically(handler, HANDLER)
        wait_for(lambda: said(base) == {"text": "HI"}, RELOAD_TIMEOUT, "the fixed handler")
        assert process.poll() is None
    assert reload_lines(log) == [
        "reload: handlers/echo_say.py changed; server restarted",
        "reload: the server exited with status 1; answering 503 until it restarts on the next change",
        "reload: handlers/echo_say.py changed; server restarted",
    ]
