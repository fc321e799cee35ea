"""tests/golden holds expected build output, not tests: its generated test modules are never collected here.

(They run against freshly built packages in tests/codegen/test_e2e.py.)
"""

collect_ignore_glob = ["*"]
