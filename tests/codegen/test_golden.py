"""Each example builds to exactly the bytes in tests/golden/<example>/ (the estate's services in
tests/golden/estate/<service>/); `pytest --update-golden` rewrites them."""

from __future__ import annotations

import importlib
import shutil
from pathlib import Path

import pytest

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
