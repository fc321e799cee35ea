"""The HTTP API document of every example, against the running services: valid OpenAPI, fuzzed by schemathesis
with every check it has, and turned into a working client by openapi-python-client.

The three examples are built with `svcgen build` and served by uvicorn on 127.0.0.1. Every topic gets a small
real handler that answers, chosen by a digest of the request, one of the statuses its topic declares (its success
statuses with a payload, its declared failures with a detail), so each answer the document promises can appear
and no answer outside it should. Bounded: a fixed number of derandomized examples per operation and mode.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from openapi_python_client.strings import snake_case
from openapi_spec_validator import validate
from schemathesis import Case, GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance

from svcgen.runtime import Context, MeshHost, MeshSettings, Registry, Result
from svcgen.runtime._registry import Registration
from tests.support.server import running

from .test_contract_fuzz import EXAMPLES, HANDLERS, NOW, SERVICES, forget_package

pytestmark = pytest.mark.slow

MAX_EXAMPLES = 25
"""Per operation and generation mode: 11 operations x 2 modes, about 550 requests."""


def extra_handlers(name: str, models: ModuleType) -> dict[tuple[str, str], Callable[[Any], Any]]:
    """Handlers for the topics the operations-document fuzz leaves as stubs: here every topic answers."""
    if name == "payments":
        money = models.Money(amount_minor=100)
        return {("payments:get-capture", ""): lambda r: models.Capture(
            capture_id=r.capture_id, order_id="o-1", amount=money, captured_at=NOW)}  # fmt: skip
    if name == "inventory":
        return {("inventory:transfer", ""): lambda r: models.Transfer(transfer_id="t-1", lines={r.sku: r.quantity})}
    return {}


ANSWER_HEADER = "x-answer"
"""`success` or `failure` makes a handler answer its first declared status of that kind (for the client test)."""


def declared(make: Callable[[Any], Any], registration: Registration) -> Callable[[Any, Context], Any]:
    """A handler answering one of the statuses its topic declares, chosen by a digest of the request."""
    statuses = [*registration.success, *registration.failures]

    async def handle(request: Any, context: Context) -> Result[Any]:
        digest = hashlib.sha256(repr(request).encode("utf-8", "surrogatepass")).digest()[0]
        chosen = {"success": registration.success[0], "failure": (*registration.failures, None)[0]}
        status = chosen.get(context.headers.get(ANSWER_HEADER, "")) or statuses[digest % len(statuses)]
        if status in registration.success:
            return Result.of(status, make(request))
        return Result.of(status, detail=f"declared {status}")

    return handle


def with_declared_handlers(original: Callable[[], Registry], answers: dict[tuple[str, str], Any]) -> Any:
    def build_registry() -> Registry:
        registry = Registry()
        for registration in original():
            make = answers[(registration.topic, registration.version)]
            registry.add(registration.topic, declared(make, registration), version=registration.version,
                         request=registration.request_type, response=registration.response_type,
                         summary=registration.summary, success=registration.success,
                         failures=registration.failures, deprecated=registration.deprecated,
                         idempotent=registration.idempotent)  # fmt: skip
        return registry

    return build_registry


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    out = tmp_path_factory.mktemp("httpapi")
    for name in SERVICES:
        result = subprocess.run(
            [sys.executable, "-m", "svcgen", "build", str(EXAMPLES / f"{name}.yaml"), "-o", str(out)],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
    packages = [f"{name}_service" for name in SERVICES]
    for package in packages:
        forget_package(package)  # another test module may have imported its own build of the same package
    sys.path.insert(0, str(out))
    try:
        yield out
    finally:
        sys.path.remove(str(out))
        for package in packages:
            forget_package(package)


@pytest.fixture(scope="module")
def served(built: Path) -> Iterator[dict[str, str]]:
    """Base URL of each example service, served without mesh feeds (`svcgen serve` with no collector)."""
    with contextlib.ExitStack() as stack, pytest.MonkeyPatch.context() as patch:
        bases = {}
        for name in SERVICES:
            module = importlib.import_module(f"{name}_service.service")
            models = importlib.import_module(f"{name}_service.models")
            answers = {**HANDLERS[name](models), **extra_handlers(name, models)}
            registry = with_declared_handlers(module.build_registry, answers)
            patch.setattr(module, "DEFINITION", dataclasses.replace(module.DEFINITION, registry=registry))
            bases[name] = stack.enter_context(running(module.create_app(mesh=_no_feeds(module))))
        yield bases


def _no_feeds(module: ModuleType) -> MeshHost:
    # A collector nobody listens on, a heartbeat that never comes: feeds fail quietly and never reach a caller.
    return MeshHost(module.identity(), MeshSettings(collector="http://127.0.0.1:9", heartbeat_seconds=3600), environ={})


@pytest.mark.parametrize("name", list(SERVICES))
def test_the_served_document_is_valid_openapi_and_the_committed_one(
    built: Path, served: dict[str, str], name: str
) -> None:
    prefix = SERVICES[name]
    answer = httpx.get(f"{served[name]}{prefix}/http-api.json", timeout=10)
    assert answer.status_code == 200
    assert answer.content == (built / f"{name}_service" / "contracts" / "http-api.json").read_bytes()
    validate(answer.json())


KEY_REUSED = "this Idempotency-Key was used with a different request"


def integer_literals_only(response: schemathesis.Response, case: Case[Any], key_reused: bool) -> None:
    """Schema-valid data is accepted, except a float literal for an integer: JSON Schema counts `3.0` as an
    integer, the wire does not (docs/wire.md), and no schema keyword can tell the two literals apart; and except
    an `Idempotency-Key` sent before (`key_reused`), which the fuzzer draws again for another request and which is
    rightly refused then (422), as no schema can say "unique". This replaces schemathesis'
    `positive_data_acceptance`, which cannot know either."""
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive or response.status_code < 400:
        return
    detail = response.json().get("detail", "") if response.content else ""
    integer_literal = response.status_code == 422 and detail.endswith("expected integer")
    reused = key_reused and response.status_code == 422 and detail == KEY_REUSED
    assert response.status_code in (404, 409) or integer_literal or reused, (
        f"{case.operation.label}: schema-valid data refused: HTTP {response.status_code} {response.text[:300]}\n"
        f"{case.as_curl_command()}"
    )


def only_text_parameters(operation: Any) -> bool:
    """Whether no request to the operation can be schema-invalid: no body, and every parameter takes any text."""
    definition = operation.definition.raw
    parameters = definition.get("parameters", [])
    return "requestBody" not in definition and all(p.get("schema") == {"type": "string"} for p in parameters)


@pytest.fixture(scope="module")
def sent_keys() -> dict[str, set[str]]:
    """Each service's `Idempotency-Key` values sent so far: its store keeps them as long as it runs (the module)."""
    return {name: set() for name in SERVICES}


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=str)
@pytest.mark.parametrize("name", list(SERVICES))
def test_schemathesis_finds_every_answer_documented(
    served: dict[str, str], sent_keys: dict[str, set[str]], name: str, mode: GenerationMode
) -> None:
    base = served[name]
    keys = sent_keys[name]
    schema = schemathesis.openapi.from_url(f"{base}{SERVICES[name]}/http-api.json")
    operations = [result.ok() for result in schema.get_all_operations()]  # type: ignore[union-attr]
    assert operations, f"{name}: the HTTP API document has no operations"
    calls: dict[str, int] = {}
    with requests.Session() as session:
        for operation in operations:

            @settings(max_examples=MAX_EXAMPLES, derandomize=True, database=None, deadline=None,
                      suppress_health_check=list(HealthCheck))  # fmt: skip
            @given(case=operation.as_strategy(mode))
            def fuzz(case: Case[Any]) -> None:
                key = {header.lower(): value for header, value in (case.headers or {}).items()}.get("idempotency-key")
                response = case.call(base_url=base, session=session, timeout=10)
                calls[case.operation.label] = calls.get(case.operation.label, 0) + 1
                # Every check schemathesis has; positive_data_acceptance in the form the wire allows.
                case.validate_response(response, excluded_checks=[positive_data_acceptance])
                integer_literals_only(response, case, key_reused=key in keys)
                if key is not None:
                    keys.add(key)

            try:
                fuzz()
            except Unsatisfiable:
                # Nothing about the operation can be invalid, so there is no negative case to send.
                assert mode is GenerationMode.NEGATIVE and only_text_parameters(operation), operation.label
                calls[operation.label] = 0
    assert set(calls) == {operation.label for operation in operations}


# --- a generated client ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def orders_client(built: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    """The client openapi-python-client generates from the orders document, importable as `orders_api_client`."""
    out = tmp_path_factory.mktemp("client")
    document = built / "orders_service" / "contracts" / "http-api.json"
    generator = Path(sys.executable).with_name("openapi-python-client")
    # Its post-generation hook runs ruff, which sits beside it in the environment.
    environment = {**os.environ, "PATH": f"{generator.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    result = subprocess.run(
        [str(generator), "generate", "--path", str(document), "--output-path", str(out / "client"), "--meta", "none"],
        capture_output=True, text=True, timeout=300, env=environment,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Warning" not in result.stdout + result.stderr, result.stdout + result.stderr
    sys.path.insert(0, str(out))
    try:
        yield importlib.import_module("client")
    finally:
        sys.path.remove(str(out))
        for module in [module for module in sys.modules if module == "client" or module.startswith("client.")]:
            del sys.modules[module]


def test_a_generated_client_calls_every_route_with_the_answers_decoded(
    built: Path, served: dict[str, str], orders_client: ModuleType
) -> None:
    document = json.loads((built / "orders_service" / "contracts" / "http-api.json").read_bytes())
    operation_ids = {op["operationId"] for item in document["paths"].values() for op in item.values()}
    models = importlib.import_module("client.models")
    items = [models.LineItem(sku="apple", quantity=2), models.LineItem(sku="pear")]
    place = models.PlaceOrder(customer_id="c-1", items=items, placed_at=NOW)
    address = models.Address(recipient="R", line1="Main 1", city="Ghent", postal_code="9000", country_code="BE")
    place_v2 = models.PlaceOrderV2(customer_id="c-1", items=items, shipping_address=address)
    arguments: dict[str, dict[str, Any]] = {
        "ordersPlace_v1": {"body": place},
        "ordersPlace_v1_2": {"body": place},
        "ordersPlace_v2": {"body": place_v2},
        "ordersGet": {"order_id": "o-7", "verbose": True},
    }
    assert set(arguments) == operation_ids
    for answer_kind in ("success", "failure"):
        client = orders_client.Client(base_url=served["orders"], headers={ANSWER_HEADER: answer_kind},
                                      raise_on_unexpected_status=True)  # fmt: skip
        for operation_id, given_arguments in arguments.items():
            module = importlib.import_module(f"client.api.default.{snake_case(operation_id)}")
            answer = module.sync_detailed(client=client, **given_arguments)
            label = f"{operation_id} ({answer_kind}): HTTP {answer.status_code} {answer.content[:300]!r}"
            if answer_kind == "failure":
                assert isinstance(answer.parsed, models.Failure), label
                assert answer.parsed.status in ("not-found", "conflict") and answer.parsed.detail, label
                continue
            assert answer.status_code == (200 if operation_id == "ordersGet" else 201), label
            order = answer.parsed
            assert isinstance(order, models.Order), label
            assert order.customer_id in ("c-1", "c-1") and order.placed_at.tzinfo is not None, label
            if operation_id == "ordersGet":
                assert order.order_id == "o-7" and [item.sku for item in order.items] == ["sku-1"], label
            else:
                assert [item.sku for item in order.items] == ["apple", "pear"], label
            if operation_id == "ordersPlace_v2":
                assert order.shipping_address.city == "Ghent", label
