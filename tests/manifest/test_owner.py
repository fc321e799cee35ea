"""`produces: - from: <owner's manifest>`: the entry takes the owner's topic and types; every way it can go wrong
is one error at the entry's position, reported with the manifest's other errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from svcgen.manifest import ManifestError, load_manifest, load_manifest_with_warnings
from svcgen.manifest.model import Manifest
from svcgen.manifest.typeexpr import parse_type
from tests.support.manifests import MINIMAL

PAYMENTS = """\
svcgen: 1
service: payments
enums:
  CaptureStatus:
    values: [captured, failed]
types:
  Money:
    fields:
      amountMinor: {type: integer, minimum: 0}
  CapturePayment:
    fields:
      orderId: string
      amount: Money
  Capture:
    fields:
      captureId: string
      status: CaptureStatus
  Unrelated:
    fields:
      x: string
topics:
  - id: payments:capture
    version: v1
    request: CapturePayment
    response: Capture
  - id: payments:refund
    version: v1
    request: Unrelated
    response: Unrelated
  - id: payments:refund
    version: v2
    request: Unrelated
    response: Unrelated
"""
ORDERS = MINIMAL.replace("topics:\n", "{local}topics:\n") + "produces:\n  - id: {topic}\n{entry}"
"""A producer of one topic: `local` adds types, `entry` is the rest of its produces entry."""


def write(folder: Path, *, topic: str = "payments:capture", entry: str = "    from: ../payments/payments.yaml\n",
          local: str = "") -> Path:  # fmt: skip
    (folder / "payments").mkdir(exist_ok=True)
    (folder / "payments" / "payments.yaml").write_text(PAYMENTS, encoding="utf-8")
    (folder / "orders").mkdir(exist_ok=True)
    path = folder / "orders" / "orders.yaml"
    path.write_text(ORDERS.format(topic=topic, entry=entry, local=local), encoding="utf-8")
    return path


def errors_of(path: Path) -> list[str]:
    with pytest.raises(ManifestError) as info:
        load_manifest(path.as_posix())
    return [str(diagnostic) for diagnostic in info.value.diagnostics if diagnostic.is_error]


def test_the_entry_takes_the_owners_topic_version_and_the_types_it_reaches(tmp_path: Path) -> None:
    model: Manifest = load_manifest(write(tmp_path).as_posix())
    (produced,) = model.produces
    assert (produced.id, produced.version) == ("payments:capture", "v1")  # the owner's only version
    # Under the owner's namespace (its service name): payments.CapturePayment is payments_CapturePayment.
    assert (produced.request, produced.response) == (
        parse_type("payments_CapturePayment"),
        parse_type("payments_Capture"),
    )
    assert [record.name for record in model.types] == [
        "Order", "payments_CapturePayment", "payments_Money", "payments_Capture"
    ]
    assert [enum.name for enum in model.enums] == ["payments_CaptureStatus"]
    assert next(r for r in model.types if r.name == "payments_Money").fields[0].contract == {"minimum": 0}


def test_a_local_type_of_the_owners_name_lives_apart_from_it(tmp_path: Path) -> None:
    local = "  Money:\n    fields:\n      amountMinor: integer\n"
    text = write(tmp_path, local=local).read_text().replace("total: integer", "total: Money")
    path = tmp_path / "orders" / "orders.yaml"
    path.write_text(text, encoding="utf-8")
    loaded = load_manifest_with_warnings(path.as_posix())
    model = loaded.manifest
    names = [record.name for record in model.types]
    assert "Money" in names and "payments_Money" in names
    # The copy is a type of its own; the warning names the first difference, with both values, and the way out.
    assert (
        "warning: type 'Money' is not payments.Money: they differ first at fields[amountMinor].contract.minimum "
        "(absent here, 0 in payments); use payments.Money to take the owner's, or rename this one"
    ) in [str(w).split(": ", 1)[1] for w in loaded.warnings]
    local_money = next(r for r in model.types if r.name == "Money")
    assert local_money.fields[0].contract == {}


def test_a_local_type_may_use_the_owners_types_by_namespace(tmp_path: Path) -> None:
    local = "  Refund:\n    fields:\n      amount: payments.Money\n      status: payments.CaptureStatus\n"
    text = write(tmp_path, local=local).read_text()
    path = tmp_path / "orders" / "orders.yaml"
    path.write_text(text.replace("response: Order\n", "response: Refund\n", 1), encoding="utf-8")
    model = load_manifest(path.as_posix())
    refund = next(r for r in model.types if r.name == "Refund")
    assert [str(f.type) for f in refund.fields] == ["payments_Money", "payments_CaptureStatus"]


def test_a_missing_owner_file_is_one_error_at_from(tmp_path: Path) -> None:
    path = write(tmp_path, entry="    from: ../nowhere/payments.yaml\n")
    assert errors_of(path) == [
        f"{path.as_posix()}:13:11: owner's manifest '../nowhere/payments.yaml' not found (looked for "
        f"{tmp_path.as_posix()}/nowhere/payments.yaml); the path is relative to the manifest's directory"
    ]


def test_an_unknown_topic_is_one_error_at_the_id_with_a_suggestion(tmp_path: Path) -> None:
    path = write(tmp_path, topic="payments:captur")
    assert errors_of(path) == [
        f"{path.as_posix()}:12:9: owner payments (../payments/payments.yaml) serves no topic 'payments:captur'; "
        "did you mean 'payments:capture'?"
    ]


def test_an_ambiguous_or_unknown_version_is_one_error(tmp_path: Path) -> None:
    path = write(tmp_path, topic="payments:refund")
    assert errors_of(path) == [
        f"{path.as_posix()}:12:9: owner payments (../payments/payments.yaml) serves payments:refund in versions "
        "'v1', 'v2'; name one with 'version'"
    ]
    path = write(tmp_path, topic="payments:refund", entry="    version: v3\n    from: ../payments/payments.yaml\n")
    assert errors_of(path) == [
        f"{path.as_posix()}:13:14: owner payments (../payments/payments.yaml) serves payments:refund in versions "
        "'v1', 'v2', not 'v3'"
    ]
    model = load_manifest(write(tmp_path, topic="payments:refund", entry="    version: v2\n    from: "
                                "../payments/payments.yaml\n").as_posix())  # fmt: skip
    assert model.produces[0].version == "v2"


def test_from_with_its_own_request_is_an_error_and_without_from_request_is_required(tmp_path: Path) -> None:
    path = write(tmp_path, entry="    from: ../payments/payments.yaml\n    request: Order\n")
    assert errors_of(path) == [
        f"{path.as_posix()}:14:5: a produces entry with 'from' takes its request type from the owner's manifest; "
        "remove 'request', or 'from' to declare the types here"
    ]
    path = write(tmp_path, entry="    request: Order\n")
    assert errors_of(path) == [
        f"{path.as_posix()}:12:5: missing required key 'response' in each produces entry; add it: a type expression "
        "like string, list[LineItem] or LineItem, or take the types from the owner with 'from: <its manifest>'"
    ]


def test_the_owners_errors_and_the_manifests_own_come_in_one_pass(tmp_path: Path) -> None:
    path = write(tmp_path, topic="payments:nothing")
    path.write_text(path.read_text().replace("orderId: string", "orderId: strin"), encoding="utf-8")
    found = errors_of(path)
    assert [line.split(": ", 1)[0].rsplit(":", 2)[1:] for line in found] == [["6", "16"], ["12", "9"]]
    assert "unknown type 'strin'" in found[0] and "serves no topic 'payments:nothing'" in found[1]


def test_an_invalid_owner_is_named_with_its_first_error(tmp_path: Path) -> None:
    path = write(tmp_path)
    owner = tmp_path / "payments" / "payments.yaml"
    owner.write_text(PAYMENTS.replace("orderId: string", "orderId: strin"), encoding="utf-8")
    (error,) = errors_of(path)
    assert error.startswith(f"{path.as_posix()}:13:11: owner's manifest '../payments/payments.yaml' is invalid: ")
    assert "unknown type 'strin'" in error


def test_an_invalid_owner_does_not_make_its_namespace_an_unknown_one(tmp_path: Path) -> None:
    """The producer's own record uses payments.Money, reached through the `from:` entry. With payments invalid, the
    use was also reported as "unknown namespace 'payments' ...; import its manifest under 'imports: ...'", a wrong
    fix: the entry's error is the one cause, reported once."""
    path = write(tmp_path, local="  Held:\n    fields: {money: payments.Money}\n")
    path.write_text(path.read_text().replace("request: Order", "request: Held"), encoding="utf-8")
    assert load_manifest(path.as_posix()).topics[0].request.name == "Held"
    owner = tmp_path / "payments" / "payments.yaml"
    owner.write_text(PAYMENTS.replace("orderId: string", "orderId: strin"), encoding="utf-8")
    (error,) = errors_of(path)
    assert "owner's manifest '../payments/payments.yaml' is invalid: " in error


def test_a_from_cycle_is_an_error_not_a_recursion(tmp_path: Path) -> None:
    path = write(tmp_path)
    owner = tmp_path / "payments" / "payments.yaml"
    owner.write_text(
        PAYMENTS + "produces:\n  - id: orders:get\n    from: ../orders/orders.yaml\n", encoding="utf-8"
    )
    (error,) = errors_of(path)
    assert "is in an imports or from: cycle: orders.yaml → ../payments/payments.yaml → orders.yaml; " in error


def test_a_manifest_naming_itself_is_told_its_own_types_need_no_from(tmp_path: Path) -> None:
    # A service subscribing to its own event may reach for `from:` its own manifest; a cycle of one says little.
    path = tmp_path / "orders.yaml"
    text = MINIMAL + "events:\n  - {id: orders:placed, payload: Order}\n"
    path.write_text(text + "subscribes:\n  - {id: orders:placed, from: orders.yaml}\n", encoding="utf-8")
    (error,) = errors_of(path)
    assert error == (
        f"{path.as_posix()}:14:31: 'orders.yaml' is this manifest itself: its own types need no 'from:' or import (to "
        "handle an event it publishes, subscribe with 'payload: <Type>' and 'publisher: <its service>')"
    )


def test_an_entry_taking_the_owners_version_repeats_one_that_names_it(tmp_path: Path) -> None:
    entry = "    from: ../payments/payments.yaml\n  - id: payments:capture\n    version: v1\n    request: Order\n" \
            "    response: Order\n"  # fmt: skip
    path = write(tmp_path, entry=entry)
    assert errors_of(path) == [
        f"{path.as_posix()}:14:9: produces entry 'payments:capture' version 'v1' is already defined at line 12; each "
        "(id, version) must be unique"
    ]


# --- each file read once per load ---------------------------------------------------------------------------------


def link(number: int, owner: int | None) -> str:
    """Service `s<number>` owning `s<number>:get`; with an owner, it also produces the owner's topic from it."""
    text = (
        f"svcgen: 1\nservice: s{number}\ntypes:\n  Thing{number}:\n    fields:\n      id: string\n"
        f"topics:\n  - id: s{number}:get\n    request: Thing{number}\n    response: Thing{number}\n"
    )
    if owner is not None:
        text += f"produces:\n  - id: s{owner}:get\n    from: s{owner}.yaml\n"
    return text


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """Every file of the test's folder its loads read, by name, in order (jsonschema's own files left out)."""
    read: list[str] = []
    original = Path.read_text

    def counted(self: Path, *args: object, **kwargs: object) -> str:
        if self.resolve().is_relative_to(tmp_path.resolve()):
            read.append(self.name)
        return original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "read_text", counted)
    return read


def test_a_chain_of_four_owners_loads_each_manifest_once(tmp_path: Path, reads: list[str]) -> None:
    for number in range(5):  # s0 takes from s1, ..., s3 from s4
        (tmp_path / f"s{number}.yaml").write_text(link(number, number + 1 if number < 4 else None), encoding="utf-8")
    model = load_manifest(tmp_path / "s0.yaml")
    assert sorted(reads) == ["s0.yaml", "s1.yaml", "s2.yaml", "s3.yaml", "s4.yaml"]
    assert [topic.id for topic in model.produces] == ["s1:get"]
    assert [record.name for record in model.types] == ["Thing0", "s1_Thing1"]  # under the owner's namespace


def test_an_owner_two_entries_name_and_a_schema_file_are_read_once(tmp_path: Path, reads: list[str]) -> None:
    write(tmp_path, entry="    from: ../payments/payments.yaml\n  - id: payments:refund\n    version: v2\n"
                          "    from: ../payments/payments.yaml\n")  # fmt: skip
    (tmp_path / "orders" / "note.json").write_text(
        '{"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}', encoding="utf-8"
    )
    path = tmp_path / "orders" / "orders.yaml"
    path.write_text(
        path.read_text(encoding="utf-8").replace(
            "types:\n", "types:\n  Note:\n    jsonSchema: note.json\n"
        ).replace("response: Order\n", "response: Note\n", 1),
        encoding="utf-8",
    )
    reads.clear()
    model = load_manifest(path)
    assert sorted(reads) == ["note.json", "orders.yaml", "payments.yaml"]
    taken = [(topic.id, topic.version) for topic in model.produces]
    assert taken == [("payments:capture", "v1"), ("payments:refund", "v2")]
    assert "Note" in {record.name for record in model.types}


def copy_warnings(tmp_path: Path, local: str, response: str) -> list[str]:
    """The warnings of the orders manifest with the local types `local`, its first topic answering `response`."""
    text = write(tmp_path, local=local).read_text()
    path = tmp_path / "orders" / "orders.yaml"
    path.write_text(text.replace("response: Order\n", f"response: {response}\n", 1), encoding="utf-8")
    return [str(w).split(": ", 1)[1] for w in load_manifest_with_warnings(path.as_posix()).warnings]


def test_an_identical_local_copy_warns_that_it_repeats_the_owners_type(tmp_path: Path) -> None:
    local = "  Money:\n    fields:\n      amountMinor: {type: integer, minimum: 0}\n"
    assert copy_warnings(tmp_path, local, "Money") == [
        "warning: type 'Money' repeats payments.Money; they are two types: use payments.Money and remove this copy"
    ]


def test_a_copy_that_names_the_owners_types_by_namespace_repeats_it(tmp_path: Path) -> None:
    # `status: payments.CaptureStatus` is the owner's `status: CaptureStatus`; it is not qualified a second time.
    local = "  Capture:\n    fields:\n      captureId: string\n      status: payments.CaptureStatus\n"
    assert copy_warnings(tmp_path, local, "Capture") == [
        "warning: type 'Capture' repeats payments.Capture; they are two types: use payments.Capture and remove "
        "this copy"
    ]


BOOKINGS = """\
svcgen: 1
service: bookings
types:
  Booked: {fields: {id: string}}
  BookedV2: {fields: {id: string, at: string}}
events:
  - {id: "bookings:booked", payload: Booked}
  - {id: "bookings:booked", version: v2, payload: BookedV2}
"""


def test_an_ambiguous_event_says_how_to_name_its_unversioned_version(tmp_path: Path) -> None:
    (tmp_path / "bookings.yaml").write_text(BOOKINGS, encoding="utf-8")
    path = tmp_path / "notes.yaml"
    subscriber = 'svcgen: 1\nservice: notes\nsubscribes:\n  - {id: "bookings:booked", from: bookings.yaml%s}\n'
    path.write_text(subscriber % "", encoding="utf-8")
    assert errors_of(path) == [
        f"{path.as_posix()}:4:10: publisher bookings (bookings.yaml) publishes bookings:booked in versions '', 'v2'; "
        "name one with 'version' (version: \"\" names the unversioned one)"
    ]
    path.write_text(subscriber % ', version: ""', encoding="utf-8")
    assert load_manifest(path.as_posix()).subscribes[0].version == ""


def test_an_invalid_manifest_two_levels_down_keeps_its_own_role_word(tmp_path: Path) -> None:
    # notify subscribes to billing's event; billing imports shared, which is invalid. The nested error is billing's
    # own line about its import ("owner's manifest"), whatever role billing plays for notify (its publisher).
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "shared.yaml").write_text(
        "svcgen: 1\nservice: shared\ntypes:\n  Ref:\n    fields: {id: strin}\n", encoding="utf-8"
    )
    (tmp_path / "billing").mkdir()
    (tmp_path / "billing" / "billing.yaml").write_text(
        "svcgen: 1\nservice: billing\nimports:\n  shared: ../shared/shared.yaml\n"
        "events:\n  - id: billing:invoiced\n    payload: shared.Ref\n",
        encoding="utf-8",
    )
    (tmp_path / "notify").mkdir()
    path = tmp_path / "notify" / "notify.yaml"
    path.write_text(
        "svcgen: 1\nservice: notify\nsubscribes:\n  - id: billing:invoiced\n    from: ../billing/billing.yaml\n",
        encoding="utf-8",
    )
    (error,) = errors_of(path)
    assert error.startswith(f"{path.as_posix()}:5:11: publisher's manifest '../billing/billing.yaml' is invalid: ")
    assert ": owner's manifest '../shared/shared.yaml' is invalid: " in error
    assert error.count("publisher's manifest") == 1
