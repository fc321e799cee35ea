"""Which contract keywords fit which field types, and how enums, defaults and examples are checked."""

from __future__ import annotations

import pytest

from svcgen.manifest.contract import member_name
from tests.support.manifests import MINIMAL, errors, load_ok

ENUM = "enums:\n  Mode:\n    values: [air, sea]\n"


def with_field(spec: str) -> str:
    return ENUM + MINIMAL.replace("orderId: string", f"orderId: string\n      x: {spec}")


@pytest.mark.parametrize(
    "spec",
    [
        '{type: "string?", minLength: 1, pattern: "^a", format: email}',
        "{type: float, minimum: 0.5, exclusiveMaximum: 2, multipleOf: 0.5}",
        "{type: integer, minimum: 1, maximum: 1}",
        '{type: "set[string]", minItems: 1, maxItems: 2, default: [a]}',
        '{type: "tuple[integer]?", maxItems: 2}',
        "{type: Mode, default: sea, examples: [air], deprecated: true, description: How}",
        "{type: string, minLength: 0, examples: []}",
    ],
)
def test_fitting_keywords_are_accepted(spec: str) -> None:
    record = load_ok(with_field(spec)).types[0]
    assert record.fields[1].wire == "x"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("{type: Mode, minLength: 1}", "minLength does not apply to a field of type Mode"),
        ('{type: "map[string]", minItems: 1}', "minItems does not apply to a field of type map[string]"),
        ("{type: boolean, maximum: 1}", "maximum does not apply to a field of type boolean"),
        ('{type: "list[string]", pattern: "a"}', "pattern does not apply to a field of type list[string]"),
        ("{type: string, minLength: 3, maxLength: 2}", "minLength 3 is greater than maxLength 2"),
        ("{type: Mode, default: rail}", 'must fit its type Mode, got "rail"; use one of air, sea'),
        ("{type: Mode, examples: [rail]}", 'example of field \'x\' must fit its type Mode, got "rail"'),
        ('{type: "string?", pattern: "^a", default: b}', 'breaks the field\'s own contract: expected text matching ^a'),
        ("{type: float, multipleOf: 0.5, default: 0.7}", "expected a multiple of 0.5"),
        ("{type: string, format: email, examples: [nope]}", "expected an email address"),
        ("{type: string, multipleOf: 0}", "'multipleOf' must be greater than 0, got 0"),
        ("{type: string, minLength: -1}", "'minLength' must be at least 0, got -1"),
    ],
)
def test_misuse_is_an_error_with_the_fix(spec: str, message: str) -> None:
    found = errors(with_field(spec))
    assert any(message in line for line in found), found


def test_a_type_and_an_enum_may_not_share_a_name() -> None:
    text = "enums:\n  Order:\n    values: [a]\n" + MINIMAL
    assert any("type name 'Order' is also an enum (line 2)" in line for line in errors(text))


def test_an_enum_name_is_checked_like_a_type_name() -> None:
    text = "enums:\n  mode:\n    values: [a]\n" + MINIMAL
    expected = "type name 'mode' must be a PascalCase identifier; did you mean 'Mode'?"
    assert any(expected in line for line in errors(text))


@pytest.mark.parametrize(
    ("value", "member"),
    [("placed", "PLACED"), ("pickup-point", "PICKUP_POINT"), ("inTransit", "IN_TRANSIT"), ("2fa", "V_2FA"),
     ("DE", "DE"), ("a.b c", "A_B_C"), ("-", "HYPHEN_MINUS"), ("<=", "LESS_THAN_SIGN_EQUALS_SIGN"),
     ("Übersicht", "ÜBERSICHT"), ("é", "É"), ("€", "EURO_SIGN"), ("ﬁx", "FIX")],
)  # fmt: skip
def test_member_names(value: str, member: str) -> None:
    assert member_name(value) == member
    assert member.isidentifier()


def test_values_of_symbols_or_other_alphabets_each_get_their_own_member() -> None:
    # Sort orders and comparison operators are ordinary wire values; they all used to become V_ and clash.
    values = '["+", "-", "<", "<=", "=", "é", "#", "_", "ÜBER", "BER"]'
    manifest = load_ok(f"enums:\n  Op:\n    values: {values}\n" + MINIMAL)
    members = [member_name(value) for value in manifest.enums[0].values]
    assert len(set(members)) == len(members), members
