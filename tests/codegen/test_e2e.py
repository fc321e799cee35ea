"""End to end: build orders, serve it with `svcgen serve`, implement a handler, rebuild, add a topic.

The server runs as a subprocess on 127.0.0.1 and a free port, with bounded waits, and is always killed.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from tests.support.codegen import CLI, REPO, run_cli
from tests.support.server import free_port

STARTUP_TIMEOUT = 30.0

IMPLEMENTATION = '''\
"""orders:place v1, implemented."""

from __future__ import annotations

from svcgen.runtime import Context, Result

from ..models import Order, PlaceOrder


async def handle(request: PlaceOrder, context: Context) -> Result[Order]:
    total = sum(item.quantity for item in request.items)
    order = Order(
        order_id="o-1",
        customer_id=request.customer_id,
        items=request.items,
        total_items=total,
        placed_at=request.placed_at,
    )
    return Result.ok(order)
'''

NEW_TOPIC = """\
  - id: orders:cancel
    summary: Cancel an order
    request: GetOrder
    response: Order
    routes: ["DELETE /orders/{orderId}"]
"""

PLACE = {"customerId": "c-7", "items": [{"sku": "a", "quantity": 2}, {"sku": "b"}], "placedAt": "2024-05-01T12:00:00Z"}


@contextlib.contextmanager
def served(workdir: Path, package: str) -> Iterator[httpx.Client]:
    port = free_port()
    log = (workdir / "serve.log").open("ab")
    process = subprocess.Popen(
        [sys.executable, "-c", CLI, "serve", f"out/{package}", "--port", str(port)],
        cwd=workdir,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            deadline = time.monotonic() + STARTUP_TIMEOUT
            while True:
                assert process.poll() is None, (workdir / "serve.log").read_text()
                assert time.monotonic() < deadline, "the server did not start in time"
                try:
                    client.get("/svc/spec")
                    break
                except httpx.TransportError:
                    time.sleep(0.1)
            yield client
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        log.close()


def build(workdir: Path) -> str:
    result = run_cli("build", "orders.yaml", "-o", "out", cwd=workdir)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_build_serve_implement_rebuild_extend(tmp_path: Path) -> None:
    shutil.copy(REPO / "examples/manifests/orders.yaml", tmp_path / "orders.yaml")
    shutil.copy(REPO / "examples/manifests/payments.yaml", tmp_path / "payments.yaml")  # orders takes types from it
    shutil.copytree(REPO / "examples/manifests/schemas", tmp_path / "schemas")
    build(tmp_path)
    package = tmp_path / "out/orders_service"

    with served(tmp_path, "orders_service") as client:
        answer = client.post("/orders", json=PLACE)
        assert answer.status_code == 501
        assert answer.json() == {"status": "not-implemented", "detail": "orders:place is not implemented yet"}
        assert client.get("/orders/o-1").status_code == 501
        assert client.post("/v2/orders", json=PLACE).status_code == 422  # v2 needs a shippingAddress
        assert client.get("/svc/health").json()["isHealthy"] is True

    handler = package / "handlers/orders_place_v1.py"
    handler.write_text(IMPLEMENTATION)
    output = build(tmp_path)
    assert (
        "kept: handlers/orders_get.py, handlers/orders_place_v1.py, handlers/orders_place_v2.py, health/cache.py, "
        "health/database.py, wiring.py"
    ) in output
    assert handler.read_text() == IMPLEMENTATION

    with served(tmp_path, "orders_service") as client:
        for path in ("/orders", "/v1/orders"):
            answer = client.post(path, json=PLACE)
            assert answer.status_code == 200, answer.text
            assert answer.json() == {
                "orderId": "o-1",
                "customerId": "c-7",
                "status": "placed",
                "items": [{"sku": "a", "quantity": 2}, {"sku": "b", "quantity": 1}],
                "totalItems": 3,
                "shippingAddress": None,
                "placedAt": "2024-05-01T12:00:00+00:00",
            }
            assert answer.headers["svc-version"] == "v1"

    manifest = tmp_path / "orders.yaml"
    manifest.write_text(manifest.read_text().replace("produces:\n", NEW_TOPIC + "produces:\n"))
    output = build(tmp_path)
    assert "created: handlers/orders_cancel.py" in output
    assert handler.read_text() == IMPLEMENTATION
    assert "= orders_cancel.handle" in (package / "service.py").read_text()

    with served(tmp_path, "orders_service") as client:
        assert client.delete("/orders/o-1").status_code == 501
        assert client.post("/orders", json=PLACE).status_code == 200

    contracts = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "out/orders_service/tests"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert contracts.returncode == 0, contracts.stdout + contracts.stderr
    assert "5 passed" in contracts.stdout
