"""`make demo`, in two acts, everything through the `svcgen` CLI on 127.0.0.1:

1. Build examples/manifests/orders.yaml into out/, serve the stubs, fill in a handler, rebuild, serve again.
2. A live mesh: build orders, payments and inventory with real handlers, run a collector, send mixed traffic
   (successes, validation errors, a handler exception, calls from orders to payments), probe every service,
   print the fleet and one trace spanning two services, write the UI artifacts and the dashboard.
3. Events over JetStream: bookings publishes `bookings:booked`, notifications handles it; a confirmation that
   keeps failing is dead-lettered, then replayed once the cause is fixed.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
MANIFEST = "examples/manifests/orders.yaml"
OUT = REPO / "out"
PACKAGE = OUT / "orders_service"
SVCGEN = [sys.executable, "-m", "svcgen"]

IMPLEMENTATION = REPO / "examples" / "handlers" / "orders_place_v1.py"
"""What act 1 fills in; the reliability tests serve the same handler."""

ORDER = {"customerId": "c-42", "items": [{"sku": "apple", "quantity": 3}, {"sku": "pear"}],
         "placedAt": "2026-11-22T10:00:00+01:00"}


def step(title: str) -> None:
    print(f"\n=== {title}")


def svcgen(*args: str) -> None:
    print("$ svcgen " + " ".join(args))
    subprocess.run([*SVCGEN, *args], cwd=REPO, check=True)


def show(client: httpx.Client, method: str, path: str, body: object | None = None) -> None:
    response = client.request(method, path, json=body)
    text = json.dumps(response.json(), indent=2) if response.content else "(no body)"
    if len(text) > 900:
        text = text[:900] + "\n  ..."
    print(f"{method} {path} → {response.status_code}\n{text}\n")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until_up(url: str, process: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 20
    while True:
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            if time.monotonic() > deadline or process.poll() is not None:
                raise SystemExit(f"{what} did not start") from None
            time.sleep(0.1)


@contextmanager
def serving() -> Iterator[httpx.Client]:
    port = free_port()
    print(f"$ svcgen serve out/orders_service --port {port}")
    server = subprocess.Popen(
        [*SVCGEN, "serve", str(PACKAGE), "--host", "127.0.0.1", "--port", str(port)],
        cwd=REPO,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until_up(f"http://127.0.0.1:{port}/svc/spec", server, "the service")
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5) as client:
            yield client
    finally:
        server.terminate()
        server.wait(timeout=10)


def main() -> None:
    if OUT.exists():
        shutil.rmtree(OUT)
    step("build the orders manifest")
    svcgen("build", MANIFEST, "-o", "out")

    step("serve the fresh build: every stub answers 501")
    with serving() as client:
        show(client, "POST", "/orders", ORDER)
        show(client, "POST", "/orders", {"customerId": "c-42", "items": [{"sku": "apple", "quantity": "three"}]})
        show(client, "GET", "/svc/health")
        show(client, "POST", "/svc/invoke", {"topic": "orders:get", "body": json.dumps({"orderId": "o-1"})})

    step("implement orders:place v1 in out/orders_service/handlers/orders_place_v1.py, then rebuild")
    shutil.copyfile(IMPLEMENTATION, PACKAGE / "handlers" / "orders_place_v1.py")
    svcgen("build", MANIFEST, "-o", "out")
    svcgen("check", MANIFEST, "-o", "out")

    step("serve again: the handler answers, v2 is still a stub")
    with serving() as client:
        show(client, "POST", "/orders", ORDER)
        address = {"recipient": "Ada", "line1": "1 Main St", "city": "Lyon", "postal_code": "69001",
                   "countryCode": "FR"}
        show(client, "POST", "/v2/orders", {**ORDER, "shippingAddress": address})
        show(client, "POST", "/svc/invoke/orders:place/v1", ORDER)
    import demo_events
    import demo_mesh

    demo_mesh.run()
    demo_events.run()
    print("\n=== demo done: the packages are in out/, the mesh state in out/mesh/")


if __name__ == "__main__":
    main()
