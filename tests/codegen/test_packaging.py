"""Packaging: the templates resolve and every one is used (tests/install checks what a wheel ships)."""

from __future__ import annotations

from svcgen.codegen.templating import environment, templates_dir


def test_templates_resolve_and_every_template_is_used() -> None:
    assert (templates_dir() / "package" / "service.py.jinja").is_file()
    names = set(environment().list_templates(extensions=["jinja"]))
    rendered_by_path = {
        "package/__init__.py.jinja",
        "package/app.py.jinja",
        "package/clients.py.jinja",
        "package/events.py.jinja",
        "package/handlers/__init__.py.jinja",
        "package/handlers/handler.py.jinja",
        "package/handlers/on_event.py.jinja",
        "package/health/__init__.py.jinja",
        "package/health/check.py.jinja",
        "package/models.py.jinja",
        "package/service.py.jinja",
        "package/tests/__init__.py.jinja",
        "package/tests/test_contracts.py.jinja",
        "package/tests/test_service.py.jinja",
        "package/wiring.py.jinja",
        "manifest/starter.yaml.jinja",
    }
    assert names == rendered_by_path
