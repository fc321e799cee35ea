"""The guard and outbound credentials without a server: key files, API keys, the verified-token cache, JWKS pacing
through an injected transport and clock, token providers cached until expiry, credentials per produced topic."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest

from svcgen.runtime import (
    ApiKey,
    ApiKeyScheme,
    BearerToken,
    Guard,
    HttpSender,
    Identity,
    JwtScheme,
    Principal,
    Registry,
    Result,
    Security,
    SecurityError,
    Service,
    Wiring,
    WiringError,
)
from svcgen.runtime._credentials import Credential, SenderWithCredentials
from tests.support.security import (
    AUDIENCE,
    ISSUER,
    hs256_with_public_key,
    jwks_of,
    public_pem,
    rsa_key,
    staff_scheme,
    tampered,
    token,
    unsigned,
)

SECRET = b"s3cret-that-is-long-enough-for-hs256-!!"


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def bearer(text: str) -> dict[str, str]:
    return {"authorization": f"Bearer {text}"}


def hs_security(tmp_path: Path) -> Security:
    secret = tmp_path / "staff.secret"
    secret.write_bytes(SECRET + b"\n")
    scheme = JwtScheme("staff", ISSUER, [AUDIENCE], ["HS256"], key=str(secret))
    return Security.declare([scheme], default=[{"staff": ["a"]}])


def test_shared_secret_key_file(tmp_path: Path) -> None:
    guard = Guard(hs_security(tmp_path)).load()
    needed = guard.security.default
    good = jwt.encode({"iss": ISSUER, "aud": AUDIENCE, "sub": "s", "exp": time.time() + 60, "scope": "a"}, SECRET)
    assert isinstance(run(guard.check(needed, bearer(good))), Principal)
    other = jwt.encode({"iss": ISSUER, "aud": AUDIENCE, "exp": time.time() + 60, "scope": "a"}, SECRET + b"x")
    refused = run(guard.check(needed, bearer(other)))
    assert isinstance(refused, Result) and refused.status == "unauthorized" and refused.detail is not None
    assert "bad signature" in refused.detail


def test_a_token_issued_by_a_clock_a_little_ahead_is_let_in_and_expiry_stays_exact(tmp_path: Path) -> None:
    """An issuer whose clock is a second ahead stamps `iat` (and often `nbf`) in the service's future: a token used
    at once, as a client-credentials call does, was refused "not yet valid" now and then."""
    guard = Guard(hs_security(tmp_path), remember_tokens=False).load()
    needed = guard.security.default
    now = int(time.time())

    def signed(**claims: Any) -> dict[str, str]:
        return bearer(jwt.encode({"iss": ISSUER, "aud": AUDIENCE, "sub": "s", "exp": now + 60, "scope": "a",
                                  **claims}, SECRET))  # fmt: skip

    assert isinstance(run(guard.check(needed, signed(iat=now + 2, nbf=now + 2))), Principal)
    for claims, reason in (({"nbf": now + 600}, "not yet valid"), ({"iat": now + 600}, "not yet valid"),
                           ({"exp": now - 1}, "expired")):  # fmt: skip
        refused = run(guard.check(needed, signed(**claims)))
        assert isinstance(refused, Result) and refused.detail == f"the credential is not valid: {reason}", claims


def test_pem_public_key_file_and_startup_errors(tmp_path: Path) -> None:
    key = rsa_key()
    pem = tmp_path / "staff.pem"
    pem.write_bytes(public_pem(key))
    guard = Guard(Security.declare([staff_scheme(key=str(pem))], default=["staff"])).load()
    assert isinstance(run(guard.check(guard.security.default, bearer(token(key)))), Principal)
    for hostile in (hs256_with_public_key(key), unsigned(), token(rsa_key()), tampered(token(key))):
        refused = run(guard.check(guard.security.default, bearer(hostile)))
        assert isinstance(refused, Result) and refused.status == "unauthorized"
    missing = Security.declare([staff_scheme(key=str(tmp_path / "nope.pem"))])
    with pytest.raises(SecurityError, match=r"nope\.pem cannot be read"):
        Guard(missing).load()
    wiring = Wiring(environ={})
    with pytest.raises(WiringError, match=r"nope\.pem"):
        wiring.guard(missing)
    short = tmp_path / "short.secret"
    short.write_text("tiny")
    with pytest.raises(SecurityError, match="shorter than 32 bytes"):
        Guard(Security.declare([JwtScheme("s", ISSUER, [AUDIENCE], ["HS256"], key=str(short))])).load()


def test_declarations_that_cannot_work_are_refused() -> None:
    with pytest.raises(SecurityError, match="never none"):
        JwtScheme("s", ISSUER, [AUDIENCE], ["none"], jwks="https://x/jwks")
    with pytest.raises(SecurityError, match="exactly one"):
        JwtScheme("s", ISSUER, [AUDIENCE], ["RS256"])
    with pytest.raises(SecurityError, match="not a declared scheme"):
        Security.declare([ApiKeyScheme("partner")], default=["staff"])
    with pytest.raises(SecurityError, match="not an apiKey scheme"):
        Guard(Security.declare([ApiKeyScheme("partner")]), api_keys={"other": {"k": "s"}})


def test_api_key_maps_to_its_subject() -> None:
    guard = Guard(Security.declare([ApiKeyScheme("partner", "X-Key")], default=["partner"]),
                  api_keys={"partner": {"key-a": "alpha", "key-b": "beta"}})  # fmt: skip
    principal = run(guard.check(guard.security.default, {"x-key": "key-b"}))
    assert principal == Principal("partner", "beta")
    assert run(guard.check(guard.security.default, {"x-key": "key-c"})).status == "unauthorized"
    assert run(guard.check((), {})) is None  # public


def test_an_api_key_read_with_its_trailing_newline_still_lets_its_caller_in() -> None:
    """A key wiring.py reads from a file or a secret store often ends in a newline, which no HTTP header can carry
    (and the guard strips what is presented): every call with that key was refused as an unknown API key."""
    wiring = Wiring(environ={})
    wiring.api_keys["partner"] = {"key-a\n": "alpha", " key-b\r\n": "beta"}
    guard = wiring.guard(Security.declare([ApiKeyScheme("partner", "X-Key")], default=["partner"]))
    assert run(guard.check(guard.security.default, {"x-key": "key-a"})) == Principal("partner", "alpha")
    assert run(guard.check(guard.security.default, {"x-key": "key-b"})) == Principal("partner", "beta")


class JwksTransport(httpx.AsyncBaseTransport):
    def __init__(self, document: Any) -> None:
        self.document = document
        self.requests = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        if isinstance(self.document, Exception):
            raise self.document
        return httpx.Response(200, json=self.document)


def test_jwks_refetch_on_unknown_kid_is_paced_by_the_clock() -> None:
    key, rotated = rsa_key(), rsa_key()
    transport = JwksTransport(jwks_of(key))
    now = [1000.0]
    guard = Guard(Security.declare([staff_scheme(jwks="https://id.test/jwks")], default=["staff"]),
                  transport=transport, clock=lambda: now[0], refetch_seconds=30)  # fmt: skip
    needed = guard.security.default
    assert isinstance(run(guard.check(needed, bearer(token(key)))), Principal)
    fresh = token(rotated, kid="key-2")
    assert run(guard.check(needed, bearer(fresh))).detail.endswith("unknown key")
    assert transport.requests == 1  # fetched just now: no refetch yet
    now[0] += 31
    for _ in range(5):
        assert run(guard.check(needed, bearer(fresh))).detail.endswith("unknown key")
    assert transport.requests == 2  # the first fetch, one refetch for the unknown kid; the rest waited
    transport.document = {"keys": [*jwks_of(key)["keys"], *jwks_of(rotated, "key-2")["keys"]]}
    now[0] += 31
    assert isinstance(run(guard.check(needed, bearer(fresh))), Principal)  # the rotated key, once allowed
    assert transport.requests == 3


def test_jwks_outage_keeps_the_last_keys_and_fails_health() -> None:
    key = rsa_key()
    transport = JwksTransport(jwks_of(key))
    now = [0.0]
    guard = Guard(Security.declare([staff_scheme(jwks="https://id.test/jwks")], default=["staff"]),
                  transport=transport, clock=lambda: now[0], cache_seconds=60)  # fmt: skip
    check = guard.health_check()
    assert check is not None
    assert run(check.check()).status == "ok"
    transport.document = httpx.ConnectError("down")
    now[0] += 61  # the cache expired: a refetch is due and fails
    good = token(key, jti="other")
    assert isinstance(run(guard.check(guard.security.default, bearer(good))), Principal)
    assert run(check.check()).status == "failed"


def test_a_failed_security_check_recovers_without_traffic_once_the_jwks_is_back() -> None:
    """A readiness probe on a failed health check takes the service out of its load balancer, so no call comes to
    refetch the keys: the check only recovered through a call, and so stayed failed after the JWKS was back."""
    key = rsa_key()
    transport = JwksTransport(jwks_of(key))
    now = [0.0]
    guard = Guard(Security.declare([staff_scheme(jwks="https://id.test/jwks")], default=["staff"]),
                  transport=transport, clock=lambda: now[0], cache_seconds=60, refetch_seconds=30)  # fmt: skip
    check = guard.health_check()
    assert check is not None
    assert run(check.check()).status == "ok"
    transport.document = httpx.ConnectError("down")
    now[0] += 61
    assert isinstance(run(guard.check(guard.security.default, bearer(token(key)))), Principal)  # the last good keys
    assert run(check.check()).status == "failed"
    transport.document = jwks_of(key)  # back, and no call comes
    now[0] += 31
    assert run(check.check()).status == "ok"


def test_bearer_token_is_fetched_once_per_lifetime() -> None:
    now = [1000.0]
    calls: list[float] = []

    async def provider() -> tuple[str, float]:
        calls.append(now[0])
        return f"t{len(calls)}", now[0] + 300

    credential = BearerToken(provider, clock=lambda: now[0])

    async def many() -> list[str]:
        return [(await credential.headers())["authorization"] for _ in range(50)]

    assert set(run(many())) == {"Bearer t1"} and len(calls) == 1
    now[0] += 280  # within the 30 s margin before expiry: replaced
    assert run(credential.headers())["authorization"] == "Bearer t2"


def test_bearer_token_reads_a_jwts_expiry() -> None:
    now = [time.time()]
    issued = jwt.encode({"exp": int(now[0]) + 3600}, SECRET)

    async def provider() -> str:
        return issued

    credential = BearerToken(provider, clock=lambda: now[0])
    run(credential.token())
    now[0] += 3000
    run(credential.token())
    assert credential.fetches == 1
    now[0] += 580
    run(credential.token())
    assert credential.fetches == 2


class Recorder:
    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, str]]] = []

    async def send(self, topic: str, payload: Any = None, headers: Any = None) -> Result[Any]:
        self.sent.append((topic, dict(headers or {})))
        return Result.ok()

    async def aclose(self) -> None:
        return None


def test_credentials_go_per_topic_and_the_callers_header_wins() -> None:
    recorder = Recorder()

    async def failing() -> str:
        raise RuntimeError("idp down")

    sender = SenderWithCredentials(recorder, {"a:b": ApiKey("X-Api-Key", "k1"), "c:d": BearerToken(failing)})

    async def go() -> list[Result[Any]]:
        return [
            await sender.send("a:b"),
            await sender.send("a:b", headers={"x-api-key": "mine"}),
            await sender.send("e:f"),
            await sender.send("c:d"),
        ]

    results = run(go())
    assert recorder.sent == [("a:b", {"x-api-key": "k1"}), ("a:b", {"x-api-key": "mine"}), ("e:f", {})]
    assert results[3].status == "unauthorized" and "RuntimeError" in (results[3].detail or "")


def test_a_credential_read_with_its_trailing_newline_still_goes_out() -> None:
    """A token or key read from a file or an environment variable often ends in a newline: the HTTP sender drops a
    header it cannot send, so the call went out with no credential and the target answered "a credential is
    required"."""
    received: list[httpx.Headers] = []

    def target(request: httpx.Request) -> httpx.Response:
        received.append(request.headers)
        return httpx.Response(200, json={})

    async def from_file() -> str:
        return "eyJ.token.text\n"

    credentials: dict[str, Credential] = {"a:b": ApiKey("x-api-key", "k1\r\n"), "c:d": BearerToken(from_file)}
    http = HttpSender("http://target.test/svc/invoke", transport=httpx.MockTransport(target))
    sender = SenderWithCredentials(http, credentials)

    async def go() -> list[Result[Any]]:
        async with http:
            return [await sender.send("a:b"), await sender.send("c:d")]

    assert all(result.is_successful for result in run(go()))
    assert received[0].get("x-api-key") == "k1"
    assert received[1].get("authorization") == "Bearer eyJ.token.text"


def test_wiring_refuses_credentials_for_a_topic_it_does_not_produce() -> None:
    wiring = Wiring(environ={})
    wiring.targets["a:b"] = "http://127.0.0.1:1/svc/invoke"
    wiring.credentials["x:y"] = ApiKey("x-api-key", "k")
    with pytest.raises(WiringError, match="x:y"):
        wiring.sender(["a:b"])


def test_callers_during_the_first_fetch_wait_for_it() -> None:
    key = rsa_key()

    class SlowJwks(JwksTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            await asyncio.sleep(0.05)
            return await super().handle_async_request(request)

    transport = SlowJwks(jwks_of(key))
    guard = Guard(Security.declare([staff_scheme(jwks="https://id.test/jwks")], default=["staff"]), transport=transport)
    good = bearer(token(key))

    async def burst() -> list[Any]:
        answers: list[Any] = await asyncio.gather(*(guard.check(guard.security.default, good) for _ in range(20)))
        return answers

    assert all(isinstance(answer, Principal) for answer in run(burst()))
    assert transport.requests == 1


def test_without_the_jwt_extra_the_start_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(__import__("sys").modules, "jwt", None)  # as if PyJWT were not installed
    security = Security.declare([staff_scheme(jwks="https://id.test/jwks")], default=["staff"])
    with pytest.raises(WiringError, match=r"pip install 'svcgen\[jwt\]'"):
        Wiring(environ={}).guard(security)
    guard = Guard(security)  # built anyway (as `svcgen build` does for the documents): refuses, never a 500
    answer = run(guard.check(guard.security.default, bearer("a.b.c")))
    assert answer.status == "unauthorized"
    api_only = Security.declare([ApiKeyScheme("partner")], default=["partner"])
    Wiring(environ={}).guard(api_only)  # API-key schemes need nothing more


def test_api_keys_from_the_environment_add_to_the_wiring() -> None:
    security = Security.declare([ApiKeyScheme("lab-partner")], default=["lab-partner"])
    wiring = Wiring(environ={"SVCGEN_API_KEYS_LAB_PARTNER": "acme=k-1==, beta=k-2"})
    wiring.api_keys["lab-partner"] = {"k-0": "gamma"}
    guard = wiring.guard(security)
    for key, subject in (("k-0", "gamma"), ("k-1==", "acme"), ("k-2", "beta")):
        assert run(guard.check(guard.security.default, {"x-api-key": key})) == Principal("lab-partner", subject)
    broken = Wiring(environ={"SVCGEN_API_KEYS_LAB_PARTNER": "acme=k-1,secret-without-subject"})
    with pytest.raises(WiringError, match="entry 2 is not subject=key") as raised:
        broken.guard(security)
    assert "secret-without-subject" not in str(raised.value)


def test_a_topic_naming_an_undeclared_scheme_stops_the_start() -> None:
    async def handle(request: dict[str, Any], context: Any) -> Result[dict[str, Any]]:
        return Result.ok({})

    registry = Registry()
    registry.add("a:b", handle, security=["staf"])
    with pytest.raises(SecurityError, match="requires scheme 'staf'"):
        Service(Identity("s"), registry, security=Security.declare([ApiKeyScheme("staff")]))


class TricklingJwks(httpx.AsyncBaseTransport):
    """A JWKS server that answers 200 and then sends its body a byte at a time, each within any read timeout."""

    def __init__(self, size: int = 1 << 30, pause: float = 0.02) -> None:
        self.size = size
        self.pause = pause

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "application/json"}, stream=self._body())

    def _body(self) -> httpx.AsyncByteStream:
        size, pause = self.size, self.pause

        class Stream(httpx.AsyncByteStream):
            async def __aiter__(self) -> Any:
                for _ in range(size // 4096 if not pause else size):
                    if pause:
                        await asyncio.sleep(pause)
                        yield b" "
                    else:
                        yield b" " * 4096

        return Stream()


def test_a_trickling_jwks_is_bounded_by_the_fetch_timeout_as_a_whole() -> None:
    key = rsa_key()
    security = Security.declare([staff_scheme(jwks="https://id.test/jwks")], default=["staff"])
    guard = Guard(security, transport=TricklingJwks(), fetch_timeout=0.3)

    async def timed() -> tuple[Any, float]:
        started = time.monotonic()
        answer = await asyncio.wait_for(guard.check(guard.security.default, bearer(token(key))), 5)
        return answer, time.monotonic() - started

    answer, took = run(timed())
    assert answer.status == "unauthorized" and took < 2
    check = guard.health_check()
    assert check is not None
    assert "TimeoutError" in (run(check.check()).detail or "")


def test_a_jwks_answering_an_http_error_says_which_in_the_health_check() -> None:
    """A JWKS URL with a typo (404) or an identity provider failing (503) were both told as "HTTPStatusError", which
    says nothing of which one the operator has to fix."""
    for status, told in ((404, "HTTP 404 Not Found"), (503, "HTTP 503 Service Unavailable")):
        transport = httpx.MockTransport(lambda request, status=status: httpx.Response(status))
        guard = Guard(Security.declare([staff_scheme(jwks="https://id.test/jwks")], default=["staff"]),
                      transport=transport)  # fmt: skip
        check = guard.health_check()
        assert check is not None
        result = run(check.check())
        assert result.status == "failed" and told in (result.detail or "")


def test_an_oversized_jwks_is_refused_unread() -> None:
    guard = Guard(Security.declare([staff_scheme(jwks="https://id.test/jwks")], default=["staff"]),
                  transport=TricklingJwks(size=64 << 20, pause=0))  # fmt: skip
    answer = run(guard.check(guard.security.default, bearer(token(rsa_key()))))
    assert answer.status == "unauthorized"
    check = guard.health_check()
    assert check is not None
    assert "larger than" in (run(check.check()).detail or "")


def test_a_key_file_that_does_not_fit_the_pinned_algorithms_stops_the_start(tmp_path: Path) -> None:
    pem = tmp_path / "staff.pem"
    pem.write_bytes(public_pem(rsa_key()))
    as_secret = Security.declare([JwtScheme("staff", ISSUER, [AUDIENCE], ["HS256"], key=str(pem))])
    with pytest.raises(SecurityError, match="does not fit algorithm HS256, which needs a shared secret"):
        Guard(as_secret).load()
    other_family = Security.declare([JwtScheme("staff", ISSUER, [AUDIENCE], ["ES256"], key=str(pem))])
    with pytest.raises(WiringError, match="does not fit algorithm ES256"):
        Wiring(environ={}).guard(other_family)
    Guard(Security.declare([JwtScheme("staff", ISSUER, [AUDIENCE], ["RS256", "PS256"], key=str(pem))])).load()


def test_one_bearer_challenge_however_many_jwt_schemes(tmp_path: Path) -> None:
    secret = tmp_path / "hs.secret"
    secret.write_bytes(SECRET)
    hs = JwtScheme("hs", ISSUER, [AUDIENCE], ["HS256"], key=str(secret))
    schemes: list[JwtScheme | ApiKeyScheme] = [staff_scheme(jwks="https://id.test/jwks"), hs, ApiKeyScheme("lab")]
    schemes.append(ApiKeyScheme("lab-2"))
    security = Security.declare(schemes, default=[{"staff": ["a"]}, {"hs": ["b"]}, "lab", "lab-2"])
    guard = Guard(security, api_keys={"lab": {"k" * 20: "acme"}}, transport=JwksTransport(jwks_of(rsa_key())))
    needed = security.default

    def challenge(credentials: dict[str, str]) -> str:
        answer = run(guard.check(needed, credentials))
        assert isinstance(answer, Result)
        return str(answer.headers["www-authenticate"])

    assert challenge({}) == 'Bearer realm="svc", ApiKey realm="svc", header="x-api-key"'
    assert challenge({"x-api-key": "wrong"}) == 'Bearer realm="svc", ApiKey realm="svc", header="x-api-key"'
    bad = bearer(jwt.encode({"iss": ISSUER, "aud": AUDIENCE, "exp": time.time() - 5}, SECRET))
    assert challenge(bad) == 'Bearer realm="svc", error="invalid_token", ApiKey realm="svc", header="x-api-key"'
    scopeless = bearer(jwt.encode({"iss": ISSUER, "aud": AUDIENCE, "exp": time.time() + 60}, SECRET))
    assert challenge(scopeless) == (
        'Bearer realm="svc", error="insufficient_scope", scope="a b", ApiKey realm="svc", header="x-api-key"'
    )


def test_the_reason_told_is_the_one_of_the_scheme_the_token_got_furthest_in(tmp_path: Path) -> None:
    key = rsa_key()
    secret = tmp_path / "hs.secret"
    secret.write_bytes(SECRET)
    hs = JwtScheme("hs", ISSUER, [AUDIENCE], ["HS256"], key=str(secret))
    security = Security.declare([hs, staff_scheme(jwks="https://id.test/jwks")], default=["hs", "staff"])
    guard = Guard(security, transport=JwksTransport(jwks_of(key))).load()
    for sent, reason in ((token(key, exp=1_000_000_000, iat=999_999_000), "expired"),
                         (token(key, aud="billing"), "wrong audience"),
                         (token(rsa_key()), "bad signature")):  # fmt: skip
        answer = run(guard.check(security.default, bearer(sent)))
        assert isinstance(answer, Result) and answer.detail == f"the credential is not valid: {reason}"


@pytest.mark.parametrize("header", ["x-correlation-id", "Traceparent", "idempotency-key", "svc-deadline", "svc-version",
                                    "content-type", "Host", " "])
def test_an_api_key_scheme_refuses_a_header_the_key_must_not_travel_in(header: str) -> None:
    # A key in x-correlation-id would ride into every trace event and the collector; in traceparent, onward.
    with pytest.raises(ValueError, match=r"^apiKey scheme 'partner': "):
        ApiKeyScheme("partner", header=header)
    assert ApiKeyScheme("partner", header="X-Partner-Key").header == "X-Partner-Key"
    assert ApiKeyScheme("partner", header="authorization").header == "authorization"  # an opaque `Bearer <key>`
