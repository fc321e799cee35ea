"""The `svcgen` command line."""

from __future__ import annotations

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="svcgen")
def main() -> None:
    """Manifest-first toolkit for message-topic services."""
