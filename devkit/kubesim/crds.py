"""Validate Kueue objects the way a kube-apiserver with the Kueue v0.19.2 CRDs installed would.

What is checked (``validate`` / ``validation_errors``), in the apiserver's order:

* the object is first *defaulted* from the structural schema (``default:`` values, recursively, so
  ``preemption: {}`` becomes ``{reclaimWithinCohort: Never, ...}``); nulls of non-nullable fields
  are dropped first, as the apiserver does;
* ``apiVersion``/``kind`` must name a served version of a known CRD;
* ``metadata``: known ObjectMeta fields only, ``name`` a DNS-1123 subdomain (custom resources,
  namespaced or not), ``namespace`` a DNS-1123 label and required for namespaced kinds, labels and
  annotations keys qualified names, label values valid;
* the ``openAPIV3Schema`` of that version: type, required, enum, pattern, min/maxLength,
  min/maxItems, maxProperties, minimum/maximum, format (``date-time``, ``int32``/``int64`` ranges),
  ``x-kubernetes-int-or-string`` (``anyOf [integer, string]``; the pattern applies to strings),
  ``x-kubernetes-list-type`` ``set``/``map`` (duplicates), ``x-kubernetes-preserve-unknown-fields``;
* **unknown fields are errors** (a real apiserver prunes them, or rejects them with
  ``fieldValidation=Strict`` as ``kubectl apply`` sends; idleshare must never send any);
* every ``x-kubernetes-validations`` CEL rule, evaluated with cel-python plus the Kubernetes CEL
  extension functions Kueue's rules (and common CRD rules) use. Transition rules (those that
  reference ``oldSelf``) run only when an ``old`` object is given and the value correlates (object
  keys, ``list-type=map`` keys). A rule that fails to compile or evaluate is reported as an error.

Deliberate deviation: ``format: int32``/``int64`` values out of range are errors here (Kueue's Go
types could not decode them; a bare apiserver would store them).

``webhook_errors`` checks what only Kueue's validating webhook enforces (see
``shared/kueue/README.md``); a bare apiserver does not.

CRDs are read from ``$KUEUE_CRDS_DIR`` (relative paths resolve against the repository root),
default ``../shared/kueue/crds``. They are never copied into the repository.
"""

from __future__ import annotations

import copy
import datetime as _dt
import functools
import json
import math
import os
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import celpy
import yaml
from celpy import celtypes

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CRDS_DIR = "../shared/kueue/crds"
KUEUE_GROUP = "kueue.x-k8s.io"

__all__ = [
    "CELRuleError",
    "CRDSet",
    "CRDVersion",
    "FieldError",
    "Quantity",
    "apply_defaults",
    "crds_dir",
    "evaluate_rule",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_qualified_name",
    "is_valid_label_value",
    "iter_validation_rules",
    "load_crds",
    "parse_quantity",
    "validate",
    "validation_errors",
    "webhook_errors",
]


# --------------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------------


def crds_dir() -> Path:
    """The CRD directory: ``$KUEUE_CRDS_DIR`` or the default, relative paths against the repo root."""
    raw = os.environ.get("KUEUE_CRDS_DIR") or DEFAULT_CRDS_DIR
    path = Path(raw).expanduser()
    if not path.is_absolute():
        path = REPO_ROOT / path
    return path.resolve()


@dataclass(frozen=True)
class CRDVersion:
    """One served version of one CRD."""

    group: str
    version: str
    kind: str
    list_kind: str
    plural: str
    singular: str
    short_names: tuple[str, ...]
    namespaced: bool
    served: bool
    storage: bool
    deprecated: bool
    deprecation_warning: str | None
    schema: dict[str, Any]
    subresources: dict[str, Any]
    printer_columns: tuple[dict[str, Any], ...]
    crd_name: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


class CRDSet:
    """All CRDs of a directory, indexed by (group, version, kind) and by (group, plural)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.raw: list[dict[str, Any]] = []
        self.by_gvk: dict[tuple[str, str, str], CRDVersion] = {}
        self.by_plural: dict[tuple[str, str], dict[str, CRDVersion]] = {}
        files = sorted(p for p in directory.glob("*.y*ml") if p.suffix in (".yaml", ".yml"))
        if not files:
            raise FileNotFoundError(f"no CRD YAML files in {directory} (set KUEUE_CRDS_DIR)")
        for path in files:
            with path.open() as fh:
                for doc in yaml.safe_load_all(fh):
                    if doc and doc.get("kind") == "CustomResourceDefinition":
                        self._add(doc)

    def _add(self, crd: dict[str, Any]) -> None:
        self.raw.append(crd)
        spec = crd["spec"]
        names = spec["names"]
        for v in spec["versions"]:
            schema = v.get("schema", {}).get("openAPIV3Schema", {})
            _check_keywords(schema, f"{crd['metadata']['name']}/{v['name']}")
            cv = CRDVersion(
                group=spec["group"],
                version=v["name"],
                kind=names["kind"],
                list_kind=names.get("listKind", names["kind"] + "List"),
                plural=names["plural"],
                singular=names.get("singular", names["kind"].lower()),
                short_names=tuple(names.get("shortNames", ())),
                namespaced=spec["scope"] == "Namespaced",
                served=bool(v.get("served")),
                storage=bool(v.get("storage")),
                deprecated=bool(v.get("deprecated")),
                deprecation_warning=v.get("deprecationWarning"),
                schema=schema,
                subresources=v.get("subresources") or {},
                printer_columns=tuple(v.get("additionalPrinterColumns") or ()),
                crd_name=crd["metadata"]["name"],
            )
            self.by_gvk[(cv.group, cv.version, cv.kind)] = cv
            self.by_plural.setdefault((cv.group, cv.plural), {})[cv.version] = cv

    def lookup(self, api_version: str, kind: str) -> CRDVersion | None:
        group, _, version = api_version.rpartition("/")
        return self.by_gvk.get((group, version, kind))

    def resource(self, group: str, version: str, plural: str) -> CRDVersion | None:
        return self.by_plural.get((group, plural), {}).get(version)

    def kinds(self) -> list[str]:
        return sorted({k for (_, _, k) in self.by_gvk})

    def versions(self, group: str = KUEUE_GROUP) -> list[str]:
        return sorted({v for (g, v, _) in self.by_gvk if g == group})

    def storage_versions(self) -> list[CRDVersion]:
        return [cv for cv in self.by_gvk.values() if cv.storage]


@functools.lru_cache(maxsize=8)
def _load(directory: str) -> CRDSet:
    return CRDSet(Path(directory))


def load_crds(directory: str | Path | None = None) -> CRDSet:
    """Load (cached per directory) every CRD from ``directory`` or :func:`crds_dir`."""
    return _load(str(Path(directory).resolve() if directory else crds_dir()))


_SUPPORTED_KEYWORDS = frozenset(
    {
        "type",
        "description",
        "title",
        "properties",
        "required",
        "items",
        "additionalProperties",
        "enum",
        "pattern",
        "maxLength",
        "minLength",
        "maxItems",
        "minItems",
        "maxProperties",
        "minProperties",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "format",
        "default",
        "nullable",
        "anyOf",
        "x-kubernetes-int-or-string",
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-list-type",
        "x-kubernetes-list-map-keys",
        "x-kubernetes-map-type",
        "x-kubernetes-validations",
        "example",
    }
)


def _check_keywords(schema: Any, where: str) -> None:
    """Refuse schemas using a keyword this validator does not implement (never silently pass)."""
    if not isinstance(schema, dict):
        return
    unknown = set(schema) - _SUPPORTED_KEYWORDS
    if unknown:
        raise NotImplementedError(f"{where}: unsupported schema keywords {sorted(unknown)}")
    for sub in schema.get("properties", {}).values():
        _check_keywords(sub, where)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            _check_keywords(schema[key], where)
    for sub in schema.get("anyOf", ()):
        _check_keywords(sub, where)


# --------------------------------------------------------------------------------------------------
# Field errors (formatted like k8s.io/apimachinery/pkg/util/validation/field)
# --------------------------------------------------------------------------------------------------

_OMIT = object()

_TYPE_TEXT = {
    "FieldValueNotFound": "Not found",
    "FieldValueRequired": "Required value",
    "FieldValueDuplicate": "Duplicate value",
    "FieldValueInvalid": "Invalid value",
    "FieldValueNotSupported": "Unsupported value",
    "FieldValueForbidden": "Forbidden",
    "FieldValueTooLong": "Too long",
    "FieldValueTooMany": "Too many",
    "InternalError": "Internal error",
    "FieldValueTypeInvalid": "Invalid value",
    # Not a k8s ErrorType: strict field validation reports these separately (400 BadRequest).
    "FieldValueUnknown": "Unknown field",
}
_NO_VALUE_TYPES = {"FieldValueRequired", "FieldValueForbidden", "InternalError", "FieldValueUnknown"}


def _fmt_value(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class FieldError:
    """One validation error; ``str()`` gives the apiserver's text, e.g.
    ``spec.cohortName: Invalid value: "X": spec.cohortName in body should match '...'``."""

    field: str
    type: str
    detail: str = ""
    value: Any = _OMIT

    @property
    def unknown_field(self) -> bool:
        return self.type == "FieldValueUnknown"

    def body(self) -> str:
        s = _TYPE_TEXT.get(self.type, self.type)
        if self.type not in _NO_VALUE_TYPES and self.value is not _OMIT:
            s += ": " + _fmt_value(self.value)
        if self.detail:
            s += ": " + self.detail
        return s

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}" if self.field else self.body()


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _index(path: str, i: int | str) -> str:
    return f"{path}[{i}]"


# --------------------------------------------------------------------------------------------------
# Name rules (k8s.io/apimachinery/pkg/util/validation)
# --------------------------------------------------------------------------------------------------

_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = _DNS1123_LABEL + r"(\." + _DNS1123_LABEL + r")*"
_QUALIFIED_NAME = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE = r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"


def is_dns1123_subdomain(value: str) -> list[str]:
    errs = []
    if len(value) > 253:
        errs.append("must be no more than 253 characters")
    if not re.fullmatch(_DNS1123_SUBDOMAIN, value):
        errs.append(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
            "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
            f"for validation is '{_DNS1123_SUBDOMAIN}')"
        )
    return errs


def is_dns1123_label(value: str) -> list[str]:
    errs = []
    if len(value) > 63:
        errs.append("must be no more than 63 characters")
    if not re.fullmatch(_DNS1123_LABEL, value):
        errs.append(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
            "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
            f"used for validation is '{_DNS1123_LABEL}')"
        )
    return errs


def is_qualified_name(value: str) -> list[str]:
    """Label-key rules: optional DNS-subdomain prefix + '/' + name of at most 63 characters."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in is_dns1123_subdomain(prefix))
    else:
        return [
            "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start "
            "and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
            f"used for validation is '{_QUALIFIED_NAME}') with an optional DNS subdomain prefix and '/' "
            "(e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part must be no more than 63 characters")
    if name and not re.fullmatch(_QUALIFIED_NAME, name):
        errs.append(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
            "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used "
            f"for validation is '{_QUALIFIED_NAME}')"
        )
    return errs


def is_valid_label_value(value: str) -> list[str]:
    errs = []
    if len(value) > 63:
        errs.append("must be no more than 63 characters")
    if not re.fullmatch(_LABEL_VALUE, value):
        errs.append(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
            "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
            f"'my_value',  or '12345', regex used for validation is '{_LABEL_VALUE}')"
        )
    return errs


# --------------------------------------------------------------------------------------------------
# Quantities (k8s.io/apimachinery/pkg/api/resource)
# --------------------------------------------------------------------------------------------------

QUANTITY_PATTERN = re.compile(
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}


def parse_quantity(value: Any) -> Fraction:
    """Exact value of a Kubernetes quantity (``int`` or string such as ``"1.5Gi"``, ``"500m"``)."""
    if isinstance(value, bool):
        raise ValueError(f"quantities cannot be booleans: {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"not a quantity: {value!r}")
        return Fraction(value)
    if not isinstance(value, str):
        raise ValueError(f"not a quantity: {value!r}")
    s = value.strip()
    if not QUANTITY_PATTERN.match(s):
        raise ValueError(f"quantities must match the regular expression '{QUANTITY_PATTERN.pattern}'")
    m = re.match(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(.*)$", s)
    assert m
    number, suffix = Fraction(m.group(1)), m.group(2)
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * _DECIMAL[suffix]
    exp = Fraction(suffix[1:])
    if exp.denominator != 1:
        raise ValueError(f"unsupported exponent in quantity {value!r}")
    return number * Fraction(10) ** int(exp)


class Quantity:
    """A CEL ``Quantity`` value (Kubernetes CEL quantity library)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.value = parse_quantity(text)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and other.value == self.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return f"Quantity({self.text!r})"


# --------------------------------------------------------------------------------------------------
# Defaulting (structural schema defaulting, as the apiserver does on decode)
# --------------------------------------------------------------------------------------------------


def _default_in_place(value: Any, schema: dict[str, Any]) -> None:
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for name, sub in props.items():
            if name in value and value[name] is None and not sub.get("nullable"):
                del value[name]
            if name not in value and "default" in sub:
                value[name] = copy.deepcopy(sub["default"])
        addl = schema.get("additionalProperties")
        for key in list(value):
            sub = props.get(key) if key in props else (addl if isinstance(addl, dict) else None)
            if sub is not None:
                if value[key] is None and not sub.get("nullable") and key not in props:
                    del value[key]
                    continue
                _default_in_place(value[key], sub)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            _default_in_place(item, schema["items"])


def apply_defaults(obj: dict[str, Any], crds: CRDSet | None = None) -> dict[str, Any]:
    """A defaulted deep copy of ``obj`` (unchanged copy if its kind is unknown)."""
    out = copy.deepcopy(obj)
    cv = (crds or load_crds()).lookup(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
    if cv is not None:
        _default_in_place(out, cv.schema)
    return out


# --------------------------------------------------------------------------------------------------
# CEL: Kubernetes extension library on top of cel-python
# --------------------------------------------------------------------------------------------------


class CELRuleError(Exception):
    """A rule that could not be compiled or evaluated (the apiserver reports these as errors)."""


def _q(x: Any) -> Quantity:
    if not isinstance(x, Quantity):
        raise CELRuleError(f"expected a Quantity, got {type(x).__name__}")
    return x


def _cel_quantity(s: Any) -> Quantity:
    try:
        return Quantity(str(s))
    except ValueError as e:
        raise CELRuleError(f"quantity({s!r}): {e}") from e


def _cel_is_quantity(s: Any) -> celtypes.BoolType:
    try:
        parse_quantity(str(s))
    except ValueError:
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


def _frac_to_quantity(f: Fraction) -> Quantity:
    if f.denominator == 1:
        return Quantity(str(f.numerator))
    # express in nano units when exact, else as a decimal approximation
    nano = f * 10**9
    if nano.denominator == 1:
        return Quantity(f"{nano.numerator}n")
    return Quantity(repr(float(f)))


def _cel_add(a: Any, b: Any) -> Any:
    if isinstance(a, Quantity):
        other = b.value if isinstance(b, Quantity) else Fraction(int(b))
        return _frac_to_quantity(a.value + other)
    raise CELRuleError("add() is only supported on Quantity")


def _cel_sub(a: Any, b: Any) -> Any:
    if isinstance(a, Quantity):
        other = b.value if isinstance(b, Quantity) else Fraction(int(b))
        return _frac_to_quantity(a.value - other)
    raise CELRuleError("sub() is only supported on Quantity")


def _cel_compare_to(a: Any, b: Any) -> celtypes.IntType:
    va, vb = _q(a).value, _q(b).value
    return celtypes.IntType((va > vb) - (va < vb))


def _cel_as_integer(a: Any) -> celtypes.IntType:
    v = _q(a).value
    if v.denominator != 1 or not -(2**63) <= v.numerator < 2**63:
        raise CELRuleError(f"cannot convert value to integer: {a.text}")
    return celtypes.IntType(v.numerator)


def _cel_index_of(a: Any, b: Any, *rest: Any) -> celtypes.IntType:
    if isinstance(a, str):
        start = int(rest[0]) if rest else 0
        return celtypes.IntType(a.find(str(b), start))
    if isinstance(a, list):
        for i, x in enumerate(a):
            if x == b:
                return celtypes.IntType(i)
        return celtypes.IntType(-1)
    raise CELRuleError("indexOf() needs a string or a list")


def _cel_last_index_of(a: Any, b: Any, *rest: Any) -> celtypes.IntType:
    if isinstance(a, str):
        return celtypes.IntType(a.rfind(str(b)) if not rest else a.rfind(str(b), 0, int(rest[0]) + len(b)))
    if isinstance(a, list):
        for i in range(len(a) - 1, -1, -1):
            if a[i] == b:
                return celtypes.IntType(i)
        return celtypes.IntType(-1)
    raise CELRuleError("lastIndexOf() needs a string or a list")


def _cel_substring(s: Any, start: Any, *end: Any) -> celtypes.StringType:
    st = str(s)
    b = int(start)
    e = int(end[0]) if end else len(st)
    if not 0 <= b <= e <= len(st):
        raise CELRuleError(f"substring({b}, {e}) out of range for a string of length {len(st)}")
    return celtypes.StringType(st[b:e])


def _cel_split(s: Any, sep: Any, *limit: Any) -> celtypes.ListType:
    n = int(limit[0]) if limit else -1
    if n == 0:
        return celtypes.ListType([])
    parts = str(s).split(str(sep)) if n < 0 else str(s).split(str(sep), n - 1)
    return celtypes.ListType([celtypes.StringType(p) for p in parts])


def _cel_join(lst: Any, *sep: Any) -> celtypes.StringType:
    return celtypes.StringType((str(sep[0]) if sep else "").join(str(x) for x in lst))


def _cel_replace(s: Any, old: Any, new: Any, *n: Any) -> celtypes.StringType:
    count = int(n[0]) if n else -1
    return celtypes.StringType(str(s).replace(str(old), str(new), count))


def _cel_char_at(s: Any, i: Any) -> celtypes.StringType:
    st, idx = str(s), int(i)
    if not 0 <= idx <= len(st):
        raise CELRuleError(f"charAt({idx}) out of range")
    return celtypes.StringType(st[idx : idx + 1])


def _cel_is_sorted(lst: Any) -> celtypes.BoolType:
    items = list(lst)
    return celtypes.BoolType(all(items[i] <= items[i + 1] for i in range(len(items) - 1)))


def _cel_sum(lst: Any) -> Any:
    items = list(lst)
    if not items:
        return celtypes.IntType(0)
    total = items[0]
    for x in items[1:]:
        total = total + x
    return total


def _cel_min(lst: Any) -> Any:
    items = list(lst)
    if not items:
        raise CELRuleError("min() of an empty list")
    return min(items)


def _cel_max(lst: Any) -> Any:
    items = list(lst)
    if not items:
        raise CELRuleError("max() of an empty list")
    return max(items)


def _cel_find(s: Any, pattern: Any) -> celtypes.StringType:
    m = re.search(str(pattern), str(s))
    return celtypes.StringType(m.group(0) if m else "")


def _cel_find_all(s: Any, pattern: Any, *limit: Any) -> celtypes.ListType:
    found = [m.group(0) for m in re.finditer(str(pattern), str(s))]
    if limit and int(limit[0]) >= 0:
        found = found[: int(limit[0])]
    return celtypes.ListType([celtypes.StringType(x) for x in found])


K8S_CEL_FUNCTIONS: dict[str, Callable[..., Any]] = {
    # quantity library
    "quantity": _cel_quantity,
    "isQuantity": _cel_is_quantity,
    "sign": lambda a: celtypes.IntType((_q(a).value > 0) - (_q(a).value < 0)),
    "isInteger": lambda a: celtypes.BoolType(
        _q(a).value.denominator == 1 and -(2**63) <= _q(a).value.numerator < 2**63
    ),
    "asInteger": _cel_as_integer,
    "asApproximateFloat": lambda a: celtypes.DoubleType(float(_q(a).value)),
    "add": _cel_add,
    "sub": _cel_sub,
    "isGreaterThan": lambda a, b: celtypes.BoolType(_q(a).value > _q(b).value),
    "isLessThan": lambda a, b: celtypes.BoolType(_q(a).value < _q(b).value),
    "compareTo": _cel_compare_to,
    # strings library
    "lowerAscii": lambda s: celtypes.StringType(str(s).lower()),
    "upperAscii": lambda s: celtypes.StringType(str(s).upper()),
    "trim": lambda s: celtypes.StringType(str(s).strip()),
    "charAt": _cel_char_at,
    "indexOf": _cel_index_of,
    "lastIndexOf": _cel_last_index_of,
    "substring": _cel_substring,
    "split": _cel_split,
    "join": _cel_join,
    "replace": _cel_replace,
    # lists library
    "isSorted": _cel_is_sorted,
    "sum": _cel_sum,
    "min": _cel_min,
    "max": _cel_max,
    # regex library
    "find": _cel_find,
    "findAll": _cel_find_all,
}

_CEL_ENV = celpy.Environment()
_CEL_LOCK = threading.Lock()
_CEL_RESERVED = {
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
}


@functools.lru_cache(maxsize=512)
def _compile(rule: str) -> Any:
    try:
        ast = _CEL_ENV.compile(rule)
        return _CEL_ENV.program(ast, functions=K8S_CEL_FUNCTIONS)
    except Exception as e:  # celpy raises CELParseError and others
        raise CELRuleError(f"compilation failed: {e}") from e


def _escape_property(name: str) -> str:
    if name in _CEL_RESERVED:
        return f"__{name}__"
    return (
        name.replace("__", "__underscores__").replace(".", "__dot__").replace("-", "__dash__").replace("/", "__slash__")
    )


def _to_cel(value: Any, schema: dict[str, Any] | None) -> Any:
    schema = schema or {}
    if value is None:
        return None
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        return celtypes.IntType(value)
    if isinstance(value, float):
        return celtypes.DoubleType(value)
    if isinstance(value, str):
        if schema.get("format") == "date-time":
            try:
                return celtypes.TimestampType(value)
            except Exception:
                return celtypes.StringType(value)
        return celtypes.StringType(value)
    if isinstance(value, list):
        items = schema.get("items") if isinstance(schema.get("items"), dict) else None
        return celtypes.ListType([_to_cel(v, items) for v in value])
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        addl = schema.get("additionalProperties")
        out = {}
        for k, v in value.items():
            if k in props:
                out[celtypes.StringType(_escape_property(k))] = _to_cel(v, props[k])
            else:
                out[celtypes.StringType(k)] = _to_cel(v, addl if isinstance(addl, dict) else None)
        return celtypes.MapType(out)
    raise CELRuleError(f"cannot represent {type(value).__name__} in CEL")


def is_transition_rule(rule: dict[str, Any]) -> bool:
    return bool(re.search(r"\boldSelf\b", rule["rule"]))


_MISSING = object()


def evaluate_rule(rule: dict[str, Any], value: Any, schema: dict[str, Any], old: Any = _MISSING) -> tuple[bool, str]:
    """Evaluate one ``x-kubernetes-validations`` entry against ``value`` (the rule's ``self``).

    Returns ``(passed, message)``. Raises :class:`CELRuleError` if the rule cannot be compiled or
    evaluated, or does not yield a bool. Transition rules need ``old``.
    """
    program = _compile(rule["rule"])
    activation: dict[str, Any] = {"self": _to_cel(value, schema)}
    if is_transition_rule(rule):
        if old is _MISSING:
            raise CELRuleError("transition rule evaluated without oldSelf")
        activation["oldSelf"] = _to_cel(old, schema)
    with _CEL_LOCK:
        try:
            result = program.evaluate(activation)
        except CELRuleError:
            raise
        except Exception as e:
            raise CELRuleError(f"evaluation failed: {e}") from e
    if not isinstance(result, celtypes.BoolType):
        raise CELRuleError(f"evaluation failed: {result!r}")
    message = rule.get("message") or f"failed rule: {rule['rule']}"
    if not result and rule.get("messageExpression"):
        try:
            with _CEL_LOCK:
                msg = _compile(rule["messageExpression"]).evaluate(activation)
            if isinstance(msg, celtypes.StringType) and str(msg).strip():
                message = str(msg)
        except Exception:  # the apiserver falls back to message on messageExpression errors
            pass
    return bool(result), message


def iter_validation_rules(
    schema: dict[str, Any], path: str = ""
) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """Every ``(path, schema node, rule)`` of a schema; lists are written ``x[*]``, maps ``x[*]``."""
    for rule in schema.get("x-kubernetes-validations", ()):
        yield path, schema, rule
    for name, sub in (schema.get("properties") or {}).items():
        yield from iter_validation_rules(sub, _child(path, name))
    if isinstance(schema.get("items"), dict):
        yield from iter_validation_rules(schema["items"], _index(path, "*"))
    if isinstance(schema.get("additionalProperties"), dict):
        yield from iter_validation_rules(schema["additionalProperties"], _index(path, "*"))


# --------------------------------------------------------------------------------------------------
# Structural schema validation
# --------------------------------------------------------------------------------------------------

_OBJECT_META_FIELDS = {
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
}

_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _type_ok(value: Any, want: str) -> bool:
    actual = _json_type(value)
    if want == "number":
        return actual in ("integer", "number")
    return actual == want


def _parse_datetime(value: str) -> bool:
    try:
        _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return bool(re.match(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$", value))


class _Validator:
    def __init__(self, old_root: Any) -> None:
        self.errors: list[FieldError] = []
        self.old_root = old_root

    def add(self, *a: Any, **kw: Any) -> None:
        self.errors.append(FieldError(*a, **kw))

    def node(self, value: Any, schema: dict[str, Any], path: str, old: Any) -> None:
        if value is None:
            if not schema.get("nullable"):
                want = "integer,string" if schema.get("x-kubernetes-int-or-string") else schema.get("type", "object")
                self.add(path, "FieldValueTypeInvalid", f'{path} in body must be of type {want}: "null"', "null")
            return
        # ---- type
        if schema.get("x-kubernetes-int-or-string"):
            if _json_type(value) not in ("integer", "string"):
                t = _json_type(value)
                self.add(path, "FieldValueTypeInvalid", f'{path} in body must be of type integer,string: "{t}"', t)
                return
        elif "type" in schema and not _type_ok(value, schema["type"]):
            t = _json_type(value)
            self.add(path, "FieldValueTypeInvalid", f'{path} in body must be of type {schema["type"]}: "{t}"', t)
            return
        for alt in schema.get("anyOf", ()):  # only the int-or-string form is used by structural CRDs
            if "type" in alt and not set(alt) <= {"type"}:
                raise NotImplementedError(f"{path}: anyOf with constraints is not supported")
        # ---- scalars
        if isinstance(value, str):
            self.string(value, schema, path)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            self.number(value, schema, path)
        if "enum" in schema and value not in schema["enum"]:
            supported = ", ".join(_fmt_value(e) for e in schema["enum"])
            self.add(path, "FieldValueNotSupported", f"supported values: {supported}", value)
        # ---- containers
        if isinstance(value, dict):
            self.obj(value, schema, path, old)
        elif isinstance(value, list):
            self.array(value, schema, path, old)
        # ---- CEL
        for rule in schema.get("x-kubernetes-validations", ()):
            self.cel(rule, value, schema, path, old)

    def string(self, value: str, schema: dict[str, Any], path: str) -> None:
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            self.add(path, "FieldValueTooLong", f"may not be more than {schema['maxLength']} bytes", value)
        if "minLength" in schema and len(value) < schema["minLength"]:
            self.add(
                path, "FieldValueInvalid", f"{path} in body should be at least {schema['minLength']} chars long", value
            )
        if "pattern" in schema and not re.search(schema["pattern"], value):
            self.add(path, "FieldValueInvalid", f"{path} in body should match '{schema['pattern']}'", value)
        if schema.get("format") == "date-time" and not _parse_datetime(value):
            self.add(path, "FieldValueInvalid", f'{path} in body must be of type date-time: "{value}"', value)

    def number(self, value: float, schema: dict[str, Any], path: str) -> None:
        fmt = schema.get("format")
        if fmt in _INT_RANGES:
            lo, hi = _INT_RANGES[fmt]
            if not lo <= value <= hi:
                self.add(path, "FieldValueInvalid", f"{path} in body must be a valid {fmt} ({lo}..{hi})", value)
        if "minimum" in schema:
            excl = schema.get("exclusiveMinimum") is True
            if value < schema["minimum"] or (excl and value == schema["minimum"]):
                op = "greater than" if excl else "greater than or equal to"
                self.add(path, "FieldValueInvalid", f"{path} in body should be {op} {schema['minimum']}", value)
        if "maximum" in schema:
            excl = schema.get("exclusiveMaximum") is True
            if value > schema["maximum"] or (excl and value == schema["maximum"]):
                op = "less than" if excl else "less than or equal to"
                self.add(path, "FieldValueInvalid", f"{path} in body should be {op} {schema['maximum']}", value)

    def obj(self, value: dict[str, Any], schema: dict[str, Any], path: str, old: Any) -> None:
        props = schema.get("properties") or {}
        addl = schema.get("additionalProperties")
        for name in schema.get("required", ()):
            if name not in value:
                self.add(_child(path, name), "FieldValueRequired", "")
        if "maxProperties" in schema and len(value) > schema["maxProperties"]:
            self.add(path, "FieldValueTooMany", f"must have at most {schema['maxProperties']} items", len(value))
        if "minProperties" in schema and len(value) < schema["minProperties"]:
            self.add(
                path,
                "FieldValueInvalid",
                f"{path} in body should have at least {schema['minProperties']} properties",
                len(value),
            )
        old_map = old if isinstance(old, dict) else None
        for key, sub_value in value.items():
            old_sub = old_map.get(key, _MISSING) if old_map is not None else _MISSING
            if key in props:
                self.node(sub_value, props[key], _child(path, key), old_sub)
            elif isinstance(addl, dict):
                self.node(sub_value, addl, _index(path, key), old_sub)
            elif addl is True or schema.get("x-kubernetes-preserve-unknown-fields"):
                continue
            else:
                p = _child(path, key)
                self.add(p, "FieldValueUnknown", f'unknown field "{p}" (field not declared in schema)')

    def array(self, value: list[Any], schema: dict[str, Any], path: str, old: Any) -> None:
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            self.add(path, "FieldValueTooMany", f"must have at most {schema['maxItems']} items", len(value))
        if "minItems" in schema and len(value) < schema["minItems"]:
            self.add(
                path, "FieldValueInvalid", f"{path} in body should have at least {schema['minItems']} items", len(value)
            )
        list_type = schema.get("x-kubernetes-list-type")
        keys = schema.get("x-kubernetes-list-map-keys") or ()
        old_by_key: dict[Any, Any] = {}
        if list_type == "map" and isinstance(old, list):
            for item in old:
                if isinstance(item, dict):
                    old_by_key[json.dumps([item.get(k) for k in keys])] = item
        seen: set[str] = set()
        items = schema.get("items") if isinstance(schema.get("items"), dict) else {}
        for i, item in enumerate(value):
            p = _index(path, i)
            old_item: Any = _MISSING
            if list_type == "map" and isinstance(item, dict):
                ident = json.dumps([item.get(k) for k in keys])
                if ident in seen:
                    self.add(p, "FieldValueDuplicate", "", {k: item.get(k) for k in keys if k in item})
                seen.add(ident)
                old_item = old_by_key.get(ident, _MISSING)
            elif list_type == "set":
                ident = json.dumps(item, sort_keys=True)
                if ident in seen:
                    self.add(p, "FieldValueDuplicate", "", item)
                seen.add(ident)
            self.node(item, items, p, old_item)

    def cel(self, rule: dict[str, Any], value: Any, schema: dict[str, Any], path: str, old: Any) -> None:
        if is_transition_rule(rule) and (old is _MISSING or old is None):
            return
        field_path = path
        if rule.get("fieldPath"):
            fp = rule["fieldPath"]
            field_path = path + fp if fp.startswith(("[", ".")) else _child(path, fp)
        try:
            ok, message = evaluate_rule(rule, value, schema, old)
        except CELRuleError as e:
            self.add(
                field_path,
                "FieldValueInvalid",
                f"rule evaluation error: {e} (rule: {rule['rule']})",
                _json_type(value),
            )
            return
        if ok:
            return
        reason = rule.get("reason") or "FieldValueInvalid"
        self.add(field_path, reason, message, _json_type(value))


def _validate_metadata(v: _Validator, meta: Any, cv: CRDVersion) -> None:
    if not isinstance(meta, dict):
        v.add("metadata", "FieldValueRequired", "")
        return
    for key in meta:
        if key not in _OBJECT_META_FIELDS:
            v.add(f"metadata.{key}", "FieldValueUnknown", f'unknown field "metadata.{key}"')
    name = meta.get("name")
    if not name:
        if not meta.get("generateName"):
            v.add("metadata.name", "FieldValueRequired", "name or generateName is required")
    elif not isinstance(name, str):
        v.add("metadata.name", "FieldValueTypeInvalid", "metadata.name in body must be of type string", name)
    else:
        for msg in is_dns1123_subdomain(name):
            v.add("metadata.name", "FieldValueInvalid", msg, name)
    ns = meta.get("namespace")
    if cv.namespaced:
        if not ns:
            v.add("metadata.namespace", "FieldValueRequired", "")
        elif isinstance(ns, str):
            for msg in is_dns1123_label(ns):
                v.add("metadata.namespace", "FieldValueInvalid", msg, ns)
    for field_name in ("labels", "annotations"):
        m = meta.get(field_name)
        if m is None:
            continue
        if not isinstance(m, dict):
            v.add(f"metadata.{field_name}", "FieldValueTypeInvalid", "must be a map of strings", m)
            continue
        for k, val in m.items():
            for msg in is_qualified_name(str(k).lower() if field_name == "annotations" else str(k)):
                v.add(f"metadata.{field_name}", "FieldValueInvalid", msg, k)
            if not isinstance(val, str):
                v.add(f"metadata.{field_name}[{k}]", "FieldValueTypeInvalid", "must be a string", val)
            elif field_name == "labels":
                for msg in is_valid_label_value(val):
                    v.add("metadata.labels", "FieldValueInvalid", msg, val)
        if field_name == "annotations":
            size = sum(len(k) + len(str(x)) for k, x in m.items())
            if size > 256 * 1024:
                v.add("metadata.annotations", "FieldValueTooLong", "must have at most 262144 bytes")
    fin = meta.get("finalizers")
    if fin is not None and (not isinstance(fin, list) or not all(isinstance(x, str) for x in fin)):
        v.add("metadata.finalizers", "FieldValueTypeInvalid", "must be a list of strings", fin)


def validation_errors(
    obj: dict[str, Any], old: dict[str, Any] | None = None, *, crds: CRDSet | None = None
) -> list[FieldError]:
    """Structured errors for ``obj`` (defaulted first); ``old`` enables transition rules (update)."""
    crds = crds or load_crds()
    if not isinstance(obj, dict):
        return [FieldError("", "FieldValueTypeInvalid", "object must be a JSON object", _json_type(obj))]
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not api_version or not kind:
        return [FieldError("kind" if api_version else "apiVersion", "FieldValueRequired", "")]
    cv = crds.lookup(str(api_version), str(kind))
    if cv is None:
        return [
            FieldError(
                "apiVersion",
                "FieldValueNotSupported",
                f'no matches for kind "{kind}" in version "{api_version}"',
                api_version,
            )
        ]
    if not cv.served:
        return [FieldError("apiVersion", "FieldValueNotSupported", "version is not served", api_version)]
    defaulted = copy.deepcopy(obj)
    _default_in_place(defaulted, cv.schema)
    old_defaulted: Any = _MISSING
    if old is not None:
        old_defaulted = copy.deepcopy(old)
        _default_in_place(old_defaulted, cv.schema)
    v = _Validator(old_defaulted)
    _validate_metadata(v, defaulted.get("metadata"), cv)
    body = {k: x for k, x in defaulted.items() if k != "metadata"}
    schema = {**cv.schema, "properties": {k: s for k, s in cv.schema.get("properties", {}).items() if k != "metadata"}}
    old_body = (
        {k: x for k, x in old_defaulted.items() if k != "metadata"} if isinstance(old_defaulted, dict) else _MISSING
    )
    v.node(body, schema, "", old_body)
    return v.errors


def validate(obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
    """Errors (apiserver-style strings) for ``obj`` against the CRD schema and CEL rules; [] if valid."""
    return [str(e) for e in validation_errors(obj, old)]


# --------------------------------------------------------------------------------------------------
# Kueue validating webhook rules (not enforced by bare CRDs)
# --------------------------------------------------------------------------------------------------


def _qty(value: Any) -> Fraction | None:
    try:
        return parse_quantity(value)
    except ValueError:
        return None


def _webhook_resource_groups(errs: list[FieldError], rgs: Any, has_parent: bool, is_cohort: bool) -> None:
    path = "spec.resourceGroups"
    if not isinstance(rgs, list):
        return
    seen_resources: set[str] = set()
    seen_flavors: set[str] = set()
    total_flavors = total_covered = 0
    parent_word = "parent" if is_cohort else "cohort"
    for i, rg in enumerate(rgs):
        if not isinstance(rg, dict):
            continue
        rg_path = _index(path, i)
        covered = [str(c) for c in rg.get("coveredResources") or []]
        flavors = [f for f in rg.get("flavors") or [] if isinstance(f, dict)]
        total_covered += len(covered)
        total_flavors += len(flavors)
        for j, name in enumerate(covered):
            p = _index(_child(rg_path, "coveredResources"), j)
            for msg in is_qualified_name(name):
                errs.append(FieldError(p, "FieldValueInvalid", msg, name))
            if name in seen_resources:
                errs.append(FieldError(p, "FieldValueDuplicate", "", name))
            seen_resources.add(name)
        combos = 0
        for j, fq in enumerate(flavors):
            fpath = _index(_child(rg_path, "flavors"), j)
            resources = [r for r in fq.get("resources") or [] if isinstance(r, dict)]
            combos += len(resources)
            for k, rq in enumerate(resources):
                if k >= len(covered):
                    break
                rpath = _index(_child(fpath, "resources"), k)
                if rq.get("name") != covered[k]:
                    errs.append(
                        FieldError(
                            _child(rpath, "name"),
                            "FieldValueInvalid",
                            "must match the name in coveredResources",
                            rq.get("name"),
                        )
                    )
                nominal = _qty(rq.get("nominalQuota"))
                if nominal is not None and nominal < 0:
                    errs.append(
                        FieldError(
                            _child(rpath, "nominalQuota"),
                            "FieldValueInvalid",
                            "must be greater than or equal to 0",
                            str(rq.get("nominalQuota")),
                        )
                    )
                for limit_name in ("borrowingLimit", "lendingLimit"):
                    if rq.get(limit_name) is None:
                        continue
                    lpath = _child(rpath, limit_name)
                    raw = rq[limit_name]
                    limit = _qty(raw)
                    if limit is not None and limit < 0:
                        errs.append(
                            FieldError(lpath, "FieldValueInvalid", "must be greater than or equal to 0", str(raw))
                        )
                    if not has_parent:
                        errs.append(
                            FieldError(lpath, "FieldValueInvalid", f"must be nil when {parent_word} is empty", str(raw))
                        )
                    if (
                        limit_name == "lendingLimit"
                        and not is_cohort
                        and limit is not None
                        and nominal is not None
                        and limit > nominal
                    ):
                        errs.append(
                            FieldError(
                                lpath, "FieldValueInvalid", "must be less than or equal to the nominalQuota", str(raw)
                            )
                        )
            name = fq.get("name")
            if name in seen_flavors:
                errs.append(FieldError(_child(fpath, "name"), "FieldValueDuplicate", "", name))
            seen_flavors.add(name)
        if combos > 512:
            errs.append(
                FieldError(
                    rg_path,
                    "FieldValueInvalid",
                    f"number of flavor-resource combinations in a resourceGroup must be ≤ 512, got {combos}",
                    combos,
                )
            )
    if total_flavors > 256:
        errs.append(
            FieldError(
                path,
                "FieldValueInvalid",
                f"total number of flavors across all resourceGroups must be ≤ 256, got {total_flavors}",
                total_flavors,
            )
        )
    if total_covered > 256:
        errs.append(
            FieldError(
                path,
                "FieldValueInvalid",
                f"total number of covered resources across all resourceGroups must be ≤ 256, got {total_covered}",
                total_covered,
            )
        )


def _webhook_fair_sharing(errs: list[FieldError], fs: Any, path: str) -> None:
    if not isinstance(fs, dict) or fs.get("weight") is None:
        return
    w = _qty(fs["weight"])
    if w is None:
        return
    if w < 0:
        errs.append(FieldError(path, "FieldValueInvalid", "must be greater than or equal to 0", str(fs["weight"])))
    if 0 < w <= Fraction(1, 10**9):
        errs.append(FieldError(path, "FieldValueInvalid", "When not 0, weight must be > 10e-9", str(fs["weight"])))


def _webhook_label_selector(errs: list[FieldError], sel: Any, path: str) -> None:
    if not isinstance(sel, dict):
        return
    for k, val in (sel.get("matchLabels") or {}).items():
        for msg in is_qualified_name(str(k)):
            errs.append(FieldError(_child(path, "matchLabels"), "FieldValueInvalid", msg, k))
        for msg in is_valid_label_value(str(val)):
            errs.append(FieldError(_child(path, "matchLabels"), "FieldValueInvalid", msg, val))
    for i, expr in enumerate(sel.get("matchExpressions") or []):
        p = _index(_child(path, "matchExpressions"), i)
        op, values = expr.get("operator"), expr.get("values") or []
        if op in ("In", "NotIn"):
            if not values:
                errs.append(
                    FieldError(
                        _child(p, "values"),
                        "FieldValueRequired",
                        "must be specified when `operator` is 'In' or 'NotIn'",
                    )
                )
        elif op in ("Exists", "DoesNotExist"):
            if values:
                errs.append(
                    FieldError(
                        _child(p, "values"),
                        "FieldValueForbidden",
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    )
                )
        else:
            errs.append(FieldError(_child(p, "operator"), "FieldValueInvalid", "not a valid selector operator", op))
        for msg in is_qualified_name(str(expr.get("key", ""))):
            errs.append(FieldError(_child(p, "key"), "FieldValueInvalid", msg, expr.get("key")))


def webhook_errors(obj: dict[str, Any]) -> list[str]:
    """Rules only Kueue's validating webhook enforces (ClusterQueue, Cohort, ResourceFlavor)."""
    kind = obj.get("kind")
    spec = apply_defaults(obj).get("spec") or {}
    errs: list[FieldError] = []
    if kind == "ClusterQueue":
        _webhook_resource_groups(errs, spec.get("resourceGroups"), bool(spec.get("cohortName")), False)
        _webhook_label_selector(errs, spec.get("namespaceSelector"), "spec.namespaceSelector")
        pre = spec.get("preemption")
        if (
            isinstance(pre, dict)
            and pre.get("reclaimWithinCohort") == "Never"
            and isinstance(pre.get("borrowWithinCohort"), dict)
            and pre["borrowWithinCohort"].get("policy", "Never") != "Never"
        ):
            errs.append(
                FieldError(
                    "spec.preemption",
                    "FieldValueInvalid",
                    "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
                    pre,
                )
            )
        ff = spec.get("flavorFungibility")
        if (
            isinstance(ff, dict)
            and ff.get("preference") is not None
            and (ff.get("whenCanBorrow") != "TryNextFlavor" or ff.get("whenCanPreempt") != "TryNextFlavor")
        ):
            errs.append(
                FieldError(
                    "spec.flavorFungibility.preference",
                    "FieldValueInvalid",
                    f'preference "{ff["preference"]}" requires both whenCanBorrow and whenCanPreempt to be TryNextFlavor',
                    ff["preference"],
                )
            )
        _webhook_fair_sharing(errs, spec.get("fairSharing"), "spec.fairSharing")
    elif kind == "Cohort":
        _webhook_resource_groups(errs, spec.get("resourceGroups"), bool(spec.get("parentName")), True)
        _webhook_fair_sharing(errs, spec.get("fairSharing"), "spec.fairSharing")
    elif kind == "ResourceFlavor":
        for k, val in (spec.get("nodeLabels") or {}).items():
            for msg in is_qualified_name(str(k)):
                errs.append(FieldError("spec.nodeLabels", "FieldValueInvalid", msg, k))
            for msg in is_valid_label_value(str(val)):
                errs.append(FieldError("spec.nodeLabels", "FieldValueInvalid", msg, val))
        for i, taint in enumerate(spec.get("nodeTaints") or []):
            for msg in is_qualified_name(str(taint.get("key", ""))):
                errs.append(FieldError(f"spec.nodeTaints[{i}].key", "FieldValueInvalid", msg, taint.get("key")))
    return [str(e) for e in errs]
