from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from svcgen.runtime import (
    HealthCheck,
    HealthChecks,
    HttpApp,
    Identity,
    MeshHost,
    MeshSettings,
    Registry,
    Service,
    WiringError,
    declare_profile,
    self_check,
)
from svcgen.runtime._mesh.host import COLLECTOR_ENV, HEARTBEAT_ENV
from svcgen.runtime._mesh.profile import PROFILE_NAME, REQUIREMENTS
from tests.support.fakes import registry

IDENTITY = Identity("orders", service_version="1.0.0")


def wired(
    *,
    topics: Registry | None = None,
    health: bool = True,
    mesh: bool = True,
    prefix: str = "/svc",
) -> tuple[Service, MeshHost | None]:
    host = MeshHost(IDENTITY, MeshSettings("http://collector.test", heartbeat_seconds=5)) if mesh else None
    checks = HealthChecks([HealthCheck("db", lambda: True)]) if health else None
    service = Service(
        IDENTITY,
        topics if topics is not None else registry(),
        middleware=host.middleware if host is not None else (),
        health=checks,
        prefix=prefix,
    )
    return service, host


def test_a_fully_wired_service_is_conformant_with_a_reason_for_every_requirement() -> None:
    service, mesh = wired()
    check = self_check(service, HttpApp(service), mesh)
    assert [c.id for c in check.checks] == list(REQUIREMENTS)
    assert check.is_conformant and check.missing == []
    assert all(c.satisfied and c.reason for c in check.checks)
    assert "GET /svc/health" in check.reason("R3")
    assert "http://collector.test" in check.reason("R6") and "5 s" in check.reason("R6")
    assert check.profile == {"name": PROFILE_NAME}


@pytest.mark.parametrize(
    ("wiring", "options", "missing"),
    [
        ({"health": False}, {}, ["R3"]),
        ({"mesh": False}, {}, ["R6", "R8"]),
        ({}, {"invoke": False}, ["R4"]),
        ({}, {"spec": False}, ["R5"]),
        ({"topics": Registry()}, {}, ["R2"]),
        ({"health": False, "mesh": False, "topics": Registry()}, {"invoke": False}, ["R2", "R3", "R4", "R6", "R8"]),
    ],
)
def test_each_unmet_requirement_is_missing_in_requirement_order(
    wiring: dict[str, Any], options: dict[str, Any], missing: list[str]
) -> None:
    service, mesh = wired(**wiring)
    check = self_check(service, HttpApp(service, **options), mesh)
    assert check.missing == missing
    assert not check.is_conformant
    assert check.profile == {"name": PROFILE_NAME, "missing": missing}
    for requirement in missing:
        assert check.reason(requirement)


def test_unhosted_service_misses_transport_requirements() -> None:
    service, mesh = wired()
    check = self_check(service, None, mesh)
    assert check.missing == ["R1", "R3", "R4", "R5", "R6", "R7"]
    assert check.reason("R1") == "the service is not hosted behind a transport"


def test_reasons_name_the_configured_prefix() -> None:
    service, mesh = wired(prefix="/ops/mesh")
    check = self_check(service, HttpApp(service), mesh)
    assert check.is_conformant
    assert "/ops/mesh" in check.reason("R7") and "GET /ops/mesh/spec" in check.reason("R5")


def test_unknown_requirement_is_a_clear_error() -> None:
    service, mesh = wired()
    with pytest.raises(KeyError, match="R9"):
        self_check(service, HttpApp(service), mesh).reason("R9")


def test_declared_profile_is_in_the_descriptor_and_svc_mesh_answer_but_not_the_hash() -> None:
    service, mesh = wired(health=False)
    before = service.descriptor.hash
    app = HttpApp(service)
    declare_profile(app, mesh)
    document = service.descriptor.document
    assert document["profile"] == {"name": PROFILE_NAME, "missing": ["R3"]}
    assert list(document)[-2:] == ["profile", "descriptorHash"]
    assert service.descriptor.hash == before
    answer = orjson.loads(asyncio.run(service.invoke_envelope({"topic": "svc:mesh"})))
    assert orjson.loads(answer["body"])["profile"] == {"name": PROFILE_NAME, "missing": ["R3"]}


def test_the_register_feed_carries_the_declared_profile() -> None:
    service, mesh = wired()
    assert mesh is not None
    app = HttpApp(service)
    declare_profile(app, mesh)
    mesh.attach(app)
    assert mesh.reporter is not None
    assert mesh.reporter.descriptor.document["profile"] == {"name": PROFILE_NAME}


def test_the_collector_address_can_be_overridden_where_the_service_runs() -> None:
    settings = MeshSettings("http://127.0.0.1:8700")
    host = MeshHost(IDENTITY, settings, environ={COLLECTOR_ENV: "http://collector.internal:9000"})
    assert host.settings.collector == "http://collector.internal:9000"
    assert MeshHost(IDENTITY, settings, environ={COLLECTOR_ENV: " "}).settings.collector == "http://127.0.0.1:8700"
    service = Service(IDENTITY, registry(), middleware=host.middleware)
    assert "http://collector.internal:9000" in self_check(service, HttpApp(service), host).reason("R6")


def test_the_heartbeat_can_be_overridden_and_a_bad_value_is_refused_clearly() -> None:
    settings = MeshSettings("http://127.0.0.1:8700", heartbeat_seconds=30)
    assert MeshHost(IDENTITY, settings, environ={HEARTBEAT_ENV: "0.5"}).settings.heartbeat_seconds == 0.5
    for bad in ("soon", "0", "-1", "inf", "nan"):
        with pytest.raises(ValueError, match=f"{HEARTBEAT_ENV}="):
            MeshHost(IDENTITY, settings, environ={HEARTBEAT_ENV: bad})


@pytest.mark.parametrize(("variable", "value", "said"), [
    ("SVCGEN_COLLECTOR", "notaurl", "SVCGEN_COLLECTOR='notaurl': expected an http:// or https:// URL like "
                                    "http://127.0.0.1:8700"),
    ("SVCGEN_COLLECTOR", "127.0.0.1:8700", "SVCGEN_COLLECTOR='127.0.0.1:8700': expected an http:// or https:// URL"),
    ("SVCGEN_MESH_NATS", "zzz", "SVCGEN_MESH_NATS = 'zzz' is not a nats://host:port URL"),
])
def test_a_feed_destination_from_the_environment_that_is_no_url_stops_the_start_in_one_line(
    variable: str, value: str, said: str
) -> None:
    # It started, then failed every beat with "no URL for topic 'svc:mesh:register'" (or timed out, for NATS).
    with pytest.raises(WiringError) as refused:
        MeshHost(IDENTITY, MeshSettings("http://127.0.0.1:8700"), environ={variable: value})
    assert str(refused.value).startswith(said)
