"""The generator: a validated manifest in, a service package out (templates, contracts, ownership rules).

    files = render_package(load_manifest("orders.yaml"))     # pure: nothing written
    report = write_package(files, Path("out/orders_service"))  # the ownership rules
    diff = stale_diff(files, Path("out/orders_service"), "out/orders_service")  # `check`
"""

from .errors import CodegenError
from .files import GeneratedFile, Owner
from .render import render_package
from .writer import BuildReport, stale_diff, write_package

__all__ = ["BuildReport", "CodegenError", "GeneratedFile", "Owner", "render_package", "stale_diff", "write_package"]
