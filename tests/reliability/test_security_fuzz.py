"""The clinic example (JWT and API-key schemes, a public topic) served for real, fuzzed through its HTTP API document
by schemathesis with a valid token: no answer is a 5xx, every answer is documented, and schemathesis' own
`ignored_auth` check finds no operation that serves without the credential. Then clients generated from the same
document authenticate: openapi-python-client's `AuthenticatedClient` and an openapi-typescript client (npm)."""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import shutil
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
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import Case, GenerationMode
from schemathesis.specs.openapi.checks import ignored_auth, positive_data_acceptance

from svcgen.runtime import Context, Registry, Result, Wiring
from tests.support.codegen import REPO
from tests.support.security import jwks_of, rsa_key, token
from tests.support.server import running

MAX_EXAMPLES = 20
"""Per operation and mode: 3 operations x 2 modes, about 120 requests."""
LAB_KEY = "lab-key-fuzz-5a1c"


def clinic_handlers(models: ModuleType) -> dict[str, Callable[[Any], Any]]:
    return {
        "patients:get": lambda request: Result.ok(models.Patient(patient_id=request.patient_id, name="Ada")),
        "results:record": lambda request: Result.created(models.Recorded(result_id="r-1")),
        "clinic:opening": lambda request: Result.ok([models.Opening(ward="A", hours="8-18")]),
    }


def with_handlers(original: Callable[[], Registry], answers: dict[str, Callable[[Any], Any]]) -> Any:
    def build_registry() -> Registry:
        registry = Registry()
        for registration in original():
            answer = answers[registration.topic]

            async def handle(request: Any, context: Context, answer: Any = answer) -> Result[Any]:
                result: Result[Any] = answer(request)
                return result

            security = None if registration.security is None else [dict(entry) for entry in registration.security]
            registry.add(registration.topic, handle, version=registration.version,
                         request=registration.request_type, response=registration.response_type,
                         summary=registration.summary, success=registration.success,
                         failures=registration.failures, security=security,
                         idempotent=registration.idempotent)  # fmt: skip
        return registry

    return build_registry


def clinic_token(key: RSAPrivateKey) -> str:
    return token(key, iss="https://id.clinic.example/", aud="clinic", scope="patients:read results:write")


@pytest.fixture(scope="module")
def key() -> RSAPrivateKey:
    return rsa_key()


@pytest.fixture(scope="module")
def clinic(tmp_path_factory: pytest.TempPathFactory, key: RSAPrivateKey) -> Iterator[tuple[str, Path]]:
    """(base URL, http-api.json) of the clinic example served with declared handlers, JWKS behind the wiring."""
    out = tmp_path_factory.mktemp("clinic")
    built = subprocess.run(
        [sys.executable, "-m", "svcgen", "build", str(REPO / "examples" / "manifests" / "clinic.yaml"), "-o", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    sys.path.insert(0, str(out))
    try:
        module = importlib.import_module("clinic_service.service")
        models = importlib.import_module("clinic_service.models")
        registry = with_handlers(module.build_registry, clinic_handlers(models))
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(module, "DEFINITION", dataclasses.replace(module.DEFINITION, registry=registry))
            jwks = httpx.MockTransport(lambda request: httpx.Response(200, json=jwks_of(key)))
            wiring = Wiring(environ={}, transport=jwks)
            wiring.api_keys["lab"] = {LAB_KEY: "acme-labs"}
            with running(module.create_app(setup=wiring)) as base:
                yield base, out / "clinic_service" / "contracts" / "http-api.json"
    finally:
        sys.path.remove(str(out))
        for name in [name for name in sys.modules if name == "clinic_service" or name.startswith("clinic_service.")]:
            del sys.modules[name]


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=str)
def test_schemathesis_with_a_valid_token_finds_no_5xx(
    clinic: tuple[str, Path], key: RSAPrivateKey, mode: GenerationMode
) -> None:
    base, _ = clinic
    schema = schemathesis.openapi.from_url(f"{base}/svc/http-api.json")
    operations = [result.ok() for result in schema.get_all_operations()]  # type: ignore[union-attr]
    assert len(operations) == 3
    credentials = {"authorization": f"Bearer {clinic_token(key)}"}
    codes: list[int] = []
    with requests.Session() as session:
        for operation in operations:

            @settings(max_examples=MAX_EXAMPLES, derandomize=True, database=None, deadline=None,
                      suppress_health_check=list(HealthCheck))  # fmt: skip
            @given(case=operation.as_strategy(mode))
            def fuzz(case: Case[Any]) -> None:
                response = case.call(base_url=base, session=session, timeout=10, headers=credentials)
                codes.append(response.status_code)
                assert response.status_code < 500, f"{case.operation.label}: {response.status_code} {response.text}"
                # Every check schemathesis has, schema-valid floats for integers aside; `ignored_auth` replaces one
                # credential with a bad one but keeps the other, which our "any one suffices" rightly lets in, so
                # the same request without any credential is checked below instead.
                case.validate_response(response, excluded_checks=[positive_data_acceptance, ignored_auth],
                                       headers=credentials)  # fmt: skip
                protected = case.operation.definition.raw.get("security") != []
                carried = {name.lower() for name in case.headers or {}}
                if protected and not carried & {"authorization", "x-api-key"}:
                    anonymous = case.call(base_url=base, session=session, timeout=10)
                    assert anonymous.status_code == 401, (case.operation.label, anonymous.status_code)

            try:
                fuzz()
            except Unsatisfiable:
                assert mode is GenerationMode.NEGATIVE
    assert codes and max(codes) < 500


def test_openapi_python_client_authenticates(clinic: tuple[str, Path], key: RSAPrivateKey,
                                             tmp_path: Path) -> None:  # fmt: skip
    base, document = clinic
    generator = Path(sys.executable).with_name("openapi-python-client")
    environment = {**os.environ, "PATH": f"{generator.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    generated = subprocess.run(
        [str(generator), "generate", "--path", str(document), "--output-path", str(tmp_path / "clinic_client"),
         "--meta", "none"],
        capture_output=True, text=True, timeout=300, env=environment,
    )  # fmt: skip
    assert generated.returncode == 0, generated.stdout + generated.stderr
    sys.path.insert(0, str(tmp_path))
    try:
        client_module = importlib.import_module("clinic_client")
        operation = importlib.import_module("clinic_client.api.default.patients_get")
        anonymous = client_module.Client(base_url=base)
        assert operation.sync_detailed("p-1", client=anonymous).status_code == 401
        authenticated = client_module.AuthenticatedClient(base_url=base, token=clinic_token(key))
        answer = operation.sync_detailed("p-1", client=authenticated)
        assert answer.status_code == 200
        assert answer.parsed.patient_id == "p-1"
    finally:
        sys.path.remove(str(tmp_path))
        for name in [name for name in sys.modules if name == "clinic_client" or name.startswith("clinic_client.")]:
            del sys.modules[name]


TYPESCRIPT_CLIENT = """
import createClient from "openapi-fetch";
const [base, token, key] = process.argv.slice(2);
const client = createClient({ baseUrl: base });
const out = {};
out.anonymous = (await client.GET("/patients/{patientId}", { params: { path: { patientId: "p-1" } } })).response.status;
const staff = createClient({ baseUrl: base, headers: { Authorization: `Bearer ${token}` } });
const got = await staff.GET("/patients/{patientId}", { params: { path: { patientId: "p-1" } } });
out.staff = got.response.status; out.patientId = got.data.patientId;
const lab = createClient({ baseUrl: base, headers: { "x-api-key": key } });
const posted = await lab.POST("/patients/{patientId}/results", {
  params: { path: { patientId: "p-1" } }, body: { test: "hb", value: 13.5 } });
out.lab = posted.response.status;
console.log(JSON.stringify(out));
"""


def test_openapi_typescript_client_authenticates(clinic: tuple[str, Path], key: RSAPrivateKey, tmp_path: Path) -> None:
    npm = shutil.which("npm")
    assert npm is not None, "npm is needed for the openapi-typescript client"
    base, document = clinic
    work = tmp_path / "ts"
    work.mkdir()
    (work / "package.json").write_text(json.dumps({"type": "module", "private": True}))
    installed = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--silent", "openapi-typescript@7", "openapi-fetch@0.13"],
        cwd=work, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr
    types = subprocess.run(
        [str(work / "node_modules" / ".bin" / "openapi-typescript"), str(document), "-o", str(work / "clinic.d.ts")],
        cwd=work, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert types.returncode == 0, types.stdout + types.stderr
    declared = (work / "clinic.d.ts").read_text()
    assert '"/patients/{patientId}"' in declared and "patientId: string" in declared
    (work / "client.mjs").write_text(TYPESCRIPT_CLIENT)
    ran = subprocess.run(
        ["node", "client.mjs", base, clinic_token(key), LAB_KEY], cwd=work, capture_output=True, text=True, timeout=60
    )
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == {"anonymous": 401, "staff": 200, "patientId": "p-1", "lab": 201}
