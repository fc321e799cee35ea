"""UI artifacts: the read models mesh dashboards fetch by relative path, written from a collector snapshot.

`write_artifacts(snapshot, target)` writes them all; each builder is a pure function of the snapshot
(plus the generation time) so it can be tested, and reused, on its own.
"""

from .annotations import build_annotations
from .asyncapi import build_asyncapi
from .estate import build_estate_manifest, build_service_documents
from .filenames import sanitise, service_file_names
from .health import HEALTHY, UNHEALTHY, UNREACHABLE, service_health
from .issuepanel import build_issues
from .topics import build_topics
from .topology import build_topology
from .usage import build_usage
from .windows import build_windows
from .writer import write_artifacts

__all__ = [
    "HEALTHY",
    "UNHEALTHY",
    "UNREACHABLE",
    "build_annotations",
    "build_asyncapi",
    "build_estate_manifest",
    "build_issues",
    "build_service_documents",
    "build_topics",
    "build_topology",
    "build_usage",
    "build_windows",
    "sanitise",
    "service_file_names",
    "service_health",
    "write_artifacts",
]
