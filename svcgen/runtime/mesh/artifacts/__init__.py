"""UI artifacts: the read models mesh dashboards fetch by relative path, written from a collector snapshot."""
