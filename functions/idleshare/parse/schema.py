"""What every input schema is made of, and the refusal that names every offending field.

An input's schema is a tree of :class:`Shape` s — frozen msgspec Structs that refuse unknown keys — whose fields carry
their bounds as types: ``Annotated[int, Meta(ge=0, le=10_000)]``, a ``Literal`` enum (``Meta(title=...)`` names it), a
string's ``pattern`` and length, a list's length, and :class:`Checked` scalars for what msgspec cannot bound (an exact
JSON number, text by Unicode category). What the types cannot say (a name listed twice) is the Shape's
:meth:`Shape.rules`. The same types give the OpenAPI document (:func:`json_schema`). The schemas of what other
systems send (a Kubernetes Node, an inbound event) are plain msgspec Structs declaring only what idleshare reads: their
unknown keys are ignored.

:func:`convert` validates with msgspec, in C, which stops at the first problem. When it refuses, the document is walked
against the same types (``msgspec.inspect``) to name every problem at once, each with its path and what the value must
be (``[1].ComputeQuotaConfig.ResourceSharingConfig.BorrowLimit: must be <= 10000 (got 20000)``), then the rules of
every part that passed. Nothing but :class:`~idleshare.parse.errors.InputError` leaves :func:`convert`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from decimal import Decimal
from fractions import Fraction
from functools import cache
from typing import Any, ClassVar, Self, TypeVar, cast

import msgspec
from msgspec import inspect as mi

from idleshare.parse.errors import FieldError, InputError, capped

__all__ = ["Checked", "ExactNumber", "Shape", "Text", "convert", "json_schema", "loc", "problem", "show"]

T = TypeVar("T")
Path = tuple[str | int, ...]
NULL = "must not be null (omit the field instead)"


# ------------------------------------------------------------------------------------------ the parts
class Shape(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A JSON object of an input: its fields are the Struct's (botocore's PascalCase member names), each typed with
    its bounds. ``REFUSED`` names keys refused with a reason rather than as unknown."""

    REFUSED: ClassVar[Mapping[str, str]] = {}

    def rules(self) -> list[tuple[Path, str]]:
        """What the types cannot say, as (path below this object, message); checked once every field is valid."""
        return []


class Checked:
    """A scalar msgspec cannot bound itself: ``check`` returns the value as an instance of the class, or raises
    ``ValueError`` with what is wrong (the message of the refusal); ``json_schema`` documents it."""

    @classmethod
    def check(cls, value: object) -> Self:
        raise NotImplementedError

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        raise NotImplementedError


class ExactNumber(Fraction, Checked):
    """A JSON number between ``minimum`` and ``maximum``, exactly: a ``Decimal`` (JSON text is read with
    ``parse_float=Decimal``), an ``int``, or a Python ``float`` read by its shortest repr (``0.1`` is 1/10)."""

    minimum: ClassVar[int] = 0
    maximum: ClassVar[int]

    @classmethod
    def check(cls, value: object) -> Self:
        if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
            raise ValueError(f"must be a number (got {show(value)})")
        exact = Decimal(repr(value)) if isinstance(value, float) else value
        if isinstance(exact, Decimal) and not exact.is_finite():
            raise ValueError(f"must be a finite number (got {show(value)})")
        number = cls(exact)
        if number < cls.minimum:
            raise ValueError(f"must be >= {cls.minimum} (got {show(value)})")
        if number > cls.maximum:
            raise ValueError(f"must be <= {cls.maximum} (got {show(value)})")
        return number

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        return {"type": "number", "minimum": cls.minimum, "maximum": cls.maximum}

    def exact(self) -> int | Fraction:
        """The domain's amount: an ``int`` when whole, else a plain ``Fraction``."""
        return self.numerator if self.denominator == 1 else Fraction(self.numerator, self.denominator)


class Text(str, Checked):
    """A string of ``min_length`` to ``max_length`` characters, each ``allowed``."""

    min_length: ClassVar[int] = 0
    max_length: ClassVar[int]

    @classmethod
    def allowed(cls, char: str) -> bool:
        return True

    @classmethod
    def check(cls, value: object) -> Self:
        if not isinstance(value, str):
            raise ValueError(f"must be a string (got {show(value)})")
        if not cls.min_length <= len(value) <= cls.max_length:
            low = f"{cls.min_length} to " if cls.min_length else "at most "
            raise ValueError(f"must be {low}{cls.max_length} characters (got {len(value)})")
        for index, char in enumerate(value):
            if not cls.allowed(char):
                raise ValueError(f"character {index} ({char!r}) is not allowed")
        return cls(value)

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        return {"type": "string", "minLength": cls.min_length, "maxLength": cls.max_length}


# ------------------------------------------------------------------------------------------ converting
def _dec_hook(kind: type, value: object) -> object:
    if issubclass(kind, Checked):
        return kind.check(value)
    raise NotImplementedError(kind)  # pragma: no cover - every custom type of a schema is Checked


def convert(document: object, kind: type[T], source: str) -> T:
    """``document`` as ``kind`` (a Shape, a list of them, an annotated scalar), or :class:`InputError` naming
    ``source`` and every problem."""
    try:
        value: T = msgspec.convert(document, kind, strict=True, dec_hook=_dec_hook)
    except msgspec.ValidationError as exc:
        raise InputError(source, capped(_explain(document, kind) or [_fallback(exc)])) from None
    except RecursionError:
        raise InputError(source, [FieldError("", "nested too deeply")]) from None
    except UnicodeEncodeError:  # msgspec matching a lone surrogate against a pattern or an enum
        raise InputError(source, [FieldError("", "holds a lone surrogate (not Unicode text)")]) from None
    errors = [FieldError(loc(path), message) for path, message in rules_of(value)]
    if errors:
        raise InputError(source, capped(errors))
    return value


def problem(value: object, kind: Any) -> str | None:
    """What is wrong with ``value`` as ``kind`` (a field's type), or None."""
    try:
        convert(value, kind, "value")
    except InputError as exc:
        return exc.errors[0].message
    return None


def rules_of(value: object, at: Path = ()) -> Iterator[tuple[Path, str]]:
    """The rules of ``value`` (a converted Shape, list or scalar) and of every Shape inside it."""
    if isinstance(value, Shape):
        for path, message in value.rules():
            yield (*at, *path), message
        for name, key in _keys_of(type(value)):
            inner = getattr(value, name)
            if isinstance(inner, Shape | list):
                yield from rules_of(inner, (*at, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from rules_of(item, (*at, index))


@cache
def _keys_of(shape: type[Shape]) -> tuple[tuple[str, str], ...]:
    """(attribute, key) of each field of ``shape``."""
    return tuple(zip(shape.__struct_fields__, shape.__struct_encode_fields__, strict=True))


def _fallback(exc: msgspec.ValidationError) -> FieldError:  # pragma: no cover - the walk names them all
    message, _, where = str(exc).partition(" - at `$")
    return FieldError(where.rstrip("`").lstrip("."), message)


# ------------------------------------------------------------------------------------------ messages
def show(value: object) -> str:
    """A value as a message shows it: JSON-like, cut short; objects and arrays by kind."""
    if isinstance(value, Decimal):
        text = str(value)
    elif isinstance(value, str | bool) or value is None:
        text = json.dumps(value)
    elif isinstance(value, int) and value.bit_length() > 128:  # repr() refuses > 4300 digits
        text = f"a{' negative' if value < 0 else ''} {value.bit_length()}-bit integer"
    elif isinstance(value, int | float):
        text = repr(value)
    else:
        text = {"dict": "an object", "list": "an array", "tuple": "an array"}.get(type(value).__name__, "a value")
    return text if len(text) <= 80 else text[:77] + "..."


def loc(path: Path) -> str:
    """``("ComputeQuotas", 1, "Name")`` -> ``ComputeQuotas[1].Name``."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


def _enum(values: tuple[Any, ...], title: str, value: object) -> str:
    import difflib

    if len(values) == 1:
        return f"must be {values[0]} (got {show(value)})"
    if len(values) <= 12:
        return f"must be one of {', '.join(map(str, values))} (got {show(value)})"
    hint = difflib.get_close_matches(value, sorted(values), n=1) if isinstance(value, str) and len(value) <= 100 else []
    return f"{show(value)} is not a {title} value" + (f"; did you mean {hint[0]}?" if hint else "")


# ----------------------------------------------------------------------------------- the walk of a refusal
def _explain(document: object, kind: Any) -> list[FieldError]:
    walk = _Walk(kind)
    try:
        walk.check(document, walk.root, (), {})
        walk.rules(document, walk.root, ())
    except RecursionError:
        return [FieldError("", "nested too deeply")]
    return walk.errors


class _Walk:
    """The problems of a document against a type that msgspec refused it as."""

    def __init__(self, kind: Any) -> None:
        self.root = _info(kind)
        self.family = _keys(self.root)
        self.errors: list[FieldError] = []
        self.bad: list[Path] = []

    def fail(self, path: Path, message: str) -> None:
        self.errors.append(FieldError(loc(path), message))
        self.bad.append(path)

    def check(self, value: object, t: mi.Type, path: Path, meta: dict[str, Any]) -> None:
        if isinstance(t, mi.Metadata):
            self.check(value, t.type, path, {**meta, **(t.extra_json_schema or {}), **(t.extra or {})})
        elif isinstance(t, mi.UnionType):
            self.union(value, t, path, meta)
        elif isinstance(t, mi.StructType):
            self.struct(value, t, path)
        elif isinstance(t, mi.ListType):
            self.array(value, t, path)
        elif isinstance(t, mi.LiteralType):
            self.literal(value, t, path, meta)
        elif isinstance(t, mi.IntType):
            self.integer(value, t, path)
        elif isinstance(t, mi.BoolType):
            if not isinstance(value, bool):
                self.fail(path, f"must be true or false (got {show(value)})")
        elif isinstance(t, mi.DictType):
            self.mapping(value, t, path)
        elif isinstance(t, mi.StrType):
            self.string(value, t, path, meta)
        elif isinstance(t, mi.CustomType):
            try:
                cast(type[Checked], t.cls).check(value)
            except ValueError as exc:
                self.fail(path, str(exc))
        elif not isinstance(t, mi.AnyType):  # pragma: no cover - no schema uses another type
            raise TypeError(f"no message for {t!r}")

    def union(self, value: object, t: mi.UnionType, path: Path, meta: dict[str, Any]) -> None:
        options = [o for o in t.types if not isinstance(o, mi.NoneType)]
        fitting = [o for o in options if _fits(value, o)]  # the option of the value's JSON kind
        if value is None and len(options) < len(t.types):
            return
        if len(options) > 1 and not fitting:
            kinds = " or ".join(dict.fromkeys(_KINDS[type(_bare(o))][1] for o in options))
            self.fail(path, f"must be {kinds} (got {show(value)})")
        else:
            self.check(value, (fitting or options)[0], path, meta)

    def array(self, value: object, t: mi.ListType, path: Path) -> None:
        if not isinstance(value, list | tuple):
            self.fail(path, f"must be an array (got {show(value)})")
        elif t.max_length is not None and len(value) > t.max_length:
            self.fail(path, f"must have at most {t.max_length} items (got {len(value)})")
        else:
            for index, item in enumerate(value):
                self.check(item, t.item_type, (*path, index), {})

    def literal(self, value: object, t: mi.LiteralType, path: Path, meta: dict[str, Any]) -> None:
        if not isinstance(value, str):
            self.fail(path, f"must be a string (got {show(value)})")
        elif value not in t.values:
            self.fail(path, _enum(t.values, meta.get("title", "allowed"), value))

    def mapping(self, value: object, t: mi.DictType, path: Path) -> None:
        if not isinstance(value, dict):
            self.fail(path, f"must be an object (got {show(value)})")
        else:
            for key, item in value.items():
                self.check(item, t.value_type, (*path, str(key)), {})

    def struct(self, value: object, t: mi.StructType, path: Path) -> None:
        if not isinstance(value, dict):
            self.fail(path, f"must be an object (got {show(value)})")
            return
        fields = {f.encode_name: f for f in t.fields}
        for name, field in fields.items():
            if name not in value:
                if field.required:
                    self.fail((*path, name), "required field is missing")
            elif value[name] is None and not field.required and not _admits_null(field.type):
                self.fail((*path, name), NULL)
            else:
                self.check(value[name], field.type, (*path, name), {})
        for key in value if t.forbid_unknown_fields else ():
            if key not in fields:
                text = str(key)
                self.fail((*path, text if len(text) <= 100 else text[:97] + "..."), self.unknown(text, t))

    def unknown(self, key: str, t: mi.StructType) -> str:
        import difflib

        refused = cast(type[Shape], t.cls).REFUSED
        if key in refused:
            return refused[key]
        inside = _inside(t).get(key)
        if inside:
            return f"unknown field here: put it inside {inside}"
        if key in self.family:
            return f"unknown field here: {key} belongs to another object"
        own = [f.encode_name for f in t.fields]
        hint = difflib.get_close_matches(key, own, n=1, cutoff=0.75) if len(key) <= 100 else []
        hint = hint or (
            difflib.get_close_matches(key, sorted(self.family), n=1, cutoff=0.75) if len(key) <= 100 else []
        )
        return "unknown field" + (f"; did you mean {hint[0]}?" if hint else "")

    def integer(self, value: object, t: mi.IntType, path: Path) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(path, f"must be an integer (got {show(value)})")
        elif t.ge is not None and value < t.ge:
            self.fail(path, f"must be >= {t.ge} (got {show(value)})")
        elif t.le is not None and value > t.le:
            self.fail(path, f"must be <= {t.le} (got {show(value)})")

    def string(self, value: object, t: mi.StrType, path: Path, meta: dict[str, Any]) -> None:
        if not isinstance(value, str):
            self.fail(path, f"must be a string (got {show(value)})")
        elif t.min_length == 1 and value == "":
            self.fail(path, "must not be empty")
        elif t.min_length is not None and len(value) < t.min_length:
            self.fail(path, f"must be at least {t.min_length} characters (got {show(value)})")
        elif t.max_length is not None and len(value) > t.max_length:
            self.fail(path, f"must be at most {t.max_length} characters (got {len(value)})")
        elif t.pattern is not None and _compiled(t.pattern).search(value) is None:
            what, shown = meta.get("what", meta.get("title", "value")), meta.get("pattern", t.pattern)
            self.fail(path, f"must be a valid {what}, matching {shown} (got {show(value)})")

    def rules(self, value: object, t: mi.Type, path: Path) -> None:
        """The rules of every Shape below ``path`` that passed its types."""
        if isinstance(t, mi.Metadata):
            self.rules(value, t.type, path)
        elif isinstance(t, mi.UnionType):
            if value is not None:
                self.rules(value, next(o for o in t.types if not isinstance(o, mi.NoneType)), path)
        elif not isinstance(t, mi.StructType | mi.ListType):
            return  # a scalar has no rules
        elif any(bad[: len(path)] == path for bad in self.bad):
            if isinstance(t, mi.StructType) and isinstance(value, dict):
                for field in t.fields:
                    if field.encode_name in value:
                        self.rules(value[field.encode_name], field.type, (*path, field.encode_name))
            elif isinstance(t, mi.ListType) and isinstance(value, list | tuple):
                for index, item in enumerate(value):
                    self.rules(item, t.item_type, (*path, index))
        else:
            try:
                converted = msgspec.convert(value, _python_type(t), strict=True, dec_hook=_dec_hook)
            except msgspec.ValidationError:  # pragma: no cover - the walk found nothing wrong here
                return
            self.errors += [FieldError(loc((*path, *rest)), message) for rest, message in rules_of(converted)]


def _python_type(t: mi.Type) -> Any:
    """The Python type of a Shape, or of a list of them, as msgspec describes it."""
    if isinstance(t, mi.Metadata):
        return _python_type(t.type)
    if isinstance(t, mi.UnionType):
        return _python_type(next(o for o in t.types if not isinstance(o, mi.NoneType))) | None
    if isinstance(t, mi.ListType):
        return list[_python_type(t.item_type)]  # type: ignore[misc]
    assert isinstance(t, mi.StructType), t
    return t.cls


# a type -> the Python type of the JSON values it reads, and their kind in words
_KINDS: dict[type, tuple[Any, str]] = {
    mi.StrType: (str, "a string"), mi.LiteralType: (str, "a string"), mi.IntType: (int, "an integer"),
    mi.BoolType: (bool, "true or false"), mi.ListType: (list | tuple, "an array"),
    mi.StructType: (dict, "an object"), mi.DictType: (dict, "an object"),
}  # fmt: skip


def _bare(t: mi.Type) -> mi.Type:
    return _bare(t.type) if isinstance(t, mi.Metadata) else t


def _fits(value: object, t: mi.Type) -> bool:
    """``value`` is of the JSON kind ``t`` reads (a string, an integer, a boolean, an array, an object)."""
    kind = _KINDS.get(type(_bare(t)), (object, ""))[0]
    return isinstance(value, kind) and not (isinstance(value, bool) and kind is int)


def _admits_null(t: mi.Type) -> bool:
    return isinstance(t, mi.NoneType | mi.AnyType) or (
        isinstance(t, mi.UnionType) and any(isinstance(o, mi.NoneType) for o in t.types)
    )


@cache
def _info(kind: Any) -> mi.Type:
    return mi.type_info(kind)


@cache
def _compiled(pattern: str) -> Any:
    import re

    return re.compile(pattern)


def _structs(t: mi.Type, through_lists: bool = True) -> Iterator[mi.StructType]:
    """The Shapes directly under ``t`` (through unions and metadata; through lists when asked)."""
    if isinstance(t, mi.Metadata):
        yield from _structs(t.type, through_lists)
    elif isinstance(t, mi.UnionType):
        for option in t.types:
            yield from _structs(option, through_lists)
    elif isinstance(t, mi.ListType) and through_lists:
        yield from _structs(t.item_type, through_lists)
    elif isinstance(t, mi.StructType):
        yield t


def _keys(root: mi.Type) -> frozenset[str]:
    """Every key of every Shape of a document."""
    seen: set[type] = set()
    keys: set[str] = set()
    pending = list(_structs(root))
    while pending:
        struct = pending.pop()
        if struct.cls in seen:
            continue
        seen.add(struct.cls)
        for field in struct.fields:
            keys.add(field.encode_name)
            pending += _structs(field.type)
    return frozenset(keys)


def _inside(t: mi.StructType) -> dict[str, str]:
    """Keys of the objects nested in ``t`` (not through arrays) -> where they go, as a path from ``t``."""
    own = {f.encode_name for f in t.fields}
    out: dict[str, str] = {}
    for field in t.fields:
        for struct in _structs(field.type, through_lists=False):
            for key, where in {**{f.encode_name: "" for f in struct.fields}, **_inside(struct)}.items():
                if key not in own:
                    out.setdefault(key, f"{field.encode_name}.{where}" if where else field.encode_name)
    return out


# ------------------------------------------------------------------------------------------ the document
def _schema_hook(kind: type) -> dict[str, Any]:
    if issubclass(kind, Checked):
        return kind.json_schema()
    raise NotImplementedError(kind)  # pragma: no cover


def json_schema(kind: Any, title: str | None = None) -> dict[str, Any]:
    """``kind``'s JSON schema, self-contained (every ``$ref`` inlined: the shapes are not recursive)."""
    raw = msgspec.json.schema(kind, schema_hook=_schema_hook)
    defs = raw.get("$defs", {})

    def inline(value: Any) -> Any:
        if isinstance(value, dict):
            ref = value.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                rest = {k: inline(v) for k, v in value.items() if k != "$ref"}
                return {**inline(defs[ref.removeprefix("#/$defs/")]), **rest}
            return {k: inline(v) for k, v in value.items() if k != "$defs"}
        if isinstance(value, list):
            return [inline(v) for v in value]
        return value

    out: dict[str, Any] = inline(raw)
    return out | ({"title": title} if title else {})


def field_names(*kinds: Any) -> frozenset[str]:
    """Every key of every Shape of documents of these types."""
    return frozenset().union(*(_keys(_info(kind)) for kind in kinds))
