"""The mesh: traces, issues, feeds, reporter, profile and probe; built on the core and the HTTP binding."""
