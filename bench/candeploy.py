"""`svcgen can-i-deploy` as a whole process against `svcgen collector serve` holding 200 services and 5,000 topics.

Each service registers a descriptor of 25 topics (derived schemas of five-field records) and sends three topics of
its neighbour, so every topic version has a declared producer; traffic is reported for a tenth of the topics. The
change under test is the first service's manifest with one topic version removed and a required property added to
another's request: both blocked. Wall and CPU time are medians of REPEATS child processes, beside interpreter start
and `svcgen --version` measured in the same run (the floor every command pays).

    PYTHONPATH=. python -m bench.candeploy [--services 200] [--topics 25] [--json FILE]
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import yaml

from bench.collector import envelope, serve
from bench.harness import REPEATS, Figure, Recorder, run
from svcgen.codegen.render import descriptor_document
from svcgen.manifest import load_manifest


def service_manifest(index: int, topics: int) -> dict[str, Any]:
    """Service `s<index>`: `topics` topics `s<index>:t<n>` over five-field records, and three produces entries
    taking the next service's first topics (its own copies of the same records)."""
    types = {f"R{n}": {"fields": {f"f{k}": ["string", "integer", "boolean", "float", "string?"][k] for k in range(5)}}
             for n in range(topics)}  # fmt: skip
    own = [{"id": f"s{index}:t{n}", "version": "v1", "request": f"R{n}", "response": f"R{(n + 1) % topics}"}
           for n in range(topics)]  # fmt: skip
    neighbour = index + 1
    produces = [{"id": f"s{neighbour}:t{n}", "version": "v1", "request": f"R{n}", "response": f"R{(n + 1) % topics}"}
                for n in range(3)]  # fmt: skip
    return {"svcgen": 1, "service": f"s{index}", "types": types, "topics": own, "produces": produces}


def changed(manifest: dict[str, Any]) -> dict[str, Any]:
    """One topic version removed, one request given a new required property: two breaking changes."""
    new = copy.deepcopy(manifest)
    new["topics"] = new["topics"][1:]
    new["types"]["R1"] = {"fields": {**new["types"]["R1"]["fields"], "coupon": "string"}}
    return new


def descriptors(services: int, topics: int, scratch: Path) -> list[dict[str, Any]]:
    """The registered descriptors, derived as a build would; the services' manifests share one shape, so the
    descriptor of the first is renamed for the others (deriving 200 would time the generator, not the gate)."""
    first = scratch / "s0.yaml"
    first.write_text(yaml.safe_dump(service_manifest(0, topics), sort_keys=False))
    template = orjson.dumps(descriptor_document(load_manifest(first))).decode()
    documents = []
    for index in range(services):
        text = template.replace('"s1:', f'"s{index + 1}:').replace('"s0:', f'"s{index}:').replace(
            '"service":"s0"', f'"service":"s{index}"')
        document = orjson.loads(text)
        document["instanceId"] = f"i-{index}"
        documents.append(document)
    return documents


def traffic(services: int, topics: int) -> list[dict[str, Any]]:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return [{"traceId": f"{index:032x}", "spanId": f"{index:016x}", "service": f"s{index % services}",
             "topic": f"s{index % services}:t{index % topics}", "topicVersion": "v1", "status": "ok",
             "startedAt": now, "durationMs": 1.0} for index in range(0, services * topics, 10)]  # fmt: skip


def child(command: list[str]) -> tuple[float, float, int]:
    """(wall s, CPU s, exit status) of one child process."""
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert process.stderr is not None
    error = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise SystemExit(f"{' '.join(command)} failed ({code}):\n{error.decode()}")
    return time.perf_counter() - started, usage.ru_utime + usage.ru_stime, code


def measure(record: Recorder, args: argparse.Namespace) -> None:
    record("interpreter start (python -c pass)",
           statistics.median(child([sys.executable, "-c", "pass"])[0] for _ in range(REPEATS)) * 1e3, "ms")
    record("svcgen --version (start-up floor)",
           statistics.median(child([sys.executable, "-m", "svcgen", "--version"])[0] for _ in range(REPEATS)) * 1e3,
           "ms")
    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder)
        server, base = serve(scratch / "collector.json")
        try:
            with httpx.Client(base_url=base, timeout=60) as client:
                for document in descriptors(args.services, args.topics, scratch):
                    answer = client.post("/svc/invoke", content=envelope("svc:mesh:register", document))
                    assert answer.json()["isSuccessful"], answer.text
                events = traffic(args.services, args.topics)
                for start in range(0, len(events), 100):
                    batch = {"events": events[start:start + 100]}
                    client.post("/svc/invoke", content=envelope("svc:mesh:traces", batch))
                topics_held, asked = 0, {"limit": 1000}
                while asked:  # the fleet answer is paged: follow its topic cursor to count what the collector holds
                    answer = client.post("/svc/invoke", content=envelope("svc:mesh:query:fleet", asked))
                    fleet = orjson.loads(answer.json()["body"])
                    topics_held += len(fleet["topics"])
                    asked = {"limit": 1000, "topicsAfter": fleet["nextTopics"]} if fleet.get("nextTopics") else {}
            change = scratch / "s0-next.yaml"
            change.write_text(yaml.safe_dump(changed(service_manifest(0, args.topics)), sort_keys=False))
            command = [sys.executable, "-m", "svcgen", "can-i-deploy", str(change), "--collector", base]
            runs = [child(command) for _ in range(REPEATS)]
            assert all(code == 1 for _, _, code in runs), "the change is meant to be blocked"
            record(f"can-i-deploy, collector with {args.services} services / {topics_held} topics, whole process",
                   statistics.median(wall for wall, _, _ in runs), "s", target=2.0)
            record("  its CPU time (user + system)", statistics.median(cpu for _, cpu, _ in runs), "s")
        finally:
            server.terminate()
            server.wait(timeout=30)


def parser() -> argparse.ArgumentParser:
    options = argparse.ArgumentParser(description=__doc__)
    options.add_argument("--services", type=int, default=200)
    options.add_argument("--topics", type=int, default=25, help="topics per service")
    return options


def main(argv: list[str] | None = None) -> list[Figure]:
    return run("bench/candeploy.py", measure, argv, parser())


if __name__ == "__main__":
    main()
