"""YAML loading: values, positions of values and keys, and the errors of the safe subset."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from svcgen.manifest import loader
from svcgen.manifest.diagnostics import ManifestError
from svcgen.manifest.loader import load_yaml
from svcgen.manifest.model import Position
from tests.support.manifests import manifest


def load_errors(text: str) -> list[str]:
    """What the loader refused: raised when the text is not YAML, otherwise carried by the document."""
    try:
        document = load_yaml(manifest(text), "f.yaml")
    except ManifestError as error:
        return [str(diagnostic) for diagnostic in error.diagnostics]
    assert document.diagnostics
    return [str(diagnostic) for diagnostic in document.diagnostics]


def test_values_and_positions_of_nested_nodes() -> None:
    document = load_yaml(
        manifest(
            """
            service: orders
            topics:
              - id: orders:place
                routes: ["POST /orders", "GET /x"]
            """
        ),
        "f.yaml",
    )
    assert document.data == {
        "service": "orders",
        "topics": [{"id": "orders:place", "routes": ["POST /orders", "GET /x"]}],
    }
    assert document.at(("service",)) == Position("f.yaml", 1, 10)
    assert document.key_at(("service",)) == Position("f.yaml", 1, 1)
    assert document.at(("topics", 0)) == Position("f.yaml", 3, 5)
    assert document.at(("topics", 0, "id")) == Position("f.yaml", 3, 9)
    assert document.key_at(("topics", 0, "routes")) == Position("f.yaml", 4, 5)
    assert document.at(("topics", 0, "routes", 1)) == Position("f.yaml", 4, 30)


def test_missing_paths_fall_back_to_the_nearest_ancestor() -> None:
    document = load_yaml("mesh:\n  collector: x\n", "f.yaml")
    assert document.at(("mesh", "heartbeatSeconds")) == Position("f.yaml", 2, 3)
    assert document.key_at(("mesh", "heartbeatSeconds")) == Position("f.yaml", 2, 3)
    assert document.at(("nothing", 3)) == Position("f.yaml", 1, 1)


def test_an_empty_value_is_positioned_at_its_key() -> None:
    document = load_yaml("a: 1\nmesh:\n", "f.yaml")
    assert document.data == {"a": 1, "mesh": None}
    assert document.at(("mesh",)) == Position("f.yaml", 2, 1)


def test_scalars_become_json_values_and_remember_their_source_text() -> None:
    document = load_yaml("a: 0x1F\nb: 1.10\nc: yes\nd: ~\ne: '1.10'\nf: 2024-01-01T00:00:00Z\n", "f.yaml")
    assert document.data == {"a": 31, "b": 1.1, "c": True, "d": None, "e": "1.10", "f": "2024-01-01T00:00:00Z"}
    assert document.sources[("b",)] == "1.10"
    assert document.sources[("c",)] == "yes"
    assert ("e",) not in document.sources


def test_a_number_with_an_exponent_is_a_number_as_in_json() -> None:
    # YAML 1.1 wants a dot and a signed exponent (1.0e+7); `default: 1e-7` for a float field was the text "1e-7".
    document = load_yaml("a: 1e-7\nb: -2.5E3\nc: .5e1\nd: '1e3'\ne: 1e3x\nf: 1e999\n", "f.yaml")
    assert document.data == {"a": 1e-7, "b": -2500.0, "c": 5.0, "d": "1e3", "e": "1e3x", "f": None}
    assert document.sources[("a",)] == "1e-7"
    assert [str(d) for d in document.diagnostics] == ["f.yaml:6:4: 1e999 is not a JSON number; use a finite number"]


def test_a_plain_equals_sign_is_text() -> None:
    # YAML 1.1 gives a lone `=` a type of its own ("value"); an enum of operators writes it unquoted.
    document = load_yaml("values: [<, <=, =]\ndefault: =\n=: x\n", "f.yaml")
    assert document.data == {"values": ["<", "<=", "="], "default": "=", "=": "x"}
    assert not document.diagnostics


def test_keys_are_taken_as_written() -> None:
    assert load_yaml("200: a\ntrue: b\n", "f.yaml").data == {"200": "a", "true": "b"}


def test_empty_document_is_none() -> None:
    assert load_yaml("# nothing\n", "f.yaml").data is None


def test_duplicate_keys_are_errors_at_the_second_key() -> None:
    assert load_errors(
        """
        types:
          A:
            fields: {}
          A:
            fields: {}
        """
    ) == ["f.yaml:4:3: duplicate key 'A': it is already defined at line 2; keep only one"]


def test_every_duplicate_key_is_reported() -> None:
    assert load_errors("a: 1\nb: {x: 1, x: 2}\na: 3\n") == [
        "f.yaml:2:11: duplicate key 'x': it is already defined at line 2; keep only one",
        "f.yaml:3:1: duplicate key 'a': it is already defined at line 1; keep only one",
    ]


@pytest.fixture(params=["libyaml", "pure"])
def parser(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each YAML parser the loader may run on: libyaml when PyYAML has it, else PyYAML's own."""
    if request.param == "pure":

        class Pure(loader._MemoResolving, loader._PureLoader):
            pass

        monkeypatch.setattr(loader, "_PARSER", loader._PureLoader)
        monkeypatch.setattr(loader, "_FastLoader", Pure)
    elif not hasattr(yaml, "CSafeLoader"):
        pytest.skip("this PyYAML is built without libyaml")
    return str(request.param)


@pytest.mark.parametrize(
    ("text", "data"),
    [
        ("a: {type: string?}\n", {"a": {"type": "string?"}}),
        ("A: {fields: {a: string?, b: int?}}\n", {"A": {"fields": {"a": "string?", "b": "int?"}}}),
        ("a: string?\nb:\n  - map[string, int?]?\n", {"a": "string?", "b": ["map[string, int?]?"]}),
        ("a: [x?, y?z, 'w?']\nb: {c?: d, e: f ? g}\n", {"a": ["x?", "y?z", "w?"], "b": {"c?": "d", "e": "f ? g"}}),
    ],
)
def test_a_question_mark_inside_a_flow_scalar_is_text_with_either_parser(parser: str, text: str, data: object) -> None:
    document = load_yaml(text, "f.yaml")
    assert document.data == data
    assert document.diagnostics == []


def test_positions_after_a_nullable_type_are_the_same_with_either_parser(parser: str) -> None:
    document = load_yaml("A:\n  fields: {a: string?, b: int?}\n", "f.yaml")
    assert document.at(("A", "fields", "b")) == Position("f.yaml", 2, 27)
    assert document.key_at(("A", "fields", "b")) == Position("f.yaml", 2, 24)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "a: {type: string?, b: int?\nc: 1\n",
            "f.yaml:2:2: invalid YAML: expected ',' or '}', but got ':' (while parsing a flow mapping)",
        ),
        (
            "a: {type: string? default: x}\n",
            "f.yaml:1:26: invalid YAML: expected ',' or '}', but got ':' (while parsing a flow mapping)",
        ),
        (
            "a: {type: string?, default: [x}\n",
            "f.yaml:1:31: invalid YAML: expected ',' or ']', but got '}' (while parsing a flow sequence)",
        ),
    ],
)
def test_a_broken_flow_mapping_with_a_nullable_type_is_refused_where_it_breaks(
    parser: str, text: str, message: str
) -> None:
    assert load_errors(text) == [message]


def test_a_colon_before_a_question_mark_in_a_flow_scalar_is_refused_by_either_parser(parser: str) -> None:
    # libyaml refuses `a:?` inside {...}; the pure parser must not accept what libyaml refuses.
    (error,) = load_errors("a: {type: a:?}\n")
    assert error.startswith("f.yaml:1:1") and "invalid YAML" in error


def test_every_yaml_example_of_the_manifest_doc_reads_the_same_with_the_pure_parser() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "manifest.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```yaml\n(.*?)```", doc, re.DOTALL)
    assert any("{type: string?" in block for block in blocks)
    for block in blocks:
        try:
            expected = yaml.load(block, Loader=loader._PARSER)
        except yaml.YAMLError:
            continue  # an example of a mistake
        assert yaml.load(block, Loader=loader._PureLoader) == expected


def test_syntax_error_is_positioned_at_the_problem_mark() -> None:
    assert load_errors("a: 1\nb: [1, 2\nc: 3\n") == [
        "f.yaml:3:2: invalid YAML: expected ',' or ']', but got ':' (while parsing a flow sequence)"
    ]


def test_a_syntax_error_is_reported_where_it_is_not_at_an_earlier_nullable_type(parser: str) -> None:
    assert load_errors("a: {type: string?}\nb: [x?, y?]\nc: {type: map[string], default: {}}\n") == [
        "f.yaml:3:14: invalid YAML: expected ',' or '}', but got '[' (while parsing a flow mapping); "
        'quote a type expression inside {...}, like {type: "set[string]", default: []}'
    ]


def test_bad_indentation() -> None:
    assert load_errors("a:\n  b: 1\n c: 2\n") == [
        "f.yaml:3:2: invalid YAML: expected <block end>, but found '<block mapping start>' "
        "(while parsing a block mapping)"
    ]


def test_several_documents_are_refused() -> None:
    assert load_errors("a: 1\n---\nb: 2\n") == [
        "f.yaml:2:1: invalid YAML: a manifest is one YAML document; remove the second '---'"
    ]


def test_control_characters_are_refused() -> None:
    assert load_errors("a: b\x07\n") == [
        "f.yaml:1:5: invalid YAML: character U+0007 is not allowed (special characters are not allowed)"
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: !!binary aGk=\n", "f.yaml:1:4: unsupported YAML tag '!!binary'; only plain values, lists and mappings"),
        (
            "a: !!python/name:os.system x\n",
            "f.yaml:1:4: unsupported YAML tag '!!python/name:os.system'; only plain values, lists and mappings",
        ),
        ("a: !custom x\n", "f.yaml:1:4: unsupported YAML tag '!custom'; only plain values, lists and mappings"),
        ("a: !!set {x}\n", "f.yaml:1:4: unsupported YAML tag '!!set'; use a plain mapping"),
        ("a: !!omap [x: 1]\n", "f.yaml:1:4: unsupported YAML tag '!!omap'; use a plain list"),
        ("a: &x [*x]\n", "f.yaml:1:4: a YAML alias refers to itself; recursive structures are not allowed"),
        ("base: &b {x: 1}\nc:\n  <<: *b\n", "f.yaml:3:3: YAML merge keys ('<<') are not supported; write the keys out"),
        ("? [a]\n: 1\n", "f.yaml:1:3: a mapping key must be a plain name, not a list or mapping"),
        ("a: .inf\n", "f.yaml:1:4: .inf is not a JSON number; use a finite number"),
        ("a: .nan\n", "f.yaml:1:4: .nan is not a JSON number; use a finite number"),
    ],
)
def test_outside_the_safe_json_subset(text: str, message: str) -> None:
    assert load_errors(text) == [message]


def test_aliases_to_plain_nodes_are_values() -> None:
    assert load_yaml("a: &x {b: 1}\nc: *x\n", "f.yaml").data == {"a": {"b": 1}, "c": {"b": 1}}
