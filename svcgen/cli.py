"""The `svcgen` command line.

A user error (an invalid manifest, a missing file, a generated file edited by hand) is printed as clear
lines on stderr with exit status 1, never as a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import math
import os
import re
import signal
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import urlsplit

import click
import orjson
import yaml

from .contractdiff import (
    ApprovalsError,
    CompatReport,
    DiffReport,
    Level,
    LevelsError,
    across_revisions,
    compat_manifests,
    diff_manifests,
    parse_approvals,
    parse_levels,
)
from .manifest import Manifest, ManifestError, load_manifest, load_manifest_with_warnings
from .manifest.build import default_package
from .manifest.load import cycle_collection_paused
from .manifest.revision import (
    ManifestAbsent,
    RevisionError,
    load_manifest_at,
    matching_tags,
    repository_path,
    split_revision,
)
from .runtime._logging import configure_logging
from .runtime._mesh.profile import MEANINGS
from .runtime._topics import DEFAULT_PREFIX

if TYPE_CHECKING:
    from .candeploy import DeployReport
    from .codegen.files import GeneratedFile
    from .codegen.ownership import BuildReport

# The code generator (jinja2 and the templates), the server and the collector are imported by the commands that
# use them, so `svcgen diff` and `svcgen validate` start without them.


class _LazyDefault(click.Option):
    """An option whose default is read from a module only when it is needed (--help, or the option left out),
    so that defining the option does not import that module."""

    def __init__(self, *args: Any, default_from: Callable[[], Any], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.default_from = default_from

    def get_default(self, ctx: click.Context, call: bool = True) -> Any:
        return self.default_from()


class _Seconds(click.FloatRange):
    """A number of seconds of at least `min`: FloatRange alone lets nan through (every comparison with it is
    false), which fails the timers later with a traceback, and inf, which waits for ever."""

    name = "seconds"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        seconds = super().convert(value, param, ctx)
        if not math.isfinite(seconds):
            self.fail(f"{value!r} is not a finite number of seconds.", param, ctx)
        return seconds


def _probe_timeout() -> float:
    from .collector.probe import DEFAULT_TIMEOUT

    return DEFAULT_TIMEOUT


def _poll_interval() -> float:
    from .collector.poller import DEFAULT_INTERVAL

    return DEFAULT_INTERVAL


def _artifacts_interval() -> float:
    from .collector.host import DEFAULT_ARTIFACTS_INTERVAL

    return DEFAULT_ARTIFACTS_INTERVAL


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

    Generated files are rewritten; handler and health stubs and wiring.py are created once and then kept.
    Prints what was written, created, kept and orphaned, and notes on the handlers and health modules
    (likely renames, changed types).
    """
    try:
        package_dir, report = _build(manifest, out, force=force)
    except _BuildFailed as failure:
        _fail(failure.lines)
    click.echo(f"built {package_dir.as_posix()} from {manifest}")
    for line in report.summary():
        click.echo(line)


@main.command()
@click.argument("manifest")
@click.option(
    "-o", "--output", "out", required=True, type=click.Path(file_okay=False, path_type=Path),
    help="Directory holding the built package, as for build.",
)
@click.option("--against", metavar="REV", multiple=True,
              help="Also diff the contract of MANIFEST against the same file at git revision REV (as `svcgen diff`); "
                   "an error-level change fails the check. Repeatable; a tag glob ('v*') means every matching tag.")
@click.option("--accept", "accept_file", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="Approvals: a YAML or JSON list of {fingerprint, reason}; those findings are accepted, not failing.")
def check(manifest: str, out: Path, against: tuple[str, ...], accept_file: Path | None) -> None:
    """Exit 1 when OUT/<package> is not what building MANIFEST would write (a unified diff on stdout), or when
    a user file needs attention (orphaned or missing handlers and health modules, handlers whose types no
    longer match, an old health.py; one line each on stderr), or, with --against, when the contract has an
    error-level change since REV (or an incompatibility with the owners its `from:` entries name).

    Writes nothing; for CI and review.
    """
    from .codegen.ownership import check_findings, stale_diff

    model = _load(manifest)
    approvals = {} if accept_file is None else _approvals(accept_file)
    contract = None if not against else _accepted(_diff_against(manifest, against, model), approvals, accept_file)
    owners = None if not against else _compat_with_owners(manifest, model)
    files = _render(model, out)
    package_dir = out / model.package
    try:
        diff = stale_diff(files, package_dir, package_dir.as_posix())
        problems = check_findings(files, package_dir)
    except OSError as error:
        _fail([f"{package_dir}: cannot read the package: {error.strerror or error}"])
    if diff:
        click.echo(diff, nl=False)
        click.echo(f"{package_dir.as_posix()} is stale; run: svcgen build {manifest} -o {out.as_posix()}", err=True)
    for line in problems:
        click.echo(f"{package_dir.as_posix()}/{line}", err=True)
    if not diff and not problems:
        click.echo(f"{package_dir.as_posix()} is up to date with {manifest}")
    if contract is not None:
        click.echo(f"contract of {manifest} against {', '.join(against)}:")
        for line in contract.lines():
            click.echo(f"  {line}")
    if owners is not None:
        click.echo(f"produces entries of {manifest} against their owners:")
        for line in owners.lines():
            click.echo(f"  {line}")
    if diff or problems or any(report is not None and report.breaking for report in (contract, owners)):
        raise SystemExit(1)


@main.command("diff")
@click.argument("old")
@click.argument("new")
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="text: one line per change and a summary; json: for tools.")
@click.option("--levels", "levels_file", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="YAML or JSON mapping of rule id to level (error, warning, info), overriding the defaults.")
@click.option("--accept", "accept_file", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="Approvals: a YAML or JSON list of {fingerprint, reason}; those findings are reported accepted "
                   "and do not fail.")
def diff_command(old: str, new: str, output_format: str, levels_file: Path | None, accept_file: Path | None) -> None:
    """Classify every contract change from the manifest OLD to NEW (each a file, or REV:PATH read from git).

    Exit 1 when a change is error-level (it breaks existing callers), 0 otherwise, 2 when an input cannot be
    read. The rules and the levels file are described in docs/contract-diff.md.
    """
    levels = None if levels_file is None else _levels(levels_file)
    approvals = {} if accept_file is None else _approvals(accept_file)
    with cycle_collection_paused():  # two large models alive to the end: nothing for the collector to find
        report = diff_manifests(_load_side(old), _load_side(new), levels)
    _report(_accepted(report, approvals, accept_file), output_format)

@main.command("compat")
@click.argument("manifests", nargs=-1, required=True, metavar="MANIFEST...")
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="text: one line per finding and a summary; json: for tools.")
@click.option("--levels", "levels_file", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="YAML or JSON mapping of rule id to level (error, warning, info), as for `svcgen diff`.")
def compat_command(manifests: tuple[str, ...], output_format: str, levels_file: Path | None) -> None:
    """Check every produces entry of each MANIFEST against the manifest among them that serves its topic.

    The producer's copy of a topic must still work against the owner's, by the rules of `svcgen diff`: what
    the producer sends must be accepted, what the owner answers must decode. Exit 1 on an incompatibility, 0
    otherwise, 2 when an input cannot be read. A produces entry no given manifest serves is a warning line.
    """
    levels = None if levels_file is None else _levels(levels_file)
    _report(compat_manifests([_load_side(manifest) for manifest in manifests], levels), output_format)


@main.command("can-i-deploy")
@click.argument("manifest")
@click.option("--collector", "collector_url", required=True, metavar="URL",
              help="The collector's base URL (a path in it is the collector's prefix, /svc without one).")
@click.option("--window", default="7d", show_default=True, metavar="DURATION",
              help="Traffic this recent blocks a breaking change: 90s, 30m, 24h, 7d, 2w.")
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="text: one line per breaking change and a summary; json: for tools.")
@click.option("--token-file", type=click.Path(dir_okay=False, path_type=Path),
              help="The locked collector's token (default: $SVCGEN_COLLECTOR_TOKEN).")
@click.option("--accept", "accept_file", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="Approvals, as for `svcgen diff` (the same change has the same fingerprint): those findings are "
                   "reported accepted and do not block.")
def can_i_deploy(manifest: str, collector_url: str, window: str, output_format: str, token_file: Path | None,
                 accept_file: Path | None) -> None:
    """Judge MANIFEST against what the live fleet runs and sends, as the collector knows it.

    Each breaking change from the contract the service runs now (its newest registered descriptor) is blocked when
    another registered service still declares that topic version or traffic used it within the window, safe
    otherwise (traffic counted in the collector's time buckets for a window up to 24h, all-time beyond); MANIFEST's
    produces entries are checked against the live owners and its subscriptions against the live publishers; an event
    it publishes is blocked while a registered service subscribes to it. Exit 0 when all is safe, 1 when something
    is blocked, 2 when the collector cannot say (unreachable, locked, never heard of it).
    """
    import datetime as dt

    from .candeploy import CollectorUnavailable, fetch_contract, judge, parse_window, window_minutes
    from .codegen.errors import CodegenError
    from .codegen.render import descriptor_document

    if not collector_url.startswith(("http://", "https://")):
        _fail([f"--collector {collector_url}: not an http(s) URL; for example http://127.0.0.1:8700"], status=2)
    try:
        span = parse_window(window)
    except ValueError as error:
        _fail([f"--window: {error}"], status=2)
    token = _collector_token(token_file)
    approvals = {} if accept_file is None else _approvals(accept_file)
    model = _load_side(manifest)
    try:
        change = descriptor_document(model)
    except CodegenError as error:
        _fail([f"{manifest}: {line}" for line in error.lines], status=2)
    try:
        answer = fetch_contract(collector_url, model.service, sorted({entry.id for entry in model.produces}),
                                events=sorted({entry.id for entry in model.subscribes}), token=token,
                                window_minutes=window_minutes(span))
    except CollectorUnavailable as error:
        _fail([str(error)], status=2)
    # An approval no finding has is not reported: the file is usually the diff's, whose findings are more (warnings,
    # topic-version-not-bumped) than the breaking changes judged here.
    report = judge(change, answer, window=span, window_text=window, now=dt.datetime.now(dt.UTC))
    _report(report.accept(approvals), output_format)


def _collector_token(token_file: Path | None) -> str | None:
    """The token from the file, else $SVCGEN_COLLECTOR_TOKEN (as `collector serve` reads it); exit 2 when unreadable."""
    if token_file is None:  # the collector application is not imported for an environment variable
        from .runtime._mesh.feeds import TOKEN_ENV

        return os.environ.get(TOKEN_ENV, "").strip() or None
    from .collector.host import collector_token

    try:
        return collector_token(token_file, os.environ)
    except ValueError as error:
        _fail([str(error)], status=2)


@main.command()
@click.argument("manifest")
def validate(manifest: str) -> None:
    """Exit 0 when MANIFEST is valid; otherwise print its errors as file:line:col: message and exit 1.

    Warnings (file:line:col: warning: message) are printed either way and do not change the exit status.
    """
    model = _load(manifest)
    click.echo(f"{manifest}: valid ({_count(len(model.types), 'type')}, {_count(len(model.topics), 'topic')})")


@main.command()
@click.argument("package_dir", metavar="OUT/PACKAGE", type=click.Path(file_okay=False, path_type=Path))
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535), help="Port to bind.")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(min=1), help="Worker processes.")
@click.option("--access-log", is_flag=True, help="Log one line per request (off by default: it costs CPU).")
@click.option("--reload", is_flag=True,
              help="Dev loop: rebuild when the manifest changes, restart when a module of the package changes.")
@click.option("--manifest", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="The manifest --reload rebuilds from (default: the one named in the package's header).")
@click.option("--nats", metavar="URL", help="Also serve the topics over NATS at URL (nats://host:port); docs/nats.md.")
def serve(package_dir: Path, host: str, port: int, workers: int, access_log: bool, reload: bool,
          manifest: Path | None, nats: str | None) -> None:
    """Run the built package OUT/PACKAGE under uvicorn with httptools and uvloop (OUT is put on the import path)."""
    from . import serving
    from .runtime._wiring import NATS_ENV
    from .serving import Package, Reloader, ServeError

    if manifest is not None and not reload:  # taken silently, it would suggest a build that never happens
        _fail(["--manifest names the manifest --reload rebuilds from; add --reload"])
    try:
        package = Package.at(package_dir)
        if nats:
            serving.serve_over_nats(nats)
        elif os.environ.get(NATS_ENV, "").strip():
            # The app connects at startup anyway: an unreachable server is this one line, not a startup traceback.
            serving.serve_over_nats(os.environ[NATS_ENV], NATS_ENV)
        if not reload:
            serving.serve(package, host, port, workers, access_log)
            return
        if workers > 1:
            _fail(["--reload runs one server process; leave out --workers"])
        source = manifest or package.manifest()
        out = package.parent
        try:
            other = _other_package(load_manifest(str(source)), package.name, out)
        except ManifestError:
            other = None  # the first rebuild prints its diagnostics
        if other is not None:
            _fail([other])

        def rebuild() -> list[str]:
            try:
                _build(str(source), out, force=False, package=package.name)
            except _BuildFailed as failure:
                return failure.lines
            return []

        def inputs() -> list[Path]:
            # The owners' manifests (imports:, from:, a subscription's publisher, and theirs in turn) shape the
            # package as much as this one; their records' jsonSchema paths are relative to this manifest already.
            model = load_manifest(str(source))
            files = [source.parent / record.json_schema for record in model.types if record.json_schema]
            owners, pending = set[str](), [file for _, file in model.namespaces]
            while pending:
                owner = pending.pop()
                if owner not in owners:
                    owners.add(owner)
                    pending += [file for _, file in load_manifest(owner).namespaces]
            return [*files, *map(Path, sorted(owners))]

        Reloader(package, source, rebuild, inputs, click.echo, access_log).run(host, port)
    except ServeError as error:
        _fail([str(error)])


@main.command()
@click.argument("url")
@click.option("--prefix", default=DEFAULT_PREFIX, show_default=True, help="Where the well-known surfaces are mounted.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--timeout", cls=_LazyDefault, default_from=_probe_timeout, show_default=True,
              type=_Seconds(min=0.1),
              help="Seconds to wait for each surface.")
@click.option("--header", "header_lines", multiple=True, metavar="'NAME: VALUE'",
              help="A header every request carries, e.g. an API key for protected well-known surfaces; repeatable.")
@click.option("--token-file", type=click.Path(dir_okay=False, path_type=Path),
              help="Send `authorization: Bearer <the file's token>` with every request.")
def probe(
    url: str, prefix: str, as_json: bool, timeout: float, header_lines: tuple[str, ...], token_file: Path | None
) -> None:
    """Audit the running service at URL against the cloud-service profile, from outside.

    Exit status 1 when a requirement is positively unmet; inconclusive verdicts do not fail.
    """
    if not url.startswith(("http://", "https://")):
        _fail([f"{url}: not an http(s) URL; for example http://127.0.0.1:8000"])
    parts = urlsplit(url)
    if parts.query or parts.fragment:  # the prefix and the surfaces' paths go after the base URL's path
        base = parts._replace(netloc=parts.netloc.rpartition("@")[2], query="", fragment="").geturl()
        _fail([f"{base}?…: a base URL has no query or fragment; give it as {base}"])
    headers = _probe_headers(header_lines, token_file)
    from .collector import probe as probing

    report = asyncio.run(probing.probe(url, prefix=prefix, timeout=timeout, headers=headers))
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


_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_HEADER_VALUE = re.compile(r"[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?")


def _probe_headers(lines: Sequence[str], token_file: Path | None) -> dict[str, str]:
    """`--header 'NAME: VALUE'`s and `--token-file`'s bearer token as request headers. They carry credentials, so
    an error names the option and the header's position, never what was given."""
    headers: dict[str, str] = {}
    for number, line in enumerate(lines, 1):
        name, colon, value = line.partition(":")
        name, value = name.strip().lower(), value.strip()
        if not colon or not _HEADER_NAME.fullmatch(name) or not _HEADER_VALUE.fullmatch(value):
            _fail([f"--header #{number}: expected 'NAME: VALUE' (a header name, a colon, a printable ASCII value)"])
        headers[name] = value
    if token_file is not None:
        if "authorization" in headers:
            _fail(["--token-file and --header authorization both set the authorization header; give one"])
        from .collector.host import collector_token

        try:
            headers["authorization"] = f"Bearer {collector_token(token_file, {})}"
        except ValueError as error:
            _fail([str(error)])
    return headers


@main.group()
def collector() -> None:
    """The mesh collector: ingest, queries, poller, UI artifacts and dashboard."""


@collector.command("repair")
@click.option("--store", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The collector's JSON-file store (the collector stopped: the store takes one at a time).")
def collector_repair(store: Path) -> None:
    """Replay what the log segments a collector set aside as damaged still hold into the store, then keep them as
    `.repaired-<time>`."""
    from datetime import UTC, datetime

    from .collector import JsonFileStore, MemoryBackend, StoreError
    from .collector.caps import CollectorLimits
    from .collector.store import DAMAGED, read_damaged

    files = JsonFileStore(store)
    damaged = files.damaged_segments() if store.parent.is_dir() else []
    if not damaged:
        _fail([f"{store}: no damaged log segments to repair"])
    backend = MemoryBackend(files)
    try:
        backend.open(CollectorLimits())
    except StoreError as error:
        _fail([f"{store}: {error}"])
    applied = skipped = 0
    for segment in damaged:
        changes, unreadable = read_damaged(segment)
        done, refused = backend.replay_readable(changes)
        applied, skipped = applied + done, skipped + refused + unreadable
    backend.close()  # a snapshot holding everything replayed
    when = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    for segment in damaged:
        segment.rename(segment.with_name(segment.name.split(DAMAGED)[0] + f".repaired-{when}"))
    click.echo(f"replayed {applied} change(s) from {len(damaged)} damaged segment(s) into {store}; skipped {skipped} "
               f"damaged or malformed line(s); the segments are kept as *.repaired-{when}")


@collector.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind.")
@click.option("--port", default=8700, show_default=True, type=click.IntRange(0, 65535), help="Port to bind.")
@click.option("--store", metavar="FILE|URL",
              help="Where the state is kept: a JSON file, or a PostgreSQL URL (postgresql://...) that any number of "
                   "collector replicas share (needs svcgen[postgres]).")
@click.option("--poll", "polls", multiple=True, metavar="NAME=URL",
              help="A service to poll (repeatable); a path in URL is its surfaces' prefix, /svc without one.")
@click.option("--poll-interval", cls=_LazyDefault, default_from=_poll_interval, show_default=True,
              type=_Seconds(min=0.1),
              help="Seconds between poll sweeps.")
@click.option("--artifacts", type=click.Path(file_okay=False, path_type=Path),
              help="Directory the UI artifacts are written to (default: a temporary one).")
@click.option("--artifacts-interval", cls=_LazyDefault, default_from=_artifacts_interval, show_default=True,
              type=_Seconds(min=0.1), help="Seconds between artifact rewrites.")
@click.option("--token-file", type=click.Path(dir_okay=False, path_type=Path),
              help="Lock the collector: every request but the dashboard page needs `authorization: Bearer <the "
                   "file's token>` (default: $SVCGEN_COLLECTOR_TOKEN; neither: open).")
@click.option("--nats", metavar="URL",
              help="Also take the feeds from this NATS server's JetStream stream SVC_MESH, through the durable "
                   "consumer svc-collector that replicas share (needs svcgen[nats]).")
@click.option("--heartbeat-seconds", default=30.0, show_default=True, type=_Seconds(min=0.1),
              help="The services' heartbeat interval (their manifests' mesh.heartbeatSeconds): an instance that "
                   "missed three heartbeats shows as stale.")
def collector_serve(
    host: str, port: int, store: str | None, polls: tuple[str, ...], poll_interval: float,
    artifacts: Path | None, artifacts_interval: float, token_file: Path | None, nats: str | None,
    heartbeat_seconds: float,
) -> None:
    """Run the collector: envelope invoke surface with the collector topics, its health and spec, the
    poller, the UI artifacts and the dashboard at /."""
    import uvicorn

    from .collector import StoreError
    from .collector.host import (
        CollectorHost,
        CollectorSettings,
        collector_token,
        exposed_without_token,
        is_database_url,
        without_password,
    )
    from .runtime._mesh.jetstream import DEFAULT_DURABLE, require_nats
    from .runtime._wiring import WiringError
    from .serving import uvicorn_options

    fleet = [_poll_target(text) for text in polls]
    database = store if store is not None and is_database_url(store) else None
    store_file = Path(store) if store is not None and database is None else None
    if store_file is not None and not store_file.parent.is_dir():
        _fail([f"{store_file}: the directory {store_file.parent} does not exist"])
    if store_file is not None and store_file.is_dir():
        # Never a store: read as one it would be moved aside whole, with everything it holds.
        _fail([f"{store_file}: is a directory; give the store's file, like {store_file / 'mesh.json'}"])
    if database is not None and importlib.util.find_spec("psycopg_pool") is None:
        _fail(["a PostgreSQL store needs psycopg: pip install 'svcgen[postgres]'"])
    if nats is not None:
        try:
            require_nats()
        except WiringError as error:
            _fail([str(error)])
    try:
        token = collector_token(token_file, os.environ)
    except ValueError as error:
        _fail([str(error)])
    configure_logging()
    if exposed_without_token(host, token):
        logging.getLogger("svcgen.mesh.collector").warning(
            "collector bound to %s without a token: anyone who can reach it can write to it and read it "
            "(lock it with --token-file FILE or SVCGEN_COLLECTOR_TOKEN)", host)
    settings = CollectorSettings(store=store_file, database=database, fleet=fleet, poll_interval=poll_interval,
                                 artifacts=artifacts, artifacts_interval=artifacts_interval, token=token, nats=nats,
                                 heartbeat_seconds=heartbeat_seconds)
    try:
        collector_host = CollectorHost(settings)
    except StoreError as error:
        _fail([f"{without_password(store or '')}: {error}"])
    base = f"http://{host}:{port}"
    click.echo(f"collector on {base}{settings.prefix}/invoke; dashboard at {base}/"
               + ("#token=<token> (locked: requests need authorization: Bearer <token>)" if token else ""))
    click.echo(f"state: {without_password(store) if store else 'in memory'}; artifacts: {collector_host.artifacts}; "
               f"polling {len(fleet)} service(s) every {poll_interval:g} s")
    if nats is not None:
        click.echo(f"feeds also from JetStream: stream {settings.nats_stream.name}, durable consumer {DEFAULT_DURABLE}")
    try:
        uvicorn.run(collector_host.app, host=host, port=port, log_level="warning", **uvicorn_options())
    finally:
        # uvicorn skips the app's shutdown on a second Ctrl-C (it stops waiting for open requests): the store is
        # written out here then, a bounded wait that another Ctrl-C does not cut short.
        with _uninterrupted():
            collector_host.finish()


@main.command()
@click.option("--store", "store_value", required=True, type=click.Path(dir_okay=False),
              help="The collector's JSON-file store.")
@click.option("-o", "--output", "out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Directory the artifacts are written into.")
@click.option("--heartbeat-seconds", default=30.0, show_default=True, type=_Seconds(min=0.1),
              help="The services' heartbeat interval, as `svcgen collector serve` is told it: an instance that "
                   "missed three heartbeats by now shows as stale.")
def artifacts(store_value: str, out: Path, heartbeat_seconds: float) -> None:
    """Write the UI artifacts and the dashboard from a collector snapshot, once."""
    from .collector import JsonFileStore, MemoryBackend, SnapshotError, StoreError
    from .collector.artifacts import write_artifacts
    from .collector.artifacts.site import DASHBOARD, dashboard_html
    from .collector.collector import HEARTBEAT_MISSES, judged
    from .collector.host import is_database_url, without_password

    if is_database_url(store_value):  # read as a path it was "no such store file", its password in the line
        _fail([f"{without_password(store_value)}: svcgen artifacts reads a JSON-file store; a PostgreSQL store's "
               f"artifacts are written by its collectors (svcgen collector serve --store URL --artifacts DIR)"])
    store = Path(store_value)
    if not JsonFileStore(store).exists():
        _fail([f"{store}: no such store file"])
    try:
        stored = JsonFileStore(store).load()
    except StoreError as error:
        _fail([f"{store}: {error}"])
    restored = MemoryBackend()
    try:
        restored.restore_stored(stored)
        # Judged now, as the collector judges its own: an instance silent since is stale, or no longer shown.
        snapshot = judged(restored.snapshot(), restored.clock(), stale_after=HEARTBEAT_MISSES * heartbeat_seconds)
        written = write_artifacts(snapshot, out)
        (out / DASHBOARD).write_bytes(dashboard_html())
    except SnapshotError as error:
        _fail([f"{store}: {error}"])
    except OSError as error:
        _fail([f"{out}: cannot write: {error.strerror or error}"])
    click.echo(f"wrote {len(written)} artifacts and {DASHBOARD} to {out}")


@contextlib.contextmanager
def _uninterrupted() -> Iterator[None]:
    """Ctrl-C (SIGINT) ignored meanwhile, in the main thread (the only one signals reach)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


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
    from .codegen.starter import starter_manifest

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


class _BuildFailed(Exception):
    def __init__(self, lines: Iterable[str]) -> None:
        super().__init__()
        self.lines = list(lines)


def _build(manifest: str, out: Path, *, force: bool, package: str | None = None) -> tuple[Path, BuildReport]:
    """Build MANIFEST into OUT/<package>: the package directory and what was written; _BuildFailed with the
    diagnostics otherwise, or, given `package`, when MANIFEST builds another package (nothing written)."""
    from .codegen.errors import CodegenError
    from .codegen.ownership import write_package

    model = _load_or_raise(manifest)
    other = None if package is None else _other_package(model, package, out)
    if other is not None:
        raise _BuildFailed([other])
    files = _render_or_raise(model, out)
    package_dir = out / model.package
    try:
        return package_dir, write_package(files, package_dir, force=force)
    except CodegenError as error:
        raise _BuildFailed(error.lines) from None
    except OSError as error:
        where = Path(error.filename).as_posix() if error.filename else package_dir
        raise _BuildFailed([f"{where}: cannot write the package: {error.strerror or error}"]) from None


def _other_package(model: Manifest, package: str, out: Path) -> str | None:
    """`serve --reload` rebuilds only the package it runs: the line saying a manifest builds another one."""
    if model.package == package:
        return None
    return (f"{model.path} builds the package {model.package}, not {package}, which this server runs; serve "
            f"{(out / model.package).as_posix()} instead, or name the manifest of {package} with --manifest")


def _load_or_raise(manifest: str) -> Manifest:
    """The valid manifest, its warnings printed on stderr; _BuildFailed with every diagnostic otherwise."""
    try:
        loaded = load_manifest_with_warnings(manifest)
    except ManifestError as error:
        raise _BuildFailed(str(error).splitlines()) from None
    for warning in loaded.warnings:
        click.echo(str(warning), err=True)
    return loaded.manifest


def _render_or_raise(model: Manifest, out: Path) -> list[GeneratedFile]:
    from .codegen.errors import CodegenError
    from .codegen.render import render_package

    try:
        return render_package(model, out)
    except CodegenError as error:
        raise _BuildFailed(f"{model.path}: {line}" for line in error.lines) from None


def _load(manifest: str) -> Manifest:
    try:
        return _load_or_raise(manifest)
    except _BuildFailed as failure:
        _fail(failure.lines)


def _render(model: Manifest, out: Path) -> list[GeneratedFile]:
    try:
        return _render_or_raise(model, out)
    except _BuildFailed as failure:
        _fail(failure.lines)


def _load_side(spec: str) -> Manifest:
    """One side of a diff: a manifest file, or REV:PATH from git; exit 2 when it cannot be read or is invalid."""
    parts = split_revision(spec)
    try:
        return load_manifest(spec) if parts is None else load_manifest_at(*parts).manifest
    except ManifestError as error:
        _fail(str(error).splitlines(), status=2)
    except RevisionError as error:
        _fail([f"{spec}: {error}"], status=2)


def _report(report: DiffReport | CompatReport | DeployReport, output_format: str) -> None:
    """Print a diff, compat or can-i-deploy report as text lines or JSON; exit 1 when it is breaking."""
    if output_format == "json":
        click.echo(orjson.dumps(report.document(), option=orjson.OPT_INDENT_2).decode())
    else:
        for line in report.lines():
            click.echo(line)
    if report.breaking:
        raise SystemExit(1)


def _diff_against(manifest: str, specs: tuple[str, ...], model: Manifest) -> DiffReport:
    """The contract diff of MANIFEST at each git revision (a tag glob: every matching tag) to `model` (MANIFEST as
    it is now); with more than one revision, each finding names the revisions it appears against."""
    reports: list[tuple[str, DiffReport]] = []
    try:
        root, path = repository_path(manifest)
        revisions = [rev for spec in specs for rev in (matching_tags(spec, root) if _is_glob(spec) else [spec])]
    except RevisionError as error:
        _fail([f"--against {' '.join(specs)}: {manifest}: {error}"], status=2)
    for rev in dict.fromkeys(revisions):
        try:
            old = load_manifest_at(rev, path, root).manifest
        except ManifestError as error:
            _fail(str(error).splitlines(), status=2)
        except ManifestAbsent:
            # A manifest added since: no caller of that revision can be broken by it.
            click.echo(f"--against {rev}: {manifest} is not in {rev}: a new contract, nothing there to break",
                       err=True)  # fmt: skip
            continue
        except RevisionError as error:
            _fail([f"--against {rev}: {manifest}: {error}"], status=2)
        reports.append((rev, diff_manifests(old, model)))
    if not reports:
        return DiffReport()
    if len(dict.fromkeys(revisions)) == 1 and not _is_glob(specs[0]):
        return reports[0][1]
    return across_revisions(reports)


def _is_glob(spec: str) -> bool:
    return any(character in spec for character in "*?[")


def _compat_with_owners(manifest: str, model: Manifest) -> CompatReport | None:
    """MANIFEST's produces entries against the owners' manifests its `from:` entries and `imports:` name (those that
    load): the entries with their own copies of an owner's topics are checked there too. None when it names none."""
    from .manifest.owner import owner_paths

    owners: list[Manifest] = []
    for path in owner_paths(manifest):
        try:
            owners.append(load_manifest(path))
        except ManifestError:
            continue  # the manifest's own load already reported it
    if not owners:
        return None
    report = compat_manifests([model, *owners])
    mine = tuple(item for item in report.findings if item.producer == model.service)
    served = {topic.id for owner in owners for topic in owner.topics}
    checked = sum(1 for entry in model.produces if entry.id in served)
    return CompatReport(mine, (), checked)


def _accepted(report: DiffReport, approvals: dict[str, str], file: Path | None) -> DiffReport:
    """The report with the approved findings accepted; an approval no finding has is a warning on stderr (the change
    it approved is gone, so the entry can go too)."""
    if not approvals:
        return report
    found = {finding.fingerprint for finding in report.findings}
    for fingerprint in approvals:
        if fingerprint not in found:
            click.echo(f"warning: {file}: approval {fingerprint} matches no finding; remove it", err=True)
    return report.accept(approvals)


class _NumbersAsText(yaml.SafeLoader):
    """YAML whose plain numbers stay text: a fingerprint of decimal digits only (1234567890123456, or 0123456701234567,
    which YAML 1.1 reads as octal) is written unquoted as svcgen prints it, and must not turn into an integer."""


_NumbersAsText.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers
            if tag not in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _approvals(file: Path) -> dict[str, str]:
    try:
        return parse_approvals(yaml.load(file.read_text(encoding="utf-8-sig"), Loader=_NumbersAsText))
    except OSError as error:
        _fail([f"{file}: cannot read the approvals file: {error.strerror or error}"], status=2)
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        _fail([f"{file}: not a YAML or JSON file: {' '.join(str(error).split())}"], status=2)
    except ApprovalsError as error:
        _fail([f"{file}: {error}"], status=2)


def _levels(file: Path) -> dict[str, Level]:
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8-sig"))
        return parse_levels(data)
    except OSError as error:
        _fail([f"{file}: cannot read the levels file: {error.strerror or error}"], status=2)
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        _fail([f"{file}: not a YAML or JSON file: {' '.join(str(error).split())}"], status=2)
    except LevelsError as error:
        _fail([f"{file}: {error}"], status=2)


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _fail(lines: Iterable[str], status: int = 1) -> NoReturn:
    for line in lines:
        click.echo(line, err=True)
    raise SystemExit(status)



@main.group()
def events() -> None:
    """Events over JetStream (docs/events.md)."""


@events.command("dead-letters")
@click.argument("action", type=click.Choice(["list", "replay", "drop"]))
@click.option("--nats", "url", metavar="URL", envvar="SVCGEN_NATS", required=True,
              help="The NATS server (nats://host:port); default $SVCGEN_NATS.")
@click.option("--subscriber", metavar="SERVICE", help="Only the dead letters of this subscribing service.")
@click.option("--event", metavar="EVENT",
              help="Only those of this event id (every version), or of EVENT@VERSION as list names it; needs "
              "--subscriber.")
def dead_letters_command(action: str, url: str, subscriber: str | None, event: str | None) -> None:
    """List (one line each, with its payload), replay (republish to the original subject under a new message id,
    then remove) or drop what subscribers gave up on."""
    from .deadletters import run
    from .runtime._nats.connections import NatsError
    from .runtime._nats.events import refusal

    if event is not None and subscriber is None:
        _fail(["--event needs --subscriber: dead letters are kept per subscriber"], status=2)
    try:
        count = asyncio.run(run(action, url, subscriber, event, click.echo))
    except NatsError as error:
        _fail([str(error)])
    except Exception as error:
        _fail([f"dead letters at {url}: {refusal(error)}"])
    done = {"list": "dead letter(s)", "replay": "replayed", "drop": "dropped"}[action]
    click.echo(f"{count} {done}", err=True)
