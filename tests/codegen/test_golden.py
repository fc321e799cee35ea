"""Each example builds to exactly the bytes in tests/golden/<example>/ (the estate's services in
tests/golden/estate/<service>/); `pytest --update-golden` rewrites them."""

from __future__ import annotations

import importlib
import shutil
from pathlib import Path

import pytest

from svcgen.codegen.ownership import write_package
from svcgen.codegen.render import render_package
from svcgen.manifest import load_manifest
from svcgen.runtime import Wiring
from tests.support.codegen import ESTATE, EXAMPLES, GOLDEN, REPO, build_example, imported, tree


@pytest.mark.parametrize("example", [*EXAMPLES, *(f"estate/{service}" for service in ESTATE)])
def test_build_matches_golden(
    example: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, update_golden: bool
) -> None:
    monkeypatch.chdir(REPO)
    # As `svcgen build examples/manifests/<example>.yaml -o tests/golden/<example>` would write it.
    package_dir = build_example(example.removeprefix("estate/"), tmp_path, named_from=GOLDEN / example)
    golden_dir = GOLDEN / example / package_dir.name
    built = tree(package_dir)
    if update_golden:
        shutil.rmtree(GOLDEN / example, ignore_errors=True)
        shutil.copytree(package_dir, golden_dir, ignore=shutil.ignore_patterns("__pycache__"))
        return
    expected = tree(golden_dir)
    assert sorted(built) == sorted(expected), "missing or extra files; run pytest --update-golden after review"
    for relpath, data in built.items():
        assert data == expected[relpath], f"{example}/{relpath} differs from the golden file"


def test_the_committed_documents_are_what_the_built_service_serves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # orders has a GET-only topic (idempotent unless said otherwise): the contracts must derive it as service.py
    # registers it, or the committed http-api.json lists Idempotency-Key answers the service never gives.
    monkeypatch.chdir(REPO)
    package_dir = build_example("orders", tmp_path)
    with imported(tmp_path, package_dir.name):
        app = importlib.import_module(f"{package_dir.name}.service").create_app(setup=Wiring(environ={}))
        contracts = package_dir / "contracts"
        assert app.http_api_body == (contracts / "http-api.json").read_bytes()
        assert app.openapi_body == (contracts / "openapi.json").read_bytes()


def test_the_committed_documents_of_topics_with_timeouts_are_what_the_built_service_serves(tmp_path: Path) -> None:
    # A topic's timeout bounds every call (its operations' 504 names it): the contracts must register topics with
    # every option service.py gives them, or the committed http-api.json differs from the served one.
    manifests = tmp_path / "manifests"
    shutil.copytree(REPO / "examples" / "manifests", manifests)
    text = (manifests / "orders.yaml").read_text(encoding="utf-8")
    text = text.replace("    failures: [conflict]\n", "    failures: [conflict]\n    timeout: 1500ms\n")
    text = text.replace("    failures: [not-found]\n", "    failures: [not-found]\n    timeout: 2s\n")
    (manifests / "orders.yaml").write_text(text, encoding="utf-8")
    model = load_manifest(manifests / "orders.yaml")
    out = tmp_path / "out"
    package_dir = out / model.package
    write_package(render_package(model, out), package_dir)
    with imported(out, package_dir.name):
        app = importlib.import_module(f"{package_dir.name}.service").create_app(setup=Wiring(environ={}))
        timeouts = {(r.topic, r.version): r.timeout for r in app.service.registry}
        assert timeouts == {("orders:place", "v1"): 1.5, ("orders:place", "v2"): 1.5, ("orders:get", ""): 2.0}
        contracts = package_dir / "contracts"
        assert app.http_api_body == (contracts / "http-api.json").read_bytes()
        assert app.openapi_body == (contracts / "openapi.json").read_bytes()
        assert b"the topic's timeout (2 s)" in app.http_api_body
