"""What a plain `pip install svcgen` gives (no extras): light, complete, builds and serves, manifests with
`jsonSchema:` types included."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx

from tests.support.processes import stop_process, wait_until_up
from tests.support.server import free_port

from .conftest import REPO, FreshInstall

MB = 1_000_000
SITE_PACKAGES_TARGET = 25 * MB
"""For everything but uvloop: its compiled event loop alone is ~14 MB, and `svcgen serve` needs it (~1/3 of the
server CPU per request, see bench/serve.py); the README gives the whole figure and what weighs what."""
JSONSCHEMA_EXTRA = ("datamodel-code-generator", "pydantic", "black", "isort")


def weighs(install: FreshInstall) -> str:
    heaviest = sorted(install.weights.items(), key=lambda item: -item[1])
    return ", ".join(f"{name} {size / MB:.1f} MB" for name, size in heaviest)


def test_plain_install_is_light_and_brings_the_fast_server(fresh_install: FreshInstall) -> None:
    installed = set(fresh_install.weights)
    assert not installed & set(JSONSCHEMA_EXTRA), "the jsonschema extra rode along"
    assert {"svcgen", "uvicorn", "httptools", "uvloop", "watchfiles", "httpx"} <= installed
    rest = sum(size for name, size in fresh_install.weights.items() if name != "uvloop")
    assert rest <= SITE_PACKAGES_TARGET, f"{rest / MB:.1f} MB besides uvloop in {len(installed)} packages: " \
        f"{weighs(fresh_install)}"


def test_installed_package_has_every_module_template_and_data_file(fresh_install: FreshInstall) -> None:
    installed = fresh_install.site_packages / "svcgen"
    source = {path.relative_to(REPO).as_posix() for path in (REPO / "svcgen").rglob("*")
              if path.is_file() and "__pycache__" not in path.parts}
    source |= {"svcgen/templates/" + path.relative_to(REPO / "templates").as_posix()
               for path in (REPO / "templates").rglob("*") if path.is_file() and "__pycache__" not in path.parts}
    shipped = {path.relative_to(installed.parent).as_posix() for path in installed.rglob("*")
               if path.is_file() and "__pycache__" not in path.parts}
    assert source == shipped
    where = "from svcgen.codegen.templating import templates_dir; print(templates_dir())"
    found = subprocess.run([str(fresh_install.python), "-c", where], capture_output=True, text=True, check=True,
                           timeout=60, cwd=fresh_install.venv)
    assert Path(found.stdout.strip()) == installed / "templates"


def test_runtime_imports_without_the_generator_extra(fresh_install: FreshInstall) -> None:
    probe = (
        "import importlib.util, svcgen.runtime; "
        f"print([name for name in {[n.replace('-', '_') for n in JSONSCHEMA_EXTRA]!r} "
        "if importlib.util.find_spec(name)])"
    )
    done = subprocess.run([str(fresh_install.python), "-c", probe], capture_output=True, text=True, timeout=60,
                          cwd=fresh_install.venv)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_build_and_serve_a_manifest_without_json_schema_types(fresh_install: FreshInstall, tmp_path: Path) -> None:
    manifest = REPO / "examples" / "manifests" / "payments.yaml"
    assert "jsonSchema" not in manifest.read_text()
    built = subprocess.run([str(fresh_install.svcgen), "build", str(manifest), "-o", str(tmp_path / "out")],
                           capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("w") as sink:
        server = subprocess.Popen(
            [str(fresh_install.svcgen), "serve", str(tmp_path / "out" / "payments_service"), "--port", str(port)],
            stdout=sink, stderr=subprocess.STDOUT, cwd=tmp_path,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            wait_until_up(server, base + "/svc/spec", log)
            spec = httpx.get(base + "/svc/spec", timeout=10)
            assert spec.status_code == 200
            assert spec.json()["service"] == "payments"
        finally:
            stop_process(server)


def test_a_json_schema_manifest_builds_without_any_extra(fresh_install: FreshInstall, tmp_path: Path) -> None:
    manifest = REPO / "examples" / "manifests" / "orders.yaml"
    assert "jsonSchema" in manifest.read_text()
    built = subprocess.run([str(fresh_install.svcgen), "build", str(manifest), "-o", str(tmp_path / "out")],
                           capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    models = (tmp_path / "out" / "orders_service" / "models.py").read_text()
    assert "class Address:" in models and "Meta(min_length=2, max_length=2" in models
