"""Types for an estate (DESIGN §12) as the model sees them: imported types under their owner's namespace, composed
and generic records as concrete records, closed records, per-field versions projected per topic version; and the
estate example served (a closed record's 422 names the unknown property)."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

import httpx
import pytest

from svcgen.codegen.ownership import write_package
from svcgen.codegen.render import render_package
from svcgen.contractdiff import compat_manifests, diff_manifests
from svcgen.manifest import ManifestError, load_manifest, load_manifest_text
from svcgen.manifest.model import Manifest, RecordDef
from svcgen.runtime._http.docspage import docs_page
from tests.support.codegen import REPO, imported

ESTATE = REPO / "examples" / "estate"


def estate(service: str) -> Manifest:
    return load_manifest((ESTATE / service / f"{service}.yaml").as_posix())


def record(manifest: Manifest, name: str) -> RecordDef:
    return next(r for r in manifest.types if r.name == name)


def fields(manifest: Manifest, name: str) -> dict[str, str]:
    return {f.wire: str(f.type) for f in record(manifest, name).fields}


def test_two_owners_types_of_one_name_live_apart_and_a_shared_owner_is_one_namespace() -> None:
    appointments = estate("appointments")
    # patients.Ref and billing.Ref are both reachable; billing's own import of patients is appointments' patients.
    assert fields(appointments, "billing_Ref") == {"invoiceId": "string"}
    assert fields(appointments, "patients_Ref") == {"patientId": "string"}
    assert fields(appointments, "billing_Invoice")["patient"] == "patients_Ref"
    assert fields(appointments, "billing_Invoice")["sex"] == "patients_Sex"
    assert not any(r.name.startswith("billing_patients") for r in appointments.types)
    produced = {topic.id: (str(topic.request), str(topic.response)) for topic in appointments.produces}
    assert produced == {
        "patients:get": ("patients_Ref", "patients_Patient_v2"),
        "billing:bill": ("billing_Bill", "billing_Invoice"),
    }


def test_extends_puts_the_bases_fields_first_and_omit_and_partial_apply() -> None:
    appointments = estate("appointments")
    assert fields(appointments, "Booking") == {
        "patientId": "string", "bookingId": "string", "slot": "datetime", "invoice": "billing_Ref?"
    }  # fmt: skip
    assert fields(appointments, "BookVisit") == {"patientId": "string", "slot": "datetime"}
    reschedule = record(appointments, "Reschedule")
    assert [(f.wire, str(f.type), f.default) for f in reschedule.fields] == [
        ("bookingId", "string?", None), ("slot", "datetime?", None), ("invoice", "billing_Ref?", None)
    ]  # fmt: skip
    # A constraint of the base comes along with its field.
    assert record(appointments, "BookVisit").fields[0].contract == {"minLength": 1}


def test_a_generic_record_becomes_one_concrete_record_per_argument() -> None:
    appointments = estate("appointments")
    assert fields(appointments, "Page_Booking") == {"items": "list[Booking]", "total": "integer"}
    (listing,) = [topic for topic in appointments.topics if topic.id == "appointments:list"]
    assert str(listing.response) == "Page_Booking"
    assert not any(r.name == "Page" for r in appointments.types)  # the template itself is no record


def test_two_uses_of_a_generic_record_whose_names_read_alike_are_two_records() -> None:
    # Box[Box[string]?] and Box[Box[string?]] both read Box_Box_string_null: the later takes a suffix.
    manifest = load_manifest_text(
        """svcgen: 1
service: boxes
types:
  Box: {params: [T], fields: {value: T}}
  Both:
    fields: {outer: "Box[Box[string]?]", inner: "Box[Box[string?]]", again: "Box[Box[string]?]"}
topics:
  - {id: boxes:put, request: Both, response: "Box[Box[string?]]"}
""",
        "boxes.yaml",
    )
    assert fields(manifest, "Both") == {
        "outer": "Box_Box_string_null", "inner": "Box_Box_string_null_2", "again": "Box_Box_string_null"
    }  # fmt: skip
    assert fields(manifest, "Box_Box_string_null") == {"value": "Box_string?"}
    assert fields(manifest, "Box_Box_string_null_2") == {"value": "Box_string_null"}
    assert str(manifest.topics[0].response) == "Box_Box_string_null_2"


def test_closed_is_per_record_and_the_manifests_default() -> None:
    appointments, billing = estate("appointments"), estate("billing")
    assert record(appointments, "Booking").closed and record(appointments, "Page_Booking").closed
    assert record(billing, "Bill").closed and not record(billing, "Invoice").closed
    # An imported record keeps its owner's closedness, whatever the importer's default.
    assert not record(appointments, "billing_Ref").closed


def test_a_topic_with_versions_is_registered_once_per_version_with_its_types_at_that_version() -> None:
    patients = estate("patients")
    registered = [(t.id, t.version, str(t.request), str(t.response)) for t in patients.topics]
    assert registered[:4] == [
        ("patients:register", "v1", "RegisterPatient_v1", "Patient_v1"),
        ("patients:register", "v2", "RegisterPatient_v2", "Patient_v2"),
        ("patients:get", "v1", "Ref", "Patient_v1"),  # Ref has no versioned field: one record for both
        ("patients:get", "v2", "Ref", "Patient_v2"),
    ]
    assert "fax" in fields(patients, "Patient_v1") and "phone" not in fields(patients, "Patient_v1")
    assert "phone" in fields(patients, "Patient_v2") and "fax" not in fields(patients, "Patient_v2")
    assert patients.versions == ("v1", "v2")


def test_two_owners_named_alike_need_an_import_alias(tmp_path: Path) -> None:
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "owner.yaml").write_text(
            "svcgen: 1\nservice: owner\ntypes:\n  Ref:\n    fields:\n      id: string\n"
            f"topics:\n  - id: {folder}:get\n    request: Ref\n    response: Ref\n",
            encoding="utf-8",
        )
    text = (
        "svcgen: 1\nservice: user\ntopics: []\nproduces:\n"
        "  - id: a:get\n    from: a/owner.yaml\n  - id: b:get\n    from: b/owner.yaml\n"
    )
    with pytest.raises(ManifestError) as info:
        load_manifest_text(text, (tmp_path / "user.yaml").as_posix())
    (error,) = [str(d) for d in info.value.diagnostics]
    assert ":8:11: the owner owner (" in error and "would take the namespace 'owner'" in error
    # Importing one under an alias gives each its own namespace.
    aliased = text.replace("topics: []\n", "imports:\n  other: b/owner.yaml\ntopics: []\n")
    model = load_manifest_text(aliased, (tmp_path / "user.yaml").as_posix())
    assert [str(topic.request) for topic in model.produces] == ["owner_Ref", "other_Ref"]


def test_the_estate_serves_its_versions_and_refuses_unknown_properties(tmp_path: Path) -> None:
    manifest = estate("patients")
    write_package(render_package(manifest, tmp_path), tmp_path / manifest.package)

    async def call(app: object, version: str, body: Mapping[str, object]) -> dict[str, object]:
        transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://service") as client:
            envelope = {"topic": "patients:register", "headers": {"svc-version": version}, "body": json.dumps(body)}
            answer = await client.post("/svc/invoke", json=envelope)
            result: dict[str, object] = answer.json()
            return result

    with imported(tmp_path, manifest.package) as package:
        app = importlib.import_module(f"{package.__name__}.service").create_app()
        body = {"name": "Ada", "bornOn": "1815-12-10", "phone": "555", "nmae": "x"}
        refused = asyncio.run(call(app, "v1", body))
        assert refused["statusCode"] == "validation-error"
        detail = json.loads(str(refused["body"]))["detail"]
        assert "nmae: unexpected property" in detail and "phone: unexpected property" in detail  # v1 has no phone
        del body["nmae"]
        accepted = asyncio.run(call(app, "v2", body))  # the stub answers not-implemented once the body decoded
        assert accepted["statusCode"] == "not-implemented"


def test_the_estate_is_compatible_and_each_manifest_diffs_clean_against_itself() -> None:
    manifests = [estate(service) for service in ("patients", "billing", "appointments")]
    report = compat_manifests(manifests)
    assert report.checked == 2 and report.findings == ()  # appointments sends patients:get@v2 and billing:bill
    assert all(not diff_manifests(m, m).findings for m in manifests)


def test_a_fields_default_is_the_same_on_its_query_parameter_and_its_component() -> None:
    manifest = estate("patients")
    files = {f.relpath: f.data for f in render_package(manifest, Path("."))}
    document = json.loads(files["contracts/http-api.json"])
    (limit,) = [p for p in document["paths"]["/patients"]["get"]["parameters"] if p["name"] == "limit"]
    component = document["components"]["schemas"]["ListPatients"]["properties"]["limit"]
    assert limit["required"] is False
    assert limit["schema"]["default"] == component["default"] == 50
    assert b"default 50." in docs_page(document)  # the docs page says it too


def test_a_plain_default_is_in_the_http_api_document_but_the_spec_rows_stay_as_the_table_says() -> None:
    manifest = load_manifest_text(
        "svcgen: 1\nservice: shop\nenums:\n  Status:\n    values: [placed, shipped]\ntypes:\n  Order:\n"
        "    fields:\n      id: string\n      qty: {type: integer, default: 1}\n"
        "      status: {type: Status, default: placed}\n      note: string?\n"
        "topics:\n  - id: orders:get\n    request: Order\n    response: Order\n    routes: [\"GET /orders/{id}\"]\n"
        "  - id: orders:put\n    request: Order\n    response: Order\n    routes: [\"PUT /orders/{id}\"]\n",
        "shop.yaml",
    )
    files = {f.relpath: f.data for f in render_package(manifest, Path("."))}
    document = json.loads(files["contracts/http-api.json"])
    properties = document["components"]["schemas"]["Order"]["properties"]
    assert properties["qty"]["default"] == 1
    assert properties["status"] == {"$ref": "#/components/schemas/Status", "default": "placed"}
    assert properties["note"]["default"] is None  # `T?` defaults to null
    parameters = {p["name"]: p for p in document["paths"]["/orders/{id}"]["get"]["parameters"]}
    assert parameters["qty"]["schema"]["default"] == 1 and parameters["status"]["schema"]["default"] == "placed"
    assert b"default 1." in docs_page(document) and b"default &quot;placed&quot;." in docs_page(document)
    # The service spec's rows (and the operations document compared against them) keep the table's schema.
    spec = json.loads(files["contracts/spec.json"])
    (row,) = [t for t in spec["topics"] if t["id"] == "orders:get"]
    assert "default" not in row["requestSchema"]["properties"]["qty"]
    assert b'"default"' not in files["contracts/openapi.json"]


@pytest.mark.parametrize(("alias", "proposal"), [("list", "owner"), ("Owner-Types", "owner_types"), ("2nd", "owner")])
def test_a_refused_namespace_is_answered_with_a_valid_one(tmp_path: Path, alias: str, proposal: str) -> None:
    (tmp_path / "owner.yaml").write_text(
        "svcgen: 1\nservice: owner\ntypes:\n  Thing: {fields: {id: string}}\n"
        "topics:\n  - {id: owner:get, request: Thing, response: Thing}\n",
        encoding="utf-8",
    )
    text = (f"svcgen: 1\nservice: user\nimports:\n  '{alias}': owner.yaml\n"
            "types:\n  Thing: {fields: {id: string}}\ntopics:\n  - {id: user:get, request: Thing, response: Thing}\n")
    with pytest.raises(ManifestError) as info:
        load_manifest_text(text, (tmp_path / "user.yaml").as_posix())
    (error,) = [str(d) for d in info.value.diagnostics if d.is_error]
    assert error.endswith(f", like {proposal!r}")
    # The name suggested is one the loader takes.
    assert load_manifest_text(text.replace(f"'{alias}'", proposal), (tmp_path / "user.yaml").as_posix()).service


def test_manifests_importing_each_other_are_one_error_naming_the_chain_once(tmp_path: Path) -> None:
    for name, other in (("a", "b"), ("b", "c"), ("c", "a")):
        (tmp_path / f"{name}.yaml").write_text(
            f"svcgen: 1\nservice: {name}\nimports:\n  {other}: {other}.yaml\ntypes:\n  Thing:\n    fields:\n"
            f"      id: string\ntopics:\n  - id: {name}:get\n    request: Thing\n    response: Thing\n",
            encoding="utf-8",
        )
    with pytest.raises(ManifestError) as info:
        load_manifest((tmp_path / "a.yaml").as_posix())
    (error,) = [str(d) for d in info.value.diagnostics if d.is_error]
    # Reported where the manifest loaded names the cycle, not once more inside each manifest of the chain.
    assert error.startswith(f"{(tmp_path / 'a.yaml').as_posix()}:4:6: owner's manifest 'b.yaml' is in an imports or "
                            "from: cycle: a.yaml → b.yaml → c.yaml → a.yaml; ")
    assert error.count("cycle") == 1 and "is invalid" not in error
    with pytest.raises(ManifestError) as info:
        load_manifest((tmp_path / "b.yaml").as_posix())  # the chain starts where the load does
    assert "cycle: b.yaml → c.yaml → a.yaml → b.yaml; " in str(info.value.diagnostics[0])


def test_imported_types_serve_as_topic_produces_and_event_types_directly(tmp_path: Path) -> None:
    patients = Path(os.path.relpath(ESTATE / "patients" / "patients.yaml", tmp_path)).as_posix()
    text = (
        f"svcgen: 1\nservice: desk\nimports:\n  patients: {patients}\n"
        "topics:\n  - id: desk:find\n    request: patients.Ref\n    response: patients.Patient_v2\n"
        "produces:\n  - id: patients:list\n    request: patients.ListPatients\n    response: patients.Page_Patient_v2\n"
        "events:\n  - id: desk:seen\n    payload: patients.Ref\n    key: patientId\n"
    )
    model = load_manifest_text(text, (tmp_path / "desk.yaml").as_posix())
    (topic,), (produced,), (event,) = model.topics, model.produces, model.events
    assert (str(topic.request), str(topic.response)) == ("patients_Ref", "patients_Patient_v2")
    assert str(produced.response) == "patients_Page_Patient_v2"
    assert str(event.payload) == "patients_Ref"
    assert fields(model, "patients_Page_Patient_v2")["items"] == "list[patients_Patient_v2]"


def test_one_owner_imported_under_two_namespaces_is_an_error_naming_both(tmp_path: Path) -> None:
    # It was a warning: the build then generated two classes for each of the owner's types (patients_Patient and
    # people_Patient), which do not mix, so a handler could not put the request into a field typed by the other.
    (tmp_path / "sub").mkdir()
    (tmp_path / "owner.yaml").write_text(
        "svcgen: 1\nservice: patients\ntypes:\n  Patient: {fields: {patientId: string}}\n"
        "topics:\n  - {id: patients:get, request: Patient, response: Patient}\n",
        encoding="utf-8",
    )
    text = ("svcgen: 1\nservice: desk\nimports:\n  patients: owner.yaml\n  people: sub/../owner.yaml\n"
            "types:\n  Visit: {fields: {who: patients.Patient}}\n"
            "topics:\n  - {id: desk:admit, request: people.Patient, response: Visit}\n")
    with pytest.raises(ManifestError) as info:
        load_manifest_text(text, (tmp_path / "desk.yaml").as_posix())
    (error,) = [str(d) for d in info.value.diagnostics]  # the uses of people.Patient are not errors of their own
    assert error == (
        f"{(tmp_path / 'desk.yaml').as_posix()}:5:3: 'sub/../owner.yaml' is already imported as 'patients': one "
        "owner's types under two namespaces would be two copies of each that do not mix (patients.Patient is not "
        "people.Patient); import it once and write patients.<Name>"
    )
    one = text.replace("  people: sub/../owner.yaml\n", "").replace("people.Patient", "patients.Patient")
    assert str(load_manifest_text(one, (tmp_path / "desk.yaml").as_posix()).topics[0].request) == "patients_Patient"


def test_an_owner_s_generic_record_applied_to_new_arguments_says_to_declare_it_locally(tmp_path: Path) -> None:
    """docs/manifest.md: an owner's generic record comes as the concrete records its manifest uses; applying it
    to new arguments is not supported. The error says so, instead of pointing at one of those concrete records."""
    patients = Path(os.path.relpath(ESTATE / "patients" / "patients.yaml", tmp_path)).as_posix()
    text = (f"svcgen: 1\nservice: user\nimports:\n  patients: {patients}\n"
            "types:\n  Visit: {fields: {id: string}}\n  Visits: {fields: {page: 'patients.Page[Visit]'}}\n"
            "topics:\n  - {id: user:get, request: Visit, response: Visits}\n")
    with pytest.raises(ManifestError) as info:
        load_manifest_text(text, (tmp_path / "user.yaml").as_posix())
    (error,) = [str(d) for d in info.value.diagnostics if d.is_error]
    assert error.endswith(":7:27: patients.Page is a generic record of patients, imported only as the concrete "
                          "records its manifest uses (patients.Page_Patient_v2); applying it to other arguments "
                          "is not supported: declare Page under 'types' here")


def test_a_shared_types_manifest_s_unused_generic_record_is_named_as_generic_not_missing(tmp_path: Path) -> None:
    """A shared-types manifest declares `Page` with `params: [T]` and uses it nowhere. Importing it as
    `shared.Page[Visit]` said "shared (shared) has no type 'Page'", though the file plainly has it; the error now says
    what the rule is (an owner's generic record comes only as the concrete records it uses) and the way out."""
    (tmp_path / "shared.yaml").write_text(
        "svcgen: 1\nservice: shared\ntypes:\n  Page:\n    params: [T]\n    fields: {items: 'list[T]'}\n",
        encoding="utf-8",
    )
    text = ("svcgen: 1\nservice: user\nimports:\n  shared: shared.yaml\n"
            "types:\n  Visit: {fields: {id: string}}\n  Visits: {fields: {page: 'shared.Page[Visit]'}}\n"
            "  Other: {fields: {page: shared.Page}}\n"
            "topics:\n  - {id: user:get, request: Other, response: Visits}\n")
    with pytest.raises(ManifestError) as info:
        load_manifest_text(text, (tmp_path / "user.yaml").as_posix())
    errors = [str(d).split(": ", 1)[1] for d in info.value.diagnostics if d.is_error]
    generic = ("shared.Page is a generic record of shared, imported only as the concrete records its manifest uses, "
               "and it uses none; applying it to other arguments is not supported: declare Page under 'types' here")
    assert errors == [generic, generic]


def test_a_default_of_an_imported_record_or_enum_is_held_to_the_owner_s_type(tmp_path: Path) -> None:
    """`money: {type: shared.Money, default: {...}}` was never checked: a default missing the owner's required field
    validated, and the build then failed with a traceback deriving the schemas. It is checked like a local one."""
    (tmp_path / "shared.yaml").write_text(
        "svcgen: 1\nservice: shared\nimports:\n  base: base.yaml\nenums:\n  Currency: {values: [EUR, USD]}\n"
        "types:\n  Money:\n    fields: {amountMinor: integer, currency: Currency, ref: base.Ref?}\n",
        encoding="utf-8",
    )
    (tmp_path / "base.yaml").write_text("svcgen: 1\nservice: base\ntypes:\n  Ref: {fields: {id: string}}\n",
                                        encoding="utf-8")
    good = ("svcgen: 1\nservice: user\nimports:\n  shared: shared.yaml\ntypes:\n  Visit:\n    fields:\n"
            "      money: {type: shared.Money, default: {amountMinor: 5, currency: EUR, ref: {id: r}}}\n"
            "      cur: {type: shared.Currency, default: USD}\n"
            "topics:\n  - {id: user:get, request: Visit, response: Visit}\n")
    assert load_manifest_text(good, (tmp_path / "user.yaml").as_posix()).service == "user"
    bad = (good.replace("currency: EUR, ref: {id: r}", "ref: {id: 3}")
           .replace("default: USD", "default: GBP"))  # fmt: skip
    with pytest.raises(ManifestError) as info:
        load_manifest_text(bad, (tmp_path / "user.yaml").as_posix())
    errors = [str(d).split(": ", 1)[1] for d in info.value.diagnostics if d.is_error]
    assert len(errors) == 2
    assert errors[0].startswith("default of field 'money' must fit its type shared.Money, got ")
    assert errors[1] == "default of field 'cur' must fit its type shared.Currency, got \"GBP\"; use one of EUR, USD"


def test_a_default_of_a_generic_record_applied_is_held_to_its_arguments(tmp_path: Path) -> None:
    """`b: {type: "Box[integer]", default: {value: 3}}` was refused ("must fit its type Box[integer]"): the default
    was decoded with the parameter T standing for a record. It is decoded with T as the argument, nested uses too."""
    text = ("svcgen: 1\nservice: gen\ntypes:\n  Box:\n    params: [T]\n    fields: {value: T?, more: 'list[Box[T]]?'}\n"
            "  Holder:\n    fields:\n"
            "      b: {type: 'Box[integer]', default: {value: 3, more: [{value: 4}]}}\n"
            "      c: {type: 'Box[string]', default: {value: 3}}\n"
            "      d: {type: 'Box[string]', default: {value: s, more: [{value: 5}]}}\n"
            "topics:\n  - {id: gen:get, request: Holder, response: Holder}\n")
    with pytest.raises(ManifestError) as info:
        load_manifest_text(text, (tmp_path / "gen.yaml").as_posix())
    errors = [str(d).split(": ", 1)[1] for d in info.value.diagnostics if d.is_error]
    assert [error.split(",", 1)[0] for error in errors] == [
        "default of field 'c' must fit its type Box[string]", "default of field 'd' must fit its type Box[string]"
    ]
    good = text.replace("{value: 3}}", "{value: x}}").replace("[{value: 5}]", "[{value: y}]")
    assert load_manifest_text(good, (tmp_path / "gen.yaml").as_posix()).service == "gen"


def test_an_owner_s_record_that_differs_between_its_versions_is_named_with_its_version_records(
    tmp_path: Path,
) -> None:
    """patients.yaml declares Patient, with a field `added: v2`: it reaches an importer as Patient_v1 and Patient_v2.
    `patients.Patient` said "patients (patients) has no type 'Patient'", though the file plainly has it."""
    (tmp_path / "patients.yaml").write_text(
        "svcgen: 1\nservice: patients\nversions: [v1, v2]\ntypes:\n"
        "  Patient: {fields: {name: string, phone: {type: string?, added: v2}}}\n"
        "topics:\n  - {id: patients:get, versions: [v1, v2], request: Patient, response: Patient}\n",
        encoding="utf-8",
    )
    text = ("svcgen: 1\nservice: ward\nimports:\n  patients: patients.yaml\n"
            "types:\n  Bed: {fields: {who: patients.Patient}}\n"
            "topics:\n  - {id: ward:get, request: Bed, response: Bed}\n")
    with pytest.raises(ManifestError) as info:
        load_manifest_text(text, (tmp_path / "ward.yaml").as_posix())
    errors = [str(d).split(": ", 1)[1] for d in info.value.diagnostics if d.is_error]
    assert errors == [
        "patients.Patient changes with the versions of patients, so it is imported as one record per version its "
        "manifest uses: patients.Patient_v1, patients.Patient_v2; name one"
    ]
    chosen = load_manifest_text(text.replace("patients.Patient}", "patients.Patient_v2}"),
                                (tmp_path / "ward.yaml").as_posix())  # fmt: skip
    assert fields(chosen, "Bed") == {"who": "patients_Patient_v2"}
