"""Compute quotas and the scheduler config validated with pydantic: every problem named.

``idleshare.parse.quotas`` reads valid documents without pydantic (a stdlib check of the same bounds);
whatever it cannot vouch for comes here, which accepts exactly botocore's shapes and reports every
offending field. ``SHAPES`` (botocore shape name -> model) also feeds the admin API's OpenAPI document.
Loaded only when needed: pydantic costs `idleshare plan` and the Lambdas nothing on valid policies.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic_core import PydanticCustomError

from idleshare.domain.catalog import KNOWN_INSTANCE_TYPES, MIG_PROFILES
from idleshare.domain.model import (
    AcceleratorPartition,
    Amount,
    PriorityClass,
    Quota,
    ResourceConfig,
    SchedulerConfig,
    Strategy,
)
from idleshare.parse.errors import FieldError, InputError, capped
from idleshare.parse.quotas import (
    _DNS_LABEL_LINEAR,
    ACTIVATION_STATES,
    AMOUNT_MAX,
    BORROW_LIMIT_MAX,
    ENTITY_NAME_MAX,
    ENTITY_NAME_MIN,
    ENTITY_NAME_PATTERN,
    FAIR_SHARE,
    FAIR_SHARE_WEIGHT_MAX,
    IDLE_RESOURCE_SHARING,
    INSTANCE_COUNT_MAX,
    PREEMPT_TEAM_TASKS,
    PRIORITY_CLASS_LIST_MAX,
    PRIORITY_CLASS_NAME_PATTERN,
    PRIORITY_WEIGHT_MAX,
    RESOURCE_LIST_MAX,
    STRATEGIES,
    TEAM_NAME_PATTERN,
    decode,
)

__all__ = ["SHAPES", "parse_quotas", "parse_scheduler_config"]

_T = TypeVar("_T")


# ---------------------------------------------------------------------------------- validators
def _show(value: object) -> str:
    """A value as it appears in an error message: JSON-like, cut short."""
    if isinstance(value, Decimal):
        text = str(value)
    elif isinstance(value, (str, bool)) or value is None:
        text = json.dumps(value)
    elif isinstance(value, int) and value.bit_length() > 128:  # repr() refuses > 4300 digits
        text = f"a{' negative' if value < 0 else ''} {value.bit_length()}-bit integer"
    elif isinstance(value, (int, float)):
        text = repr(value)
    else:
        text = type(value).__name__  # objects and arrays: name the kind, not the content
        text = {"dict": "an object", "list": "an array"}.get(text, text)
    return text if len(text) <= 80 else text[:77] + "..."


def _enum(shape: str, members: Sequence[str]) -> Callable[[str], str]:
    allowed = frozenset(members)
    listed = ", ".join(m for m in members) if len(allowed) <= 12 else ""

    def check(value: str) -> str:
        if value not in allowed:
            if listed:
                raise PydanticCustomError("enum", f"must be one of {listed} (got {_show(value)})")
            hint = difflib.get_close_matches(value, sorted(allowed), n=1) if len(value) <= 100 else []
            maybe = f"; did you mean {hint[0]}?" if hint else ""
            raise PydanticCustomError("enum", f"{_show(value)} is not a {shape} value{maybe}")
        return value

    return check


def _pattern(shape: str, pattern: str, linear: str | None = None) -> Callable[[str], str]:
    """Full match of botocore's ``pattern`` (checked with ``linear``, an equivalent pattern, if given)."""
    compiled = re.compile(linear or pattern)

    def check(value: str) -> str:
        if compiled.fullmatch(value) is None:
            raise PydanticCustomError("pattern", f"must be a valid {shape}, matching {pattern} (got {_show(value)})")
        return value

    return check


def _exact_number(value: object) -> Decimal:
    """A JSON number (int, Decimal, or a float read by its shortest repr) as an exact Decimal."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        raise PydanticCustomError("number", f"must be a number (got {_show(value)})")
    try:
        number = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    except (InvalidOperation, ValueError):  # pragma: no cover - every int/float/Decimal converts
        raise PydanticCustomError("number", f"must be a number (got {_show(value)})") from None
    if not number.is_finite():
        raise PydanticCustomError("number", f"must be a finite number (got {_show(value)})")
    return number


def _enum_str(shape: str, members: Sequence[str]) -> AfterValidator:
    return AfterValidator(_enum(shape, members))


_Count = Annotated[int, Field(strict=True, ge=0, le=INSTANCE_COUNT_MAX)]
_BorrowLimit = Annotated[int, Field(strict=True, ge=0, le=BORROW_LIMIT_MAX)]
_FairShareWeight = Annotated[int, Field(strict=True, ge=0, le=FAIR_SHARE_WEIGHT_MAX)]
_PriorityWeight = Annotated[int, Field(strict=True, ge=0, le=PRIORITY_WEIGHT_MAX)]
_ExactAmount = Annotated[Decimal, BeforeValidator(_exact_number), Field(ge=0, le=AMOUNT_MAX)]
_InstanceType = Annotated[str, Field(strict=True), _enum_str("ClusterInstanceType", sorted(KNOWN_INSTANCE_TYPES))]
_MigProfile = Annotated[str, Field(strict=True), _enum_str("MIGProfileType", sorted(MIG_PROFILES))]
_Strategy = Annotated[str, Field(strict=True), _enum_str("ResourceSharingStrategy", STRATEGIES)]
_Preempt = Annotated[str, Field(strict=True), _enum_str("PreemptTeamTasks", PREEMPT_TEAM_TASKS)]
_Activation = Annotated[str, Field(strict=True), _enum_str("ActivationState", ACTIVATION_STATES)]
_FairShare = Annotated[str, Field(strict=True), _enum_str("FairShare", FAIR_SHARE)]
_IdleSharing = Annotated[str, Field(strict=True), _enum_str("IdleResourceSharing", IDLE_RESOURCE_SHARING)]
_EntityName = Annotated[
    str,
    Field(strict=True, min_length=ENTITY_NAME_MIN, max_length=ENTITY_NAME_MAX),
    AfterValidator(_pattern("EntityName", ENTITY_NAME_PATTERN)),
]
_TeamName = Annotated[
    str, Field(strict=True), AfterValidator(_pattern("team name", TEAM_NAME_PATTERN, _DNS_LABEL_LINEAR))
]
_PriorityClassName = Annotated[
    str,
    Field(strict=True),
    AfterValidator(_pattern("priority class name", PRIORITY_CLASS_NAME_PATTERN, _DNS_LABEL_LINEAR)),
]


# ---------------------------------------------------------------------------------- the shapes
# Model fields carry botocore's PascalCase member names; the classes are private so that no field
# name shadows a type name (a pydantic pitfall). ``SHAPES`` maps botocore shape names to them.
class _Shape(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class _Partition(_Shape):
    """``AcceleratorPartitionConfig``"""

    Type: _MigProfile
    Count: _Count


class _ResourceEntry(_Shape):
    """``ComputeQuotaResourceConfig``"""

    InstanceType: _InstanceType
    Count: _Count | None = None
    Accelerators: _Count | None = None
    VCpu: _ExactAmount | None = None
    MemoryInGiB: _ExactAmount | None = None
    AcceleratorPartition: _Partition | None = None


_ResourceList = Annotated[list[_ResourceEntry], Field(max_length=RESOURCE_LIST_MAX)]


class _Sharing(_Shape):
    """``ResourceSharingConfig``"""

    Strategy: _Strategy
    BorrowLimit: _BorrowLimit | None = None
    AbsoluteBorrowLimits: _ResourceList | None = None


class _QuotaConfig(_Shape):
    """``ComputeQuotaConfig``"""

    ComputeQuotaResources: _ResourceList | None = None
    ResourceSharingConfig: _Sharing | None = None
    PreemptTeamTasks: _Preempt | None = None


class _Target(_Shape):
    """``ComputeQuotaTarget``"""

    TeamName: _TeamName
    FairShareWeight: _FairShareWeight | None = None


class _Quota(_Shape):
    """Union of ``CreateComputeQuotaRequest`` and ``DescribeComputeQuotaResponse``."""

    Name: _EntityName
    ComputeQuotaConfig: _QuotaConfig | None = None
    ComputeQuotaTarget: _Target
    ActivationState: _Activation | None = None
    # accepted and ignored
    ClusterArn: Any = None
    Description: Any = None
    Tags: Any = None
    ComputeQuotaArn: Any = None
    ComputeQuotaId: Any = None
    ComputeQuotaVersion: Any = None
    Status: Any = None
    FailureReason: Any = None
    CreationTime: Any = None
    CreatedBy: Any = None
    LastModifiedTime: Any = None
    LastModifiedBy: Any = None


class _QuotaList(_Shape):
    """``{"ComputeQuotas": [...]}`` / ``{"ComputeQuotaSummaries": [...]}`` (a list response)."""

    ComputeQuotas: list[_Quota] | None = None
    ComputeQuotaSummaries: list[_Quota] | None = None
    NextToken: Any = None


class _PriorityClass(_Shape):
    """``PriorityClass``"""

    Name: _PriorityClassName
    Weight: _PriorityWeight


class _Scheduler(_Shape):
    """``SchedulerConfig``"""

    PriorityClasses: Annotated[list[_PriorityClass], Field(max_length=PRIORITY_CLASS_LIST_MAX)] | None = None
    FairShare: _FairShare | None = None
    IdleResourceSharing: _IdleSharing | None = None


class _ClusterScheduler(_Shape):
    """Union of ``CreateClusterSchedulerConfigRequest`` and ``DescribeClusterSchedulerConfigResponse``."""

    SchedulerConfig: _Scheduler | None = None
    # accepted and ignored
    Name: Any = None
    ClusterArn: Any = None
    Description: Any = None
    Tags: Any = None
    ClusterSchedulerConfigArn: Any = None
    ClusterSchedulerConfigId: Any = None
    ClusterSchedulerConfigVersion: Any = None
    Status: Any = None
    FailureReason: Any = None
    StatusDetails: Any = None
    CreationTime: Any = None
    CreatedBy: Any = None
    LastModifiedTime: Any = None
    LastModifiedBy: Any = None


SHAPES: dict[str, type[BaseModel]] = {
    "AcceleratorPartitionConfig": _Partition,
    "ComputeQuotaResourceConfig": _ResourceEntry,
    "ResourceSharingConfig": _Sharing,
    "ComputeQuotaConfig": _QuotaConfig,
    "ComputeQuotaTarget": _Target,
    "ComputeQuota": _Quota,
    "SchedulerConfig": _Scheduler,
    "PriorityClass": _PriorityClass,
    "ClusterSchedulerConfig": _ClusterScheduler,
}
"""botocore shape name -> the model that validates it (for the tests)."""

_ALL_SHAPES: tuple[type[BaseModel], ...] = (*SHAPES.values(), _QuotaList)
_KNOWN_KEYS = sorted({name for shape in _ALL_SHAPES for name in shape.model_fields})
_LIST_KEYS = ("ComputeQuotas", "ComputeQuotaSummaries")
_M = TypeVar("_M", bound=_Shape)


# ------------------------------------------------------------------------------------- parsing
def parse_quotas(raw: bytes | str | object, source: str = "quotas", *, decoded: bool = False) -> tuple[Quota, ...]:
    """Compute quotas from JSON text (``bytes``/``str``) or already-decoded JSON values.

    Raises :class:`InputError` naming ``source`` and every offending field; nothing else."""
    document = raw if decoded else decode(raw, source)
    prefix: str | None = ""
    items: list[_Quota]
    if isinstance(document, list):
        items = _validate_list(document, source)
    elif isinstance(document, dict) and any(key in document for key in _LIST_KEYS):
        wrapper = _validate(_QuotaList, document, source)
        if wrapper.ComputeQuotas is not None and wrapper.ComputeQuotaSummaries is not None:
            raise InputError(source, [FieldError("", "give ComputeQuotas or ComputeQuotaSummaries, not both")])
        prefix = "ComputeQuotas" if wrapper.ComputeQuotas is not None else "ComputeQuotaSummaries"
        items = wrapper.ComputeQuotas or wrapper.ComputeQuotaSummaries or []
    elif isinstance(document, dict):
        items = [_validate(_Quota, document, source)]
        prefix = None  # a single quota: paths start at its fields
    else:
        raise InputError(
            source,
            [FieldError("", f"expected an array of compute quotas or an object, got {_show(document)}")],
        )
    _check_quotas(items, prefix, source)
    return tuple(_to_quota(item) for item in items)


def parse_scheduler_config(
    raw: bytes | str | object, source: str = "scheduler-config", *, decoded: bool = False
) -> SchedulerConfig:
    """The scheduler config from JSON text or decoded JSON: the bare ``SchedulerConfig`` shape
    (``{"PriorityClasses": ..., "FairShare": ..., "IdleResourceSharing": ...}``) or the
    ``Create``/``DescribeClusterSchedulerConfig`` shape with a ``SchedulerConfig`` key. ``None``, an
    empty text or an absent ``SchedulerConfig`` mean the defaults (everything Enabled)."""
    if raw is None or (not decoded and isinstance(raw, (str, bytes)) and not raw.strip()):
        return SchedulerConfig()
    document = raw if decoded else decode(raw, source)
    if document is None:
        return SchedulerConfig()
    if not isinstance(document, dict):
        raise InputError(source, [FieldError("", f"expected an object, got {_show(document)}")])
    bare = set(_Scheduler.model_fields)
    if set(document) <= bare:
        shape: _Scheduler | None = _validate(_Scheduler, document, source)
        loc = ""
    else:
        shape = _validate(_ClusterScheduler, document, source).SchedulerConfig
        loc = "SchedulerConfig."
    if shape is None:
        return SchedulerConfig()
    classes = shape.PriorityClasses or []
    errors = [
        FieldError(
            f"{loc}PriorityClasses[{i}].Name",
            f"duplicate priority class {_show(pc.Name)} (also {loc}PriorityClasses[{j}])",
        )
        for i, j, pc in _duplicates(classes, lambda pc: pc.Name)
    ]
    if errors:
        raise InputError(source, errors)
    return SchedulerConfig(
        priority_classes=tuple(PriorityClass(name=pc.Name, weight=pc.Weight) for pc in classes),
        fair_share=shape.FairShare != "Disabled",
        idle_resource_sharing=shape.IdleResourceSharing != "Disabled",
    )


# ----------------------------------------------------------------------------------- internals
def _validate(model: type[_M], document: object, source: str, prefix: tuple[int | str, ...] = ()) -> _M:
    try:
        return model.model_validate(document)
    except ValidationError as exc:
        raise InputError(source, _field_errors(exc, prefix)) from None
    except RecursionError:
        raise InputError(source, [FieldError("", "nested too deeply")]) from None


def _validate_list(document: list[object], source: str) -> list[_Quota]:
    items: list[_Quota] = []
    errors: list[FieldError] = []
    for index, element in enumerate(document):
        try:
            items.append(_validate(_Quota, element, source, prefix=(index,)))
        except InputError as exc:
            errors.extend(exc.errors)
    if errors:
        raise InputError(source, capped(errors))
    return items


def _field_errors(exc: ValidationError, prefix: tuple[int | str, ...]) -> list[FieldError]:
    errors: list[FieldError] = []
    for error in exc.errors(include_url=False):
        loc = _loc((*prefix, *error["loc"]))
        if error["type"] == "extra_forbidden" and error["loc"]:
            message = _unknown_field(str(error["loc"][-1]), len(error["loc"]) == 1)
        else:
            message = _message(error["type"], error.get("ctx") or {}, error.get("input"), error["msg"])
        errors.append(FieldError(loc, message))
    return capped(errors)


def _unknown_field(key: str, top_level: bool) -> str:
    if top_level and key in _Scheduler.model_fields:
        return "unknown field here: put it inside SchedulerConfig"
    if key in _KNOWN_KEYS:
        return f"unknown field here: {key} belongs to another object"
    hint = difflib.get_close_matches(key, _KNOWN_KEYS, n=1, cutoff=0.75) if len(key) <= 100 else []
    return "unknown field" + (f"; did you mean {hint[0]}?" if hint else "")


def _loc(parts: Iterable[int | str]) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


# pydantic's error type -> what the value must be
_MUST_BE = {
    **dict.fromkeys(("int_type", "int_parsing", "int_from_float"), "an integer"),
    **dict.fromkeys(("string_type", "string_sub_type"), "a string"),
    **dict.fromkeys(("list_type", "tuple_type"), "an array"),
    **dict.fromkeys(("model_type", "model_attributes_type", "dict_type"), "an object"),
    **dict.fromkeys(("decimal_max_digits", "decimal_max_places", "finite_number"), "a finite number"),
}


def _message(kind: str, ctx: dict[str, Any], value: object, fallback: str) -> str:
    got = f" (got {_show(value)})"
    if kind in ("enum", "pattern", "number"):
        return fallback
    if kind == "missing":
        return "required field is missing"
    if kind == "less_than_equal":
        return f"must be <= {ctx['le']}{got}"
    if kind == "greater_than_equal":
        return f"must be >= {ctx['ge']}{got}"
    if kind == "too_long":
        if isinstance(value, str):
            return f"must be at most {ctx['max_length']} characters (got {len(value)})"
        return f"must have at most {ctx['max_length']} items (got {ctx.get('actual_length', '?')})"
    if kind in ("too_short", "string_too_short"):
        return f"must be at least {ctx['min_length']} characters{got}"
    if kind == "string_too_long":
        return f"must be at most {ctx['max_length']} characters (got {len(str(value))})"
    if kind in _MUST_BE:
        return f"must be {_MUST_BE[kind]}{got}"
    return f"{fallback}{got}"


def _duplicates(items: Sequence[_T], key: Callable[[_T], object]) -> list[tuple[int, int, _T]]:
    """(index, index of the first with the same key, item) for every repeat."""
    first: dict[object, int] = {}
    out: list[tuple[int, int, _T]] = []
    for index, item in enumerate(items):
        k = key(item)
        if k in first:
            out.append((index, first[k], item))
        else:
            first[k] = index
    return out


def _check_quotas(items: Sequence[_Quota], prefix: str | None, source: str) -> None:
    def at(index: int) -> str:
        return "" if prefix is None else f"{prefix}[{index}]"

    def path(index: int, rest: str) -> str:
        return f"{at(index)}.{rest}" if at(index) else rest

    errors: list[FieldError] = []
    for i, j, q in _duplicates(items, lambda q: q.Name):
        errors.append(FieldError(path(i, "Name"), f"duplicate quota name {_show(q.Name)} (also {at(j)})"))
    for i, j, q in _duplicates(items, lambda q: q.ComputeQuotaTarget.TeamName):
        errors.append(
            FieldError(
                path(i, "ComputeQuotaTarget.TeamName"),
                f"team {_show(q.ComputeQuotaTarget.TeamName)} has two quotas: "
                f"{_show(items[j].Name)} ({at(j)}) and {_show(q.Name)} ({at(i)})",
            )
        )
    for index, quota in enumerate(items):
        config = quota.ComputeQuotaConfig
        if config is None:
            continue
        lists = [("ComputeQuotaConfig.ComputeQuotaResources", config.ComputeQuotaResources or [])]
        if config.ResourceSharingConfig is not None:
            lists.append(
                (
                    "ComputeQuotaConfig.ResourceSharingConfig.AbsoluteBorrowLimits",
                    config.ResourceSharingConfig.AbsoluteBorrowLimits or [],
                )
            )
        for where, entries in lists:
            for i, j, entry in _duplicates(entries, lambda e: e.InstanceType):
                errors.append(
                    FieldError(
                        path(index, f"{where}[{i}].InstanceType"),
                        f"instance type {_show(entry.InstanceType)} listed twice (also [{j}])",
                    )
                )
    if errors:
        raise InputError(source, capped(errors))


def _amount(value: Decimal | None) -> Amount | None:
    if value is None:
        return None
    exact = Fraction(value)
    return exact.numerator if exact.denominator == 1 else exact


def _to_resource(entry: _ResourceEntry) -> ResourceConfig:
    partition = entry.AcceleratorPartition
    return ResourceConfig(
        instance_type=entry.InstanceType,
        count=entry.Count,
        accelerators=entry.Accelerators,
        vcpu=_amount(entry.VCpu),
        memory_gib=_amount(entry.MemoryInGiB),
        accelerator_partition=(
            None if partition is None else AcceleratorPartition(type=partition.Type, count=partition.Count)
        ),
    )


def _to_quota(item: _Quota) -> Quota:
    config = item.ComputeQuotaConfig or _QuotaConfig()
    sharing = config.ResourceSharingConfig
    return Quota(
        name=item.Name,
        team=item.ComputeQuotaTarget.TeamName,
        resources=tuple(_to_resource(e) for e in config.ComputeQuotaResources or []),
        strategy=Strategy(sharing.Strategy) if sharing is not None else Strategy.LEND_AND_BORROW,
        borrow_limit=sharing.BorrowLimit if sharing is not None else None,
        absolute_borrow_limits=tuple(
            _to_resource(e) for e in (sharing.AbsoluteBorrowLimits if sharing is not None else None) or []
        ),
        preempt_team_tasks=config.PreemptTeamTasks or "Never",
        fair_share_weight=item.ComputeQuotaTarget.FairShareWeight,
        enabled=item.ActivationState != "Disabled",
    )
