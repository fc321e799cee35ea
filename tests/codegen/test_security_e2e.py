"""The clinic example as a user runs it: built, served by uvicorn with API keys from its wiring and a JWKS behind
the wiring's transport; a second generated service calls it through its generated clients, with credentials per
produced topic from its wiring (a token provider called once, an API key)."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from svcgen.codegen.ownership import write_package
from svcgen.codegen.render import render_package
from svcgen.manifest import load_manifest
from svcgen.runtime import ApiKey, BearerToken, Wiring
from tests.support.codegen import REPO, build_example, imported
from tests.support.security import jwks_of, rsa_key, token
from tests.support.server import running

LAB_KEY = "lab-key-0b8e6f3d2a"


def clinic_token(key: Any, **claims: Any) -> str:
    return token(key, iss="https://id.clinic.example/", aud="clinic", **claims)


def frontdesk(tmp_path: Path) -> Path:
    owner = os.path.relpath(REPO / "examples" / "manifests" / "clinic.yaml", tmp_path)
    manifest = tmp_path / "frontdesk.yaml"
    manifest.write_text(
        "svcgen: 1\nservice: frontdesk\nproduces:\n"
        f"  - id: patients:get\n    from: {owner}\n  - id: results:record\n    from: {owner}\n",
        encoding="utf-8",
    )
    model = load_manifest(str(manifest))
    out = tmp_path / "out"
    write_package(render_package(model, out), out / model.package)
    return out


def test_generated_service_enforces_and_generated_clients_authenticate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    key = rsa_key()
    jwks = httpx.MockTransport(lambda request: httpx.Response(200, json=jwks_of(key)))
    build_example("clinic", tmp_path / "clinic")
    fronts = frontdesk(tmp_path)
    with imported(tmp_path / "clinic", "clinic_service"):
        wiring = Wiring(environ={}, transport=jwks)
        wiring.api_keys["lab"] = {LAB_KEY: "acme-labs"}
        app = importlib.import_module("clinic_service.service").create_app(setup=wiring)
        with running(app) as url, httpx.Client(base_url=url, timeout=10) as client:
            # Enforced as declared: the handler stubs answer 501 once a caller is let in.
            assert client.get("/patients/p-1").status_code == 401
            reader = {"authorization": f"Bearer {clinic_token(key, scope='patients:read')}"}
            assert client.get("/patients/p-1", headers=reader).status_code == 501
            writer = {"authorization": f"Bearer {clinic_token(key, scope='results:write')}"}
            assert client.get("/patients/p-1", headers=writer).status_code == 403
            result = {"test": "hb", "value": 13.5}
            assert client.post("/patients/p-1/results", json=result, headers={"x-api-key": LAB_KEY}).status_code == 501
            assert client.post("/patients/p-1/results", json=result, headers=writer).status_code == 501
            assert client.post("/patients/p-1/results", json=result).status_code == 401
            assert client.get("/opening").status_code == 501  # public
            document = client.get("/svc/http-api.json").json()
            assert set(document["components"]["securitySchemes"]) == {"staff", "lab"}
            assert 'href="#security-staff"' in client.get("/svc/docs").text

            with imported(fronts, "frontdesk_service"):
                calls = 0

                async def provider() -> str:
                    nonlocal calls
                    calls += 1
                    return clinic_token(key, scope="patients:read")

                outbound = Wiring(environ={})
                outbound.targets.update({"patients:get": f"{url}/svc/invoke", "results:record": f"{url}/svc/invoke"})
                outbound.credentials["patients:get"] = BearerToken(provider)
                outbound.credentials["results:record"] = ApiKey("x-api-key", LAB_KEY)
                models = importlib.import_module("frontdesk_service.models")
                clients_module = importlib.import_module("frontdesk_service.clients")

                async def call() -> list[str]:
                    sender = outbound.sender(["patients:get", "results:record"])
                    clients = clients_module.Clients(sender)
                    try:
                        ref = models.clinic_PatientRef(patient_id="p")  # clinic's type, under its namespace
                        answers = [await clients.patients_get(ref) for _ in range(3)]
                        lab = models.clinic_LabResult(patient_id="p", test="hb", value=13.5)
                        answers.append(await clients.results_record(lab))
                        bare = clients_module.Clients(f"{url}/svc/invoke")
                        answers.append(await bare.patients_get(ref))
                        await bare.aclose()
                        return [answer.status for answer in answers]
                    finally:
                        await sender.aclose()  # type: ignore[attr-defined]

                statuses = asyncio.run(call())
                assert statuses == ["not-implemented"] * 4 + ["unauthorized"]
                assert calls == 1  # one token for three calls: cached until it expires


def test_openapi_json_is_unchanged_by_security_and_invoke_false_turns_the_faces_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    text = (REPO / "examples" / "manifests" / "clinic.yaml").read_text(encoding="utf-8")
    plain = "\n".join(line for line in text.splitlines() if "security: " not in line)
    plain = plain[: plain.index("security:")] + plain[plain.index("types:") :]
    documents = {}
    closed = text.replace("title: Clinic API", "title: Clinic API\ninvoke: false")
    for name, manifest in (("secured", text), ("closed", closed), ("plain", plain)):
        path = tmp_path / name / "clinic.yaml"
        path.parent.mkdir()
        path.write_text(manifest, encoding="utf-8")
        model = load_manifest(str(path))
        files = {generated.relpath: generated.text for generated in render_package(model, tmp_path / name)}
        documents[name] = files
    assert documents["secured"]["contracts/openapi.json"] == documents["plain"]["contracts/openapi.json"]
    assert "securitySchemes" in documents["secured"]["contracts/http-api.json"]
    assert "securitySchemes" not in documents["plain"]["contracts/http-api.json"]
    assert "invoke=False" in documents["closed"]["service.py"]
    # No invoke face served, none described: the committed document lists no operation, as the app serves it.
    assert json.loads(documents["closed"]["contracts/openapi.json"])["paths"] == {}
    model = load_manifest(str(tmp_path / "closed" / "clinic.yaml"))
    write_package(render_package(model, tmp_path / "closed"), tmp_path / "closed" / "clinic_service")
    with imported(tmp_path / "closed", "clinic_service"):
        app = importlib.import_module("clinic_service.service").create_app(setup=Wiring(environ={}))
        with running(app) as url, httpx.Client(base_url=url, timeout=10) as client:
            assert client.post("/svc/invoke", json={"topic": "svc:spec"}).status_code == 404
            assert client.post("/svc/invoke/clinic:opening", json={}).status_code == 404
            assert client.get("/opening").status_code == 501
            committed = documents["closed"]["contracts/openapi.json"]
            assert client.get("/svc/openapi.json").text == committed
