"""Keys, tokens, a JWKS server and a small clinic service behind `security`, for the security tests."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey

from svcgen.runtime import (
    ApiKeyScheme,
    Context,
    Guard,
    HttpApp,
    Identity,
    JwtScheme,
    Principal,
    Registry,
    Result,
    Route,
    Security,
    Service,
)
from tests.support.server import running

ISSUER = "https://id.example.test/"
AUDIENCE = "clinic"
KID = "key-1"


def rsa_key() -> RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def public_pem(key: RSAPrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def jwks_of(key: RSAPrivateKey, kid: str = KID) -> dict[str, Any]:
    entry = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    return {"keys": [{**entry, "kid": kid, "use": "sig", "alg": "RS256"}]}


def token(key: Any, *, kid: str | None = KID, algorithm: str = "RS256", **claims: Any) -> str:
    now = int(time.time())
    body: dict[str, Any] = {"iss": ISSUER, "aud": AUDIENCE, "sub": "dr-who", "iat": now, "exp": now + 600}
    body.update(claims)
    body = {name: value for name, value in body.items() if value is not None}
    headers = {"kid": kid} if kid is not None else None
    return jwt.encode(body, key, algorithm=algorithm, headers=headers)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def hs256_with_public_key(key: RSAPrivateKey) -> str:
    """The algorithm-confusion attack: HS256 signed with the RS256 public key's PEM as the shared secret (built by
    hand, as PyJWT refuses to make it)."""
    now = int(time.time())
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": KID}).encode())
    payload = _b64(json.dumps({"iss": ISSUER, "aud": AUDIENCE, "sub": "mallory", "exp": now + 600}).encode())
    signature = hmac.new(public_pem(key), f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{_b64(signature)}"


def unsigned(**claims: Any) -> str:
    """alg none: no signature at all."""
    now = int(time.time())
    header = _b64(json.dumps({"alg": "none", "typ": "JWT", "kid": KID}).encode())
    body = {"iss": ISSUER, "aud": AUDIENCE, "sub": "mallory", "exp": now + 600, **claims}
    return f"{header}.{_b64(json.dumps(body).encode())}."


def tampered(valid: str) -> str:
    """A valid token whose payload was swapped after signing (more scopes, another subject)."""
    header, payload, signature = valid.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims.update(sub="mallory", scope="patients:read patients:write admin")
    return f"{header}.{_b64(json.dumps(claims).encode())}.{signature}"


@dataclass
class PatientQuery:
    patient_id: str


@dataclass
class Patient:
    patient_id: str
    seen_by: str = ""
    scopes: list[str] = field(default_factory=list)


@dataclass
class Calls:
    """What reached the handlers: (topic, principal)."""

    seen: list[tuple[str, Principal | None]] = field(default_factory=list)


def clinic_service(guard: Guard | Security, calls: Calls, name: str = "clinic") -> Service:
    registry = Registry()

    async def get(request: PatientQuery, context: Context) -> Result[Patient]:
        calls.seen.append(("patients:get", context.principal))
        principal = context.principal
        who = principal.subject if principal is not None else ""
        scopes = sorted(principal.scopes) if principal is not None else []
        return Result.ok(Patient(request.patient_id, who, scopes))

    async def directory(request: PatientQuery, context: Context) -> Result[Patient]:
        calls.seen.append(("patients:directory", context.principal))
        return Result.ok(Patient(request.patient_id))

    registry.add("patients:get", get, request=PatientQuery, response=Patient,
                 security=[{"staff": ["patients:read"]}, "partner"])  # fmt: skip
    registry.add("patients:directory", directory, request=PatientQuery, response=Patient, security=[])
    registry.add("patients:note", get, request=PatientQuery, response=Patient)  # the default: staff
    return Service(Identity(name), registry, security=guard)


CLINIC_ROUTES = [
    Route.parse("GET /patients/{patientId}", "patients:get"),
    Route.parse("GET /directory/{patientId}", "patients:directory"),
    Route.parse("POST /notes", "patients:note"),
]


def staff_scheme(jwks: str = "", key: str = "") -> JwtScheme:
    return JwtScheme("staff", ISSUER, (AUDIENCE,), ("RS256",), jwks=jwks, key=key)


def clinic_security(jwks: str = "", key: str = "", well_known: list[Any] | None = None) -> Security:
    return Security.declare(
        (staff_scheme(jwks, key), ApiKeyScheme("partner", "x-api-key")), default=["staff"], well_known=well_known or []
    )


class JwksServer:
    """A JWKS endpoint on a real server: `/jwks` the keys, `/hang` never answers, `/garbage` is not JSON, `/empty`
    has no keys. `hits` counts requests per path."""

    def __init__(self, jwks: dict[str, Any]) -> None:
        self.jwks = jwks
        self.hits: dict[str, int] = {}

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        path = scope["path"]
        self.hits[path] = self.hits.get(path, 0) + 1
        if path == "/hang":
            await asyncio.sleep(30)
        body = {"/jwks": json.dumps(self.jwks).encode(), "/empty": b'{"keys": []}'}.get(path, b"<html>garbage")
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})


@contextlib.contextmanager
def jwks_server(jwks: dict[str, Any]) -> Iterator[tuple[str, JwksServer]]:
    server = JwksServer(jwks)
    with running(server, timeout_graceful_shutdown=1) as base:
        yield base, server


def serve_clinic(guard: Guard, calls: Calls) -> contextlib.AbstractContextManager[str]:
    return running(HttpApp(clinic_service(guard, calls), CLINIC_ROUTES))
