"""The `svcgen` command line.

A user error (an invalid manifest, a missing file, a generated file edited by hand) is printed as clear
lines on stderr with exit status 1, never as a traceback.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import NoReturn
from urllib.parse import urlsplit

import click
import orjson

from .codegen.errors import CodegenError
from .codegen.files import GeneratedFile
from .codegen.render import render_package
from .codegen.starter import starter_manifest
from .codegen.writer import stale_diff, write_package
from .manifest import Manifest, ManifestError, load_manifest
from .manifest.build import default_package
from .runtime._mesh import probe as probing
from .runtime._mesh.artifacts import write_artifacts
from .runtime._mesh.artifacts.site import DASHBOARD, dashboard_html
from .runtime._mesh.collector import Collector, JsonFileStore, SnapshotError, StoreError
from .runtime._mesh.collector_host import DEFAULT_ARTIFACTS_INTERVAL, CollectorHost, CollectorSettings
from .runtime._mesh.poller import DEFAULT_INTERVAL as DEFAULT_POLL_INTERVAL
from .runtime._mesh.profile import MEANINGS
from .runtime._reserved import DEFAULT_PREFIX


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="svcgen")
def main() -> None:
    """Manifest-first toolkit for message-topic services."""


@main.command()
@click.argument("manifest")
@click.option(
    "-o", "--output", "out", required=True, type=click.Path(file_okay=False, path_type=Path),
    help="Directory the package is written into, as OUT/<package>.",
)
@click.option("--force", is_flag=True, help="Overwrite generated files even when they were edited by hand.")
def build(manifest: str, out: Path, force: bool) -> None:
    """Write the service package of MANIFEST into OUT/<package>.

    Generated files are rewritten; handler stubs and health.py are created once and then kept. Prints
    what was written, created, kept and orphaned.
    """
    model = _load(manifest)
    files = _render(model)
    package_dir = out / model.package
    try:
        report = write_package(files, package_dir, force=force)
    except CodegenError as error:
        _fail(error.lines)
    except OSError as error:
        _fail([f"{package_dir}: cannot write the package: {error.strerror or error}"])
    click.echo(f"built {package_dir.as_posix()} from {manifest}")
    for line in report.summary():
        click.echo(line)


@main.command()
@click.argument("manifest")
@click.option(
    "-o", "--output", "out", required=True, type=click.Path(file_okay=False, path_type=Path),
    help="Directory holding the built package, as for build.",
)
def check(manifest: str, out: Path) -> None:
    """Exit 1 with a unified diff when OUT/<package> is not what building MANIFEST would write.

    Writes nothing; for CI and review.
    """
    model = _load(manifest)
    files = _render(model)
    package_dir = out / model.package
    try:
        diff = stale_diff(files, package_dir, package_dir.as_posix())
    except OSError as error:
        _fail([f"{package_dir}: cannot read the package: {error.strerror or error}"])
    if diff:
        click.echo(diff, nl=False)
        click.echo(f"{package_dir.as_posix()} is stale; run: svcgen build {manifest} -o {out.as_posix()}", err=True)
        raise SystemExit(1)
    click.echo(f"{package_dir.as_posix()} is up to date with {manifest}")


@main.command()
@click.argument("manifest")
def validate(manifest: str) -> None:
    """Exit 0 when MANIFEST is valid; otherwise print its errors as file:line:col: message and exit 1."""
    model = _load(manifest)
    click.echo(f"{manifest}: valid ({len(model.types)} types, {len(model.topics)} topics)")


@main.command()
@click.argument("package_dir", metavar="OUT/PACKAGE", type=click.Path(file_okay=False, path_type=Path))
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535), help="Port to bind.")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(min=1), help="Worker processes.")
def serve(package_dir: Path, host: str, port: int, workers: int) -> None:
    """Run the built package OUT/PACKAGE under uvicorn (OUT is put on the import path)."""
    import uvicorn

    if not (package_dir / "app.py").is_file():
        _fail([f"{package_dir.as_posix()}: no generated package here (no app.py); build one: svcgen build M -o OUT"])
    name = package_dir.resolve().name
    if not name.isidentifier():
        _fail([f"{package_dir.as_posix()}: {name!r} is not an importable package name"])
    app_dir = str(package_dir.resolve().parent)
    uvicorn.run(f"{name}.app:app", host=host, port=port, workers=workers, app_dir=app_dir)


@main.command()
@click.argument("url")
@click.option("--prefix", default=DEFAULT_PREFIX, show_default=True, help="Where the well-known surfaces are mounted.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--timeout", default=probing.DEFAULT_TIMEOUT, show_default=True, type=click.FloatRange(min=0.1),
              help="Seconds to wait for each surface.")
def probe(url: str, prefix: str, as_json: bool, timeout: float) -> None:
    """Audit the running service at URL against the cloud-service profile, from outside.

    Exit status 1 when a requirement is positively unmet; inconclusive verdicts do not fail.
    """
    if not url.startswith(("http://", "https://")):
        _fail([f"{url}: not an http(s) URL; for example http://127.0.0.1:8000"])
    report = asyncio.run(probing.probe(url, prefix=prefix, timeout=timeout))
    if as_json:
        click.echo(orjson.dumps(report.document(), option=orjson.OPT_INDENT_2).decode())
    else:
        click.echo(f"probe {report.base_url} (prefix {report.prefix})")
        for verdict in report.requirements:
            click.echo(f"  {verdict.id}  {verdict.verdict:<13}  {MEANINGS[verdict.id]}: {verdict.reason}")
        unmet, unknown = report.not_satisfied, report.inconclusive
        summary = f"not satisfied: {', '.join(unmet)}" if unmet else "clean: nothing positively unmet"
        click.echo(summary + (f"; inconclusive: {', '.join(unknown)}" if unknown else ""))
    if not report.is_clean:
        raise SystemExit(1)


@main.group()
def collector() -> None:
    """The mesh collector: ingest, queries, poller, UI artifacts and dashboard."""


@collector.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind.")
@click.option("--port", default=8700, show_default=True, type=click.IntRange(0, 65535), help="Port to bind.")
@click.option("--store", type=click.Path(dir_okay=False, path_type=Path), help="JSON file the state is kept in.")
@click.option("--poll", "polls", multiple=True, metavar="NAME=URL",
              help="A service to poll (repeatable); a path in URL is its surfaces' prefix, /svc without one.")
@click.option("--poll-interval", default=DEFAULT_POLL_INTERVAL, show_default=True, type=click.FloatRange(min=0.1),
              help="Seconds between poll sweeps.")
@click.option("--artifacts", type=click.Path(file_okay=False, path_type=Path),
              help="Directory the UI artifacts are written to (default: a temporary one).")
@click.option("--artifacts-interval", default=DEFAULT_ARTIFACTS_INTERVAL, show_default=True,
              type=click.FloatRange(min=0.1), help="Seconds between artifact rewrites.")
def collector_serve(
    host: str, port: int, store: Path | None, polls: tuple[str, ...], poll_interval: float,
    artifacts: Path | None, artifacts_interval: float,
) -> None:
    """Run the collector: envelope invoke surface with the collector topics, its health and spec, the
    poller, the UI artifacts and the dashboard at /."""
    import uvicorn

    fleet = [_poll_target(text) for text in polls]
    if store is not None and not store.parent.is_dir():
        _fail([f"{store}: the directory {store.parent} does not exist"])
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per poll request is noise
    settings = CollectorSettings(store=store, fleet=fleet, poll_interval=poll_interval, artifacts=artifacts,
                                 artifacts_interval=artifacts_interval)
    collector_host = CollectorHost(settings)
    base = f"http://{host}:{port}"
    click.echo(f"collector on {base}{settings.prefix}/invoke; dashboard at {base}/")
    click.echo(f"state: {store or 'in memory'}; artifacts: {collector_host.artifacts}; "
               f"polling {len(fleet)} service(s) every {poll_interval:g} s")
    uvicorn.run(collector_host.app, host=host, port=port, log_level="warning")


@main.command()
@click.option("--store", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The collector's JSON-file store.")
@click.option("-o", "--output", "out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Directory the artifacts are written into.")
def artifacts(store: Path, out: Path) -> None:
    """Write the UI artifacts and the dashboard from a collector snapshot, once."""
    if not JsonFileStore(store).exists():
        _fail([f"{store}: no such store file"])
    try:
        stored = JsonFileStore(store).load()
    except StoreError as error:
        _fail([f"{store}: {error}"])
    restored = Collector()
    try:
        restored.restore_stored(stored)
        written = write_artifacts(restored.snapshot(), out)
        (out / DASHBOARD).write_bytes(dashboard_html())
    except SnapshotError as error:
        _fail([f"{store}: {error}"])
    except OSError as error:
        _fail([f"{out}: cannot write: {error.strerror or error}"])
    click.echo(f"wrote {len(written)} artifacts and {DASHBOARD} to {out}")


def _poll_target(text: str) -> tuple[str, str, str]:
    """(name, base URL, prefix): the URL's path is where the service's surfaces are, `/svc` when it has none."""
    name, separator, url = text.partition("=")
    parts = urlsplit(url)
    if not separator or not name.strip() or parts.scheme not in ("http", "https") or not parts.netloc \
            or parts.query or parts.fragment:
        _fail([f"--poll {text}: expected NAME=URL, for example orders=http://127.0.0.1:8000 "
               "(or inventory=http://127.0.0.1:8001/ops for surfaces under /ops)"])
    return name.strip(), f"{parts.scheme}://{parts.netloc}", parts.path.rstrip("/") or DEFAULT_PREFIX


@main.command()
@click.argument("name")
def init(name: str) -> None:
    """Write a starter manifest NAME.yaml for the service NAME (never overwrites)."""
    try:
        text = starter_manifest(name)
    except ValueError as error:
        _fail([str(error)])
    target = Path(f"{name}.yaml")
    try:
        with target.open("x", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
    except FileExistsError:
        _fail([f"{target}: already exists; not overwriting it"])
    except OSError as error:
        _fail([f"{target}: cannot write: {error.strerror or error}"])
    click.echo(f"wrote {target}; next: svcgen build {target} -o out && svcgen serve out/{default_package(name)}")


def _load(manifest: str) -> Manifest:
    try:
        return load_manifest(manifest)
    except ManifestError as error:
        _fail(str(error).splitlines())


def _render(model: Manifest) -> list[GeneratedFile]:
    try:
        return render_package(model)
    except CodegenError as error:
        _fail(f"{model.path}: {line}" for line in error.lines)


def _fail(lines: Iterable[str]) -> NoReturn:
    for line in lines:
        click.echo(line, err=True)
    raise SystemExit(1)
