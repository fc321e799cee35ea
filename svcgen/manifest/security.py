"""Semantic checks of `security:`: what the schema cannot say about schemes and the requirements naming them.

A JWT scheme pins its algorithms to one key family, takes its keys from exactly one place (a JWKS URL or a key
file), and names its issuer and audience; an API-key scheme names its header. Every requirement (the default,
`wellKnown`, a topic's own) names declared schemes, and scopes only where a scheme carries them (JWT).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..runtime._security import key_header_problem
from .loader import JsonPath, YamlDocument
from .model import Position
from .spelling import suggestion
from .validate import SchemaFindings

HMAC_ALGORITHMS = frozenset({"HS256", "HS384", "HS512"})
"""Shared-secret algorithms: a key file holding the secret, never a JWKS or a public key."""
JWT_KEYS = ("issuer", "audience", "jwks", "key", "algorithms")

Report = Callable[[Position, str], None]


def check_security(document: YamlDocument, findings: SchemaFindings, error: Report, warn: Report) -> None:
    data = document.data if isinstance(document.data, dict) else {}
    security = data.get("security")
    schemes: dict[str, str] = {}
    """Scheme name → type, for the schemes whose type the schema accepted."""
    if isinstance(security, dict):
        declared = security.get("schemes")
        if isinstance(declared, dict):
            for name, scheme in declared.items():
                path: JsonPath = ("security", "schemes", name)
                if isinstance(scheme, dict) and path not in findings.rejected:
                    kind = _check_scheme(document, findings, error, path, str(name), scheme)
                    jwks = scheme.get("jwks")
                    if isinstance(jwks, str) and jwks.startswith("http://") and not _loopback(jwks):
                        warn(document.at((*path, "jwks")), f"scheme {name!r} fetches its keys over plain http, where "
                             "they can be swapped in transit; use https")  # fmt: skip
                    if kind:
                        schemes[str(name)] = kind
        elif "schemes" in security:
            return  # the schema stage reported it; the requirements cannot be checked against it
        for key in ("default", "wellKnown"):
            _check_requirements(document, findings, error, ("security", key), security.get(key), schemes)
    topics = data.get("topics")
    if isinstance(topics, list):
        for index, topic in enumerate(topics):
            if isinstance(topic, dict) and "security" in topic:
                if not isinstance(security, dict):
                    error(
                        document.key_at(("topics", index, "security")),
                        "this topic names security requirements, but the manifest declares no 'security:' "
                        "section with schemes; add one, or remove the topic's 'security'",
                    )
                    continue
                _check_requirements(document, findings, error, ("topics", index, "security"), topic["security"],
                                    schemes)  # fmt: skip


def _loopback(url: str) -> bool:
    host = url.removeprefix("http://").split("/", 1)[0].rsplit(":", 1)[0]
    return host in ("localhost", "127.0.0.1", "[::1]")


def _check_scheme(
    document: YamlDocument, findings: SchemaFindings, error: Report, path: JsonPath, name: str, scheme: dict[str, Any]
) -> str:
    kind = str(scheme.get("type"))
    if kind not in ("jwt", "apiKey") or (*path, "type") in findings.rejected:
        return ""
    where = document.key_at(path)
    if kind == "apiKey":
        for key in JWT_KEYS:
            if key in scheme:
                error(document.key_at((*path, key)), f"scheme {name!r} is an apiKey scheme, which has no {key!r}; "
                      "remove it, or make the scheme type jwt")  # fmt: skip
        if "header" not in scheme:
            error(where, f"apiKey scheme {name!r} needs 'header', the request header carrying the key, like x-api-key")
        elif isinstance(scheme["header"], str) and (problem := key_header_problem(scheme["header"])) is not None:
            error(document.at((*path, "header")), f"apiKey scheme {name!r}: {problem}; name its own, like x-api-key")
        return kind
    if "header" in scheme:
        error(document.key_at((*path, "header")), f"scheme {name!r} is a jwt scheme, which reads the "
              "Authorization header; remove 'header', or make the scheme type apiKey")  # fmt: skip
    for key in ("issuer", "audience", "algorithms"):
        if key not in scheme:
            error(where, f"jwt scheme {name!r} needs {key!r}: tokens are checked against it, never accepted without")
    has_jwks, has_key = "jwks" in scheme, "key" in scheme
    if has_jwks == has_key:
        error(where, f"jwt scheme {name!r} needs exactly one of 'jwks' (the issuer's JWKS URL) or 'key' "
              "(a PEM public key or shared-secret file)")  # fmt: skip
    algorithms = scheme.get("algorithms")
    if isinstance(algorithms, list) and (*path, "algorithms") not in findings.rejected:
        names = {str(algorithm) for algorithm in algorithms}
        secret = names & HMAC_ALGORITHMS
        position = document.at((*path, "algorithms"))
        if secret and secret != names:
            error(position, f"scheme {name!r} mixes shared-secret ({', '.join(sorted(secret))}) and public-key "
                  "algorithms; a key is one or the other, so pin algorithms of one kind")  # fmt: skip
        elif secret and has_jwks:
            error(position, f"scheme {name!r} takes keys from a JWKS, which publishes public keys; pin public-key "
                  "algorithms like RS256, or name the shared secret with 'key'")  # fmt: skip
    return kind


def _check_requirements(
    document: YamlDocument,
    findings: SchemaFindings,
    error: Report,
    path: JsonPath,
    entries: Any,
    schemes: dict[str, str],
) -> None:
    if not isinstance(entries, list) or path in findings.rejected:
        return
    for number, entry in enumerate(entries):
        entry_path = (*path, number)
        if entry_path in findings.rejected:
            continue
        named: list[tuple[str, Any, JsonPath]] = []
        if isinstance(entry, str):
            named.append((entry, [], entry_path))
        elif isinstance(entry, dict):
            named += [(str(name), scopes, (*entry_path, name)) for name, scopes in entry.items()]
        for name, scopes, where in named:
            position = document.key_at(where) if where != entry_path else document.at(where)
            kind = schemes.get(name)
            if kind is None:
                choices = ", ".join(schemes) or "none"
                error(position, f"no security scheme named {name!r}{suggestion(name, schemes) or ''}; "
                      f"declared schemes: {choices}")  # fmt: skip
            elif kind == "apiKey" and isinstance(scopes, list) and scopes:
                error(position, f"scheme {name!r} is an apiKey scheme, whose keys carry no scopes; "
                      f"write [{name}] or {{{name}: []}}")  # fmt: skip
