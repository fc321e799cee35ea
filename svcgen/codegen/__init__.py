"""The generator: a validated manifest in, a service package out (templates, contracts, ownership rules).

    files = render_package(load_manifest("orders.yaml"), Path("out"))  # pure: nothing written
    report = write_package(files, Path("out/orders_service"))  # the ownership rules
    diff = stale_diff(files, Path("out/orders_service"), "out/orders_service")  # `check`
    problems = check_findings(files, Path("out/orders_service"))  # `check`: user files needing attention
    manifest_of(Path("out/orders_service"))  # the manifest a built package came from (its header)
"""

from .errors import CodegenError
from .files import GeneratedFile, Owner, manifest_of
from .ownership import BuildReport, check_findings, stale_diff, write_package
from .render import render_package

__all__ = [
    "BuildReport",
    "CodegenError",
    "GeneratedFile",
    "Owner",
    "check_findings",
    "manifest_of",
    "render_package",
    "stale_diff",
    "write_package",
]
