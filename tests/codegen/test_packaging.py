"""Packaging: every package under svcgen/ is listed in pyproject.toml, and the templates ship with it."""

from __future__ import annotations

import tomllib

from svcgen.codegen.templating import environment, templates_dir

from .support import REPO


def test_every_svcgen_package_is_listed() -> None:
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = {
        ".".join(path.parent.relative_to(REPO).parts) for path in (REPO / "svcgen").rglob("__init__.py")
    }
    assert set(setuptools["packages"]) == found | {"svcgen.templates"}
    assert setuptools["package-dir"] == {"svcgen.templates": "templates"}


def test_templates_resolve_and_every_template_is_used() -> None:
    assert (templates_dir() / "package" / "service.py.jinja").is_file()
    names = set(environment().list_templates(extensions=["jinja"]))
    rendered_by_path = {
        "package/__init__.py.jinja",
        "package/app.py.jinja",
        "package/clients.py.jinja",
        "package/handlers/__init__.py.jinja",
        "package/handlers/handler.py.jinja",
        "package/health/__init__.py.jinja",
        "package/health/check.py.jinja",
        "package/models.py.jinja",
        "package/service.py.jinja",
        "package/tests/__init__.py.jinja",
        "package/tests/test_contracts.py.jinja",
        "package/wiring.py.jinja",
        "manifest/starter.yaml.jinja",
    }
    assert names == rendered_by_path
