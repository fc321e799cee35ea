"""Who may call each topic: the schemes a manifest declares, checked before a request's body is decoded.

`Security` is the declaration (generated from `security:`); `Guard` enforces it for one process, with the API
keys wiring.py supplies. Credentials come from the transport's own headers only (HTTP request headers, NATS
message headers), never from the `headers` inside an envelope. JWTs are verified by PyJWT (with `cryptography`)
against pinned algorithms; keys come from a PEM file, a shared-secret file or a JWKS fetched over httpx, cached,
and refetched on an unknown `kid` at most once per `refetch_seconds`. A credential never reaches a log.

- No credential, or a malformed, expired, not-yet-valid or wrongly signed token, a wrong issuer or audience, an
  unknown key, an algorithm not pinned: 401 `unauthorized` with `WWW-Authenticate`.
- A valid credential without a required scope: 403 `forbidden`, `WWW-Authenticate` with `insufficient_scope`.
- Anything while the JWKS cannot be fetched: 401, and the `security` health check fails.

JWT schemes need the `jwt` extra (`pip install 'svcgen[jwt]'`); without it `Guard.load` (at startup) says so.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import httpx
import orjson

from ._context import CORRELATION_HEADER, TRACEPARENT
from ._deadline import DEADLINE_HEADER
from ._health import HealthCheck, HealthCheckResult
from ._idempotency import IDEMPOTENCY_KEY_HEADER
from ._result import Result
from ._topics import VERSION_HEADERS

if TYPE_CHECKING:
    from ._registry import Registration

logger = logging.getLogger("svcgen.security")

Requirement: TypeAlias = tuple[tuple[str, tuple[str, ...]], ...]
"""One way in: (scheme, scopes it needs) for every scheme it names, all of them."""
Requirements: TypeAlias = tuple[Requirement, ...]
"""Any one requirement lets the caller in; none at all is public."""
RequirementsSpec: TypeAlias = Sequence[str | Mapping[str, Sequence[str]]]
"""As written: `["staff"]`, `[{"staff": ["patients:read"]}]`, `[]` for public."""

WWW_AUTHENTICATE_HEADER: Final = "www-authenticate"
"""Where a refused call is told which credential the service takes (RFC 9110 11.6.1)."""
PUBLIC: Final[Requirements] = ()
HMAC_ALGORITHMS: Final = frozenset({"HS256", "HS384", "HS512"})
JWT_MISSING: Final = "JWT schemes need PyJWT with cryptography where the service runs: pip install 'svcgen[jwt]'"
MAX_TOKEN_CHARS: Final = 8192
"""A longer bearer token is refused unread: no parse cost for an oversized credential."""
MAX_JWKS_BYTES: Final = 1 << 20
"""A JWKS document longer than this is refused unread beyond it (a failed fetch)."""
CLOCK_SKEW_SECONDS: Final = 30
"""How far ahead of the service's clock an issuer's may be: `nbf` and `iat` up to this far in the future are taken
(an issuer a second ahead stamps them in our future, and a token used at once was refused); `exp` stays exact."""
VERIFIED_CACHE_ENTRIES: Final = 4096
VERIFIED_CACHE_SECONDS: Final = 60.0
"""A verified token is remembered (by its exact text) until it expires, at most this long, so a client calling
again with the same token costs a lookup, not a signature check."""


class SecurityError(ValueError):
    """A security declaration that cannot work (a missing key file, an unknown scheme): raised at startup."""


def requirements(spec: RequirementsSpec | None) -> Requirements:
    """Normalised requirements: each entry's schemes and scopes sorted, so equal requirements compare equal."""
    parsed: list[Requirement] = []
    for entry in spec or ():
        if isinstance(entry, str):
            parsed.append(((entry, ()),))
        else:
            parsed.append(tuple((name, tuple(sorted(set(scopes)))) for name, scopes in sorted(entry.items())))
    return tuple(parsed)


@dataclass(frozen=True, slots=True)
class JwtScheme:
    """A bearer JSON Web Token: `Authorization: Bearer <token>`. Exactly one of `jwks` (URL) and `key` (a PEM
    public key file for RS/PS/ES/EdDSA, a shared-secret file for HS) says where the keys are."""

    name: str
    issuer: str
    audience: Sequence[str]
    algorithms: Sequence[str]
    jwks: str = ""
    key: str = ""
    description: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "audience", tuple(self.audience))
        object.__setattr__(self, "algorithms", tuple(self.algorithms))
        if not self.algorithms or "none" in {a.lower() for a in self.algorithms}:
            raise SecurityError(f"scheme {self.name}: pin at least one algorithm, never none")
        if bool(self.jwks) == bool(self.key):
            raise SecurityError(f"scheme {self.name}: name exactly one of jwks and key")

    @property
    def type(self) -> str:
        return "jwt"


@dataclass(frozen=True, slots=True)
class ApiKeyScheme:
    """A key in a request header; the keys themselves come from wiring.py (`wiring.api_keys[name]`). Not a header
    the service reads for something else (`key_header_problem`)."""

    name: str
    header: str = "x-api-key"
    description: str | None = None

    def __post_init__(self) -> None:
        problem = key_header_problem(self.header)
        if problem is not None:
            raise ValueError(f"apiKey scheme {self.name!r}: {problem}")

    @property
    def type(self) -> str:
        return "apiKey"


Scheme: TypeAlias = JwtScheme | ApiKeyScheme

CALL_REQUEST_HEADERS: Final = (*VERSION_HEADERS, IDEMPOTENCY_KEY_HEADER, DEADLINE_HEADER, TRACEPARENT,
                               CORRELATION_HEADER)  # fmt: skip
"""The request headers a call may carry for the service to read (a browser may always send them)."""
_FRAMING_HEADERS: Final = frozenset({"host", "content-type", "content-length", "transfer-encoding", "connection"})


def key_header_problem(header: str) -> str | None:
    """Why an API key may not travel in `header`, or None: a header the service reads for something else would
    carry the key there too (a correlation id into every trace and the collector, a traceparent onward to the next
    service), and the HTTP framing's own headers carry no key (`authorization` may carry one: `Bearer <key>`)."""
    name = header.strip().lower()
    if not name:
        return "its header is empty"
    if name in CALL_REQUEST_HEADERS:
        return f"header {header!r} is one the service reads for something else; the key would travel with it"
    if name in _FRAMING_HEADERS:
        return f"header {header!r} frames the HTTP message; a key cannot travel in it"
    return None


@dataclass(frozen=True)
class Security:
    """A service's declaration: its schemes, the requirement of topics without their own (`default`) and of the
    well-known documents (`well_known`: spec, openapi, http-api, docs; health stays public)."""

    schemes: tuple[Scheme, ...] = ()
    default: Requirements = PUBLIC
    well_known: Requirements = PUBLIC

    @classmethod
    def declare(
        cls, schemes: Iterable[Scheme], *, default: RequirementsSpec = (), well_known: RequirementsSpec = ()
    ) -> Security:
        declared = cls(tuple(schemes), requirements(default), requirements(well_known))
        names = {scheme.name for scheme in declared.schemes}
        for requirement in (*declared.default, *declared.well_known):
            for name, _ in requirement:
                if name not in names:
                    raise SecurityError(f"security requirement names {name!r}, which is not a declared scheme")
        return declared

    def scheme(self, name: str) -> Scheme | None:
        return next((scheme for scheme in self.schemes if scheme.name == name), None)

    def of(self, registration: Registration | None) -> Requirements:
        """What calling `registration` needs: its own requirements, else the default (an unknown topic too, so
        an anonymous caller learns nothing about which topics exist)."""
        own = registration.security if registration is not None else None
        return self.default if own is None else own


@dataclass(frozen=True, slots=True)
class Principal:
    """The verified caller: `context.principal` on a protected topic (None on a public one)."""

    scheme: str
    subject: str
    scopes: frozenset[str] = frozenset()
    claims: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


class _Refused(Exception):
    """A credential that does not authenticate; the reason is safe to show (it never quotes the credential).
    When several schemes refuse the same credential, the reason told is the one of the highest `rank`: 2, the
    signature was good (expired, wrong audience, ...: the token is for this scheme); 1, the credential got as far
    as this scheme's keys (bad signature, unknown key); 0, it is not of this scheme's kind at all. `bearer`: what
    was refused is a bearer token, so the refusal is RFC 6750's `invalid_token` (an API key, or another
    `Authorization` scheme, is not one)."""

    def __init__(self, reason: str, *, rank: int = 0, bearer: bool = True) -> None:
        super().__init__(reason)
        self.rank = rank
        self.bearer = bearer


class Guard:
    """Enforces a `Security` declaration for one process.

    - `api_keys`: scheme name → {key: subject} (wiring.py's `api_keys`).
    - `transport`: the httpx transport JWKS are fetched through (default: a real connection); `fetch_timeout`
      bounds one fetch.
    - `clock` (monotonic seconds) paces refetches and key-cache expiry; `now` (epoch seconds) dates the cache of
      verified tokens (PyJWT checks `exp` and `nbf` against the system clock itself).
    - `realm`: named in `WWW-Authenticate`.
    - `remember_tokens`: keep verified tokens until they expire (`VERIFIED_CACHE_SECONDS` at most), so a repeated
      token costs a lookup; False verifies the signature on every request.
    """

    def __init__(
        self,
        security: Security,
        *,
        api_keys: Mapping[str, Mapping[str, str]] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        fetch_timeout: float = 5.0,
        refetch_seconds: float = 30.0,
        cache_seconds: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], float] = time.time,
        realm: str = "svc",
        remember_tokens: bool = True,
    ) -> None:
        self.security = security
        self.realm = realm
        keys = api_keys or {}
        self._verifiers: dict[str, _Verifier] = {}
        self._jwks: list[_Jwks] = []
        for scheme in security.schemes:
            if isinstance(scheme, ApiKeyScheme):
                self._verifiers[scheme.name] = _ApiKeys(scheme, keys.get(scheme.name, {}))
            elif scheme.jwks:
                jwks = _Jwks(scheme, transport, fetch_timeout, refetch_seconds, cache_seconds, clock)
                self._jwks.append(jwks)
                self._verifiers[scheme.name] = _JwtVerifier(scheme, jwks, now, remember_tokens)
            else:
                self._verifiers[scheme.name] = _JwtVerifier(scheme, _StaticKey(scheme), now, remember_tokens)
        for name in keys.keys() - self._verifiers.keys():
            raise SecurityError(f"wiring.api_keys names {name!r}, which is not an apiKey scheme of the manifest")

    def check_registrations(self, registrations: Iterable[Registration]) -> None:
        """SecurityError for a topic whose requirements name a scheme the declaration does not have."""
        for registration in registrations:
            for requirement in registration.security or ():
                for name, _ in requirement:
                    if name not in self._verifiers:
                        raise SecurityError(f"{registration.key} requires scheme {name!r}, which is not declared")

    def load(self) -> Guard:
        """Read every key file now, so a missing or unreadable one stops the service at startup (SecurityError)."""
        for verifier in self._verifiers.values():
            if isinstance(verifier, _JwtVerifier):
                pyjwt()
                if isinstance(verifier.keys, _StaticKey):
                    verifier.keys.load()
        return self

    def requirements(self, registration: Registration | None) -> Requirements:
        return self.security.of(registration)

    async def check(self, needed: Requirements, credentials: Mapping[str, str]) -> Principal | Result[Any] | None:
        """The principal when `credentials` satisfy one requirement; None when `needed` is public; otherwise the
        401 or 403 failure to answer."""
        if not needed:
            return None
        verified: dict[str, Principal | _Refused | None] = {}
        short_of_scope = False
        for requirement in needed:
            principal: Principal | None = None
            satisfied = True
            for name, scopes in requirement:
                if name not in verified:
                    verified[name] = await self._verify(name, credentials)
                found = verified[name]
                if not isinstance(found, Principal):
                    satisfied = False
                    break
                if not found.scopes.issuperset(scopes):
                    satisfied = False
                    short_of_scope = True
                    break
                principal = principal or found
            if satisfied and principal is not None:
                return principal
        # RFC 6750's invalid_token is about a bearer token: an API key refused says nothing of one.
        presented = any(isinstance(found, _Refused) and found.bearer for found in verified.values())
        if short_of_scope:
            return Result.forbidden(
                "the credential lacks a required scope", headers=self._challenge(needed, "insufficient_scope")
            )
        refusals = [found for found in verified.values() if isinstance(found, _Refused)]
        told = max(refusals, key=lambda refused: refused.rank) if refusals else None  # the first of the highest
        detail = f"the credential is not valid: {told}" if told is not None else "a credential is required"
        return Result.unauthorized(detail, headers=self._challenge(needed, "invalid_token" if presented else ""))

    async def _verify(self, name: str, credentials: Mapping[str, str]) -> Principal | _Refused | None:
        verifier = self._verifiers.get(name)
        if verifier is None:
            return _Refused(f"no scheme {name!r}", bearer=False)
        try:
            return await verifier.verify(credentials)
        except _Refused as refused:
            return refused

    def _challenge(self, needed: Requirements, error: str) -> dict[str, str]:
        """One challenge per way of sending a credential: every JWT scheme is `Bearer` in the same realm, so they
        share one challenge (naming the scopes any of them needs); an API key is one per header."""
        challenges: dict[str, str] = {}  # by how the credential is sent, in the order the requirements name them
        bearer = "\0bearer"  # a key no API-key header is
        scopes: set[str] = set()
        for requirement in needed:
            for name, scoped in requirement:
                scheme = self.security.scheme(name)
                if isinstance(scheme, ApiKeyScheme):
                    text = f'ApiKey realm="{self.realm}", header="{scheme.header}"'
                    challenges.setdefault(scheme.header.lower(), text)
                elif scheme is not None:
                    challenges.setdefault(bearer, "")
                    scopes.update(scoped)
        if bearer in challenges:
            text = f'Bearer realm="{self.realm}"'
            if error:
                text += f', error="{error}"'
            if error == "insufficient_scope" and scopes:
                text += f', scope="{" ".join(sorted(scopes))}"'
            challenges[bearer] = text
        return {WWW_AUTHENTICATE_HEADER: ", ".join(challenges.values())}

    def health_check(self) -> HealthCheck | None:
        """`security`: failed while a scheme's JWKS cannot be fetched; None without JWKS schemes."""
        if not self._jwks:
            return None
        return HealthCheck("security", self._health, timeout=max(j.fetch_timeout for j in self._jwks) + 1.0)

    async def _health(self) -> HealthCheckResult:
        failing = []
        for jwks in self._jwks:
            if not await jwks.healthy():
                failing.append(f"the JWKS of scheme {jwks.scheme.name} cannot be fetched ({jwks.last_error})")
        return HealthCheckResult.failed("; ".join(failing)) if failing else HealthCheckResult.ok()


class _Verifier:
    async def verify(self, credentials: Mapping[str, str]) -> Principal | None:
        """The principal; None when no credential of this scheme was sent; raises `_Refused` for a bad one."""
        raise NotImplementedError


class _ApiKeys(_Verifier):
    def __init__(self, scheme: ApiKeyScheme, keys: Mapping[str, str]) -> None:
        self.scheme = scheme
        self.header = scheme.header.lower()
        # Stripped as a presented key is: one read with its trailing newline could otherwise never match.
        self.keys = [(key.strip().encode("utf-8"), subject) for key, subject in keys.items()]

    async def verify(self, credentials: Mapping[str, str]) -> Principal | None:
        presented = credentials.get(self.header)
        if presented is None:
            return None
        given = presented.strip().encode("latin-1", "replace")
        subject: str | None = None
        for key, owner in self.keys:  # every key compared, in constant time each: no early exit to time
            if hmac.compare_digest(given, key) and subject is None:
                subject = owner
        if subject is None or not given:
            raise _Refused("unknown API key", rank=1, bearer=False)
        return Principal(self.scheme.name, subject)


class _KeySource:
    async def key_for(self, token: str, kid: str | None) -> Any:
        raise NotImplementedError


class _JwtVerifier(_Verifier):
    def __init__(self, scheme: JwtScheme, keys: _KeySource, now: Callable[[], float], remember: bool) -> None:
        self.scheme = scheme
        self.keys = keys
        self.algorithms = list(scheme.algorithms)
        self.audience = list(scheme.audience)
        self._now = now
        self._remember_tokens = remember
        self._verified: OrderedDict[str, tuple[float, Principal]] = OrderedDict()

    async def verify(self, credentials: Mapping[str, str]) -> Principal | None:
        authorization = (credentials.get("authorization") or "").strip()
        if not authorization:
            return None
        kind, _, token = authorization.partition(" ")
        if kind.lower() != "bearer":  # a bare token, `Bearer<tab>`, another scheme: sent, but not as we read it
            raise _Refused("the Authorization header is not Bearer <token>", bearer=False)
        token = token.strip()
        if not token:
            raise _Refused("empty bearer token")
        if len(token) > MAX_TOKEN_CHARS:
            raise _Refused("token too long")
        remembered = self._verified.get(token)
        now = self._now()
        if remembered is not None:
            if remembered[0] > now:
                return remembered[1]
            del self._verified[token]
        try:
            jwt = pyjwt()
        except SecurityError as error:
            logger.error("%s", error)
            raise _Refused("JWT verification is not installed") from None
        keys = self.keys
        if isinstance(keys, _StaticKey):  # one key: no need to read the header first (decode checks `alg`)
            key = await keys.key_for(token, None)
        else:
            try:
                header = jwt.get_unverified_header(token)
            except jwt.PyJWTError:
                raise _Refused("malformed token") from None
            if header.get("alg") not in self.algorithms:
                raise _Refused("algorithm not accepted")
            kid = header.get("kid")
            key = await keys.key_for(token, kid if isinstance(kid, str) else None)
        try:
            claims = jwt.decode(
                token, key, algorithms=self.algorithms, audience=self.audience, issuer=self.scheme.issuer,
                leeway=CLOCK_SKEW_SECONDS, options={"require": ["exp", "iss", "aud"]},
            )  # fmt: skip
            if int(claims["exp"]) <= int(self._now()):  # PyJWT's leeway is for every claim: the end stays exact
                raise jwt.ExpiredSignatureError("expired")
        except jwt.ExpiredSignatureError:
            raise _Refused("expired", rank=2) from None
        except jwt.ImmatureSignatureError:
            raise _Refused("not yet valid", rank=2) from None
        except jwt.InvalidIssuerError:
            raise _Refused("wrong issuer", rank=2) from None
        except jwt.InvalidAudienceError:
            raise _Refused("wrong audience", rank=2) from None
        except jwt.InvalidSignatureError:
            raise _Refused("bad signature", rank=1) from None
        except jwt.InvalidAlgorithmError:
            raise _Refused("algorithm not accepted") from None
        except jwt.MissingRequiredClaimError as error:
            raise _Refused(f"missing claim {error.claim}", rank=2) from None
        except (jwt.PyJWTError, ValueError, TypeError):
            raise _Refused("malformed token") from None
        principal = Principal(self.scheme.name, str(claims.get("sub", "")), _scopes(claims), MappingProxyType(claims))
        self._remember(token, principal, claims, now)
        return principal

    def _remember(self, token: str, principal: Principal, claims: Mapping[str, Any], now: float) -> None:
        expires = claims.get("exp")
        if not self._remember_tokens or not isinstance(expires, int | float):
            return
        cache = self._verified
        cache[token] = (min(float(expires), now + VERIFIED_CACHE_SECONDS), principal)
        if len(cache) > VERIFIED_CACHE_ENTRIES:
            cache.popitem(last=False)


def pyjwt() -> Any:
    """The `jwt` module (PyJWT) with its cryptography backend; SecurityError naming the extra when missing."""
    try:
        import jwt
        import jwt.algorithms
    except ImportError:
        raise SecurityError(JWT_MISSING) from None
    if not jwt.algorithms.has_crypto:
        raise SecurityError(JWT_MISSING)
    return jwt


def _scopes(claims: Mapping[str, Any]) -> frozenset[str]:
    """The standard `scope` claim, else `scp`: each a space-separated string or a list (identity providers send
    either form of either)."""
    for name in ("scope", "scp"):
        value = claims.get(name)
        if isinstance(value, str):
            return frozenset(value.split())
        if isinstance(value, list):
            return frozenset(item for item in value if isinstance(item, str))
    return frozenset()


class _StaticKey(_KeySource):
    """The key in `scheme.key`: a PEM public key or certificate (RS/PS/ES/EdDSA), or a shared secret (HS); a path
    relative to the working directory, read once (`Guard.load` reads it at startup)."""

    def __init__(self, scheme: JwtScheme) -> None:
        self.scheme = scheme
        self.key: Any = None

    def load(self) -> Any:
        if self.key is None:
            self.key = _read_key(self.scheme)
        return self.key

    async def key_for(self, token: str, kid: str | None) -> Any:
        try:
            return self.load()
        except SecurityError as error:
            logger.error("%s", error)
            raise _Refused("the signing key cannot be read") from None


def _read_key(scheme: JwtScheme) -> Any:
    try:
        data = Path(scheme.key).read_bytes()
    except OSError as error:
        raise SecurityError(
            f"scheme {scheme.name}: key file {scheme.key} cannot be read ({error.strerror or error}); the path is "
            "relative to the working directory"
        ) from None
    if set(scheme.algorithms) <= HMAC_ALGORITHMS:
        secret = data.strip()
        if len(secret) < 32:
            raise SecurityError(f"scheme {scheme.name}: the shared secret in {scheme.key} is shorter than 32 bytes")
        return _fitting(scheme, secret)
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    key: Any
    try:
        if b"BEGIN CERTIFICATE" in data:
            key = x509.load_pem_x509_certificate(data).public_key()
        else:
            key = load_pem_public_key(data)
    except ValueError:
        raise SecurityError(f"scheme {scheme.name}: {scheme.key} holds no PEM public key or certificate") from None
    return _fitting(scheme, key)


def _fitting(scheme: JwtScheme, key: Any) -> Any:
    """`key` once PyJWT takes it for every pinned algorithm: a key of another kind (a PEM public key as an HS secret,
    an RSA key for ES256) would refuse every token as malformed, so it stops the start instead."""
    jws = pyjwt().PyJWS()
    for algorithm in scheme.algorithms:
        try:
            jws.get_algorithm_by_name(algorithm).prepare_key(key)
        except Exception:  # InvalidKeyError, or TypeError for a key object of another family
            kind = "a shared secret, not a PEM key" if algorithm in HMAC_ALGORITHMS else "a public key of its family"
            raise SecurityError(
                f"scheme {scheme.name}: the key in {scheme.key} does not fit algorithm {algorithm}, which needs {kind}"
            ) from None
    return key


class _Jwks(_KeySource):
    """The keys of a JWKS URL, fetched when first needed, kept `cache_seconds`, refetched on an unknown `kid` at
    most once per `refetch_seconds`. One fetch at a time; callers waiting for it share it."""

    def __init__(
        self,
        scheme: JwtScheme,
        transport: httpx.AsyncBaseTransport | None,
        fetch_timeout: float,
        refetch_seconds: float,
        cache_seconds: float,
        clock: Callable[[], float],
    ) -> None:
        self.scheme = scheme
        self.fetch_timeout = fetch_timeout
        self._transport = transport
        self._refetch_seconds = refetch_seconds
        self._cache_seconds = cache_seconds
        self._clock = clock
        self._keys: dict[str | None, Any] = {}
        self._fetched_at: float | None = None
        self._attempted_at: float | None = None
        self._fetching: asyncio.Task[None] | None = None
        self.last_error = ""
        self.fetches = 0

    async def key_for(self, token: str, kid: str | None) -> Any:
        now = self._clock()
        stale = self._fetched_at is None or now - self._fetched_at >= self._cache_seconds
        # A fetch in flight is awaited by every caller (the first requests after startup included).
        if self._fetching is not None or ((stale or self._lookup(kid) is None) and self._may_fetch(now)):
            await self._refresh()
        key = self._lookup(kid)
        if key is not None:
            return key
        if self._fetched_at is None:
            raise _Refused("the signing keys cannot be fetched", rank=1)
        raise _Refused("unknown key", rank=1)

    def _lookup(self, kid: str | None) -> Any:
        keys = self._keys
        if kid is None and len(keys) == 1:
            return next(iter(keys.values()))
        return keys.get(kid)

    def _may_fetch(self, now: float) -> bool:
        return self._attempted_at is None or now - self._attempted_at >= self._refetch_seconds

    async def healthy(self) -> bool:
        """Whether the keys can be fetched: tried again (paced like any refetch) while there are none or the last
        try failed, as a service whose check failed may get no call to try it (a readiness probe took it out)."""
        if (self._fetched_at is None or self.last_error) and self._may_fetch(self._clock()):
            await self._refresh()
        return not self.last_error

    async def _refresh(self) -> None:
        if self._fetching is None:
            self._attempted_at = self._clock()
            self._fetching = asyncio.create_task(self._fetch())
        task = self._fetching
        try:
            await asyncio.shield(task)
        finally:
            if task.done() and self._fetching is task:
                self._fetching = None

    async def _fetch(self) -> None:
        self.fetches += 1
        try:
            jwt = pyjwt()
            # The whole fetch is bounded, not each read: a peer trickling bytes would otherwise hold every caller.
            async with asyncio.timeout(self.fetch_timeout):
                document = await self._download()
            keys: dict[str | None, Any] = {}
            for entry in document.get("keys", []) if isinstance(document, dict) else []:
                if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
                    continue
                try:
                    parsed = jwt.PyJWK.from_dict(entry)
                except jwt.PyJWTError:
                    continue  # a key of a kind this process cannot use: the others still count
                keys[entry.get("kid") if isinstance(entry.get("kid"), str) else None] = parsed.key
            if not keys:
                raise ValueError("no usable signing keys")
        except Exception as error:
            self.last_error = _fetch_error(error)
            logger.warning("JWKS of scheme %s could not be fetched: %s", self.scheme.name, self.last_error)
            return
        self._keys = keys
        self._fetched_at = self._clock()
        self.last_error = ""

    async def _download(self) -> Any:
        """The JWKS document, read up to `MAX_JWKS_BYTES` (ValueError beyond: a key set is a few KB)."""
        async with (
            httpx.AsyncClient(transport=self._transport, timeout=self.fetch_timeout) as client,
            client.stream("GET", self.scheme.jwks, headers={"accept": "application/json"}) as response,
        ):
            response.raise_for_status()
            data = bytearray()
            async for chunk in response.aiter_bytes():
                data += chunk
                if len(data) > MAX_JWKS_BYTES:
                    raise ValueError(f"the JWKS is larger than {MAX_JWKS_BYTES} bytes")
        return orjson.loads(data)


def _fetch_error(error: Exception) -> str:
    """Why a JWKS fetch failed, for the health check and the log: an HTTP status by its code and phrase (a 404 is a
    wrong URL, a 503 the provider), our own ValueError by its text, anything else by its type (its text may quote
    the URL, which can carry a credential)."""
    if isinstance(error, httpx.HTTPStatusError):
        return f"HTTP {error.response.status_code} {error.response.reason_phrase}".rstrip()
    return str(error)[:200] if isinstance(error, ValueError) else type(error).__name__
