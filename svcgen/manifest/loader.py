"""YAML → plain JSON-like values, with the source position of every node and every mapping key.

Only the safe subset: plain scalars, lists and mappings. Duplicate keys, tags other than the core
scalar ones and merge keys are errors rather than silently resolved, so what the user reads is
what the manifest means. Only YAML that cannot be parsed stops here; the loader's other findings
travel with the document, so the later stages still report everything else.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.tokens import ScalarToken

from .diagnostics import Diagnostic, ManifestError
from .model import Position

JsonPath = tuple[str | int, ...]

_TAG = "tag:yaml.org,2002:"
_STR, _NULL, _MAP, _SEQ = _TAG + "str", _TAG + "null", _TAG + "map", _TAG + "seq"
_VALUE, _FLOAT = _TAG + "value", _TAG + "float"
_EXPONENT_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)[eE][-+]?[0-9]+")
"""A number with an exponent as JSON and YAML 1.2 write it (`1e-7`, `2.5E3`), which YAML 1.1 reads as text."""


class _MemoResolving:
    """Resolves each distinct plain scalar once per document: the parser asks for every node, and a manifest
    repeats its scalars (`string`, `integer`, field names) thousands of times. A plain scalar's tag depends
    on its text alone; quoted scalars and collections need no pattern matching."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)  # type: ignore[call-arg]
        self._plain_tags: dict[str, str] = {}

    def resolve(self, kind: type[Node], value: Any, implicit: tuple[bool, bool]) -> str:
        if kind is ScalarNode and implicit[0]:
            tag = self._plain_tags.get(value)
            if tag is None:
                tag = super().resolve(kind, value, implicit)  # type: ignore[misc]
                if tag == _VALUE:  # YAML 1.1 reads a plain `=` as its "value" type, which nothing constructs
                    tag = _STR
                elif tag == _STR and _EXPONENT_FLOAT.fullmatch(value):  # YAML 1.1 wants `1.0e+7`; JSON `1e7`
                    tag = _FLOAT
                self._plain_tags[value] = tag
            return tag
        return super().resolve(kind, value, implicit)  # type: ignore[misc,no-any-return]


class _PureLoader(yaml.SafeLoader):
    """PyYAML's own parser, reading a '?' inside a plain scalar in `{...}`/`[...]` as text (`{type: string?}`), as
    YAML and libyaml do: PyYAML alone ends the scalar there and then refuses the '?' as a key indicator.

    Only scan_plain is changed, and only in a flow collection: there its peeks see a '?' as a letter, so the
    ',?[]{}' stop test no longer stops at it; the text it keeps is still cut from the source, '?' included.
    """

    def scan_plain(self) -> ScalarToken:
        if not self.flow_level:  # outside {...}/[...] a '?' never ends a plain scalar
            return super().scan_plain()
        self.__dict__["peek"] = self._peek_question_as_text
        try:
            return super().scan_plain()
        finally:
            del self.__dict__["peek"]

    def _peek_question_as_text(self, index: int = 0) -> str:
        character: str = yaml.SafeLoader.peek(self, index)
        if character != "?":
            return character
        at = self.pointer + index
        # libyaml refuses ':?' in a flow scalar ('found unexpected ':''): left a '?', it is refused here too.
        return character if at > 0 and self.buffer[at - 1] == ":" else "x"


# libyaml's parser when pyyaml was built with it: same nodes and marks, several times faster.
_PARSER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", _PureLoader)


class _FastLoader(_MemoResolving, _PARSER):  # type: ignore[misc,valid-type]
    pass


_SCALAR_TAGS = frozenset(_TAG + name for name in ("str", "null", "bool", "int", "float", "timestamp"))
_CONSTRUCTOR = SafeConstructor()


@dataclass
class YamlDocument:
    """The converted document plus where each part of it came from."""

    file: str
    data: Any
    values: dict[JsonPath, yaml.Mark] = field(default_factory=dict)
    """Where each value node starts, by JSON path (a Position only when asked: most are never needed)."""
    keys: dict[JsonPath, yaml.Mark] = field(default_factory=dict)
    """Where the key of each mapping entry starts, by the entry's JSON path."""
    sources: dict[JsonPath, str] = field(default_factory=dict)
    """Source text of scalars that YAML did not read as strings (`1.10`, `yes`), for quoting hints."""
    diagnostics: list[Diagnostic] = field(default_factory=list)
    """What the loader refused (duplicate keys, tags, ...); the document holds the rest."""
    refused: set[JsonPath] = field(default_factory=set)
    """Values the loader refused and left empty (None); later stages must not judge them."""
    partial: set[JsonPath] = field(default_factory=set)
    """Mappings that lost entries the loader could not read (merge keys, list keys): any key may be meant."""

    def at(self, path: JsonPath) -> Position:
        """Position of the value at `path`, or of its nearest recorded ancestor."""
        for end in range(len(path), -1, -1):
            mark = self.values.get(path[:end])
            if mark is not None:
                return position_of(self.file, mark)
        return Position(self.file, 1, 1)

    def key_at(self, path: JsonPath) -> Position:
        """Position of the mapping key naming `path` (the value's position when there is no key)."""
        mark = self.keys.get(path)
        return self.at(path) if mark is None else position_of(self.file, mark)


def position_of(file: str, mark: yaml.Mark | None) -> Position:
    if mark is None:
        return Position(file, 1, 1)
    return Position(file, mark.line + 1, mark.column + 1)


def _compose(text: str) -> Node | None:
    try:
        return yaml.compose(text, Loader=_FastLoader)
    except yaml.YAMLError as error:
        if _PARSER is _PureLoader:
            raise
        found = error
    # The pure-Python parser words its errors better; a broken manifest is small work either way. The parsers
    # still disagree on some broken documents (`[a:]`, `[?, b]`), so its wording is taken only for the same spot.
    try:
        return yaml.compose(text, Loader=_PureLoader)
    except yaml.MarkedYAMLError as worded:
        if not isinstance(found, yaml.MarkedYAMLError) or _mark_at(worded) == _mark_at(found):
            raise
    raise found


def _at(text: str, mark: yaml.Mark | None) -> str:
    """The character a parser's mark points at (libyaml's messages do not quote it)."""
    return "" if mark is None else text[mark.index : mark.index + 1]


def _mark_at(error: yaml.MarkedYAMLError) -> tuple[int, int] | None:
    mark = error.problem_mark or error.context_mark
    return None if mark is None else (mark.line, mark.column)


def load_yaml(text: str, file: str) -> YamlDocument:
    """Compose and convert one YAML document; raises ManifestError when the text is not YAML at all.

    The document's `diagnostics` say what else the loader refused.
    """
    try:
        root = _compose(text)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        problem = error.problem or "malformed YAML"
        detail = f"{problem} ({error.context})" if error.context else problem
        if problem.startswith("but found another document"):
            detail = "a manifest is one YAML document; remove the second '---'"
        elif "flow mapping" in (error.context or "") and _at(text, mark) == "[":
            # `{type: set[string]}`: inside `{...}` a '[' starts a list; the type expression needs quotes.
            detail += '; quote a type expression inside {...}, like {type: "set[string]", default: []}'
        elif "flow sequence" in (error.context or "") and _at(text, mark) == "[":
            detail += '; quote a type expression inside [...], like extends: ["Page[Booking]"]'
        raise ManifestError([Diagnostic(position_of(file, mark), f"invalid YAML: {detail}")]) from None
    except yaml.reader.ReaderError as error:
        line = text.count("\n", 0, error.position) + 1
        column = error.position - (text.rfind("\n", 0, error.position) + 1) + 1
        character = error.character if isinstance(error.character, int) else ord(error.character[:1] or "\0")
        message = f"invalid YAML: character U+{character:04X} is not allowed ({error.reason})"
        raise ManifestError([Diagnostic(Position(file, line, column), message)]) from None
    except yaml.YAMLError as error:  # any other pyyaml failure still becomes one clean line
        raise ManifestError([Diagnostic(Position(file, 1, 1), f"invalid YAML: {error}")]) from None
    document = YamlDocument(file, None)
    if root is None:
        return document
    document.data = _Converter(document).convert(root, ())
    return document


def _short_tag(tag: str) -> str:
    return "!!" + tag[len(_TAG) :] if tag.startswith(_TAG) else tag


class _Converter:
    def __init__(self, document: YamlDocument) -> None:
        self.document = document
        self._active: set[int] = set()

    def error(self, node: Node, message: str) -> None:
        self.document.diagnostics.append(Diagnostic(position_of(self.document.file, node.start_mark), message))

    def refuse(self, node: Node, path: JsonPath, message: str) -> None:
        self.error(node, message)
        self.document.refused.add(path)

    def convert(self, node: Node, path: JsonPath) -> Any:
        # Called once per node of the document: the common cases (a string, a plain list or mapping) first.
        self.document.values[path] = node.start_mark
        if isinstance(node, ScalarNode):
            if node.tag == _STR:
                return node.value
            # An empty value (`mesh:`) has no text of its own; its key's position is the useful one.
            if node.tag == _NULL and node.value == "":
                self.document.values[path] = self.document.keys.get(path, node.start_mark)
            return self.scalar(node, path)
        # Only a list or mapping can contain itself.
        if id(node) in self._active:
            self.refuse(node, path, "a YAML alias refers to itself; recursive structures are not allowed")
            return None
        self._active.add(id(node))
        try:
            if isinstance(node, MappingNode):
                return self.mapping(node, path)
            if isinstance(node, SequenceNode):
                return self.sequence(node, path)
            return None
        finally:
            self._active.discard(id(node))

    def mapping(self, node: MappingNode, path: JsonPath) -> dict[str, Any] | None:
        if node.tag != _MAP:
            self.refuse(node, path, f"unsupported YAML tag {_short_tag(node.tag)!r}; use a plain mapping")
            return None
        result: dict[str, Any] = {}
        keys, values = self.document.keys, self.document.values
        for key_node, value_node in node.value:
            if not isinstance(key_node, ScalarNode):
                self.error(key_node, "a mapping key must be a plain name, not a list or mapping")
                self.document.partial.add(path)
                continue
            if key_node.tag == _TAG + "merge":
                self.error(key_node, "YAML merge keys ('<<') are not supported; write the keys out")
                self.document.partial.add(path)
                continue
            # Keys are taken as written: `200:` means the name "200", as it would in JSON.
            key = key_node.value
            entry = (*path, key)
            if key in result:
                line = keys[entry].line + 1
                self.error(key_node, f"duplicate key {key!r}: it is already defined at line {line}; keep only one")
                continue
            keys[entry] = key_node.start_mark
            if type(value_node) is ScalarNode and value_node.tag == _STR:  # most values: skip a call
                values[entry] = value_node.start_mark
                result[key] = value_node.value
            else:
                result[key] = self.convert(value_node, entry)
        return result

    def sequence(self, node: SequenceNode, path: JsonPath) -> list[Any] | None:
        if node.tag != _SEQ:
            self.refuse(node, path, f"unsupported YAML tag {_short_tag(node.tag)!r}; use a plain list")
            return None
        return [self.convert(item, (*path, index)) for index, item in enumerate(node.value)]

    def scalar(self, node: ScalarNode, path: JsonPath) -> Any:
        tag = node.tag
        if tag not in _SCALAR_TAGS:
            self.refuse(node, path, f"unsupported YAML tag {_short_tag(tag)!r}; only plain values, lists and mappings")
            return None
        if tag == _TAG + "str":
            return node.value
        self.document.sources[path] = node.value
        if tag == _TAG + "timestamp":  # JSON has no dates: a datetime default is its RFC 3339 text
            return node.value
        if tag == _TAG + "float":
            number = _CONSTRUCTOR.construct_yaml_float(node)
            if not math.isfinite(number):
                self.refuse(node, path, f"{node.value} is not a JSON number; use a finite number")
                return None
            return number
        if tag == _TAG + "int":
            return _CONSTRUCTOR.construct_yaml_int(node)
        if tag == _TAG + "bool":
            return _CONSTRUCTOR.construct_yaml_bool(node)
        return None
