"""Hostile credentials against a real server (uvicorn on 127.0.0.1, a JWKS endpoint on another): every one is 401
with WWW-Authenticate and no handler runs; a valid token reaches the handler as `context.principal`, on every face."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey

from svcgen.runtime import Guard
from tests.support.security import (
    AUDIENCE,
    ISSUER,
    Calls,
    clinic_security,
    hs256_with_public_key,
    jwks_of,
    jwks_server,
    rsa_key,
    serve_clinic,
    tampered,
    token,
    unsigned,
)

PARTNER_KEY = "pk-7f3a9c1e5b2d4f60a8e9"


@pytest.fixture(scope="module")
def signing_key() -> RSAPrivateKey:
    return rsa_key()


@pytest.fixture(scope="module")
def other_key() -> RSAPrivateKey:
    return rsa_key()


@pytest.fixture(scope="module")
def jwks(signing_key: RSAPrivateKey) -> Iterator[tuple[str, Any]]:
    with jwks_server(jwks_of(signing_key)) as served:
        yield served


@pytest.fixture
def clinic(jwks: tuple[str, Any]) -> Iterator[tuple[httpx.Client, Calls]]:
    base, _ = jwks
    calls = Calls()
    guard = Guard(clinic_security(jwks=f"{base}/jwks"), api_keys={"partner": {PARTNER_KEY: "acme-labs"}},
                  fetch_timeout=2.0)  # fmt: skip
    with serve_clinic(guard, calls) as url, httpx.Client(base_url=url, timeout=10) as client:
        yield client, calls


def hostile_tokens(signing_key: RSAPrivateKey, other_key: RSAPrivateKey) -> dict[str, str]:
    valid = token(signing_key, scope="patients:read")
    return {
        "alg none": unsigned(scope="patients:read"),
        "RS256 switched to HS256 with the public key as secret": hs256_with_public_key(signing_key),
        "expired": token(signing_key, scope="patients:read", exp=1_000_000_000, iat=999_999_000),
        "not yet valid": token(signing_key, scope="patients:read", nbf=4_000_000_000),
        "wrong issuer": token(signing_key, scope="patients:read", iss="https://evil.example.test/"),
        "wrong audience": token(signing_key, scope="patients:read", aud="billing"),
        "unknown kid": token(other_key, kid="key-9", scope="patients:read"),
        "known kid, other key": token(other_key, scope="patients:read"),
        "tampered payload": tampered(valid),
        "no exp": token(signing_key, scope="patients:read", exp=None),
        "100 KB token": "e" * 100_000,
        "garbage": "not.a.jwt",
        "empty bearer": "",
    }


def test_every_hostile_token_is_401_and_reaches_no_handler(
    clinic: tuple[httpx.Client, Calls], signing_key: RSAPrivateKey, other_key: RSAPrivateKey
) -> None:
    client, calls = clinic
    for name, bad in hostile_tokens(signing_key, other_key).items():
        for method, path in (("GET", "/patients/p-1"), ("POST", "/notes")):
            sent = {"authorization": f"Bearer {bad}".strip()}
            answer = client.request(method, path, headers=sent, json={"patientId": "p"})
            assert answer.status_code == 401, (name, path, answer.status_code, answer.text[:200])
            assert answer.headers["www-authenticate"].startswith("Bearer realm="), name
            assert answer.json()["status"] == "unauthorized", name
            assert bad[:40] not in answer.text or not bad, name  # the credential is never echoed
    assert calls.seen == []


def test_missing_credential_is_401_with_a_challenge_per_scheme(clinic: tuple[httpx.Client, Calls]) -> None:
    client, calls = clinic
    answer = client.get("/patients/p-1")
    assert answer.status_code == 401
    challenge = answer.headers["www-authenticate"]
    assert 'Bearer realm="svc"' in challenge and 'ApiKey realm="svc", header="x-api-key"' in challenge
    assert "error=" not in challenge  # RFC 6750: no error code when no credential was sent
    for basic in ("Basic dXNlcjpwYXNz", "bearer", "Token abc"):
        assert client.get("/patients/p-1", headers={"authorization": basic}).status_code == 401
    assert calls.seen == []


def test_an_authorization_header_that_is_not_bearer_says_so(
    clinic: tuple[httpx.Client, Calls], signing_key: RSAPrivateKey
) -> None:
    """A token sent without its `Bearer ` (or after a tab, or under another scheme) was told "a credential is
    required", as if nothing had been sent."""
    client, calls = clinic
    good = token(signing_key, scope="patients:read")
    for sent in (good, f"Bearer\t{good}", f"JWT {good}", "Basic dXNlcjpwYXNz"):
        answer = client.get("/patients/p-1", headers={"authorization": sent})
        assert answer.status_code == 401, sent
        assert answer.json()["detail"] == "the credential is not valid: the Authorization header is not Bearer <token>"
        assert "error=" not in answer.headers["www-authenticate"]  # RFC 6750: not a bearer token, no error code
        assert good[:40] not in answer.text
    assert calls.seen == []


def test_valid_token_reaches_the_handler_as_principal(
    clinic: tuple[httpx.Client, Calls], signing_key: RSAPrivateKey
) -> None:
    client, calls = clinic
    good = token(signing_key, scope="patients:read patients:write")
    answer = client.get("/patients/p-1", headers={"authorization": f"Bearer {good}"})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"patientId": "p-1", "seenBy": "dr-who", "scopes": ["patients:read", "patients:write"]}
    (topic, principal), = calls.seen
    assert topic == "patients:get" and principal is not None
    assert principal.scheme == "staff" and principal.claims["iss"] == ISSUER and principal.claims["aud"] == AUDIENCE


@pytest.mark.parametrize("claim", ["scp", "scope"])
def test_a_scope_list_is_read_as_scopes(
    clinic: tuple[httpx.Client, Calls], signing_key: RSAPrivateKey, claim: str
) -> None:
    # Identity providers send either claim as a list too; a `scope` list was ignored (403).
    client, _ = clinic
    claims: dict[str, Any] = {claim: ["patients:read"]}
    good = token(signing_key, **claims)
    assert client.get("/patients/p-1", headers={"authorization": f"Bearer {good}"}).status_code == 200


def test_missing_scope_is_403_insufficient_scope(
    clinic: tuple[httpx.Client, Calls], signing_key: RSAPrivateKey
) -> None:
    client, calls = clinic
    answer = client.get("/patients/p-1", headers={"authorization": f"Bearer {token(signing_key, scope='other')}"})
    assert answer.status_code == 403
    assert answer.json()["status"] == "forbidden"
    assert 'error="insufficient_scope"' in answer.headers["www-authenticate"]
    assert 'scope="patients:read"' in answer.headers["www-authenticate"]
    assert calls.seen == []
    # the default requirement (staff, no scope) lets the same token in elsewhere
    noted = client.post("/notes", json={"patientId": "p"}, headers={"authorization": f"Bearer {token(signing_key)}"})
    assert noted.status_code == 200


def test_api_key_is_one_way_in(clinic: tuple[httpx.Client, Calls]) -> None:
    client, calls = clinic
    answer = client.get("/patients/p-1", headers={"x-api-key": PARTNER_KEY})
    assert answer.status_code == 200 and answer.json()["seenBy"] == "acme-labs"
    for wrong in ("", PARTNER_KEY[:-1], PARTNER_KEY + "0", PARTNER_KEY.upper()):
        refused = client.get("/patients/p-1", headers={"x-api-key": wrong})
        assert refused.status_code == 401, wrong
    # an API key is not a staff token: the default requirement still refuses it
    assert client.post("/notes", json={"patientId": "p"}, headers={"x-api-key": PARTNER_KEY}).status_code == 401
    assert len(calls.seen) == 1


def test_public_topic_needs_nothing(clinic: tuple[httpx.Client, Calls]) -> None:
    client, calls = clinic
    assert client.get("/directory/p-1").status_code == 200
    assert calls.seen == [("patients:directory", None)]
    assert client.get("/svc/health").status_code == 200


def test_every_face_enforces_alike_and_envelope_headers_never_authenticate(
    clinic: tuple[httpx.Client, Calls], signing_key: RSAPrivateKey
) -> None:
    client, calls = clinic
    good = f"Bearer {token(signing_key, scope='patients:read')}"
    body = json.dumps({"patientId": "p-1"})
    inner = {"topic": "patients:get", "headers": {"authorization": good}, "body": body}
    enveloped = client.post("/svc/invoke", json=inner)
    assert enveloped.status_code == 200
    assert enveloped.json()["statusCode"] == "unauthorized"
    assert "www-authenticate" in enveloped.json()["headers"]
    faced = client.post("/svc/invoke/patients:get", json={"patientId": "p-1"})
    assert faced.status_code == 401
    unknown = client.post("/svc/invoke", json={"topic": "patients:nothing", "body": "{}"})
    assert unknown.json()["statusCode"] == "unauthorized"  # an anonymous caller learns nothing of the topics
    assert calls.seen == []
    # the same token on the transport's own headers is let in, on both faces
    outer = {"topic": "patients:get", "body": body}
    assert client.post("/svc/invoke", json=outer, headers={"authorization": good}).json()["statusCode"] == "ok"
    faced = client.post("/svc/invoke/patients:get", json={"patientId": "p-1"}, headers={"authorization": good})
    assert faced.status_code == 200
    assert len(calls.seen) == 2


def test_credential_checked_before_the_body_is_decoded(clinic: tuple[httpx.Client, Calls]) -> None:
    client, _ = clinic
    answer = client.post("/notes", content=b"{not json")
    assert answer.status_code == 401  # not 400: an anonymous caller gets nothing parsed


@pytest.mark.parametrize("path", ["/hang", "/garbage", "/empty", "/missing-port"])
def test_unusable_jwks_is_401_and_a_failed_health_check(
    jwks: tuple[str, Any], signing_key: RSAPrivateKey, path: str
) -> None:
    base, _ = jwks
    url = "http://127.0.0.1:9/jwks" if path == "/missing-port" else f"{base}{path}"
    calls = Calls()
    guard = Guard(clinic_security(jwks=url), fetch_timeout=0.5)
    with serve_clinic(guard, calls) as served, httpx.Client(base_url=served, timeout=10) as client:
        good = token(signing_key, scope="patients:read")
        answer = client.get("/patients/p-1", headers={"authorization": f"Bearer {good}"})
        assert answer.status_code == 401, answer.text
        assert "www-authenticate" in answer.headers
        health = client.get("/svc/health")
        assert health.status_code == 503
        assert health.json()["healthChecks"]["security"]["status"] == "failed"
    assert calls.seen == []


def test_unknown_kid_refetches_at_a_bounded_rate(jwks: tuple[str, Any], other_key: RSAPrivateKey) -> None:
    base, server = jwks
    calls = Calls()
    guard = Guard(clinic_security(jwks=f"{base}/jwks"), refetch_seconds=3600)
    before = server.hits.get("/jwks", 0)
    with serve_clinic(guard, calls) as served, httpx.Client(base_url=served, timeout=10) as client:
        for n in range(20):
            forged = token(other_key, kid=f"rotated-{n}", scope="patients:read")
            assert client.get("/patients/p", headers={"authorization": f"Bearer {forged}"}).status_code == 401
    assert server.hits.get("/jwks", 0) - before == 1  # the first fetch only; no refetch storm


def test_well_known_documents_follow_security_well_known(jwks: tuple[str, Any], signing_key: RSAPrivateKey) -> None:
    base, _ = jwks
    guard = Guard(clinic_security(jwks=f"{base}/jwks", well_known=["staff"]))
    with serve_clinic(guard, Calls()) as served, httpx.Client(base_url=served, timeout=10) as client:
        for path in ("/svc/spec", "/svc/openapi.json", "/svc/http-api.json", "/svc/docs"):
            assert client.get(path).status_code == 401, path
        assert client.post("/svc/invoke", json={"topic": "svc:spec"}).json()["statusCode"] == "unauthorized"
        authorized = {"authorization": f"Bearer {token(signing_key)}"}
        document = client.get("/svc/http-api.json", headers=authorized)
        assert document.status_code == 200
        assert json.loads(document.text)["components"]["securitySchemes"]["staff"]["scheme"] == "bearer"
        assert client.get("/svc/health").status_code == 200  # health stays public
