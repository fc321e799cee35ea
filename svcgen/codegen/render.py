"""`render_package`: the manifest in, every file of the package out (text and owner), nothing written.

Deterministic: the same manifest gives the same bytes, whatever the output directory or hash seed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from ..manifest.model import Manifest
from ..runtime._version import API_LEVEL
from .bindings import service_bindings
from .contracts import DESCRIPTOR, contract_documents
from .events import event_stub_view, events_view
from .files import GeneratedFile, header_line, manifest_reference
from .records import models_view
from .templating import render
from .views import clients_view, example_view, service_view, stub_view, wiring_stub_view


def render_package(manifest: Manifest, out: Path) -> list[GeneratedFile]:
    """Every file of OUT/<package>, sorted by path; `out` is OUT, which the headers name the manifest from.
    Raises CodegenError when the package cannot be made."""
    bindings = service_bindings(manifest)
    context = {
        "header": header_line(manifest_reference(manifest.path, out)),
        "bindings": bindings,
        "package": manifest.package,
        "api_level": API_LEVEL,
    }
    models = render("package/models.py.jinja", models=models_view(manifest), **context)

    def generated(relpath: str, **extra: object) -> GeneratedFile:
        # A generated file's template mirrors its path: package/<relpath>.jinja.
        return GeneratedFile(relpath, render(f"package/{relpath}.jinja", **extra, **context), "generated")

    files = [
        generated("__init__.py"),
        GeneratedFile("models.py", models, "generated"),
        generated("service.py", service=service_view(bindings)),
        generated("app.py"),
        generated("handlers/__init__.py"),
        generated("tests/__init__.py"),
        generated("tests/test_contracts.py"),
        generated("tests/test_service.py", example=example_view(bindings)),
    ]
    if bindings.produces:
        files.append(generated("clients.py", clients=clients_view(bindings)))
    if bindings.events:
        files.append(generated("events.py", events=events_view(bindings.events)))
    for entry in bindings.subscriptions:
        stub = render("package/handlers/on_event.py.jinja", stub=event_stub_view(entry), **context)
        files.append(GeneratedFile(f"handlers/{entry.module}.py", stub, "user"))
    for topic in bindings.topics:
        stub = render("package/handlers/handler.py.jinja", stub=stub_view(topic), **context)
        files.append(GeneratedFile(f"handlers/{topic.module}.py", stub, "user"))
    wiring_stub = render("package/wiring.py.jinja", stub=wiring_stub_view(bindings), **context)
    files.append(GeneratedFile("wiring.py", wiring_stub, "user"))
    if bindings.health:
        files.append(generated("health/__init__.py"))
    for check in bindings.health:
        stub = render("package/health/check.py.jinja", check=check, **context)
        files.append(GeneratedFile(f"health/{check.module}.py", stub, "user"))
    for relpath, data in contract_documents(bindings, models, manifest.package).items():
        files.append(GeneratedFile(relpath, data.decode("utf-8"), "generated"))
    return sorted(files, key=lambda f: f.relpath)


def descriptor_document(manifest: Manifest) -> dict[str, Any]:
    """The service descriptor a build of the manifest publishes (contracts/descriptor.json), nothing written."""
    bindings = service_bindings(manifest)
    context = {"header": header_line(manifest_reference(manifest.path, Path("."))), "bindings": bindings,
               "package": manifest.package, "api_level": API_LEVEL}
    models = render("package/models.py.jinja", models=models_view(manifest), **context)
    document: dict[str, Any] = orjson.loads(contract_documents(bindings, models, manifest.package)[DESCRIPTOR])
    return document
