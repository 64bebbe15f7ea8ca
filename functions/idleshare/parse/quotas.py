"""Compute quotas and the scheduler config, from SageMaker's JSON shapes to domain objects.

Accepted quota documents (PascalCase, exactly botocore's SageMaker service model):

- a JSON array of quotas;
- ``{"ComputeQuotas": [...]}`` or ``{"ComputeQuotaSummaries": [...]}`` (the shape of a list
  response), optionally with ``NextToken``;
- a single quota object (what ``aws sagemaker describe-compute-quota`` prints).

Each quota is in the ``CreateComputeQuota`` request shape or the ``DescribeComputeQuota`` response
shape. Fields of those shapes that idleshare does not use (``ClusterArn``, ``ComputeQuotaId``,
``ComputeQuotaArn``, ``ComputeQuotaVersion``, ``Status``, ``CreationTime``, ``CreatedBy``, ``Tags``,
``Description``, ``FailureReason``, ``LastModifiedTime``, ``LastModifiedBy``) are accepted and
ignored; any key that is in neither shape is an error (a misspelled ``ComputeQuotaConfg`` must not
silently become "no quota"). ``ClusterArn`` is optional: a file describes one cluster.

Every enum, numeric bound, list length and pattern of the shapes ``ComputeQuotaConfig``,
``ComputeQuotaResourceConfig``, ``AcceleratorPartitionConfig``, ``ResourceSharingConfig``,
``ComputeQuotaTarget``, ``ActivationState``, ``PreemptTeamTasks``, ``EntityName``,
``SchedulerConfig``, ``PriorityClass``, ``FairShare`` and ``IdleResourceSharing`` is enforced. The
bounds are written out here (the Lambda never loads botocore's service model); the unit tests
derive their cases from botocore, so a botocore release that changes a bound fails a test.

Numbers: integers must be JSON integers (``5``, not ``5.0``, ``"5"`` or ``true``). ``VCpu`` and
``MemoryInGiB`` are JSON numbers converted exactly — JSON text is parsed with ``Decimal``, a Python
float is read by its shortest decimal repr — so ``0.1`` becomes ``Fraction(1, 10)``, never a binary
float. A whole number becomes an ``int``.

Defaults (botocore's, where it has one): ``ActivationState`` Enabled; no ``ResourceSharingConfig``
-> ``LendAndBorrow`` with the default borrow limit (``borrow_limit=None``; the engine uses 50); a
``ResourceSharingConfig`` must name its ``Strategy`` (botocore marks it required);
``PreemptTeamTasks`` Never.

Checks beyond botocore (decided here, errors rather than warnings, because the computation would
otherwise have to guess):

- two quotas with the same ``Name``;
- two quotas for the same team (SageMaker allows one per team; which one would win?);
- one instance type twice in a quota's ``ComputeQuotaResources``, or twice in its
  ``AbsoluteBorrowLimits`` (sum or override? ambiguous);
- two priority classes with the same ``Name`` (their WorkloadPriorityClasses would collide).

Instance types are the ``ml.*`` names of SageMaker's ``ClusterInstanceType`` enum; an unknown one
is an enum error here. Matching a quota's ``ml.p5.48xlarge`` to nodes that carry the plain EC2 name
``p5.48xlarge`` (a plain EKS cluster) is the engine's business, not the parser's. The engine, not
the parser, warns about a quota for a flavor the cluster does not have.

Errors: one :class:`~idleshare.parse.errors.InputError` listing every problem with its field path
(``[1].ComputeQuotaConfig.ResourceSharingConfig.BorrowLimit: must be <= 10000 (got 20000)``).

Two paths: a valid document is read here with the standard library (every check above, written out
below); the first thing this reader cannot vouch for sends the document to
:mod:`idleshare.parse.quota_shapes` (pydantic models of the same shapes), which names every problem.
pydantic is imported only then: `idleshare plan` and the Lambdas do not pay for it on valid policies.
The tests check that the two paths accept the same documents and read them alike.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from decimal import Decimal
from fractions import Fraction
from typing import Any

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
from idleshare.parse.errors import MAX_ERRORS as MAX_ERRORS  # the cap of every parser's error list
from idleshare.parse.errors import FieldError, InputError

__all__ = ["InputError", "parse_quotas", "parse_scheduler_config"]  # and SHAPES, loaded lazily

# ------------------------------------------------------------------------------------ botocore
# Bounds of botocore's SageMaker service model, written out (see the module docstring).
INSTANCE_COUNT_MAX = 10_000_000  # InstanceCount, AcceleratorsAmount, AcceleratorPartitionConfigCountInteger
AMOUNT_MAX = 10_000_000  # VCpuAmount, MemoryInGiBAmount (float)
BORROW_LIMIT_MAX = 10_000  # BorrowLimit
FAIR_SHARE_WEIGHT_MAX = 100  # FairShareWeight
PRIORITY_WEIGHT_MAX = 100  # PriorityWeight
RESOURCE_LIST_MAX = 15  # ComputeQuotaResourceConfigList, AbsoluteBorrowLimitResourceList
PRIORITY_CLASS_LIST_MAX = 10  # PriorityClassList
ENTITY_NAME_MIN, ENTITY_NAME_MAX = 1, 63  # EntityName
ENTITY_NAME_PATTERN = r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}"  # EntityName
TEAM_NAME_PATTERN = r"[a-z0-9]([-a-z0-9]*[a-z0-9]){0,39}?"  # ComputeQuotaTargetTeamName
PRIORITY_CLASS_NAME_PATTERN = r"[a-z0-9]([-a-z0-9]*[a-z0-9]){0,39}?"  # ClusterSchedulerPriorityClassName
# botocore's name pattern nests quantifiers: Python's backtracking ``re`` takes exponential time to
# reject ``"a" * 40 + "!"``. Since one repetition of the group can absorb any run, it accepts
# exactly the strings of this linear-time pattern (a DNS label without a length limit); the unit
# tests check the two agree.
_DNS_LABEL_LINEAR = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"

STRATEGIES = ("Lend", "DontLend", "LendAndBorrow")  # ResourceSharingStrategy
PREEMPT_TEAM_TASKS = ("Never", "LowerPriority")  # PreemptTeamTasks
ACTIVATION_STATES = ("Enabled", "Disabled")  # ActivationState
FAIR_SHARE = ("Enabled", "Disabled")  # FairShare
IDLE_RESOURCE_SHARING = ("Enabled", "Disabled")  # IdleResourceSharing


# ------------------------------------------------------------------------------------- parsing
def parse_quotas(raw: bytes | str | object, source: str = "quotas") -> tuple[Quota, ...]:
    """Compute quotas from JSON text (``bytes``/``str``) or already-decoded JSON values.

    Raises :class:`InputError` naming ``source`` and every offending field; nothing else."""
    document = decode(raw, source)
    quotas = _read_quotas(document)
    if quotas is not None:
        return quotas
    from idleshare.parse import quota_shapes

    return quota_shapes.parse_quotas(document, source, decoded=True)


def parse_scheduler_config(raw: bytes | str | object, source: str = "scheduler-config") -> SchedulerConfig:
    """The scheduler config from JSON text or decoded JSON: the bare ``SchedulerConfig`` shape
    (``{"PriorityClasses": ..., "FairShare": ..., "IdleResourceSharing": ...}``) or the
    ``Create``/``DescribeClusterSchedulerConfig`` shape with a ``SchedulerConfig`` key. ``None``, an
    empty text or an absent ``SchedulerConfig`` mean the defaults (everything Enabled)."""
    if raw is None or (isinstance(raw, (str, bytes)) and not raw.strip()):
        return SchedulerConfig()
    document = decode(raw, source)
    config = _read_scheduler(document)
    if config is not None:
        return config
    from idleshare.parse import quota_shapes

    return quota_shapes.parse_scheduler_config(document, source, decoded=True)


def __getattr__(name: str) -> Any:
    """``SHAPES`` and the key list of the pydantic models, loaded on first use."""
    if name in ("SHAPES", "_KNOWN_KEYS"):
        from idleshare.parse import quota_shapes

        return getattr(quota_shapes, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def decode(raw: bytes | str | object, source: str) -> object:
    if isinstance(raw, (bytes, bytearray, memoryview)):
        try:
            raw = bytes(raw).decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise InputError(source, [FieldError("", f"not UTF-8 text (byte {exc.start})")]) from None
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw, parse_float=Decimal, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise InputError(
            source, [FieldError("", f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}")]
        ) from None
    except ValueError as exc:  # NaN / Infinity
        raise InputError(source, [FieldError("", f"invalid JSON: {exc}")]) from None
    except RecursionError:
        raise InputError(source, [FieldError("", "invalid JSON: nested too deeply")]) from None


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON number")


# ------------------------------------------------------------------ the reader of valid documents
# Each ``_read_*`` returns the value, or None for anything it cannot vouch for (the pydantic path
# then names the problem). Conservative by design: None is always safe, a wrong value never is.
_QUOTA_IGNORED = frozenset(
    {
        "ClusterArn", "Description", "Tags", "ComputeQuotaArn", "ComputeQuotaId", "ComputeQuotaVersion", "Status",
        "FailureReason", "CreationTime", "CreatedBy", "LastModifiedTime", "LastModifiedBy",
    }
)  # fmt: skip
_QUOTA_KEYS = frozenset({"Name", "ComputeQuotaConfig", "ComputeQuotaTarget", "ActivationState"}) | _QUOTA_IGNORED
_CONFIG_KEYS = frozenset({"ComputeQuotaResources", "ResourceSharingConfig", "PreemptTeamTasks"})
_SHARING_KEYS = frozenset({"Strategy", "BorrowLimit", "AbsoluteBorrowLimits"})
_ENTRY_KEYS = frozenset({"InstanceType", "Count", "Accelerators", "VCpu", "MemoryInGiB", "AcceleratorPartition"})
_PARTITION_KEYS = frozenset({"Type", "Count"})
_TARGET_KEYS = frozenset({"TeamName", "FairShareWeight"})
_LIST_WRAPPER_KEYS = frozenset({"ComputeQuotas", "ComputeQuotaSummaries", "NextToken"})
_SCHEDULER_KEYS = frozenset({"PriorityClasses", "FairShare", "IdleResourceSharing"})
_CLUSTER_SCHEDULER_KEYS = frozenset(
    {
        "SchedulerConfig", "Name", "ClusterArn", "Description", "Tags", "ClusterSchedulerConfigArn",
        "ClusterSchedulerConfigId", "ClusterSchedulerConfigVersion", "Status", "FailureReason", "StatusDetails",
        "CreationTime", "CreatedBy", "LastModifiedTime", "LastModifiedBy",
    }
)  # fmt: skip
_ENTITY_NAME = re.compile(ENTITY_NAME_PATTERN)
_DNS_LABEL = re.compile(_DNS_LABEL_LINEAR)
_INSTANCE_TYPES = frozenset(KNOWN_INSTANCE_TYPES)


class _Doubt(Exception):
    """The reader cannot vouch for the document."""


def _object(value: object, keys: frozenset[str]) -> Mapping[str, Any]:
    if type(value) is not dict or not value.keys() <= keys:
        raise _Doubt
    return value


def _optional_object(value: object, keys: frozenset[str]) -> Mapping[str, Any] | None:
    return None if value is None else _object(value, keys)


def _integer(value: object, maximum: int, *, required: bool = False) -> int | None:
    if value is None and not required:
        return None
    if type(value) is not int or not 0 <= value <= maximum:
        raise _Doubt
    return value


def _member(value: object, members: frozenset[str] | tuple[str, ...], *, required: bool = False) -> str | None:
    if value is None and not required:
        return None
    if type(value) is not str or value not in members:
        raise _Doubt
    return value


def _matching(value: object, pattern: re.Pattern[str], max_length: int = 0) -> str:
    if type(value) is not str or (max_length and len(value) > max_length) or pattern.fullmatch(value) is None:
        raise _Doubt
    return value


def _exact_amount(value: object) -> Amount | None:
    if value is None:
        return None
    if type(value) is int:
        number: Fraction | int = value
    elif type(value) is Decimal and value.is_finite():
        number = Fraction(value)
    else:
        raise _Doubt
    if not 0 <= number <= AMOUNT_MAX:
        raise _Doubt
    return number.numerator if isinstance(number, Fraction) and number.denominator == 1 else number


def _list(value: object, maximum: int | None = None) -> list[Any]:
    if value is None:
        return []
    if type(value) is not list or (maximum is not None and len(value) > maximum):
        raise _Doubt
    return value


def _unique(items: list[Any], key: Callable[[Any], object]) -> None:
    keys = [key(item) for item in items]
    if len(set(keys)) != len(keys):
        raise _Doubt


def _read_entries(value: object) -> tuple[ResourceConfig, ...]:
    entries = []
    for raw in _list(value, RESOURCE_LIST_MAX):
        e = _object(raw, _ENTRY_KEYS)
        p = _optional_object(e.get("AcceleratorPartition"), _PARTITION_KEYS)
        partition = None
        if p is not None:
            profile = _member(p.get("Type"), MIG_PROFILES, required=True)
            count = _integer(p.get("Count"), INSTANCE_COUNT_MAX, required=True)
            assert profile is not None and count is not None
            partition = AcceleratorPartition(type=profile, count=count)
        instance_type = _member(e.get("InstanceType"), _INSTANCE_TYPES, required=True)
        assert instance_type is not None
        entries.append(
            ResourceConfig(
                instance_type=instance_type,
                count=_integer(e.get("Count"), INSTANCE_COUNT_MAX),
                accelerators=_integer(e.get("Accelerators"), INSTANCE_COUNT_MAX),
                vcpu=_exact_amount(e.get("VCpu")),
                memory_gib=_exact_amount(e.get("MemoryInGiB")),
                accelerator_partition=partition,
            )
        )
    _unique(entries, lambda e: e.instance_type)
    return tuple(entries)


def _read_quota(value: object) -> Quota:
    q = _object(value, _QUOTA_KEYS)
    name = _matching(q.get("Name"), _ENTITY_NAME, ENTITY_NAME_MAX)
    target = _object(q.get("ComputeQuotaTarget"), _TARGET_KEYS)
    config = _optional_object(q.get("ComputeQuotaConfig"), _CONFIG_KEYS) or {}
    sharing = _optional_object(config.get("ResourceSharingConfig"), _SHARING_KEYS)
    strategy = Strategy.LEND_AND_BORROW
    borrow_limit = None
    absolute: tuple[ResourceConfig, ...] = ()
    if sharing is not None:
        strategy = Strategy(str(_member(sharing.get("Strategy"), STRATEGIES, required=True)))
        borrow_limit = _integer(sharing.get("BorrowLimit"), BORROW_LIMIT_MAX)
        absolute = _read_entries(sharing.get("AbsoluteBorrowLimits"))
    return Quota(
        name=name,
        team=_matching(target.get("TeamName"), _DNS_LABEL),
        resources=_read_entries(config.get("ComputeQuotaResources")),
        strategy=strategy,
        borrow_limit=borrow_limit,
        absolute_borrow_limits=absolute,
        preempt_team_tasks=_member(config.get("PreemptTeamTasks"), PREEMPT_TEAM_TASKS) or "Never",
        fair_share_weight=_integer(target.get("FairShareWeight"), FAIR_SHARE_WEIGHT_MAX),
        enabled=_member(q.get("ActivationState"), ACTIVATION_STATES) != "Disabled",
    )


def _read_quotas(document: object) -> tuple[Quota, ...] | None:
    try:
        if type(document) is list:
            items = document
        elif type(document) is dict and ("ComputeQuotas" in document or "ComputeQuotaSummaries" in document):
            wrapper = _object(document, _LIST_WRAPPER_KEYS)
            listed = [wrapper.get(k) for k in ("ComputeQuotas", "ComputeQuotaSummaries")]
            if all(v is not None for v in listed):
                raise _Doubt
            items = _list(listed[0] if listed[0] is not None else listed[1])
        elif type(document) is dict:
            items = [document]
        else:
            raise _Doubt
        quotas = tuple(_read_quota(item) for item in items)
        _unique(list(quotas), lambda q: q.name)
        _unique(list(quotas), lambda q: q.team)
        return quotas
    except (_Doubt, RecursionError):
        return None


def _read_scheduler(document: object) -> SchedulerConfig | None:
    try:
        if document is None:
            return SchedulerConfig()
        if type(document) is not dict:
            raise _Doubt
        if document.keys() <= _SCHEDULER_KEYS:
            shape: Mapping[str, Any] | None = document
        else:
            shape = _optional_object(_object(document, _CLUSTER_SCHEDULER_KEYS).get("SchedulerConfig"), _SCHEDULER_KEYS)
        if shape is None:
            return SchedulerConfig()
        classes = []
        for raw in _list(shape.get("PriorityClasses"), PRIORITY_CLASS_LIST_MAX):
            pc = _object(raw, frozenset({"Name", "Weight"}))
            weight = _integer(pc.get("Weight"), PRIORITY_WEIGHT_MAX, required=True)
            assert weight is not None
            classes.append(PriorityClass(name=_matching(pc.get("Name"), _DNS_LABEL), weight=weight))
        _unique(classes, lambda pc: pc.name)
        return SchedulerConfig(
            priority_classes=tuple(classes),
            fair_share=_member(shape.get("FairShare"), FAIR_SHARE) != "Disabled",
            idle_resource_sharing=_member(shape.get("IdleResourceSharing"), IDLE_RESOURCE_SHARING) != "Disabled",
        )
    except (_Doubt, RecursionError):
        return None
