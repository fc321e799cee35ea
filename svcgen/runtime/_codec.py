"""Request decoding and response encoding, compiled once per type from its `Shape`.

`codec_for(tp)` turns the shape of a type into plain functions: records get a decoder and an encoder
generated as Python source (one straight-line function per record, no loop over fields, no
reflection per call), everything else gets a closure built once. The request path only runs those.

Wire decisions:

- Paths in errors use wire names: `items[2].quantity`, map keys as `tags.someKey`, and a name that is
  not an ASCII identifier in brackets as a JSON string: `tags["some key"]`. The root path is "".
- integer is a signed 64-bit integer written as a JSON integer: a float literal (`3.0`, `1e19`) is not
  one, and a value outside [-2**63, 2**63 - 1] is refused both ways (decoding: `integer out of range`;
  encoding: an error, so the response fails instead of carrying an altered number). number accepts
  integers and gives a float; neither accepts a bool or a non-finite float. boolean and string accept
  only their own JSON type.
- datetime is RFC 3339 with `T` and an offset (`Z` or `±hh:mm`); a zone is kept as its fixed offset.
  Encoding a naive datetime is an error: it has no RFC 3339 form and the decoder would reject it.
  An offset with seconds (historic zones) is encoded in UTC: same instant, valid RFC 3339.
- bytes is standard base64 with padding, nothing else accepted.
- Records ignore unknown keys; an absent optional field takes its default; `null` is only accepted
  where the type is nullable, even for a field that has a default.
- Encoding trusts the declared types of scalar fields (no checks per value); unions check members.
- Text fields (HTTP path and query values), see `Codec.decode_text_fields`: integer `-?[0-9]+`;
  number a JSON number; boolean `true`/`false`; string, datetime and bytes stay text; a nullable
  field reads `""` and `null` as null, except where its type takes any text (string, bytes, any):
  there the text is kept and null is had by leaving the field out; an array of scalars is
  comma-separated (`""` is empty), and a query name given more than once is that list's items in turn,
  a field of any other type refuses it (`RepeatedField`); a map, record or array of structured items is
  JSON text; a union takes the first member whose conversion succeeds.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import inspect
import ipaddress
import keyword
import math
import re
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, date, datetime, timezone
from enum import Enum
from fractions import Fraction
from functools import lru_cache
from typing import Any, Final, Generic, TypeVar, overload
from urllib.parse import urlsplit

import orjson

from ._meta import FORMATS, Meta
from ._shapes import (
    AnyShape,
    ArrayShape,
    ConstrainedShape,
    EnumShape,
    FieldShape,
    MapShape,
    NullableShape,
    RecordShape,
    RecursiveShape,
    ScalarShape,
    Shape,
    UnionShape,
    shape_of,
    type_key,
)

T = TypeVar("T")

Decoder = Callable[[Any], Any]
Encoder = Callable[[Any], Any]
TextConverter = Callable[[str], Any]
TextFields = Mapping[str, "str | tuple[str, ...]"]
"""HTTP path and query values by name; a query name given more than once holds every value, in order."""


class DecodeError(ValueError):
    """JSON that does not fit the type: every violation found, each as (path in wire names, what was expected).

    `path` and `message` are the first violation's; `str()` lists them all (`MAX_LISTED`, then "and N more").
    """

    MAX_LISTED = 20

    violations: list[list[str]]
    """[path, message] pairs, in the order of the input's fields."""

    def __init__(self, message: str, path: str = "") -> None:
        super().__init__(message, path)
        self.violations = [[path, message]]

    @property
    def path(self) -> str:
        return self.violations[0][0]

    @property
    def message(self) -> str:
        return self.violations[0][1]

    @classmethod
    def of(cls, errors: list[DecodeError]) -> DecodeError:
        """One error listing the violations of several."""
        combined = errors[0]
        for other in errors[1:]:
            combined.violations.extend(other.violations)
        combined.args = (combined.message, combined.path)
        return combined

    def __str__(self) -> str:
        listed = [f"{path}: {message}" if path else message for path, message in self.violations[: self.MAX_LISTED]]
        hidden = len(self.violations) - len(listed)
        return "; ".join(listed) + (f"; and {hidden} more" if hidden > 0 else "")

    def _under(self, segment: str) -> DecodeError:
        """Prefix every path with the segment the error came through (an error is re-raised, not rebuilt)."""
        for violation in self.violations:
            path = violation[0]
            if not path:
                violation[0] = segment
            elif path[0] == "[":
                violation[0] = segment + path
            else:
                violation[0] = f"{segment}.{path}"
        self.args = (self.message, self.path)
        return self


class Codec(Generic[T]):
    """Decoder, encoder and text-field converter of one type.

    `decode(value) -> T` and `encode(obj) -> Any` are plain function attributes rather than methods:
    the request path calls them directly, without a bound-method hop.
    """

    __slots__ = ("_text", "decode", "encode", "shape")

    decode: Callable[[Any], T]
    """JSON value (as from `orjson.loads`) → typed object; raises `DecodeError`."""
    encode: Callable[[T], Any]
    """Typed object → JSON-able value with wire names."""

    def __init__(
        self,
        shape: Shape,
        decode: Callable[[Any], T],
        encode: Callable[[T], Any],
        text: Mapping[str, TextConverter] | None,
    ) -> None:
        self.shape = shape
        self.decode = decode
        self.encode = encode
        self._text = text

    def decode_text_fields(self, fields: TextFields) -> dict[str, Any]:
        """HTTP path/query strings → JSON values of the record's field types, ready to merge and `decode`.

        Names that are not fields of the record stay strings; a non-record codec returns the fields as
        they are. A value that cannot be converted raises `DecodeError` at that field's path. A name given
        more than once (a tuple): a list field takes every value, a name that is no field keeps them as a
        list, any other field raises `RepeatedField`.
        """
        table = self._text
        if table is None:
            return {name: text if type(text) is str else list(text) for name, text in fields.items()}
        converted: dict[str, Any] = {}
        errors: list[DecodeError] = []
        for name, text in fields.items():
            convert = table.get(name)
            if type(text) is not str:
                text, convert = _every_value(self.shape, name, text)
            if convert is None:
                converted[name] = text
                continue
            try:
                converted[name] = convert(text)
            except DecodeError as exc:
                errors.append(exc._under(_segment(name)))
        if errors:
            raise DecodeError.of(errors)
        return converted

    def __repr__(self) -> str:
        return f"Codec({self.shape!r})"


@overload
def codec_for(tp: type[T]) -> Codec[T]: ...
@overload
def codec_for(tp: Any) -> Codec[Any]: ...
def codec_for(tp: Any) -> Codec[Any]:
    """The codec of a type, compiled on first use and then shared."""
    return _codec_for(type_key(tp))


@lru_cache(maxsize=4096)
def _codec_for(key: tuple[Any, str]) -> Codec[Any]:
    shape = shape_of(key[0])
    compiler = _Compiler()
    decode, encode = compiler.compile(shape)
    text = _record_text_table(shape) if isinstance(shape, RecordShape) else None
    return Codec(shape, decode, encode, text)


def shape_encoder(shape: Shape) -> Encoder:
    """The encoder of one shape (for values outside a request, such as a default published in a schema)."""
    return _Compiler().compile(shape)[1]


# ---------------------------------------------------------------------------------------------------
# Paths

_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _segment(name: Any) -> str:
    """A name's path segment: as it is when an ASCII identifier, else a bracketed JSON string."""
    text = str(name)
    return text if _PLAIN_NAME.fullmatch(text) else f"[{orjson.dumps(text).decode()}]"


# ---------------------------------------------------------------------------------------------------
# Scalars: full decoders (every case, used directly or as the slow path behind an inline type check)


def _identity(value: Any) -> Any:
    return value


def _decode_string(value: Any) -> str:
    if isinstance(value, str):
        return value
    raise DecodeError("expected string")


def _decode_boolean(value: Any) -> bool:
    if value is True or value is False:
        return value
    raise DecodeError("expected boolean")


# A wire integer is signed 64-bit (docs/wire.md, Integers and numbers). orjson reads an integer literal past unsigned
# 64 bits as a float (losing digits), so only an int is an integer: a float never is, whatever its value.
_INTEGER_MIN = -(2**63)
_INTEGER_MAX = 2**63 - 1
INTEGER_OUT_OF_RANGE = "integer out of range (signed 64-bit)"


def _decode_integer(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        if _INTEGER_MIN <= value <= _INTEGER_MAX:
            return int(value)
        raise DecodeError(INTEGER_OUT_OF_RANGE)
    if isinstance(value, float) and value.is_integer() and not _INTEGER_MIN < value < _INTEGER_MAX:
        # An integer literal too long for orjson (read as a float, rounded: -2**63 - 1 reads as -2**63.0, hence
        # the strict bounds), or a float as large.
        raise DecodeError(INTEGER_OUT_OF_RANGE)
    raise DecodeError("expected integer")


def _encode_integer(value: Any) -> Any:
    if _INTEGER_MIN <= value <= _INTEGER_MAX:
        return value
    raise OverflowError(f"an integer field holds a value outside the signed 64-bit range ({INTEGER_OUT_OF_RANGE})")


def _decode_number(value: Any) -> float:
    if isinstance(value, float | int) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:
            raise DecodeError("expected number") from None
        if math.isfinite(number):
            return number
    raise DecodeError("expected number")


# `T` and `Z` may be lower case in RFC 3339; 3.11's fromisoformat wants them upper case.
_RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})?"
)


def decode_datetime(value: Any) -> datetime:
    """The one RFC 3339 reader: `T` and an offset (`Z` or `±hh:mm`), valid field ranges, a moment within years
    0001–9999 in UTC too (`9999-12-31T23:59:59-14:00` is not: no UTC form, no timestamp to store or compare);
    raises DecodeError."""
    match = _RFC3339.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise DecodeError("expected RFC 3339 date-time")
    if match.group(1) is None:
        raise DecodeError("expected RFC 3339 date-time with offset")
    try:
        moment = datetime.fromisoformat(value.upper())
        moment.astimezone(UTC)
    except ValueError:
        raise DecodeError("expected RFC 3339 date-time") from None
    except OverflowError:
        raise DecodeError("expected a date-time within years 0001-9999 UTC") from None
    return moment


def utc_millis_text(epoch_seconds: float) -> str:
    """The mesh's one time form, `2026-11-22T10:00:00.123Z`: UTC, millisecond precision (the one writer beside the
    one reader, `decode_datetime`)."""
    millis = round(epoch_seconds * 1000)
    seconds = millis // 1000
    # A batch of trace events mostly shares its seconds: format each second once (one tuple, swapped atomically).
    cached = _last_second
    if cached[0] != seconds:
        cached = _format_second(seconds)
    return cached[1] + _MILLIS_SUFFIX[millis - seconds * 1000]


def _format_second(seconds: int) -> tuple[int, str]:
    global _last_second
    t = time.gmtime(seconds)
    # Not strftime: its %Y is not zero-padded below year 1000 on every platform ("68-01-01" is no RFC 3339).
    text = f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d}T{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}"
    _last_second = (seconds, text)
    return _last_second


_last_second: tuple[int, str] = (-1, "")
_MILLIS_SUFFIX: Final = tuple(f".{millis:03d}Z" for millis in range(1000))


def _encode_utc_millis(value: datetime | float) -> str:
    """A datetime, or the epoch seconds the mesh's clocks read (a values encoder's caller may hold those)."""
    if not isinstance(value, datetime):
        return utc_millis_text(value)
    if value.tzinfo is not UTC and value.utcoffset() is None:
        raise ValueError("a naive datetime has no RFC 3339 form; give it a timezone")
    return utc_millis_text(value.timestamp())


def _encode_utc_millis_or_none(value: datetime | None) -> str | None:
    return None if value is None else _encode_utc_millis(value)


_WITHOUT_NONE: Final[dict[Encoder, Encoder]] = {_encode_utc_millis_or_none: _encode_utc_millis}
"""An encoder that passes None through → the same encoder for a value known not to be None."""


def _utc_millis_encoder(shape: Shape, encode: Encoder) -> Encoder:
    """A `utc_millis` record's encoder of one field: datetimes in the mesh's time form, anything else as compiled."""
    match shape:
        case ScalarShape("datetime"):
            return _encode_utc_millis
        case NullableShape(ScalarShape("datetime")):
            return _encode_utc_millis_or_none
    return encode


def _decode_bytes(value: Any) -> bytes:
    if isinstance(value, str):
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            pass
    raise DecodeError("expected base64")


def _encode_datetime(value: datetime) -> str:
    zone = value.tzinfo
    if zone is UTC or (type(zone) is timezone and zone in _WHOLE_MINUTE_ZONES):
        # orjson writes the same text as isoformat() at a third of the cost.
        return _orjson_dumps(value)[1:-1].decode("ascii") if type(value) is datetime else value.isoformat()
    offset = value.utcoffset()
    if offset is None:
        raise ValueError("a naive datetime has no RFC 3339 form; give it a timezone")
    if offset.seconds % 60 or offset.microseconds:
        # RFC 3339 offsets are whole minutes (and orjson would round them): same instant in UTC.
        return value.astimezone(UTC).isoformat()
    if type(zone) is timezone and len(_WHOLE_MINUTE_ZONES) < _WHOLE_MINUTE_ZONES_CAP:
        _WHOLE_MINUTE_ZONES.add(zone)
    return value.isoformat()


_orjson_dumps = orjson.dumps


def float_subclass(value: Any) -> float:
    """orjson's `default` wherever an encoded value is written: a float subclass (numpy.float64), which orjson does
    not write itself, as the float it is; called only for what orjson refuses, so exact types cost nothing. The
    encoders have already applied the number rule (NaN and the infinities fail)."""
    if isinstance(value, float):
        return float.__float__(value)  # the float's own value, whatever its class makes of float()
    raise TypeError(f"Type is not JSON serializable: {type(value).__qualname__}")


# Fixed-offset zones already seen to be whole minutes (the decoder makes one per offset it reads).
_WHOLE_MINUTE_ZONES: set[timezone] = {UTC}
_WHOLE_MINUTE_ZONES_CAP = 2048  # there are 24 * 60 * 2 whole-minute offsets


def _encode_bytes(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


def _encode_number(value: float) -> float:
    if value - value == 0:  # finite: nan and the infinities are no JSON, and orjson would write them as null
        return value
    raise ValueError(f"{value!r} is not a finite number")


def _inline_number(shape: Shape, read: str) -> str | None:
    """An expression encoding a number field inline (a record encoder's: no call for the finite value it almost
    always is), or None when the shape is no number."""
    match shape:
        case ScalarShape("number"):
            return f"({read} if {read} - {read} == 0 else _encode_number({read}))"
        case ConstrainedShape(inner):
            return _inline_number(inner, read)
        case NullableShape(inner):
            plain = _inline_number(inner, read)
            if plain is None:
                return None
            return f"({read} if {read} is None or {read} - {read} == 0 else _encode_number({read}))"
    return None


_SCALAR_DECODERS: dict[str, Decoder] = {
    "string": _decode_string,
    "boolean": _decode_boolean,
    "integer": _decode_integer,
    "number": _decode_number,
    "datetime": decode_datetime,
    "bytes": _decode_bytes,
}
_SCALAR_ENCODERS: dict[str, Encoder] = {
    "string": _identity,
    "boolean": _identity,
    "integer": _encode_integer,
    "number": _encode_number,
    "datetime": _encode_datetime,
    "bytes": _encode_bytes,
}
# The JSON value orjson gives for these is already the Python value: an exact-type check is enough,
# anything else goes to the full decoder. `{}` is the expression being checked.
_SCALAR_FAST_MISS: dict[str, str] = {
    "string": "type({}) is not str",
    "boolean": "{0} is not True and {0} is not False",
    "integer": "type({0}) is not int or not -9223372036854775808 <= {0} <= 9223372036854775807",
    # x - x is 0.0 only for a finite float: inf and nan take the slow path and are refused there.
    "number": "type({0}) is not float or {0} - {0} != 0.0",
}
_TEXT_TESTS = frozenset({"minLength", "maxLength", "pattern", "description", "examples", "deprecated"})
_SEARCHES: dict[str, Callable[[str], re.Match[str] | None]] = {}
"""Compiled patterns by their text, for the inline tests `_fast_miss` writes (`_S[pattern](x)`): a compiled decoder's
namespace holds this as `_S`."""


def _search(pattern: str) -> Callable[[str], re.Match[str] | None]:
    search = _SEARCHES.get(pattern)
    if search is None:
        search = _SEARCHES[pattern] = re.compile(pattern).search
    return search


_RANGE = frozenset({"minimum", "maximum", "description", "examples", "deprecated"})
_SCALAR_EXPECTED = {
    "string": "string",
    "boolean": "boolean",
    "integer": "integer",
    "number": "number",
    "datetime": "RFC 3339 date-time",
    "bytes": "base64",
}


def _fast_miss(shape: Shape, var: str) -> str | None:
    """An expression true when `var` needs the shape's decoder; "" when it never does; None when it always does."""
    if isinstance(shape, AnyShape):
        return ""
    if isinstance(shape, ScalarShape) and shape.kind in _SCALAR_FAST_MISS:
        return _SCALAR_FAST_MISS[shape.kind].format(var)
    if isinstance(shape, ConstrainedShape) and shape.meta.constrains is False:
        return _fast_miss(shape.inner, var)  # annotations only: nothing to check beyond the type
    if isinstance(shape, ConstrainedShape) and shape.inner == ScalarShape("string") and _TEXT_TESTS.issuperset(
        shape.meta.keywords()
    ):
        # Bounded text (ids, names): length and pattern tested inline, the full decoder only for a miss.
        low, high, pattern = shape.meta.min_length or 0, shape.meta.max_length, shape.meta.pattern
        bounds = f"{low} <= len({var})" + ("" if high is None else f" <= {high}")
        if pattern is None:
            return f"type({var}) is not str or not {bounds}"
        _search(pattern)  # compiled once, for the inline test and the full decoder alike
        return f"type({var}) is not str or not {bounds} or _S[{pattern!r}]({var}) is None"
    if isinstance(shape, ConstrainedShape) and shape.inner == ScalarShape("number") and _RANGE.issuperset(
        shape.meta.keywords()
    ):
        # A finite float within inclusive bounds inline (x - x is 0.0 only when finite); anything else, the decoder.
        meta = shape.meta
        tests = [f"{var} - {var} != 0.0"]
        tests += [] if meta.minimum is None else [f"{var} < {meta.minimum!r}"]
        tests += [] if meta.maximum is None else [f"{var} > {meta.maximum!r}"]
        return f"type({var}) is not float or " + " or ".join(tests)
    if isinstance(shape, NullableShape):
        inner = _fast_miss(shape.inner, var)
        if inner == "":
            return ""
        if inner is not None:
            return f"{var} is not None and ({inner})"
    return None


def _passes_through(shape: Shape) -> bool:
    """Whether encoding a (well-typed) value of the shape returns it unchanged."""
    if isinstance(shape, ScalarShape):
        return shape.kind in _SCALAR_FAST_MISS and _SCALAR_ENCODERS[shape.kind] is _identity
    if isinstance(shape, NullableShape | ConstrainedShape):
        return _passes_through(shape.inner)
    return isinstance(shape, EnumShape)


def _expected(shape: Shape) -> str:
    match shape:
        case ScalarShape(kind):
            return _SCALAR_EXPECTED[kind]
        case NullableShape(inner):
            return f"{_expected(inner)} or null"
        case ArrayShape():
            return "array"
        case UnionShape(members):
            return " or ".join(_expected(member) for member in members)
        case AnyShape():
            return "any value"
        case EnumShape(_, values):
            return _one_of(values)
        case ConstrainedShape(inner):
            return _expected(inner)
    return "object"


def _one_of(values: tuple[str, ...]) -> str:
    return "one of " + ", ".join(values)


# ---------------------------------------------------------------------------------------------------
# Any: JSON passes through; encoding looks for dataclasses, datetimes and bytes, dispatching on the
# type once per type seen.

_ANY_ENCODERS: dict[type, Encoder] = {}
_ANY_ENCODERS_CAP = 1024  # beyond it a type is resolved on every call instead of remembered


def _encode_any(value: Any) -> Any:
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is float:  # the number rule of typed fields: nan and the infinities fail, never go out as null
        return _encode_number(value)
    encode = _ANY_ENCODERS.get(kind)
    if encode is None:
        encode = _any_encoder(kind)
        if len(_ANY_ENCODERS) < _ANY_ENCODERS_CAP:
            _ANY_ENCODERS[kind] = encode
    return encode(value)


def _any_encoder(kind: type) -> Encoder:
    # A subclass of a JSON scalar (numpy.float64, an IntEnum, a str mixin enum) goes out as its base type's value by
    # that type's rule: orjson takes no float subclass, and the number rule must see a subclass's nan too.
    if issubclass(kind, float):
        return _encode_float_subclass
    if issubclass(kind, int):  # bool is taken before: it has no subclass
        return int.__int__
    if issubclass(kind, str):
        return str.__str__
    if kind is type(None):
        return _identity
    if issubclass(kind, datetime):
        return _encode_datetime
    if issubclass(kind, bytes | bytearray | memoryview):
        return _encode_bytes
    if dataclasses.is_dataclass(kind):
        return codec_for(kind).encode
    if issubclass(kind, Mapping):
        return _encode_any_mapping
    if issubclass(kind, set | frozenset):
        return _encode_any_set
    if issubclass(kind, list | tuple):
        return _encode_any_sequence
    return _identity  # left to orjson (enums, UUIDs, dates) or to fail there


def _encode_float_subclass(value: float) -> float:
    return _encode_number(float_subclass(value))


def _encode_any_mapping(value: Mapping[Any, Any]) -> dict[Any, Any]:
    # orjson writes only exact str keys (and never hands a key to `default`): the one test it makes, so only a key
    # it would refuse takes the slow path.
    return {key if type(key) is str else _any_key(key): _encode_any(item) for key, item in value.items()}


def _any_key(key: Any) -> Any:
    """An object key orjson refuses: a str subclass (a StrEnum member) is its text, as it is as a value; any other
    key (an int) stays, and orjson refuses it: JSON keys are text, and an `any` value is JSON as it is, not a
    value turned into one."""
    return str.__str__(key) if isinstance(key, str) else key


def _encode_any_sequence(value: Any) -> list[Any]:
    return [_encode_any(item) for item in value]


def _encode_any_set(value: Any) -> list[Any]:
    return _sorted_if_possible([_encode_any(item) for item in value])


def _sorted_if_possible(items: list[Any]) -> list[Any]:
    # A set has no order of its own; sorting makes the JSON stable where the items allow it.
    try:
        return sorted(items)
    except TypeError:
        return items


# ---------------------------------------------------------------------------------------------------
# Enums and constraints


def _enum_decoder(cls: type[Enum], values: tuple[str, ...]) -> Decoder:
    members = {member.value: member for member in cls}
    expected = f"expected {_one_of(values)}"

    def decode(value: Any) -> Any:
        if type(value) is str or isinstance(value, str):
            member = members.get(value)
            if member is not None:
                return member
        raise DecodeError(expected)

    return decode


Check = Callable[[Any], bool]
_Test = tuple[str, Any, str]
"""A constraint as the compiled decoder tests it: (an expression over `v` and the bound `{c}`, true when `v`
passes; the bound; what was expected)."""


def _plural(count: int | float, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _checks(meta: Meta) -> list[_Test]:
    """Each constraint `meta` declares, tested on the JSON value, in a fixed order (the first failing one is
    reported)."""
    checks: list[_Test] = []
    if meta.min_length is not None:
        checks.append(("len(v) >= {c}", meta.min_length, f"expected at least {_plural(meta.min_length, 'character')}"))
    if meta.max_length is not None:
        checks.append(("len(v) <= {c}", meta.max_length, f"expected at most {_plural(meta.max_length, 'character')}"))
    if meta.pattern is not None:
        checks.append(("{c}(v) is not None", _search(meta.pattern), f"expected text matching {meta.pattern}"))
    if meta.format is not None:
        test, expected = _FORMAT_CHECKS[meta.format]
        checks.append(("{c}(v)", test, expected))
    if meta.minimum is not None:
        checks.append(("v >= {c}", meta.minimum, f"expected at least {meta.minimum}"))
    if meta.maximum is not None:
        checks.append(("v <= {c}", meta.maximum, f"expected at most {meta.maximum}"))
    if meta.exclusive_minimum is not None:
        checks.append(("v > {c}", meta.exclusive_minimum, f"expected more than {meta.exclusive_minimum}"))
    if meta.exclusive_maximum is not None:
        checks.append(("v < {c}", meta.exclusive_maximum, f"expected less than {meta.exclusive_maximum}"))
    if meta.multiple_of is not None:
        checks.append(("_is_multiple_of(v, {c})", meta.multiple_of, f"expected a multiple of {meta.multiple_of}"))
    if meta.min_items is not None:
        checks.append(("len(v) >= {c}", meta.min_items, f"expected at least {_plural(meta.min_items, 'item')}"))
    if meta.max_items is not None:
        checks.append(("len(v) <= {c}", meta.max_items, f"expected at most {_plural(meta.max_items, 'item')}"))
    return checks


def is_multiple_of(value: int | float, step: int | float) -> bool:
    """JSON Schema's multipleOf, decided as jsonschema decides it (so the published contract agrees): a float step
    by the float quotient (exact fractions when it overflows), an integer step by the remainder."""
    if isinstance(step, float):
        try:
            quotient = value / step
            return int(quotient) == quotient
        except OverflowError:
            return (Fraction(value) / Fraction(step)).denominator == 1
    return value % step == 0


def _constrained(decode_inner: Decoder, meta: Meta) -> Decoder:
    """`decode_inner`, then the constraints on the JSON value (a set's minItems counts the array's items), compiled
    into one function: every constrained field of every request runs it."""
    checks = _checks(meta)
    if not checks:
        return decode_inner
    namespace: dict[str, Any] = {"_inner": decode_inner, "_DecodeError": DecodeError, "_is_multiple_of": is_multiple_of}
    lines = ["def decode(v):", "    decoded = _inner(v)", "    if v is not None:"]
    for index, (test, bound, expected) in enumerate(checks):
        namespace[f"c{index}"], namespace[f"e{index}"] = bound, expected
        lines += [f"        if not ({test.format(c=f'c{index}')}):", f"            raise _DecodeError(e{index})"]
    lines.append("    return decoded")
    exec(compile("\n".join(lines) + "\n", "<svcgen codec constraints>", "exec"), namespace)
    decode: Decoder = namespace["decode"]
    return decode


# Formats, with the standard library. email: one '@' with text on both sides, no whitespace, a dot in the
# domain (a documented rule: jsonschema's own check only looks for an '@'). uri: an absolute URI, a scheme
# then text without whitespace or control characters.
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
_NO_SPACE = re.compile(r"[^\x00-\x20\x7f]*")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def is_email(text: str) -> bool:
    return _EMAIL.fullmatch(text) is not None


def is_uri(text: str) -> bool:
    if _NO_SPACE.fullmatch(text) is None:
        return False
    try:
        parts = urlsplit(text)
    except ValueError:
        return False
    return bool(parts.scheme) and _SCHEME.fullmatch(parts.scheme) is not None and len(text) > len(parts.scheme) + 1


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return all(text[index] == "-" for index in (8, 13, 18, 23))  # the hyphenated form


def _is_date(text: str) -> bool:
    if _DATE.fullmatch(text) is None:
        return False
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def _is_ipv4(text: str) -> bool:
    try:
        ipaddress.IPv4Address(text)
    except ValueError:
        return False
    return True


def _is_ipv6(text: str) -> bool:
    try:
        return not ipaddress.IPv6Address(text).scope_id
    except ValueError:
        return False


_FORMAT_CHECKS: dict[str, tuple[Check, str]] = {
    "email": (is_email, "expected an email address"),
    "uuid": (_is_uuid, "expected a UUID"),
    "uri": (is_uri, "expected a URI"),
    "date": (_is_date, "expected a date (YYYY-MM-DD)"),
    "ipv4": (_is_ipv4, "expected an IPv4 address"),
    "ipv6": (_is_ipv6, "expected an IPv6 address"),
}
assert set(_FORMAT_CHECKS) == set(FORMATS)


# ---------------------------------------------------------------------------------------------------
# Compilation


class _RecordCell:
    """A record's functions, filled in once compiled; recursive references call through it."""

    __slots__ = ("decode", "encode")

    def __init__(self) -> None:
        self.decode: Decoder | None = None
        self.encode: Encoder | None = None


_MISSING = object()


class _Compiler:
    """Compiles one type's shape tree. Records met twice in the tree share one compiled pair."""

    def __init__(self) -> None:
        self._records: dict[type, _RecordCell] = {}

    def compile(self, shape: Shape) -> tuple[Decoder, Encoder]:
        match shape:
            case AnyShape():
                return _identity, _encode_any
            case ScalarShape(kind):
                return _SCALAR_DECODERS[kind], _SCALAR_ENCODERS[kind]
            case NullableShape(inner):
                return self._nullable(inner)
            case ArrayShape(items, container):
                return self._array(items, container)
            case MapShape(values):
                return self._map(values)
            case UnionShape(members):
                return self._union(members)
            case RecordShape():
                return self._record(shape)
            case RecursiveShape(cls):
                return self._recursive(cls)
            case EnumShape(cls, values):
                return _enum_decoder(cls, values), _identity
            case ConstrainedShape(inner, meta):
                decode_inner, encode = self.compile(inner)
                return _constrained(decode_inner, meta), encode
        raise TypeError(f"unknown shape {shape!r}")

    def _nullable(self, inner: Shape) -> tuple[Decoder, Encoder]:
        decode_inner, encode_inner = self.compile(inner)

        def decode(value: Any) -> Any:
            return None if value is None else decode_inner(value)

        def encode(value: Any) -> Any:
            return None if value is None else encode_inner(value)

        return decode, (encode if encode_inner is not _identity else _identity)

    def _array(self, items: Shape, container: str) -> tuple[Decoder, Encoder]:
        decode_item, encode_item = self.compile(items)
        decode_all = _list_mapper(items, decode_item)

        def decode_list(value: Any) -> Any:
            if type(value) is not list and not isinstance(value, list | tuple):
                raise DecodeError("expected array")
            return decode_all(value)

        def decode_tuple(value: Any) -> Any:
            return tuple(decode_list(value))

        def decode_set(value: Any) -> Any:
            decoded = decode_list(value)
            try:
                return set(decoded) if container == "set" else frozenset(decoded)
            except TypeError:
                raise DecodeError("expected array of hashable items") from None

        decode = {"list": decode_list, "tuple": decode_tuple}.get(container, decode_set)
        plain = encode_item is _identity

        def encode_sequence(value: Any) -> Any:
            return list(value) if plain else [encode_item(item) for item in value]

        def encode_set(value: Any) -> Any:
            return _sorted_if_possible(encode_sequence(value))

        return decode, (encode_set if container in ("set", "frozenset") else encode_sequence)

    def _map(self, values: Shape) -> tuple[Decoder, Encoder]:
        decode_value, encode_value = self.compile(values)
        miss = _fast_miss(values, "x")
        plain = encode_value is _identity

        def decode(value: Any) -> Any:
            if type(value) is not dict and not isinstance(value, Mapping):
                raise DecodeError("expected object")
            if miss == "":
                return dict(value)
            decoded = {}
            errors: list[DecodeError] = []
            for key, item in value.items():
                try:
                    decoded[key] = decode_value(item)
                except DecodeError as exc:
                    errors.append(exc._under(_segment(key)))
            if errors:
                raise DecodeError.of(errors)
            return decoded

        def encode(value: Any) -> Any:
            return dict(value) if plain else {key: encode_value(item) for key, item in value.items()}

        return decode, encode

    def _union(self, members: tuple[Shape, ...]) -> tuple[Decoder, Encoder]:
        compiled = [self.compile(member) for member in members]
        decoders = [decode for decode, _ in compiled]
        encoders = [(_accepts(member), encode) for member, (_, encode) in zip(members, compiled, strict=True)]
        expected = f"expected {' or '.join(_expected(member) for member in members)}"

        def decode(value: Any) -> Any:
            for decode_member in decoders:
                try:
                    return decode_member(value)
                except DecodeError:
                    continue
            raise DecodeError(expected)

        def encode(value: Any) -> Any:
            for accepts, encode_member in encoders:
                if accepts(value):
                    try:
                        return encode_member(value)
                    except (TypeError, ValueError, AttributeError):
                        continue
            raise TypeError(f"{type(value).__name__} value fits no member of the union ({expected})")

        return decode, encode

    def _recursive(self, cls: type) -> tuple[Decoder, Encoder]:
        cell = self._records.get(cls)
        if cell is None:  # not below its own record: compile it in full
            return self.compile(shape_of(cls))
        if cell.decode is not None and cell.encode is not None:
            return cell.decode, cell.encode
        bound = cell

        def decode(value: Any) -> Any:
            assert bound.decode is not None
            return bound.decode(value)

        def encode(value: Any) -> Any:
            assert bound.encode is not None
            return bound.encode(value)

        return decode, encode

    def _record(self, shape: RecordShape) -> tuple[Decoder, Encoder]:
        cls, fields = shape.cls, shape.fields
        cell = self._records.get(cls)
        if cell is not None:
            return self._recursive(cls)
        cell = self._records[cls] = _RecordCell()
        compiled = [self.compile(f.shape) for f in fields]
        closed = shape.meta is not None and shape.meta.closed
        decode = _record_decoder(cls, fields, [decode for decode, _ in compiled], closed)
        encode = _record_encoder(shape, _field_encoders(shape, [encode for _, encode in compiled]))
        cell.decode, cell.encode = decode, encode
        return decode, encode


def rows_encoder(cls: type) -> RowsEncoder:
    """`encode` of the record `cls` over rows of its field values (in field order) rather than instances, many in one
    call: for a batch written off a hot path straight from the values it holds (the trace entries of a feed batch),
    each row by the same wire rule as `codec_for(cls).encode`. Compiled once per record."""
    encoder = _ROWS_ENCODERS.get(cls)
    if encoder is None:
        shape = shape_of(cls)
        if not isinstance(shape, RecordShape):
            raise TypeError(f"{cls.__qualname__} is not a record")
        compiler = _Compiler()
        encoders = _field_encoders(shape, [compiler.compile(f.shape)[1] for f in shape.fields])
        encoder = _ROWS_ENCODERS[cls] = _record_encoder(shape, encoders, rows=True)
    return encoder


RowsEncoder = Callable[[Iterable[Sequence[Any]]], list[dict[str, Any]]]
_ROWS_ENCODERS: dict[type, RowsEncoder] = {}


def _field_encoders(shape: RecordShape, encoders: list[Encoder]) -> list[Encoder]:
    if shape.meta is not None and shape.meta.utc_millis:
        return [_utc_millis_encoder(f.shape, encode) for f, encode in zip(shape.fields, encoders, strict=True)]
    return encoders


def _list_mapper(items: Shape, decode_item: Decoder) -> Callable[[Any], list[Any]]:
    """`value` → list of decoded items; the index goes into the path of an item's error."""
    miss = _fast_miss(items, "x")
    if miss == "":
        return list
    if miss is None:

        def convert(value: Any) -> list[Any]:
            return [decode_item(item) for item in value]

    else:
        namespace: dict[str, Any] = {"_decode": decode_item, "_S": _SEARCHES}
        exec(f"def convert(value):\n    return [_decode(x) if {miss} else x for x in value]\n", namespace)
        convert = namespace["convert"]

    def mapped(value: Any) -> list[Any]:
        try:
            return convert(value)
        except DecodeError:
            # Only on failure: find the indexes again rather than counting on every success.
            errors: list[DecodeError] = []
            for index, item in enumerate(value):
                try:
                    decode_item(item)
                except DecodeError as exc:
                    errors.append(exc._under(f"[{index}]"))
            raise DecodeError.of(errors) from None

    return mapped


def _accepts(shape: Shape) -> Callable[[Any], bool]:
    """A shallow type test choosing the union member that encodes a value."""
    match shape:
        case AnyShape():
            return lambda value: True
        case ScalarShape("boolean"):
            return lambda value: isinstance(value, bool)
        case ScalarShape("integer"):
            return lambda value: isinstance(value, int) and not isinstance(value, bool)
        case ScalarShape("number"):
            return lambda value: isinstance(value, int | float) and not isinstance(value, bool)
        case ScalarShape("string"):
            return lambda value: isinstance(value, str)
        case ScalarShape("datetime"):
            return lambda value: isinstance(value, datetime)
        case ScalarShape("bytes"):
            return lambda value: isinstance(value, bytes | bytearray | memoryview)
        case NullableShape(inner):
            accepts_inner = _accepts(inner)
            return lambda value: value is None or accepts_inner(value)
        case ArrayShape(_, "list"):
            return lambda value: isinstance(value, list)
        case ArrayShape(_, "tuple"):
            return lambda value: isinstance(value, tuple)
        case ArrayShape():
            return lambda value: isinstance(value, set | frozenset)
        case MapShape():
            return lambda value: isinstance(value, Mapping)
        case UnionShape(members):
            tests = [_accepts(member) for member in members]
            return lambda value: any(test(value) for test in tests)
        case RecordShape(cls, _) | RecursiveShape(cls) | EnumShape(cls):
            named_cls = cls
            return lambda value: isinstance(value, named_cls)
        case ConstrainedShape(inner):
            return _accepts(inner)
    raise TypeError(f"unknown shape {shape!r}")


# ---------------------------------------------------------------------------------------------------
# Records: one generated function each way


def _is_plain_attr(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name)


def _record_decoder(cls: type, fields: tuple[FieldShape, ...], decoders: list[Decoder], closed: bool) -> Decoder:
    """The straight-line decoder; at its first violation it hands over to `_violations`, which lists them all."""
    namespace: dict[str, Any] = {
        "_cls": cls,
        "_M": _MISSING,
        "_Mapping": Mapping,
        "DecodeError": DecodeError,
        "_all": _violations(fields, decoders, closed),
        "_W": frozenset(f.wire for f in fields),
        "_S": _SEARCHES,
    }
    lines = [
        "def decode(v):",
        "    if type(v) is not dict and not isinstance(v, _Mapping):",
        "        raise DecodeError('expected object')",
        "    get = v.get",
    ]
    if closed:
        lines += ["    if not _W.issuperset(v):", "        raise _all(v)"]
    keywords: list[str] = []
    extra: list[str] = []
    for index, (f, decode) in enumerate(zip(fields, decoders, strict=True)):
        var = f"x{index}"
        lines.append(f"    {var} = get({f.wire!r}, _M)")
        lines.append(f"    if {var} is _M:")
        if f.required:
            lines.append("        raise _all(v)")
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f"_factory{index}"] = f.default_factory
            lines.append(f"        {var} = _factory{index}()")
        else:
            namespace[f"_default{index}"] = f.default
            lines.append(f"        {var} = _default{index}")
        miss = _fast_miss(f.shape, var)
        if miss != "":
            namespace[f"_decode{index}"] = decode
            lines.append(f"    elif {miss}:" if miss else "    else:")
            lines.append("        try:")
            lines.append(f"            {var} = _decode{index}({var})")
            lines.append("        except DecodeError:")
            lines.append("            raise _all(v) from None")
        if _is_plain_attr(f.attr):
            keywords.append(f"{f.attr}={var}")
        else:
            extra.append(f"{f.attr!r}: {var}")
    if extra:
        keywords.append(f"**{{{', '.join(extra)}}}")
    elif _positional(cls, fields):  # the same call, cheaper than by keyword
        keywords = [f"x{index}" for index in range(len(fields))]
    namespace["_name"] = cls.__qualname__
    lines += [
        "    try:",
        f"        return _cls({', '.join(keywords)})",
        "    except DecodeError:",
        "        raise",
        # A __post_init__ that refuses the values is a validation failure, not a server error;
        # its text stays off the wire.
        "    except ValueError as e:",
        "        raise DecodeError('rejected by ' + _name) from e",
    ]
    return _define("decode", lines, namespace, cls)


def _positional(cls: type, fields: tuple[FieldShape, ...]) -> bool:
    """Whether `cls(*values)` in `fields`' order means `cls(**by_name)`: a dataclass whose __init__ takes exactly
    these fields, in this order, none keyword-only (an InitVar or a keyword-only field keeps the keywords)."""
    if not dataclasses.is_dataclass(cls):
        return False
    try:
        parameters = list(inspect.signature(cls).parameters.values())
    except (TypeError, ValueError):
        return False
    return [p.name for p in parameters] == [f.attr for f in fields] and all(
        p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in parameters
    )


def _violations(fields: tuple[FieldShape, ...], decoders: list[Decoder], closed: bool) -> Callable[[Any], DecodeError]:
    """Every violation of a record value, field by field (the slow path, taken only for a refused value)."""
    wires = {f.wire for f in fields}

    def collect(value: Mapping[str, Any]) -> DecodeError:
        errors: list[DecodeError] = []
        for f, decode in zip(fields, decoders, strict=True):
            item = value.get(f.wire, _MISSING)
            if item is _MISSING:
                if f.required:
                    errors.append(DecodeError("required", _segment(f.wire)))
                continue
            try:
                decode(item)
            except DecodeError as exc:
                errors.append(exc._under(_segment(f.wire)))
        if closed:
            errors += [DecodeError("unexpected property", _segment(key)) for key in value if key not in wires]
        return DecodeError.of(errors)

    return collect


def _record_encoder(shape: RecordShape, encoders: list[Encoder], *, rows: bool = False) -> Encoder:
    """One dict display; with `omit_null`, an optional field holding None is left out (the others keep their order).
    The function takes an instance; with `rows`, an iterable of field-value rows, and returns their dicts."""
    cls, fields = shape.cls, shape.fields
    omit_null = shape.meta is not None and shape.meta.omit_null
    namespace: dict[str, Any] = {"_getattr": getattr}
    values: list[tuple[FieldShape, str, str]] = []
    for index, (f, encode) in enumerate(zip(fields, encoders, strict=True)):
        attribute = f"o.{f.attr}" if _is_plain_attr(f.attr) else f"_getattr(o, {f.attr!r})"
        read = f"x{index}" if rows else attribute
        inline = _inline_number(f.shape, read)
        if encode is _identity or _passes_through(f.shape):
            values.append((f, read, read))
        elif inline is not None:  # the number encoder's rule, inline
            namespace["_encode_number"] = _encode_number
            values.append((f, read, inline))
        else:
            namespace[f"_encode{index}"] = encode
            values.append((f, read, f"_encode{index}({read})"))
    name = "encode_rows" if rows else "encode"
    if not omit_null:
        body = [f"return {{{', '.join(f'{f.wire!r}: {value}' for f, _, value in values)}}}"]
    else:
        body = ["d = {}"]
        for index, (f, read, value) in enumerate(values):
            if f.required:
                body.append(f"d[{f.wire!r}] = {value}")
            else:
                # None is left out before the encoder is called: the one that skips None need not look again.
                inner = _WITHOUT_NONE.get(namespace.get(f"_encode{index}"))  # type: ignore[arg-type]
                if inner is not None:
                    namespace[f"_encode{index}"] = inner
                body += [f"if {read} is not None:", f"    d[{f.wire!r}] = {value}"]
        body.append("return d")
    if rows:  # one loop in one frame; each row's dict appended where a record's is returned
        body = [line.replace("return ", "append(", 1) + ")" if line.startswith("return ") else line for line in body]
        row = "".join(f"x{index}, " for index in range(len(fields)))
        lines = [f"def {name}(rows):", "    out = []", "    append = out.append", f"    for ({row}) in rows:"]
        lines += ["        " + line for line in body] + ["    return out"]
    else:
        lines = [f"def {name}(o):"] + ["    " + line for line in body]
    return _define(name, lines, namespace, cls)


def _define(name: str, lines: list[str], namespace: dict[str, Any], cls: type) -> Callable[[Any], Any]:
    code = compile("\n".join(lines) + "\n", f"<svcgen codec {name} {cls.__qualname__}>", "exec")
    exec(code, namespace)
    function: Callable[[Any], Any] = namespace[name]
    function.__qualname__ = f"{name}_{cls.__qualname__}"
    return function


# ---------------------------------------------------------------------------------------------------
# Text fields (HTTP path and query values)

_TEXT_INTEGER = re.compile(r"-?[0-9]+")
_TEXT_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?")


def _text_integer(text: str) -> int:
    if _TEXT_INTEGER.fullmatch(text):
        # More digits than any integer in range: out of it (and int() refuses texts over 4300 digits).
        number = int(text) if len(text.lstrip("-0")) <= 20 else _INTEGER_MAX + 1
        if _INTEGER_MIN <= number <= _INTEGER_MAX:
            return number
        raise DecodeError(INTEGER_OUT_OF_RANGE)
    raise DecodeError("expected integer")


def _text_number(text: str) -> int | float:
    match = _TEXT_NUMBER.fullmatch(text)
    if match is None:
        raise DecodeError("expected number")
    if match.group(1) is None and match.group(2) is None and len(text.lstrip("-0")) <= 20:
        # As a JSON body reads it: an integer within 64 bits, else a float (int() refuses texts past 4300 digits).
        integer = int(text)
        if -(2**63) <= integer < 2**64:
            return integer
    number = float(text)
    if not math.isfinite(number):
        raise DecodeError("expected number")
    return number


def _text_boolean(text: str) -> bool:
    if text == "true":
        return True
    if text == "false":
        return False
    raise DecodeError("expected boolean")


def _text_json(expected: str) -> TextConverter:
    def convert(text: str) -> Any:
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            raise DecodeError(expected) from None

    return convert


_TEXT_SCALARS: dict[str, TextConverter | None] = {
    "string": None,
    "datetime": None,
    "bytes": None,
    "integer": _text_integer,
    "number": _text_number,
    "boolean": _text_boolean,
}


def _record_text_table(shape: RecordShape) -> dict[str, TextConverter]:
    table: dict[str, TextConverter] = {}
    for f in shape.fields:
        convert = _text_converter(f.shape)
        if convert is not None:
            table[f.wire] = convert
    return table


def _text_converter(shape: Shape) -> TextConverter | None:
    """Text → the JSON value `decode` expects for the shape; None when the text already is that value."""
    match shape:
        case AnyShape():
            return None
        case ScalarShape(kind):
            return _TEXT_SCALARS[kind]
        case NullableShape(inner):
            return _text_nullable(inner)
        case ArrayShape(items, _) if is_text_scalar(items):
            return _text_list(_text_converter(items))
        case ArrayShape():
            return _text_json("expected JSON array")
        case UnionShape(members):
            return _text_union(members)
        case EnumShape():
            return None
        case ConstrainedShape(inner):
            return _text_converter(inner)
    return _text_json("expected JSON object")


def is_text_scalar(shape: Shape) -> bool:
    """Whether one query or path value of this shape is read as plain text (not JSON, not a list)."""
    if isinstance(shape, NullableShape | ConstrainedShape):
        return is_text_scalar(shape.inner)
    return isinstance(shape, ScalarShape | AnyShape | EnumShape)


def _text_nullable(inner: Shape) -> TextConverter | None:
    convert_inner = _text_converter(inner)
    if _takes_any_text(inner):
        return convert_inner  # "" and "null" are values of the type: they cannot also mean null

    def convert(text: str) -> Any:
        if text in ("", "null"):
            return None
        return text if convert_inner is None else convert_inner(text)

    return convert


def _takes_any_text(shape: Shape) -> bool:
    match shape:
        case ScalarShape("string" | "bytes") | AnyShape():
            return True
        case UnionShape(members):
            return any(_takes_any_text(member) for member in members)
        case ConstrainedShape(inner):
            return _takes_any_text(inner)
    return False


def _text_list(convert_item: TextConverter | None) -> TextConverter:
    def convert(text: str) -> list[Any]:
        if not text:
            return []
        parts = text.split(",")
        if convert_item is None:
            return parts
        converted = []
        for index, part in enumerate(parts):
            try:
                converted.append(convert_item(part))
            except DecodeError as exc:
                raise exc._under(f"[{index}]") from None
        return converted

    return convert


class RepeatedField(ValueError):
    """A query name given more than once for a field that takes one value: a bad request, never one value
    silently picked."""

    def __init__(self, name: str, count: int) -> None:
        super().__init__(f"query parameter {name!r} is given {count} times; it takes one value")


def _every_value(shape: Shape, name: str, texts: Iterable[str]) -> tuple[Any, TextConverter | None]:
    """(text, converter) for a name given several times: a list of scalars reads the values (each
    comma-separated, as one value is) as one list; a name that is no field keeps them as a list."""
    texts = tuple(texts)
    field = next((f for f in shape.fields if f.wire == name), None) if isinstance(shape, RecordShape) else None
    if field is None:
        return list(texts), None
    listed = field.shape
    while isinstance(listed, NullableShape | ConstrainedShape):
        listed = listed.inner
    if not (isinstance(listed, ArrayShape) and is_text_scalar(listed.items)):
        raise RepeatedField(name, len(texts))
    # The values' items in one text: one conversion, so an error names the item's place in the whole list.
    return ",".join(text for text in texts if text), _text_list(_text_converter(listed.items))


def _text_union(members: tuple[Shape, ...]) -> TextConverter | None:
    converters = [_text_converter(member) for member in members]
    if converters[0] is None:
        return None  # the first member takes the text as it is
    expected = f"expected {' or '.join(_expected(member) for member in members)}"

    def convert(text: str) -> Any:
        for convert_member in converters:
            if convert_member is None:
                return text
            try:
                return convert_member(text)
            except DecodeError:
                continue
        raise DecodeError(expected)

    return convert
