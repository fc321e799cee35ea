"""Shared pytest options, and which tests are slow: marked here, in one place, by folder or module.

`pytest -m "not slow"` is the loop to iterate in (docs/architecture.md, Tests); `make test` runs everything.
"""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

SLOW: dict[str, str] = {
    "install": "fresh virtual environments and pip installs",
    "reliability": "load, fuzz, outage and replica suites",
    "serve": "svcgen serve and --reload in subprocesses",
    "dashboard": "headless Chromium",
    "codegen/test_quality.py": "mypy --strict, ruff and pytest over generated packages",
    "codegen/test_e2e.py": "build, serve, implement, rebuild in subprocesses",
    "codegen/test_schema_property.py": "property suite: random manifests built and derived",
    "codegen/test_determinism.py": "builds under several hash seeds in subprocesses",
    "codegen/test_binding.py::test_mypy_rejects_a_handler_annotated_with_other_types": "mypy --strict in a subprocess",
    "manifest/test_properties.py": "property suite: random manifests",
    "manifest/test_schemacheck.py::test_it_agrees_with_jsonschema_on_manifests_valid_and_broken_anywhere": (
        "property test against jsonschema"
    ),
    "runtime/test_contract_property.py": "property suite: random constrained types and values",
    "collector/test_host.py": "svcgen collector serve in subprocesses",
    "collector/test_mismatches.py": "a running collector and dashboard",
    "collector/test_traces.py::test_memory_is_flat_under_an_endless_trace_feed": "a memory soak",
    "collector/test_lock.py::test_a_generated_service_given_the_token_reports_to_a_locked_collector": (
        "a generated service and a collector, served"
    ),
    "collector/test_postgres.py::test_an_unreachable_database_is_service_unavailable_and_unhealthy": (
        "waits out a database connect timeout"
    ),
    "mesh/test_two_services.py": "two generated services and a collector under uvicorn, waiting for their feeds",
    "nats/test_nats_serve.py": "svcgen serve over NATS in subprocesses",
    "diff/test_cli.py::test_check_against_a_revision_in_a_git_repository_as_ci_runs_it": "git in subprocesses",
    "events/test_outages.py": "JetStream server restarts and subscriber kills",
    "events/test_jetstream.py::test_the_dead_letters_command_lists_replays_and_drops": "svcgen events in subprocesses",
    "collector/test_postgres.py::test_an_unreachable_database_logs_few_pool_warnings": (
        "waits out psycopg pool retries against a closed port"
    ),
    "collector/test_jetstream_consumer.py::test_a_message_the_store_never_takes_is_given_up_after"
    "_the_delivery_cap_and_logged": "waits out JetStream redeliveries to the cap",
    "collector/test_jetstream_consumer.py::test_a_collector_whose_nats_server_is_down_says_so_once"
    "_and_takes_the_feeds_when_it_is_back": "a NATS server stopped and started again",
    "collector/test_can_i_deploy.py": "svcgen collector serve and generated services in subprocesses",
    "nats/test_nats_budgets.py::test_stop_answers_the_queued_messages_unrun_and_returns": "waits out a shutdown",
    "diff/test_revision.py::test_a_manifest_read_at_a_revision_equals_the_file_read_from_disk": (
        "property suite: git commits per example"
    ),
    "diff/test_gate.py": "git repositories with tags in subprocesses",
    "http/test_deadlines.py": "waits out idle and slow connections",
    "events/test_jetstream.py": "JetStream redeliveries with backoff on the real server",
    "mesh/test_hostile_collector.py": "waits out silent and slow collectors",
}
"""Path under tests/ (a folder, a module, or a module::test) → why it is slow."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite golden files from the current output instead of comparing against them",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    missing = [where for where in SLOW if not (TESTS / where.partition("::")[0]).exists()]
    if missing:  # a renamed folder or module would quietly join the fast loop
        raise pytest.UsageError(f"tests/conftest.py SLOW names what does not exist: {', '.join(missing)}")
    for item in items:
        where = Path(str(item.path)).resolve()
        if where.is_relative_to(TESTS) and is_slow(where.relative_to(TESTS).as_posix(), item.name.partition("[")[0]):
            item.add_marker(pytest.mark.slow)


def is_slow(path: str, test: str) -> bool:
    """Whether the test `test` of the module at `path` (relative to tests/) is under an entry of SLOW."""
    for entry in SLOW:
        slow_path, _, slow_test = entry.partition("::")
        if (path == slow_path or path.startswith(slow_path + "/")) and slow_test in ("", test):
            return True
    return False


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))
