"""Compute quotas and the scheduler config: the one schema of each (botocore's SageMaker shapes), read into the domain.

Accepted quota documents (PascalCase, exactly botocore's SageMaker service model):

- a JSON array of quotas;
- ``{"ComputeQuotas": [...]}`` or ``{"ComputeQuotaSummaries": [...]}`` (the shape of a list
  response), optionally with ``NextToken``;
- a single quota object (what ``aws sagemaker describe-compute-quota`` prints).

Each quota is in the ``CreateComputeQuota`` request shape or the ``DescribeComputeQuota`` response
shape. Fields of those shapes that idleshare does not use (``ClusterArn``, ``ComputeQuotaId``,
``ComputeQuotaArn``, ``ComputeQuotaVersion``, ``Status``, ``CreationTime``, ``CreatedBy``, ``Tags``,
``Description``, ``FailureReason``, ``LastModifiedTime``, ``LastModifiedBy``) are accepted and
ignored — but a ``Status`` of :data:`SKIPPED_STATUSES` (``Deleted``, ``CreateFailed``, ...: what
``list-compute-quotas`` still lists) leaves the quota out (:func:`governs`); any key that is in neither shape is an error (a misspelled ``ComputeQuotaConfg`` must not
silently become "no quota"). ``ClusterArn`` is optional: a file describes one cluster.

The Shapes below are botocore's ``ComputeQuotaConfig``, ``ComputeQuotaResourceConfig``,
``AcceleratorPartitionConfig``, ``ResourceSharingConfig``, ``ComputeQuotaTarget``, ``SchedulerConfig`` and
``PriorityClass``; every enum, numeric bound, list length and pattern of them (and of ``ActivationState``,
``PreemptTeamTasks``, ``EntityName``, ``FairShare``, ``IdleResourceSharing``) is written on its field here (the
Lambda never loads botocore's service model); the unit tests compare each with botocore's, so a botocore release
that changes a bound fails a test. The admin API's bodies (:mod:`idleshare.parse.requests`) and the OpenAPI
document are made of the same Shapes; `idleshare plan`, the recompute and replay read with them.

Numbers: integers must be JSON integers (``5``, not ``5.0``, ``"5"`` or ``true``). ``VCpu`` and
``MemoryInGiB`` are JSON numbers converted exactly — JSON text is parsed with ``Decimal``, a Python
float is read by its shortest decimal repr — so ``0.1`` becomes ``Fraction(1, 10)``, never a binary
float. A whole number becomes an ``int``.

Defaults (botocore's, where it has one): ``ActivationState`` Enabled; no ``ResourceSharingConfig``
-> ``LendAndBorrow`` with the default borrow limit (``borrow_limit=None``; the engine uses 50); a
``ResourceSharingConfig`` must name its ``Strategy`` (botocore marks it required);
``PreemptTeamTasks`` Never.

Checks beyond botocore (decided here, errors rather than warnings, because the computation would
otherwise have to guess): two quotas with the same ``Name``; two quotas for the same team (SageMaker allows
one per team; which one would win?); one instance type twice in a quota's ``ComputeQuotaResources``, or
twice in its ``AbsoluteBorrowLimits`` (sum or override? ambiguous); two priority classes with the same
``Name`` (their WorkloadPriorityClasses would collide).

Instance types (:class:`InstanceType`): an ``ml.*`` name must be a member of SageMaker's ``ClusterInstanceType``
enum (an unknown one is an enum error here, with the enum's closest member); any other name is an EC2 instance type
or whatever a node can be labelled with, and must be able to name a ResourceFlavor. Matching a quota's
``ml.p5.48xlarge`` or ``p5.48xlarge`` to the nodes of either name is the engine's business, not the parser's. The engine, not
the parser, warns about a quota for a flavor the cluster does not have.

Errors: one :class:`~idleshare.parse.errors.InputError` listing every problem with its field path
(``[1].ComputeQuotaConfig.ResourceSharingConfig.BorrowLimit: must be <= 10000 (got 20000)``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, TypeVar

from msgspec import Meta

from idleshare.domain import model
from idleshare.domain.catalog import KNOWN_INSTANCE_TYPES, MIG_PROFILES, ML_PREFIX
from idleshare.domain.naming import DNS_LABEL, LABEL_VALUE_MAX, flavor_name_problem
from idleshare.parse import jsontext
from idleshare.parse.errors import FieldError, InputError, capped
from idleshare.parse.schema import Checked, ExactNumber, Path, Shape, convert, show

__all__ = ["SHAPES", "InputError", "parse_quotas", "parse_scheduler_config"]

_T = TypeVar("_T")


# ------------------------------------------------------------------------------------ the field types
def _pattern(botocore: str, what: str, linear: str | None = None) -> Meta:
    """A full match of botocore's ``pattern`` (checked as ``linear``, an equivalent pattern, when given): anchored,
    a trailing newline refused (``$`` alone would let one through)."""
    return Meta(pattern=f"^(?:{linear or botocore})$(?!\n)", extra={"what": what, "pattern": botocore})


# botocore's name pattern nests quantifiers: Python's backtracking ``re`` takes exponential time to reject
# ``"a" * 40 + "!"``. Since one repetition of the group can absorb any run, it accepts exactly the strings of
# DNS_LABEL's linear-time pattern (a DNS label without a length limit); the unit tests check the two agree.

InstanceCount = Annotated[int, Meta(ge=0, le=10_000_000)]
"""InstanceCount, AcceleratorsAmount, AcceleratorPartitionConfigCountInteger"""
BorrowLimitPercent = Annotated[int, Meta(ge=0, le=10_000, title="BorrowLimit")]
FairShareWeight = Annotated[int, Meta(ge=0, le=100)]
PriorityWeight = Annotated[int, Meta(ge=0, le=100)]
EntityName = Annotated[
    str, Meta(min_length=1, max_length=63), _pattern(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}", "EntityName")
]
TeamName = Annotated[str, _pattern(r"[a-z0-9]([-a-z0-9]*[a-z0-9]){0,39}?", "team name", DNS_LABEL)]
PriorityClassName = Annotated[str, _pattern(r"[a-z0-9]([-a-z0-9]*[a-z0-9]){0,39}?", "priority class name", DNS_LABEL)]
Strategy = Annotated[Literal["Lend", "DontLend", "LendAndBorrow"], Meta(title="ResourceSharingStrategy")]
PreemptTeamTasks = Annotated[Literal["Never", "LowerPriority"], Meta(title="PreemptTeamTasks")]
Activation = Annotated[Literal["Enabled", "Disabled"], Meta(title="ActivationState")]
FairShare = Annotated[Literal["Enabled", "Disabled"], Meta(title="FairShare")]
IdleResourceSharing = Annotated[Literal["Enabled", "Disabled"], Meta(title="IdleResourceSharing")]
if TYPE_CHECKING:
    MigProfile = str
else:  # the catalog's enum, too long to write out twice
    MigProfile = Annotated[Literal[tuple(sorted(MIG_PROFILES))], Meta(title="MIGProfileType")]


class InstanceType(str, Checked):
    """``ClusterInstanceType`` widened to the instance types a cluster's nodes carry (issue 40, docs/decisions.md
    "Flavor names"): an ``ml.`` name is SageMaker's and must be a member of botocore's enum (a typo gets the enum's
    closest member: ``ml.p5.48xlage`` -> ``ml.p5.48xlarge``); any other name is an EC2 instance type (``trn1.2xlarge``,
    ``inf2.xlarge``: what plain EKS and Karpenter nodes are labelled) or whatever else a node's
    ``node.kubernetes.io/instance-type`` label may hold, and must be able to name a ResourceFlavor (a lower-case
    RFC 1123 subdomain of at most 63 characters). Whether the cluster has such nodes is the engine's business."""

    enum: ClassVar[tuple[str, ...]] = tuple(sorted(KNOWN_INSTANCE_TYPES))
    """The ``ml.`` names it accepts: botocore's ``ClusterInstanceType`` enum (the unit tests compare the two)."""

    @classmethod
    def check(cls, value: object) -> InstanceType:
        if not isinstance(value, str):
            raise ValueError(f"must be a string (got {show(value)})")
        if value == "":
            raise ValueError("must not be empty")
        if value.startswith(ML_PREFIX):
            if value not in _ML_NAMES:
                raise ValueError(_enum_problem(value))
        else:
            problem = flavor_name_problem(value)
            if problem is not None:
                raise ValueError(f"{show(value)} {problem}")
        return cls(value)

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        return {
            "title": "ClusterInstanceType",
            "type": "string",
            "minLength": 1,
            "maxLength": LABEL_VALUE_MAX,
            "description": "a member of SageMaker's ClusterInstanceType enum (ml.*), or any instance type a node "
            "can carry (an EC2 name such as trn1.2xlarge: a lower-case RFC 1123 subdomain of at most "
            f"{LABEL_VALUE_MAX} characters)",
            "anyOf": [
                {"enum": list(cls.enum)},
                {"pattern": f"^(?!{ML_PREFIX.replace('.', '[.]')})[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"},
            ],
        }


_ML_NAMES = frozenset(InstanceType.enum)


def _enum_problem(value: str) -> str:
    import difflib

    hint = difflib.get_close_matches(value, InstanceType.enum, n=1) if len(value) <= 100 else []
    return f"{show(value)} is not a ClusterInstanceType value" + (f"; did you mean {hint[0]}?" if hint else "")


RESOURCE_LIST_MAX = 15  # ComputeQuotaResourceConfigList, AbsoluteBorrowLimitResourceList


class Amount(ExactNumber):
    """VCpuAmount, MemoryInGiBAmount: a JSON number from 0 to 10,000,000, read exactly."""

    maximum = 10_000_000


# ------------------------------------------------------------------------------------------ the shapes
class AcceleratorPartitionConfig(Shape):
    Type: MigProfile
    Count: InstanceCount

    def domain(self) -> model.AcceleratorPartition:
        return model.AcceleratorPartition(type=self.Type, count=self.Count)


class ComputeQuotaResourceConfig(Shape):
    InstanceType: InstanceType
    Count: InstanceCount | None = None
    Accelerators: InstanceCount | None = None
    VCpu: Amount | None = None
    MemoryInGiB: Amount | None = None
    AcceleratorPartition: AcceleratorPartitionConfig | None = None

    def domain(self) -> model.ResourceConfig:
        return model.ResourceConfig(
            str(self.InstanceType),
            self.Count,
            self.Accelerators,
            None if self.VCpu is None else self.VCpu.exact(),
            None if self.MemoryInGiB is None else self.MemoryInGiB.exact(),
            None if self.AcceleratorPartition is None else self.AcceleratorPartition.domain(),
        )


ResourceList = Annotated[list[ComputeQuotaResourceConfig], Meta(max_length=RESOURCE_LIST_MAX)]


class ResourceSharingConfig(Shape):
    Strategy: Strategy
    BorrowLimit: BorrowLimitPercent | None = None
    AbsoluteBorrowLimits: ResourceList | None = None

    def rules(self) -> list[tuple[Path, str]]:
        return _listed_twice("AbsoluteBorrowLimits", self.AbsoluteBorrowLimits or [])


class ComputeQuotaConfig(Shape):
    ComputeQuotaResources: ResourceList | None = None
    ResourceSharingConfig: ResourceSharingConfig | None = None
    PreemptTeamTasks: PreemptTeamTasks | None = None

    def rules(self) -> list[tuple[Path, str]]:
        return _listed_twice("ComputeQuotaResources", self.ComputeQuotaResources or [])


class ComputeQuotaTarget(Shape):
    TeamName: TeamName
    FairShareWeight: FairShareWeight | None = None


class _Described(Shape):
    """Members of SageMaker's Create requests and Describe responses that idleshare accepts and ignores."""

    ClusterArn: Any = None
    Description: Any = None
    Tags: Any = None
    Status: Any = None
    FailureReason: Any = None
    CreationTime: Any = None
    CreatedBy: Any = None
    LastModifiedTime: Any = None
    LastModifiedBy: Any = None


class ComputeQuota(_Described, kw_only=True):
    """Union of ``CreateComputeQuotaRequest`` and ``DescribeComputeQuotaResponse``."""

    Name: EntityName
    ComputeQuotaConfig: ComputeQuotaConfig | None = None
    ComputeQuotaTarget: ComputeQuotaTarget
    ActivationState: Activation | None = None
    ComputeQuotaArn: Any = None
    ComputeQuotaId: Any = None
    ComputeQuotaVersion: Any = None

    def domain(self) -> model.Quota:
        config = self.ComputeQuotaConfig or ComputeQuotaConfig()
        sharing = config.ResourceSharingConfig or ResourceSharingConfig(Strategy="LendAndBorrow")
        return model.Quota(
            name=self.Name,
            team=self.ComputeQuotaTarget.TeamName,
            resources=tuple(e.domain() for e in config.ComputeQuotaResources or ()),
            strategy=model.Strategy(sharing.Strategy),
            borrow_limit=sharing.BorrowLimit,
            absolute_borrow_limits=tuple(e.domain() for e in sharing.AbsoluteBorrowLimits or ()),
            preempt_team_tasks=config.PreemptTeamTasks or "Never",
            fair_share_weight=self.ComputeQuotaTarget.FairShareWeight,
            enabled=self.ActivationState != "Disabled",
        )


class ComputeQuotaList(Shape):
    """``{"ComputeQuotas": [...]}`` / ``{"ComputeQuotaSummaries": [...]}`` (a list response)."""

    ComputeQuotas: list[ComputeQuota] | None = None
    ComputeQuotaSummaries: list[ComputeQuota] | None = None
    NextToken: Any = None


class PriorityClass(Shape):
    Name: PriorityClassName
    Weight: PriorityWeight


class SchedulerConfig(Shape):
    PriorityClasses: Annotated[list[PriorityClass], Meta(max_length=10)] | None = None
    FairShare: FairShare | None = None
    IdleResourceSharing: IdleResourceSharing | None = None

    def rules(self) -> list[tuple[Path, str]]:
        """Two priority classes with one name (their WorkloadPriorityClasses would collide)."""
        return [
            (("PriorityClasses", i, "Name"), f"duplicate priority class {show(pc.Name)} (also PriorityClasses[{j}])")
            for i, j, pc in _duplicates(self.PriorityClasses or [], lambda pc: pc.Name)
        ]

    def domain(self) -> model.SchedulerConfig:
        return model.SchedulerConfig(
            priority_classes=tuple(model.PriorityClass(pc.Name, pc.Weight) for pc in self.PriorityClasses or ()),
            fair_share=self.FairShare != "Disabled",
            idle_resource_sharing=self.IdleResourceSharing != "Disabled",
        )


class ClusterSchedulerConfig(_Described, kw_only=True):
    """Union of ``CreateClusterSchedulerConfigRequest`` and ``DescribeClusterSchedulerConfigResponse``."""

    SchedulerConfig: SchedulerConfig | None = None
    Name: Any = None
    ClusterSchedulerConfigArn: Any = None
    ClusterSchedulerConfigId: Any = None
    ClusterSchedulerConfigVersion: Any = None
    StatusDetails: Any = None


SHAPES: dict[str, type[Shape]] = {
    "AcceleratorPartitionConfig": AcceleratorPartitionConfig,
    "ComputeQuotaResourceConfig": ComputeQuotaResourceConfig,
    "ResourceSharingConfig": ResourceSharingConfig,
    "ComputeQuotaConfig": ComputeQuotaConfig,
    "ComputeQuotaTarget": ComputeQuotaTarget,
    "ComputeQuota": ComputeQuota,
    "SchedulerConfig": SchedulerConfig,
    "PriorityClass": PriorityClass,
    "ClusterSchedulerConfig": ClusterSchedulerConfig,
}
"""botocore shape name -> the Shape that validates it (for the tests)."""


# ------------------------------------------------------------------------------------------ the rules
SKIPPED_STATUSES = frozenset({"Deleting", "Deleted", "CreateFailed", "CreateRollbackFailed"})
"""SageMaker Statuses of a quota (or scheduler config) that does not govern the cluster: left out by every reader
(`idleshare plan`, the scenarios, the recompute) and skipped by `idleshare quota import`, with its Status."""
NOTED_STATUSES = {
    "Updating": "an update is in flight in SageMaker: imported as SageMaker describes it now",
    "UpdateFailed": "SageMaker's last update of it failed: imported as SageMaker describes it (its FailureReason:"
    " aws sagemaker describe-compute-quota)",
}
"""SageMaker Statuses of a quota that governs, yet may not be what its admin last asked for: imported, with a note."""


def governs(status: object) -> bool:
    """Whether a quota of this SageMaker ``Status`` (None: none given, as in a Create request) governs the cluster:
    the one rule `plan` and `quota import` both apply."""
    return not (isinstance(status, str) and status in SKIPPED_STATUSES)


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


def _listed_twice(field: str, entries: Sequence[ComputeQuotaResourceConfig]) -> list[tuple[Path, str]]:
    """One instance type twice in a list of resource configs (sum or override? ambiguous)."""
    return [
        ((field, i, "InstanceType"), f"instance type {show(e.InstanceType)} listed twice (also [{j}])")
        for i, j, e in _duplicates(entries, lambda e: e.InstanceType)
    ]


def _one_per_name_and_team(items: Sequence[ComputeQuota], prefix: str | None) -> list[FieldError]:
    """Two quotas with one Name, or two for one team (SageMaker allows one per team: which would win?)."""

    def at(index: int) -> str:
        return "" if prefix is None else f"{prefix}[{index}]"

    def path(index: int, rest: str) -> str:
        return f"{at(index)}.{rest}" if at(index) else rest

    def governing(value: object, q: ComputeQuota) -> object:
        """The key of a quota that governs; one of its own for a deleted or failed one (a team's old quota beside
        its new one, as ``list-compute-quotas`` lists them, is no duplicate)."""
        return value if governs(q.Status) else (id(q),)

    errors = [
        FieldError(path(i, "Name"), f"duplicate quota name {show(q.Name)} (also {at(j)})")
        for i, j, q in _duplicates(items, lambda q: governing(q.Name, q))
    ]
    for i, j, q in _duplicates(items, lambda q: governing(q.ComputeQuotaTarget.TeamName, q)):
        errors.append(
            FieldError(
                path(i, "ComputeQuotaTarget.TeamName"),
                f"team {show(q.ComputeQuotaTarget.TeamName)} has two quotas: "
                f"{show(items[j].Name)} ({at(j)}) and {show(q.Name)} ({at(i)})",
            )
        )
    return errors


# ------------------------------------------------------------------------------------------ parsing
def parse_quotas(raw: bytes | str | object, source: str = "quotas") -> tuple[model.Quota, ...]:
    """Compute quotas from JSON text (``bytes``/``str``) or already-decoded JSON values.

    Raises :class:`InputError` naming ``source`` and every offending field; nothing else."""
    document = decode(raw, source)
    prefix: str | None = ""
    items: Sequence[ComputeQuota]
    if isinstance(document, list):  # empty: nothing to check (and msgspec's validators are built on first use)
        items = convert(document, list[ComputeQuota], source) if document else []
    elif isinstance(document, dict) and ("ComputeQuotas" in document or "ComputeQuotaSummaries" in document):
        wrapper = convert(document, ComputeQuotaList, source)
        if wrapper.ComputeQuotas is not None and wrapper.ComputeQuotaSummaries is not None:
            raise InputError(source, [FieldError("", "give ComputeQuotas or ComputeQuotaSummaries, not both")])
        prefix = "ComputeQuotas" if wrapper.ComputeQuotas is not None else "ComputeQuotaSummaries"
        items = wrapper.ComputeQuotas or wrapper.ComputeQuotaSummaries or []
    elif isinstance(document, dict):
        items = [convert(document, ComputeQuota, source)]
        prefix = None  # a single quota: paths start at its fields
    else:
        raise InputError(
            source, [FieldError("", f"expected an array of compute quotas or an object, got {show(document)}")]
        )
    errors = _one_per_name_and_team(items, prefix)
    if errors:
        raise InputError(source, capped(errors))
    return tuple(item.domain() for item in items if governs(item.Status))


CREATE_FIELDS = ("Name", "Description", "ComputeQuotaConfig", "ComputeQuotaTarget", "ActivationState")
"""The fields of a quota that idleshare stores: ``CreateComputeQuota``'s, without ``ClusterArn`` and ``Tags``."""


def quota_documents(raw: bytes | str | object, source: str = "quotas") -> list[dict[str, Any]]:
    """The quotas of any document :func:`parse_quotas` accepts (an array, a list response such as the AWS CLI's
    ``list-compute-quotas`` output, one ``describe-compute-quota``), checked by it, as JSON values in the
    ``CreateComputeQuota`` shape (:data:`CREATE_FIELDS`): the governing ones (:func:`governs`), to be stored.

    Raises :class:`InputError` as :func:`parse_quotas` does."""
    parse_quotas(raw, source)
    document = decode(raw, source)
    if isinstance(document, dict) and ("ComputeQuotas" in document or "ComputeQuotaSummaries" in document):
        document = document.get("ComputeQuotas") or document.get("ComputeQuotaSummaries") or []
    items: list[dict[str, Any]] = document if isinstance(document, list) else [document]  # type: ignore[list-item]
    return [{k: q[k] for k in CREATE_FIELDS if k in q} for q in items if governs(q.get("Status"))]


def parse_quota_files(files: Sequence[tuple[str, bytes | str]]) -> tuple[model.Quota, ...]:
    """The quotas of several files (``plan --quotas A.json --quotas B.json``: one a team, say), each read by
    :func:`parse_quotas` and named by its own source; then one quota per Name and per team across them all, as
    within one file. Raises :class:`InputError` naming the file and the field; nothing else."""
    quotas: list[model.Quota] = []
    seen_names: dict[str, str] = {}
    seen_teams: dict[str, tuple[str, str]] = {}
    for source, raw in files:
        errors: list[FieldError] = []
        for quota in parse_quotas(raw, source):
            if quota.name in seen_names:
                errors.append(
                    FieldError("Name", f"duplicate quota name {show(quota.name)} (also in {seen_names[quota.name]})")
                )
            elif quota.team in seen_teams:
                other, where = seen_teams[quota.team]
                errors.append(
                    FieldError(
                        "ComputeQuotaTarget.TeamName",
                        f"team {show(quota.team)} has two quotas: {show(other)} (in {where}) and {show(quota.name)}",
                    )
                )
            seen_names.setdefault(quota.name, source)
            seen_teams.setdefault(quota.team, (quota.name, source))
            quotas.append(quota)
        if errors:
            raise InputError(source, capped(errors))
    return tuple(quotas)


def parse_scheduler_config(raw: bytes | str | object, source: str = "scheduler-config") -> model.SchedulerConfig:
    """The scheduler config from JSON text or decoded JSON: the bare ``SchedulerConfig`` shape
    (``{"PriorityClasses": ..., "FairShare": ..., "IdleResourceSharing": ...}``) or the
    ``Create``/``DescribeClusterSchedulerConfig`` shape with a ``SchedulerConfig`` key. ``None``, an
    empty text or an absent ``SchedulerConfig`` mean the defaults (everything Enabled)."""
    if raw is None or (isinstance(raw, str | bytes) and not raw.strip()):
        return model.SchedulerConfig()
    document = decode(raw, source)
    if document is None:
        return model.SchedulerConfig()
    if not isinstance(document, dict):
        raise InputError(source, [FieldError("", f"expected an object, got {show(document)}")])
    if document.keys() <= set(SchedulerConfig.__struct_fields__):
        return convert(document, SchedulerConfig, source).domain()
    shape = convert(document, ClusterSchedulerConfig, source).SchedulerConfig
    return model.SchedulerConfig() if shape is None else shape.domain()


def decode(raw: bytes | str | object, source: str) -> object:
    """JSON text (:func:`idleshare.parse.jsontext.decode`: numbers that are not integers as exact ``Decimal``) or,
    unchanged, an already-decoded value."""
    if not isinstance(raw, bytes | bytearray | memoryview | str):
        return raw
    return jsontext.decode(raw, source)
