"""Contract fuzzing: schemathesis drives every operation of each served operations document over real HTTP.

The three example services are built with `svcgen build` into a temporary directory and served by uvicorn on
127.0.0.1 with small real handlers (one topic per service keeps its generated `not-implemented` stub), traced
and reporting to a collector that is itself served and fuzzed. Each operation gets positive and negative
cases, generated from the document the service serves at `GET {prefix}/openapi.json`, and every answer must:

- be documented: its status code is in the operation's responses and its body conforms to that response's
  schema (schemathesis' `status_code_conformance`, `content_type_conformance`, `response_schema_conformance`);
- never be a 5xx except the documented `service-unavailable` 503 of a handler exception (whose detail never
  carries the exception text) and the 501 of a topic left as a stub.

Bounded: a fixed number of examples per operation and mode, derandomized, no example database.

Two regressions found by this fuzz sit at the end: an integer beyond 64 bits was a 500 (now a 422), and a
success other than 200 is not in the operations document (an open gap, xfail until the document has it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import Case, GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from svcgen.collector import Collector, collector_service
from svcgen.runtime import Context, Identity, MeshHost, MeshSettings, Registry, Result, Service, create_app
from tests.support.server import running

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "manifests"
MAX_EXAMPLES = 25
"""Per operation and generation mode: 18 operations (3 + 3 + 4 + the collector's 8) x 2 modes, about 900 requests."""

NOW = datetime(2027, 1, 15, 8, 0, tzinfo=UTC)
SECRET = "fuzz-secret-exception-text"
"""The text of every exception the handlers raise: it must never reach a caller."""

SERVICES = {"orders": "/svc", "payments": "/svc", "inventory": "/ops"}
STUBS = {"payments:get-capture", "inventory:transfer"}
"""Topics whose generated stub stays in place: they answer 501 `not-implemented`, as documented."""


# --- handlers ------------------------------------------------------------------------------------------------


def varied(make: Callable[[Any], Any]) -> Callable[[Any, Context], Any]:
    """A handler answering `make(request)` for most requests and, chosen by a digest of the request, a
    documented failure or an exception (a `service-unavailable` 503) for the rest."""

    async def handle(request: Any, context: Context) -> Result[Any]:
        bucket = hashlib.sha256(repr(request).encode("utf-8", "surrogatepass")).digest()[0] % 8
        if bucket == 0:
            raise RuntimeError(SECRET)
        if bucket == 1:
            return Result.not_found("no such thing")
        if bucket == 2:
            return Result.conflict("already done")
        return Result.ok(make(request))

    return handle


def orders_handlers(models: ModuleType) -> dict[tuple[str, str], Callable[[Any], Any]]:
    def place_v1(r: Any) -> Any:
        return models.Order(
            order_id="o-1",
            customer_id=r.customer_id,
            items=r.items,
            total_items=sum(item.quantity for item in r.items),
            placed_at=r.placed_at,
        )

    def place_v2(r: Any) -> Any:
        return models.Order(
            order_id="o-2",
            customer_id=r.customer_id,
            items=r.items,
            total_items=len(r.items),
            shipping_address=r.shipping_address,
            placed_at=NOW,
        )

    def get(r: Any) -> Any:
        items = [models.LineItem(sku="sku-1", quantity=2)] if r.verbose else []
        return models.Order(order_id=r.order_id, customer_id="c-1", items=items, total_items=2, placed_at=NOW)

    return {("orders:place", "v1"): place_v1, ("orders:place", "v2"): place_v2, ("orders:get", ""): get}


def payments_handlers(models: ModuleType) -> dict[tuple[str, str], Callable[[Any], Any]]:
    def capture(r: Any) -> Any:
        return models.Capture(capture_id="cap-1", order_id=r.order_id, amount=r.amount, captured_at=NOW)

    def refund(r: Any) -> Any:
        amount = r.amount if r.amount is not None else models.Money(amount_minor=100)
        return models.Refund(refund_id="ref-1", capture_id=r.capture_id, amount=amount, refunded_at=NOW)

    return {("payments:capture", ""): capture, ("payments:refund", ""): refund}


def inventory_handlers(models: ModuleType) -> dict[tuple[str, str], Callable[[Any], Any]]:
    def stock(r: Any) -> Any:
        level = models.StockLevel(
            sku=r.sku,
            warehouse=r.warehouse or "main",
            on_hand=3,
            bin_location=len(r.sku) if len(r.sku) % 2 else "aisle-4",
            updated_at=NOW,
        )
        return models.StockLevels(sku=r.sku, levels=[level])

    def movements(r: Any) -> Any:
        return [
            models.Movement(sku=r.sku, delta=-n, reason="sale", at=NOW, details={"n": n, "of": [r.limit]})
            for n in range(max(0, min(r.limit, 3)))
        ]

    def reserve(r: Any) -> Any:
        minutes = max(0, min(r.hold_minutes, 10_000))
        return models.Reservation(
            reservation_id="res-1", order_id=r.order_id, lines=r.lines, expires_at=NOW + timedelta(minutes=minutes)
        )

    return {("inventory:stock", ""): stock, ("inventory:movements", ""): movements,
            ("inventory:reserve", ""): reserve}  # fmt: skip


HANDLERS = {"orders": orders_handlers, "payments": payments_handlers, "inventory": inventory_handlers}


def with_handlers(original: Callable[[], Registry], answers: dict[tuple[str, str], Callable[[Any], Any]]) -> Any:
    """`build_registry` with the generated types and summaries, but `answers` as handlers (stubs elsewhere)."""

    def build_registry() -> Registry:
        registry = Registry()
        for registration in original():
            make = answers.get((registration.topic, registration.version))
            handler = varied(make) if make is not None else registration.handler
            registry.add(registration.topic, handler, version=registration.version,
                         request=registration.request_type, response=registration.response_type,
                         summary=registration.summary)  # fmt: skip
        return registry

    return build_registry


# --- the served estate ---------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Served:
    base: str
    prefix: str


def forget_package(package: str) -> None:
    for name in [name for name in sys.modules if name == package or name.startswith(package + ".")]:
        del sys.modules[name]


@pytest.fixture(scope="module")
def estate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Served]]:
    out = tmp_path_factory.mktemp("fuzz")
    for name in SERVICES:
        built = subprocess.run(
            [sys.executable, "-m", "svcgen", "build", str(EXAMPLES / f"{name}.yaml"), "-o", str(out)],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert built.returncode == 0, built.stderr
    packages = [f"{name}_service" for name in SERVICES]
    for package in packages:
        forget_package(package)  # another test module may have imported its own build of the same package
    sys.path.insert(0, str(out))
    try:
        with contextlib.ExitStack() as stack, pytest.MonkeyPatch.context() as patch:
            collector_base = stack.enter_context(running(create_app(collector_service(Collector()))))
            served = {"collector": Served(collector_base, "/svc")}
            for name, prefix in SERVICES.items():
                module = importlib.import_module(f"{name}_service.service")
                models = importlib.import_module(f"{name}_service.models")
                registry = with_handlers(module.build_registry, HANDLERS[name](models))
                patch.setattr(module, "DEFINITION", dataclasses.replace(module.DEFINITION, registry=registry))
                mesh = MeshHost(module.identity(), MeshSettings(collector=collector_base, heartbeat_seconds=0.5),
                                environ={})  # fmt: skip
                served[name] = Served(stack.enter_context(running(module.create_app(mesh=mesh))), prefix)
            yield served
    finally:
        sys.path.remove(str(out))
        for package in packages:
            forget_package(package)


# --- checks --------------------------------------------------------------------------------------------------


def no_undocumented_server_error(response: schemathesis.Response, case: Case[Any]) -> None:
    """5xx only as a handler exception's `service-unavailable` 503 (no exception text) or a stub's 501."""
    code = response.status_code
    if code < 500:
        return
    label = case.operation.label
    body = response.json() if response.content else None
    status = body.get("status") if isinstance(body, dict) else None
    if code == 503 and status == "service-unavailable":
        assert SECRET not in response.text, f"{label}: a handler's exception text reached the caller"
        return
    topic = case.operation.path.rsplit("/invoke/", 1)[-1].split("/")[0]
    if code == 501 and status == "not-implemented" and topic in STUBS:
        return
    raise AssertionError(f"{label}: HTTP {code} {response.text[:500]!r}\n{case.as_curl_command()}")


CONFORMANCE = [status_code_conformance, content_type_conformance, response_schema_conformance]


# --- the fuzz ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def session() -> Iterator[requests.Session]:
    with requests.Session() as http:
        yield http


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=str)
@pytest.mark.parametrize("name", ["orders", "payments", "inventory", "collector"])
def test_every_answer_is_documented_and_no_undocumented_5xx(
    estate: dict[str, Served], session: requests.Session, name: str, mode: GenerationMode
) -> None:
    served = estate[name]
    schema = schemathesis.openapi.from_url(f"{served.base}{served.prefix}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]  # type: ignore[union-attr]
    assert operations, f"{name}: the operations document has no operations"
    calls: dict[str, int] = {}
    for operation in operations:

        @settings(max_examples=MAX_EXAMPLES, derandomize=True, database=None, deadline=None,
                  suppress_health_check=list(HealthCheck))  # fmt: skip
        @given(case=operation.as_strategy(mode))
        def fuzz(case: Case[Any]) -> None:
            response = case.call(base_url=served.base, session=session, timeout=10)
            calls[case.operation.label] = calls.get(case.operation.label, 0) + 1
            no_undocumented_server_error(response, case)
            case.validate_response(response, checks=CONFORMANCE)

        fuzz()
    assert set(calls) == {operation.label for operation in operations}


# --- what the fuzz found -------------------------------------------------------------------------------------


def test_an_integer_beyond_64_bits_is_a_validation_error_not_a_500(estate: dict[str, Served]) -> None:
    """orjson reads an integer literal past 64 bits as a float (losing digits) and cannot write it back: the
    codec used to take it as an int, so an echoing handler answered 500 `could not be encoded`. An integer is
    signed 64-bit: 2**63 is out of range too."""
    orders, inventory = estate["orders"].base, estate["inventory"].base
    body = (
        b'{"customerId": "c-1", "items": [{"sku": "s", "quantity": -13682484686140019713}], '
        b'"placedAt": "2000-01-01T00:00:00Z"}'
    )
    placed = requests.post(f"{orders}/svc/invoke/orders:place/v1", data=body,
                           headers={"content-type": "application/json"}, timeout=10)  # fmt: skip
    assert (placed.status_code, placed.json()) == (
        422,
        {
            "status": "validation-error",
            "detail": "items[0].quantity: integer out of range (signed 64-bit)",
            "errors": [{"path": "items[0].quantity", "message": "integer out of range (signed 64-bit)"}],
        },
    )
    queried = requests.get(f"{inventory}/stock/sku-1/movements?limit={10**30}", timeout=10)
    assert (queried.status_code, queried.json()["detail"]) == (422, "limit: integer out of range (signed 64-bit)")
    past = requests.get(f"{inventory}/stock/sku-1/movements?limit={2**63}", timeout=10)
    assert (past.status_code, past.json()["detail"]) == (422, "limit: integer out of range (signed 64-bit)")
    in_range = requests.get(f"{inventory}/stock/sku-1/movements?limit={2**63 - 1}", timeout=10)
    assert in_range.status_code != 422


@dataclasses.dataclass
class Place:
    sku: str


@dataclasses.dataclass
class Placed:
    order_id: str


async def place_created(request: Place, context: Context) -> Result[Placed]:
    return Result.created(Placed("o-1"))


@pytest.mark.xfail(
    strict=True,
    reason="open: the operations document documents 200 as the only success, "
    "but a handler's created/accepted/updated/deleted answers 201/202/204 on the typed invoke path",
)
def test_a_created_answer_is_documented(session: requests.Session) -> None:
    registry = Registry()
    registry.add("orders:place", place_created)
    with running(create_app(Service(Identity("orders"), registry))) as base:
        schema = schemathesis.openapi.from_url(f"{base}/svc/openapi.json")
        case = schema["/svc/invoke/orders:place"]["POST"].Case(body={"sku": "a"}, media_type="application/json")
        response = case.call(base_url=base, session=session, timeout=10)
        assert response.status_code == 201
        case.validate_response(response, checks=CONFORMANCE)
