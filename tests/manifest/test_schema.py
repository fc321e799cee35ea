"""Schema stage: each kind of schema error, in plain words, at the node it is about."""

from __future__ import annotations

import json
from importlib import resources

import pytest
from jsonschema import Draft202012Validator  # type: ignore[import-untyped,unused-ignore]

from svcgen.manifest.validate import manifest_schema
from tests.support.manifests import MINIMAL, errors, load_ok


def test_schema_ships_as_package_data_and_is_a_valid_2020_12_schema() -> None:
    text = resources.files("svcgen.manifest").joinpath("manifest.schema.json").read_text(encoding="utf-8")
    assert json.loads(text) == manifest_schema()
    Draft202012Validator.check_schema(manifest_schema())
    assert manifest_schema()["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_unknown_top_level_key_with_did_you_mean() -> None:
    assert errors(MINIMAL + "tpics: []\n") == ["m.yaml:11:1: unknown key 'tpics' in manifest; did you mean 'topics'?"]


def test_unknown_key_in_topic_points_at_the_key() -> None:
    text = MINIMAL.replace("    request: Order\n", "    sumary: Get\n    request: Order\n")
    assert errors(text) == ["m.yaml:9:5: unknown key 'sumary' in topic; did you mean 'summary'?"]


def test_unknown_key_without_a_close_match_lists_the_allowed_keys() -> None:
    text = MINIMAL.replace("    request: Order\n", "    zzz: 1\n    request: Order\n")
    assert errors(text) == [
        "m.yaml:9:5: unknown key 'zzz' in topic; allowed keys: id, version, versions, summary, request, response, "
        "idempotent, timeout, success, failures, routes, security, deprecated"
    ]


def test_unknown_keys_in_field_type_mesh_and_produces_entry() -> None:
    text = (
        MINIMAL.replace("orderId: string", "orderId: {type: string, defualt: x}").replace(
            "  Order:\n", "  Order:\n    desc: x\n"
        )
        + "mesh: {collector: 'http://c', heartbeat: 3}\n"
        + "produces:\n  - {id: a, request: Order, response: Order, routes: []}\n"
    )
    assert errors(text) == [
        "m.yaml:5:5: unknown key 'desc' in type 'Order'; did you mean 'description'?",
        "m.yaml:7:31: unknown key 'defualt' in field 'orderId'; did you mean 'default'?",
        "m.yaml:12:31: unknown key 'heartbeat' in mesh; did you mean 'heartbeatSeconds'?",
        "m.yaml:14:46: unknown key 'routes' in produces entry; allowed keys: id, version, request, response, from, "
        "idempotent, summary",
    ]


def test_missing_required_keys() -> None:
    text = "svcgen: 1\nservice: orders\ntopics:\n  - id: a\n    summary: x\n"
    assert errors(text) == [
        "m.yaml:4:5: missing required key 'request' in topic; "
        "add it: a type expression like string, list[LineItem] or LineItem",
        "m.yaml:4:5: missing required key 'response' in topic; "
        "add it: a type expression like string, list[LineItem] or LineItem",
    ]


def test_missing_format_version_and_service() -> None:
    assert errors("title: x\n") == [
        "m.yaml:1:1: missing required key 'svcgen' in manifest; add it: 1 (the manifest format version)",
        "m.yaml:1:1: missing required key 'service' in manifest; add it: a service name like orders "
        "(lower-case letters, digits and '-', starting with a letter)",
    ]


def test_a_misspelt_required_key_is_reported_once() -> None:
    text = MINIMAL.replace("    request: Order\n", "    requst: Order\n")
    assert errors(text) == ["m.yaml:9:5: unknown key 'requst' in topic; did you mean 'request'?"]


def test_service_pattern() -> None:
    assert errors(MINIMAL.replace("service: orders", "service: Orders")) == [
        "m.yaml:2:10: service must be a service name like orders (lower-case letters, digits and '-', "
        "starting with a letter), got 'Orders'"
    ]


def test_format_version_must_be_1() -> None:
    assert errors(MINIMAL.replace("svcgen: 1", "svcgen: 2")) == [
        "m.yaml:1:9: svcgen must be 1 (the manifest format version), got 2"
    ]


def test_numbers_where_strings_belong_get_a_quoting_hint_with_the_source_text() -> None:
    text = MINIMAL.replace("service: orders\n", "service: orders\nserviceVersion: 1.10\n").replace(
        "    request: Order\n", "    version: 2\n    request: Order\n"
    )
    assert errors(text) == [
        'm.yaml:3:17: serviceVersion must be a string, got 1.10; quote it: "1.10"',
        "m.yaml:10:14: 'version' must be a version label without spaces or '/', like v1, got 2; quote it: \"2\"",
    ]


def test_routes_must_be_a_list_of_route_strings() -> None:
    text = MINIMAL + "    routes: POST /orders\n"
    assert errors(text) == ["m.yaml:11:13: 'routes' must be a list of \"METHOD /path\" strings, got 'POST /orders'"]
    text = MINIMAL + "    routes: [POST /orders, 3, {a: 1}]\n"
    assert errors(text) == [
        "m.yaml:11:28: each item of 'routes' must be a \"METHOD /path\" string, got 3",
        "m.yaml:11:31: each item of 'routes' must be a \"METHOD /path\" string, got a mapping",
    ]


def test_wrong_shapes_of_sections_and_entries() -> None:
    text = "svcgen: 1\nservice: orders\nmesh:\ntypes: []\ntopics:\n  - orders:get\nplacement: {cloud: 1}\n"
    assert errors(text) == [
        "m.yaml:3:1: mesh must be a mapping, got an empty value",
        "m.yaml:4:8: types must be a mapping, got a list",
        "m.yaml:6:5: each topic must be a mapping with id, request and response, got 'orders:get'",
        "m.yaml:7:20: placement 'cloud' must be a string, got 1; quote it: \"1\"",
    ]


def test_a_field_is_a_type_expression_or_a_field_mapping() -> None:
    text = MINIMAL.replace("orderId: string", "orderId: 3\n      note: ''\n      other: {}")
    assert errors(text) == [
        "m.yaml:6:16: field 'orderId' must be a type expression or a mapping "
        "{type, default?, description?, constraints...}, got 3",
        "m.yaml:7:13: field 'note' must not be empty; "
        "expected a type expression or a mapping {type, default?, description?, constraints...}",
        "m.yaml:8:7: missing required key 'type' in field 'other'; "
        "add it: a type expression like string, list[LineItem] or LineItem",
    ]


def test_a_type_has_fields_or_json_schema_not_both() -> None:
    text = MINIMAL.replace("  Order:\n", "  Both:\n    jsonSchema: o.json\n    fields: {}\n  Nothing: {}\n  Order:\n")
    assert errors(text) == [
        "m.yaml:4:3: type 'Both' has both 'fields' and 'jsonSchema'; keep only one",
        "m.yaml:7:3: type 'Nothing' needs 'fields', 'extends' or 'jsonSchema'",
    ]


def test_mesh_values() -> None:
    text = MINIMAL + "mesh: {collector: 'ftp://x', heartbeatSeconds: 0, issues: maybe}\n"
    assert errors(text) == [
        "m.yaml:11:19: 'collector' must be an http:// or https:// base URL like http://127.0.0.1:8700, got 'ftp://x'",
        "m.yaml:11:48: 'heartbeatSeconds' must be greater than 0, got 0",
        "m.yaml:11:59: 'issues' must be true or false, got 'maybe'",
    ]
    assert errors("svcgen: 1\nservice: a\nmesh: {issues: true}\n") == ["m.yaml:3:1: mesh needs 'collector' or 'otlp'"]
    assert errors("svcgen: 1\nservice: a\nmesh: {otlp: 'otel:4318'}\n") == [
        "m.yaml:3:14: 'otlp' must be an http:// or https:// base URL like http://127.0.0.1:4318, got 'otel:4318'"
    ]
    only_otlp = load_ok("svcgen: 1\nservice: a\nmesh: {otlp: 'http://otel:4318/'}\n").mesh
    assert only_otlp is not None and (only_otlp.collector, only_otlp.otlp) == (None, "http://otel:4318")


def test_mesh_transport_nats_needs_a_nats_url_and_no_collector() -> None:
    assert errors(MINIMAL + "mesh: {transport: nats}\n") == [
        "m.yaml:11:1: missing required key 'nats' in mesh; add it: a nats:// or tls:// server URL like "
        "nats://127.0.0.1:4222"
    ]
    assert errors(MINIMAL + "mesh: {transport: kafka, collector: 'http://c', nats: 'http://n'}\n") == [
        "m.yaml:11:19: 'transport' must be http or nats, got 'kafka'",
        "m.yaml:11:55: 'nats' must be a nats:// or tls:// server URL like nats://127.0.0.1:4222, got 'http://n'",
    ]


def test_health_names_are_unique_strings() -> None:
    text = MINIMAL + "health: [db, '', db, 3]\n"
    assert errors(text) == [
        "m.yaml:11:14: each item of health must not be empty; expected a health check name",
        "m.yaml:11:18: health lists 'db' twice; each name must be unique",
        "m.yaml:11:22: each item of health must be a health check name, got 3",
    ]


def test_package_must_be_a_python_identifier() -> None:
    assert errors(MINIMAL + "package: my-pkg\n") == [
        "m.yaml:11:10: package must be a Python identifier (letters, digits and '_', not starting with a digit), "
        "got 'my-pkg'"
    ]


def test_topic_id_and_version_shapes() -> None:
    text = MINIMAL.replace("id: orders:get", "id: orders get\n    version: v/1")
    assert errors(text) == [
        "m.yaml:8:9: 'id' must be a topic id without spaces, like orders:place, got 'orders get'",
        "m.yaml:9:14: 'version' must be a version label without spaces or '/', like v1, got 'v/1'",
    ]


def test_the_manifest_must_be_a_mapping() -> None:
    assert errors("") == [
        "m.yaml:1:1: the manifest must be a mapping with at least 'svcgen: 1' and 'service', got an empty value"
    ]
    assert errors("- a\n") == [
        "m.yaml:1:1: the manifest must be a mapping with at least 'svcgen: 1' and 'service', got a list"
    ]


@pytest.mark.parametrize("key", ["title", "apiVersion", "serviceVersion"])
def test_identity_strings_must_not_be_empty(key: str) -> None:
    assert errors(MINIMAL + f"{key}: ''\n") == [f"m.yaml:11:{len(key) + 3}: {key} must not be empty"]


def test_schema_errors_do_not_stop_semantic_checks() -> None:
    text = MINIMAL.replace("  Order:\n", "  Unused:\n    fields: {}\n  Order:\n") + "bogus: 1\npackage: def\n"
    assert errors(text) == [
        "m.yaml:4:3: warning: type 'Unused' is not used by any topic or produces entry; remove it or reference it",
        "m.yaml:13:1: unknown key 'bogus' in manifest; allowed keys: " + ", ".join(manifest_schema()["properties"]),
        "m.yaml:14:10: package 'def' is a Python keyword and cannot be imported; choose another name, "
        "like 'def_service'",
    ]
