"""Semantic stage: one failing manifest per rule, with the exact diagnostic."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.manifests import MINIMAL, errors, load_ok, warnings

ORDER_TOPIC = """\
svcgen: 1
service: orders
types:
  Order:
    fields:
      orderId: string
      note: string?
topics:
  - id: orders:get
    request: Order
    response: Order
    routes: [{routes}]
"""


def with_routes(*routes: str) -> str:
    return ORDER_TOPIC.format(routes=", ".join(f'"{route}"' for route in routes))


# --- type expressions and names ------------------------------------------------------------------


def test_minimal_manifest_is_valid() -> None:
    assert load_ok(MINIMAL).service == "orders"


def test_type_expression_syntax_error_names_the_offset() -> None:
    assert errors(MINIMAL.replace("orderId: string", "orderId: list[string")) == [
        "m.yaml:6:16: invalid type expression 'list[string': missing ']' in type 'list[string' (at character 12)"
    ]
    assert errors(MINIMAL.replace("orderId: string", "orderId: {type: 'map'}")) == [
        "m.yaml:6:23: invalid type expression 'map': map needs an item type, like map[string] (at character 4)"
    ]


def test_unknown_type_with_did_you_mean_among_records() -> None:
    assert errors(MINIMAL.replace("response: Order", "response: Ordr")) == [
        "m.yaml:10:15: unknown type 'Ordr'; did you mean 'Order'?"
    ]


def test_unknown_type_with_did_you_mean_among_scalars() -> None:
    assert errors(MINIMAL.replace("orderId: string", "orderId: list[Strng]")) == [
        "m.yaml:6:16: unknown type 'Strng' in 'list[Strng]'; did you mean 'string'?"
    ]
    assert errors(MINIMAL.replace("orderId: string", "orderId: Integer?")) == [
        "m.yaml:6:16: unknown type 'Integer' in 'Integer?'; did you mean 'integer'?"
    ]


def test_unknown_type_without_a_close_name() -> None:
    assert errors(MINIMAL.replace("orderId: string", "orderId: Quux")) == [
        "m.yaml:6:16: unknown type 'Quux'; define it under 'types' or use a scalar "
        "(string, integer, float, boolean, datetime, bytes, any)"
    ]


def test_unused_record_type_is_a_warning_and_still_builds() -> None:
    text = MINIMAL.replace("types:\n", "types:\n  Spare:\n    fields: {x: integer}\n")
    assert warnings(text) == [
        "m.yaml:4:3: warning: type 'Spare' is not used by any topic or produces entry; remove it or reference it"
    ]
    assert [record.name for record in load_ok(text).types] == ["Spare", "Order"]


def test_types_used_only_by_unused_types_are_unused_too() -> None:
    text = MINIMAL.replace("types:\n", "types:\n  A:\n    fields: {b: B}\n  B:\n    fields: {a: 'A?'}\n")
    assert warnings(text) == [
        "m.yaml:4:3: warning: type 'A' is not used by any topic or produces entry; remove it or reference it",
        "m.yaml:6:3: warning: type 'B' is not used by any topic or produces entry; remove it or reference it",
    ]


def test_a_manifest_whose_types_are_all_used_has_no_warnings() -> None:
    assert warnings(MINIMAL) == []


def test_types_used_through_fields_and_produces_are_used() -> None:
    text = MINIMAL.replace("types:\n", "types:\n  Line:\n    fields: {sku: string}\n  Cap:\n    fields: {n: integer}\n")
    text = text.replace("orderId: string", "orderId: string\n      lines: 'map[list[Line]] | string'")
    load_ok(text + "produces:\n  - {id: payments:capture, request: Cap, response: 'Cap?'}\n")


def test_type_names_must_be_pascal_case() -> None:
    text = MINIMAL.replace("Order", "line_item")
    assert errors(text) == [
        "m.yaml:4:3: type name 'line_item' must be a PascalCase identifier; did you mean 'LineItem'?"
    ]


def test_type_names_must_not_be_scalar_names() -> None:
    text = MINIMAL.replace("types:\n", "types:\n  bytes:\n    fields: {x: integer}\n").replace(
        "request: Order", "request: Any"
    )
    text = text.replace("types:\n", "types:\n  Any:\n    fields: {y: integer}\n")
    assert errors(text) == [
        "m.yaml:4:3: type name 'Any' collides with the Python type of the scalar 'any'; choose another name",
        "m.yaml:6:3: type name 'bytes' is a built-in type name; name the record in PascalCase, like 'Bytes'",
    ]


def test_python_keywords_are_not_type_names() -> None:
    assert errors(MINIMAL.replace("Order", "None")) == [
        "m.yaml:4:3: type name 'None' is a Python keyword; choose another name"
    ]


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("orderID", "did you mean 'orderId'?"),
        ("order_id", "did you mean 'orderId'?"),
        ("OrderId", "did you mean 'orderId'?"),
        ("URLPath", "did you mean 'urlPath'?"),
        ("2fa", "use letters and digits starting with a lower-case letter, like orderId"),
    ],
)
def test_field_names_must_be_canonical_camel_case(name: str, hint: str) -> None:
    assert errors(MINIMAL.replace("orderId: string", f"'{name}': string")) == [
        f"m.yaml:6:7: field name {name!r} is not canonical camelCase; {hint}"
    ]


# --- defaults --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("type_", "default", "shown"),
    [
        ("integer", "'1'", '"1"'),
        ("integer", "true", "true"),
        ("integer", "1.5", "1.5"),
        ("float", "'x'", '"x"'),
        ("boolean", "0", "0"),
        ("string", "null", "null"),
        ("datetime", "2024-01-01", '"2024-01-01"'),
        ("datetime", "'2024-01-01T10:00:00'", '"2024-01-01T10:00:00"'),
        ("datetime", "'2024-13-01T10:00:00Z'", '"2024-13-01T10:00:00Z"'),
        ("bytes", "'not base64!'", '"not base64!"'),
        ("list[integer]", "[1, 'a']", '[1, "a"]'),
        ("map[string]", "[a]", '["a"]'),
        ("map[string]", "{a: 1}", '{"a": 1}'),
        ("integer | boolean", "'x'", '"x"'),
        ("Order", "{orderId: 1}", '{"orderId": 1}'),
        ("Order", "{}", "{} (orderId: required)"),
        ("Order", "{orderId: a, extra: 1}", '{"orderId": "a", "extra": 1} (extra: unexpected property)'),
    ],
)
def test_defaults_that_do_not_fit(type_: str, default: str, shown: str) -> None:
    text = MINIMAL.replace("orderId: string", f"orderId: string\n      value: {{type: '{type_}', default: {default}}}")
    assert errors(text) == [
        f"m.yaml:7:{len(type_) + 34}: default of field 'value' must fit its type {type_}, got {shown}"
    ]


@pytest.mark.parametrize("default", ["100000000000000000000000", "9223372036854775808", "-9223372036854775809"])
def test_an_integer_default_outside_64_bits_is_refused_at_validate_with_its_position(default: str) -> None:
    # The codec's rule (signed 64-bit): such a default would make every response carrying it a 500.
    text = MINIMAL.replace("orderId: string", f"orderId: string\n      value: {{type: integer, default: {default}}}")
    assert errors(text) == [
        f"m.yaml:7:39: default of field 'value' must fit its type integer, got {default} "
        "(integer out of range (signed 64-bit))"
    ]


def test_a_list_default_names_the_item_out_of_range_by_its_index() -> None:
    big = "1" + "0" * 30
    field = f"value: {{type: 'list[integer]', default: [1, {big}]}}"
    text = MINIMAL.replace("orderId: string", f"orderId: string\n      {field}")
    assert errors(text) == [
        f"m.yaml:7:47: default of field 'value' must fit its type list[integer], got [1, {big}] "
        "([1]: integer out of range (signed 64-bit))"
    ]


@pytest.mark.parametrize(
    ("type_", "default"),
    [
        ("integer", "3"),
        ("float", "3"),
        ("float", "2.5"),
        ("boolean", "false"),
        ("string", "''"),
        ("string?", "null"),
        ("datetime", "2024-01-01T10:00:00Z"),
        ("datetime", "'2024-01-01t10:00:00.123+02:00'"),
        ("bytes", "'aGVsbG8='"),
        ("set[string]", "[a, b]"),
        ("tuple[integer]", "[]"),
        ("map[float]", "{a: 1, b: 2.5}"),
        ("integer | string", "x"),
        ("any", "{a: [1, null]}"),
        ("Order", "{orderId: a}"),
        ("list[Order?]", "[null, {orderId: b}]"),
    ],
)
def test_defaults_that_fit(type_: str, default: str) -> None:
    load_ok(
        MINIMAL.replace("orderId: string", f"orderId: string\n      value: {{type: '{type_}', default: {default}}}")
    )


# --- topics ----------------------------------------------------------------------------------------


def test_duplicate_topic_id_and_version() -> None:
    text = MINIMAL + "  - id: orders:get\n    request: Order\n    response: Order\n"
    assert errors(text) == [
        "m.yaml:11:9: topic 'orders:get' without a version is already defined at line 8; "
        "each (id, version) must be unique"
    ]
    text = MINIMAL.replace("    request", "    version: v1\n    request") + (
        "  - {id: orders:get, version: v2, request: Order, response: Order}\n"
        "  - {id: orders:get, version: v1, request: Order, response: Order}\n"
    )
    assert errors(text) == [
        "m.yaml:13:10: topic 'orders:get' version 'v1' is already defined at line 8; each (id, version) must be unique"
    ]


def test_duplicate_produces_entries() -> None:
    text = (
        MINIMAL
        + "produces:\n  - {id: a:b, request: Order, response: Order}\n  - {id: a:b, request: Order, response: Order}\n"
    )
    assert errors(text) == [
        "m.yaml:13:10: produces entry 'a:b' without a version is already defined at line 12; "
        "each (id, version) must be unique"
    ]


def test_a_topic_may_be_both_handled_and_produced() -> None:
    load_ok(MINIMAL + "produces:\n  - {id: orders:get, request: Order, response: Order}\n")


def test_reserved_topic_ids() -> None:
    assert errors(MINIMAL.replace("id: orders:get", "id: 'svc:orders'")) == [
        "m.yaml:8:9: topic id 'svc:orders' is reserved: ids starting with 'svc:' belong to the runtime; "
        "choose another id"
    ]


def test_topic_ids_and_versions_need_a_letter_or_digit() -> None:
    text = MINIMAL.replace("id: orders:get", "id: '::'\n    version: '--'") + (
        "produces:\n  - {id: '-', request: Order, response: Order}\n"
        "  - {id: '注文:作成', request: Order, response: Order}\n"
    )
    # '注文:作成' has letters, but not the ASCII ones its handler module and operation names are made of.
    assert errors(text) == [
        "m.yaml:8:9: topic id '::' needs at least one ASCII letter or digit, like orders:place",
        "m.yaml:9:14: version '--' needs at least one ASCII letter or digit, like v1",
        "m.yaml:13:10: topic id '-' needs at least one ASCII letter or digit, like orders:place",
        "m.yaml:14:10: topic id '注文:作成' needs at least one ASCII letter or digit, like orders:place",
    ]


def test_produces_may_call_reserved_topics() -> None:
    load_ok(MINIMAL + "produces:\n  - {id: 'svc:mesh:query:fleet', request: Order, response: Order}\n")


# --- routes ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("route", "message"),
    [
        ("POST", 'route \'POST\' must be "METHOD /path", like "POST /orders"'),
        ("POST /a /b", 'route \'POST /a /b\' must be "METHOD /path", like "POST /orders"'),
        ("post /orders", "unknown method 'post' in route 'post /orders'; did you mean 'POST'?"),
        (
            "FETCH /orders",
            "unknown method 'FETCH' in route 'FETCH /orders'; use one of DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT",
        ),
        ("GET orders", "route path 'orders' must start with '/', like '/orders'"),
        ("GET /orders?x=1", "route path '/orders?x=1' must not contain a query or fragment ('?' or '#')"),
        ("GET /a//b", "route path '/a//b' has an empty segment ('//')"),
        (
            "GET /orders/id-{orderId}",
            "route path '/orders/id-{orderId}': 'id-{orderId}' is not a placeholder; "
            "a placeholder is a whole segment like {name}",
        ),
        (
            "GET /orders/{order-id}",
            "route path '/orders/{order-id}': '{order-id}' is not a placeholder; "
            "a placeholder is a whole segment like {name}",
        ),
        ("GET /{orderId}/{orderId}", "route path '/{orderId}/{orderId}' uses placeholder {orderId} twice"),
    ],
)
def test_route_syntax(route: str, message: str) -> None:
    assert errors(with_routes(route)) == [f"m.yaml:12:14: {message}"]


def test_route_placeholder_must_name_a_request_field() -> None:
    assert errors(with_routes("GET /orders/{ordrId}")) == [
        "m.yaml:12:14: route placeholder {ordrId} names no field of Order; did you mean 'orderId'?"
    ]
    assert errors(with_routes("GET /orders/{zzz}")) == [
        "m.yaml:12:14: route placeholder {zzz} names no field of Order; its fields are orderId, note"
    ]


def test_route_placeholders_need_a_record_request() -> None:
    text = with_routes("GET /orders/{orderId}").replace("request: Order", "request: string")
    assert errors(text) == [
        "m.yaml:12:14: route 'GET /orders/{orderId}' has placeholder {orderId}, but the request type string is not a "
        "record; placeholders name fields of a record request"
    ]


def test_version_placeholder_on_a_single_version_topic_is_a_warning() -> None:
    # Removing a version must not force a route change that breaks the remaining version's callers.
    text = with_routes("GET /{version}/orders")
    assert warnings(text) == [
        "m.yaml:12:14: warning: route 'GET /{version}/orders': {version} has only the unversioned topic of "
        "orders:get to select; the route keeps serving its callers (drop the segment once nobody calls it this way)"
    ]


def test_version_placeholder_is_never_a_request_field() -> None:
    text = with_routes("GET /orders/{version}").replace("note: string?", "version: string")
    assert errors(text) == [
        "m.yaml:12:14: route 'GET /orders/{version}': {version} is reserved for selecting the topic version and is "
        "never delivered to request field 'version'; rename the field and its placeholder"
    ]


def test_version_placeholder_across_versions_is_valid() -> None:
    text = with_routes("GET /{version}/orders/{orderId}").replace("    request", "    version: v1\n    request")
    manifest = load_ok(text + "  - {id: orders:get, version: v2, request: Order, response: Order}\n")
    assert [str(route) for route in manifest.topics[0].routes] == ["GET /{version}/orders/{orderId}"]


def test_a_route_shadowed_by_an_earlier_one_is_unreachable() -> None:
    assert errors(with_routes("GET /orders/{orderId}", "GET /orders/new")) == [
        "m.yaml:12:39: route 'GET /orders/new' (topic orders:get) can never match: route 'GET /orders/{orderId}' "
        "(topic orders:get, line 12) comes first and matches every request it would; "
        "list it before that route, or remove it"
    ]


def test_shadowing_is_checked_across_topics_in_manifest_order() -> None:
    text = with_routes("GET /orders/{orderId}") + (
        "  - id: orders:new\n    request: Order\n    response: Order\n    routes: ['GET /orders/{note}', 'GET /x']\n"
    )
    assert errors(text) == [
        "m.yaml:16:14: route 'GET /orders/{note}' (topic orders:new) can never match: route 'GET /orders/{orderId}' "
        "(topic orders:get, line 12) comes first and matches every request it would; "
        "list it before that route, or remove it"
    ]


def test_routes_that_can_both_match_are_fine() -> None:
    load_ok(
        with_routes(
            "GET /orders/new",
            "GET /orders/{orderId}",
            "POST /orders/{orderId}",
            "GET /orders/{orderId}/x",
            "GET /orders/",
        )
    )


# --- jsonSchema files ------------------------------------------------------------------------------

SCHEMA_TYPE = MINIMAL.replace("types:\n", "types:\n  Address:\n    jsonSchema: {path}\n").replace(
    "response: Order", "response: Address"
)


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "schemas").mkdir()
    return tmp_path


def test_json_schema_file_is_read_relative_to_the_manifest(in_tmp: Path) -> None:
    (in_tmp / "schemas" / "address.json").write_text('{"type": "object", "properties": {"city": {"type": "string"}}}')
    (in_tmp / "svc").mkdir()
    manifest = load_ok(SCHEMA_TYPE.format(path="../schemas/address.json"), path="svc/m.yaml")
    assert manifest.types[0].json_schema == "../schemas/address.json"


def test_json_schema_file_missing(in_tmp: Path) -> None:
    assert errors(SCHEMA_TYPE.format(path="schemas/nope.json"), path="m.yaml") == [
        "m.yaml:5:17: jsonSchema file 'schemas/nope.json' not found (looked for schemas/nope.json); "
        "the path is relative to the manifest's directory"
    ]
    assert errors(SCHEMA_TYPE.format(path="nope.json"), path="sub/m.yaml") == [
        "sub/m.yaml:5:17: jsonSchema file 'nope.json' not found (looked for sub/nope.json); "
        "the path is relative to the manifest's directory"
    ]


def test_json_schema_file_invalid_json(in_tmp: Path) -> None:
    (in_tmp / "schemas" / "bad.json").write_text('{"type": "object",\n  "properties": }')
    assert errors(SCHEMA_TYPE.format(path="schemas/bad.json")) == [
        "m.yaml:5:17: jsonSchema file 'schemas/bad.json' is not valid JSON: Expecting value at line 2 column 17"
    ]


def test_json_schema_file_not_a_schema(in_tmp: Path) -> None:
    (in_tmp / "schemas" / "list.json").write_text("[1, 2]")
    (in_tmp / "schemas" / "wrong.json").write_text('{"type": "objekt"}')
    assert errors(SCHEMA_TYPE.format(path="schemas/list.json")) == [
        "m.yaml:5:17: jsonSchema file 'schemas/list.json' must hold a JSON Schema object, not a JSON list"
    ]
    [message] = errors(SCHEMA_TYPE.format(path="schemas/wrong.json"))
    assert message.startswith("m.yaml:5:17: jsonSchema file 'schemas/wrong.json' is not a valid JSON Schema at type: ")


def test_json_schema_path_must_be_relative(in_tmp: Path) -> None:
    assert errors(SCHEMA_TYPE.format(path="/etc/schema.json")) == [
        "m.yaml:5:17: jsonSchema path '/etc/schema.json' must be relative to the manifest's directory"
    ]


def test_route_placeholders_against_json_schema_properties(in_tmp: Path) -> None:
    (in_tmp / "schemas" / "address.json").write_text('{"type": "object", "properties": {"city": {"type": "string"}}}')
    text = SCHEMA_TYPE.format(path="schemas/address.json").replace("request: Order", "request: Address")
    text = text.replace("response: Address", "response: Order")
    load_ok(text + "    routes: ['GET /cities/{city}']\n")
    assert errors(text + "    routes: ['GET /cities/{town}']\n") == [
        "m.yaml:13:14: route placeholder {town} names no field of Address; its fields are city"
    ]


# --- health and package ----------------------------------------------------------------------------


def test_health_names_must_make_python_function_names() -> None:
    assert errors(MINIMAL + "health: [db-main, 'db main', 2fa, import, '--']\n") == [
        "m.yaml:11:19: health checks 'db-main' and 'db main' both become the function db_main(); rename one",
        "m.yaml:11:30: health check '2fa' becomes the function name '2fa', which is not a Python identifier; "
        "start the name with a letter",
        "m.yaml:11:35: health check 'import' becomes the function name 'import', which is a Python keyword; "
        "choose another name",
        "m.yaml:11:43: health check '--' has no ASCII letters or digits to name its function",
    ]


def test_package_must_not_be_a_python_keyword() -> None:
    assert errors(MINIMAL + "package: class\n") == [
        "m.yaml:11:10: package 'class' is a Python keyword and cannot be imported; choose another name, "
        "like 'class_service'"
    ]



def test_package_must_not_take_the_name_of_a_module_the_service_imports() -> None:
    # `package: json` built, but `svcgen serve out/json` then imported the standard library's json as the package.
    hint = ("is the name of a module the service itself imports (Python's standard library, svcgen or its server); "
            "the generated package would hide it, or be hidden by it; choose another name, like")
    assert errors(MINIMAL + "package: json\n") == [f"m.yaml:11:10: package 'json' {hint} 'json_service'"]
    assert errors(MINIMAL + "package: svcgen\n") == [f"m.yaml:11:10: package 'svcgen' {hint} 'svcgen_service'"]
    assert load_ok(MINIMAL + "package: orders_service\n").package == "orders_service"

# --- all at once -----------------------------------------------------------------------------------


def test_every_semantic_error_is_reported_in_position_order() -> None:
    text = """\
svcgen: 1
service: orders
package: def
types:
  Order:
    fields:
      orderID: string
      count: {type: integer, default: many}
  Spare:
    fields: {x: integer}
topics:
  - id: orders:get
    request: Ordr
    response: Order
    routes: ["GET /orders/{id}", "GET /orders/{x}"]
"""
    assert errors(text) == [
        "m.yaml:3:10: package 'def' is a Python keyword and cannot be imported; "
        "choose another name, like 'def_service'",
        "m.yaml:7:7: field name 'orderID' is not canonical camelCase; did you mean 'orderId'?",
        "m.yaml:8:39: default of field 'count' must fit its type integer, got \"many\"",
        "m.yaml:9:3: warning: type 'Spare' is not used by any topic or produces entry; remove it or reference it",
        "m.yaml:13:14: unknown type 'Ordr'; did you mean 'Order'?",
        "m.yaml:15:34: route 'GET /orders/{x}' (topic orders:get) can never match: route 'GET /orders/{id}' "
        "(topic orders:get, line 15) comes first and matches every request it would; "
        "list it before that route, or remove it",
    ]


# --- declared statuses ------------------------------------------------------------------------------


def test_success_and_failures_hold_statuses_of_their_kind() -> None:
    loaded = load_ok(MINIMAL + "    success: [created, ok]\n    failures: [conflict, not-found]\n")
    (topic,) = loaded.topics
    assert (topic.success, topic.failures) == (("created", "ok"), ("conflict", "not-found"))
    assert load_ok(MINIMAL).topics[0].success == ("ok",)
    text = MINIMAL + "    success: [conflict, creatd, ok, ok]\n    failures: [created, nope]\n"
    assert errors(text) == [
        "m.yaml:11:15: 'conflict' is a failure status (HTTP 409), so it cannot be under 'success'; list it under "
        "'failures', or use one of ok, created, accepted, updated, deleted, ignored",
        "m.yaml:11:25: 'creatd' is not a status; did you mean 'created'?",
        "m.yaml:11:37: status 'ok' is listed twice under 'success'; remove one",
        "m.yaml:12:16: 'created' is a success status (HTTP 201), so it cannot be under 'failures'; list it under "
        "'success', or use one of bad-request, unauthorized, forbidden, not-found, conflict, validation-error, "
        "too-many-requests, unexpected-error, not-implemented, service-unavailable, timeout",
        "m.yaml:12:25: 'nope' is not a status; use one of bad-request, unauthorized, forbidden, not-found, conflict, "
        "validation-error, too-many-requests, unexpected-error, not-implemented, service-unavailable, timeout",
    ]


def test_success_needs_a_status() -> None:
    assert errors(MINIMAL + "    success: []\n") == [
        "m.yaml:11:14: success needs at least one status, like [created]; leave it out for the default [ok]"
    ]


EVENTS = """\
svcgen: 1
service: notes
types:
  Ping:
    fields:
      id: string
"""


def test_events_whose_ids_differ_only_in_punctuation_cannot_share_a_subject() -> None:
    # `nest:big` and `nest.big` both slug to nest_big: one subject, so each event's subscribers got the other's too.
    text = EVENTS + "events:\n  - {id: 'nest:big', payload: Ping}\n  - {id: nest.big, payload: Ping}\n"
    assert errors(text) == [
        "m.yaml:9:10: 'nest.big' would share the subject svc.event.notes.nest_big with 'nest:big' at line 8 (ids and "
        "versions that differ only in punctuation do); rename one of them"
    ]
    assert load_ok(EVENTS + "events:\n  - {id: 'nest:big', payload: Ping}\n  - {id: 'nest:small', payload: Ping}\n")


def test_subscriptions_that_would_share_a_durable_consumer_are_an_error() -> None:
    # `a:b` v `c` and `a:b:c` have different subjects but one durable consumer notes__a_b_c: one would bind to the
    # other's consumer and handle its messages.
    text = EVENTS + (
        "subscribes:\n"
        "  - {id: 'a:b', version: c, publisher: orders, payload: Ping}\n"
        "  - {id: 'a:b:c', publisher: orders, payload: Ping}\n"
    )
    assert errors(text) == [
        "m.yaml:9:10: 'a:b:c' would share the durable consumer notes__a_b_c on SVC_EVENTS_ORDERS with 'a:b' "
        "version 'c' at line 8 (ids and versions that differ only in punctuation do); rename one of them"
    ]


# --- durations -------------------------------------------------------------------------------------

DURATIONS = """\
svcgen: 1
service: orders
types:
  Order:
    fields: {{orderId: string}}
topics:
  - id: orders:get
    request: Order
    response: Order
    timeout: {text}
subscribes:
  - id: stock:moved
    publisher: stock
    payload: Order
    delivery: {{backoff: [{text}], ackWait: {text}}}
"""


@pytest.mark.parametrize(("text", "seconds"), [("500ms", 0.5), ("2s", 2.0), ("1.5m", 90.0), ("1h", 3600.0),
                                               ("2 s", 2.0)])  # fmt: skip
def test_a_topic_timeout_and_a_delivery_accept_the_same_durations(text: str, seconds: float) -> None:
    # A topic's timeout refused `1h` and `2 s`, which a subscription's ackWait and backoff took: one rule now.
    built = load_ok(DURATIONS.format(text=text))
    (subscription,) = built.subscribes
    assert (built.topics[0].timeout, subscription.delivery.backoff, subscription.delivery.ack_wait) == (
        seconds, (seconds,), seconds
    )


@pytest.mark.parametrize("text", ["soon", "2 seconds", "1d", "-1s", "0s", "0ms"])
def test_a_topic_timeout_and_a_delivery_refuse_the_same_texts_in_the_same_words(text: str) -> None:
    found = errors(DURATIONS.format(text=text))
    # What follows the key's name at each position: the same judgement of the same text.
    judged = {line.split(": ", 1)[1].split(f"{text!r}", 1)[1] for line in found}
    assert len(found) == 3 and len(judged) == 1, found
    assert [line.split(": ", 1)[1].split(" ", 1)[0] for line in found] == ["timeout", "backoff", "ackWait"]


def test_a_bare_number_where_a_duration_belongs_is_told_to_take_a_unit_not_quotes() -> None:
    # `ackWait: 30` was told `quote it: "30"`, which is refused in turn; `30s` is what validates.
    assert errors(DURATIONS.format(text="30").replace("[30]", "[1.5]")) == [
        "m.yaml:10:14: 'timeout' must be a duration like 500ms, 10s, 5m or 1h, got 30; write it with a unit: 30s",
        "m.yaml:15:26: each item of 'backoff' must be a duration like 500ms, 10s, 5m or 1h, got 1.5; write it with a "
        "unit: 1.5s",
        "m.yaml:15:41: 'ackWait' must be a duration like 500ms, 10s, 5m or 1h, got 30; write it with a unit: 30s",
    ]
    # No unit makes zero or `true` a duration, and quoting never does: no hint then.
    assert errors(DURATIONS.format(text="1s").replace("timeout: 1s", "timeout: 0")) == [
        "m.yaml:10:14: 'timeout' must be a duration like 500ms, 10s, 5m or 1h, got 0"
    ]
    # Other strings keep theirs: `serviceVersion: 2` meant the text "2".
    assert errors(MINIMAL.replace("service: orders", "service: orders\nserviceVersion: 2")) == [
        'm.yaml:3:17: serviceVersion must be a string, got 2; quote it: "2"'
    ]
