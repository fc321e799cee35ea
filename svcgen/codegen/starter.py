"""The starter manifest `svcgen init NAME` writes: valid, buildable and servable as it is."""

from __future__ import annotations

import re

from ..manifest.build import default_package
from .templating import render

SERVICE_NAME = re.compile(r"^[a-z][a-z0-9-]*$")


def starter_manifest(name: str) -> str:
    """The manifest text of a new service `name` (which must match SERVICE_NAME)."""
    if not SERVICE_NAME.match(name):
        raise ValueError(
            f"service name {name!r} must be lower-case letters, digits and '-', starting with a letter, like orders"
        )
    title = " ".join(word.capitalize() for word in name.split("-") if word) + " API"
    return render("manifest/starter.yaml.jinja", name=name, package=default_package(name), title=title)
