"""Act 3 of `make demo`: events over JetStream between two generated services on 127.0.0.1.

bookings publishes `bookings:booked` when an appointment is booked; notifications handles it. A confirmation to
an address that bounces fails three times and lands in the dead-letter stream; once the cause is fixed, `svcgen
events dead-letters replay` delivers it again.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
from demo import OUT, REPO, SVCGEN, free_port, step, svcgen, wait_until_up

EVENTS = OUT / "events"
HANDLERS = REPO / "examples" / "handlers" / "events"
COPIES = {"bookings_book.py": "bookings_service", "on_bookings_booked.py": "notifications_service",
          "notifications_sent.py": "notifications_service"}
LOCAL_NATS = "nats://127.0.0.1:4222"


def answers(url: str) -> bool:
    import socket

    host, _, port = url.removeprefix("nats://").partition(":")
    try:
        with socket.create_connection((host, int(port or 4222)), timeout=2) as sock:
            return sock.recv(4).startswith(b"INFO")
    except OSError:
        return False


@contextmanager
def jetstream() -> Iterator[str]:
    """The NATS server at SVCGEN_NATS or 127.0.0.1:4222 when it answers, else a throwaway `nats-server -js`."""
    url = os.environ.get("SVCGEN_NATS") or LOCAL_NATS
    if answers(url):
        yield url
        return
    binary = shutil.which("nats-server") or "/usr/sbin/nats-server"
    if not Path(binary).exists():
        raise SystemExit("act 3 needs NATS with JetStream: install nats-server (apt-get install nats-server)")
    port = free_port()
    with tempfile.TemporaryDirectory() as store:
        server = subprocess.Popen([binary, "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", store],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            url = f"nats://127.0.0.1:{port}"
            deadline = time.monotonic() + 10
            while not answers(url):
                if time.monotonic() > deadline:
                    raise SystemExit("nats-server did not start")
                time.sleep(0.1)
            print(f"(started a throwaway nats-server -js at {url})")
            yield url
        finally:
            server.terminate()
            server.wait(timeout=10)


def serve(stack: ExitStack, package: str, url: str, env: dict[str, str]) -> str:
    port = free_port()
    args = [*SVCGEN, "serve", str(EVENTS / package), "--port", str(port), "--nats", url]
    print("$ svcgen " + " ".join(args[3:]).replace(str(REPO) + "/", ""))
    process = subprocess.Popen(args, cwd=REPO, env={**os.environ, **env}, stderr=subprocess.DEVNULL)
    stack.callback(process.wait, 20)
    stack.callback(process.terminate)
    base = f"http://127.0.0.1:{port}"
    wait_until_up(base + "/svc/spec", process, package)
    return base


def dead_letters(url: str, action: str) -> str:
    args = ["events", "dead-letters", action, "--nats", url, "--subscriber", "notifications"]
    print("$ svcgen " + " ".join(args))
    done = subprocess.run([*SVCGEN, *args], cwd=REPO, capture_output=True, text=True, check=True)
    print(done.stdout + done.stderr, end="")
    return done.stdout


def sent(client: httpx.Client, patient: str) -> None:
    """Waits until the confirmation of `patient` went out."""
    deadline = time.monotonic() + 30
    while client.get("/sent", params={"patientId": patient}).json()["sent"] < 1:
        if time.monotonic() > deadline:
            raise SystemExit(f"the confirmation for {patient} did not go out")
        time.sleep(0.1)
    print(f"GET /sent?patientId={patient} → {client.get('/sent', params={'patientId': patient}).json()}")


def run() -> None:
    step("act 3: events over JetStream: bookings publishes bookings:booked, notifications handles it")
    if EVENTS.exists():
        shutil.rmtree(EVENTS)
    for name in ("bookings", "notifications"):
        svcgen("build", f"examples/manifests/{name}.yaml", "-o", "out/events")
    for handler, package in COPIES.items():
        shutil.copyfile(HANDLERS / handler, EVENTS / package / "handlers" / handler)
    fixed = EVENTS / "mail-server-fixed"
    with jetstream() as url, ExitStack() as stack:
        dead_letters(url, "drop")  # what an earlier demo left
        bookings = serve(stack, "bookings_service", url, {})
        notifications = serve(stack, "notifications_service", url, {"NOTIFY_FIXED": str(fixed)})
        with httpx.Client(base_url=bookings, timeout=10) as front, httpx.Client(base_url=notifications) as back:
            run_id = f"{int(time.time()) % 100000}"  # appointment ids are event keys: new ones each run
            ada, bob = f"p-{run_id}-1", f"p-{run_id}-2"
            for patient, email in ((ada, "ada@example.org"), (bob, "bob@bounce.example")):
                body = {"patientId": patient, "slot": "2026-12-01T09:30:00Z", "email": email}
                answer = front.post("/appointments", json=body)
                print(f"POST /appointments {body} → {answer.status_code} {answer.json()}")
            sent(back, ada)
            step("the bounced confirmation: 3 attempts (200 ms, then 1 s apart), then the dead-letter stream")
            deadline = time.monotonic() + 30
            while f"a-{bob}" not in dead_letters(url, "list"):
                if time.monotonic() > deadline:
                    raise SystemExit("the bounced confirmation was not dead-lettered")
                time.sleep(1)
            step("fix the cause, then replay: delivered again under a new message id")
            fixed.touch()
            dead_letters(url, "replay")
            sent(back, bob)
            dead_letters(url, "list")
            print(f"GET {bookings}/svc/asyncapi.json → channels "
                  f"{list(httpx.get(bookings + '/svc/asyncapi.json').json()['channels'])}")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    run()
