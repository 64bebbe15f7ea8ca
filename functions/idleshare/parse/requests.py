"""The admin API's request bodies: one Shape each, the one validation path of a write.

The API validates each body with these Shapes before calling :mod:`idleshare.service.admin`, the CLI checks a file
with them before sending it, and the OpenAPI document's request schemas are generated from them. Their quota and
scheduler-config fields are :mod:`idleshare.parse.quotas`' Shapes of botocore's SageMaker shapes (the same the
recompute reads with); what only a request has is here: ``TargetVersion`` (botocore's Integer), ``Description``
(EntityDescription), ``Tags`` (TagList) and the recalculation ``reason``.

:func:`parse` reports every problem of a body together, as one :class:`InputError` (source ``request body``) of
:class:`FieldError` s naming each field: a key the request may not carry (with "did you mean", or why: set by
idleshare, the cluster is the path, ...), a null (omit the field instead), each botocore bound, and what botocore's
model cannot say (an instance type listed twice, two priority classes with one name). The team name's check
against the cluster's namespace prefix needs the cluster record: the service makes it after the parse.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Generic, TypeVar

from msgspec import UNSET, Meta, UnsetType

from idleshare.domain.naming import priority_class_name_problem
from idleshare.parse.errors import MAX_ERRORS, FieldError, InputError, capped
from idleshare.parse.quotas import Activation, ComputeQuotaConfig, ComputeQuotaTarget, EntityName, SchedulerConfig
from idleshare.parse.schema import NULL, Path, Shape, Text, convert, loc, problem, show

__all__ = [
    "Accepted",
    "CreateQuota",
    "FieldError",
    "InputError",
    "Pause",
    "Recalculate",
    "Request",
    "SchedulerConfigRequest",
    "UpdateQuota",
    "name_problem",
    "parse",
]

SOURCE = "request body"
MAX_INT32 = 2**31 - 1  # botocore's Integer (TargetVersion)
REASON_MAX = 1024  # OwnDetail.reason on the bus
# Keys of SageMaker's shapes a request may not carry, and why (the cluster is in the path, ids are idleshare's).
_REFUSED = {
    "ClusterArn": "not accepted here: the cluster is the one in the path",
    **dict.fromkeys(
        (
            "ComputeQuotaId",
            "ComputeQuotaArn",
            "ComputeQuotaVersion",
            "Status",
            "CreationTime",
            "LastModifiedTime",
            "ClusterSchedulerConfigId",
        ),
        "set by idleshare: not accepted in a request",
    ),
}
_TAG_PUNCTUATION = frozenset("_.:/=+-@")
R = TypeVar("R", bound="Request")


# ------------------------------------------------------------------------------------------ the field types
class Description(Text):
    """EntityDescription: at most 1024 characters of ``[\\p{L}\\p{M}\\p{Z}\\p{S}\\p{N}\\p{P}]*``."""

    max_length = 1024

    @classmethod
    def allowed(cls, char: str) -> bool:
        return not unicodedata.category(char).startswith("C")


class Reason(Description):
    """A recalculation's ``reason``: the character rule of a Description (no control or format character: a bidi
    override such as U+202E would reorder what a log or the console shows), at most 1024 characters."""

    max_length = REASON_MAX


class TagKey(Text):
    """TagKey: 1 to 128 characters of ``[\\p{L}\\p{Z}\\p{N}_.:/=+\\-@]*``."""

    min_length, max_length = 1, 128

    @classmethod
    def allowed(cls, char: str) -> bool:
        return unicodedata.category(char)[0] in "LZN" or char in _TAG_PUNCTUATION


class TagValue(TagKey):
    """TagValue: up to 256 characters of the same."""

    min_length, max_length = 0, 256


class Tag(Shape):
    Key: TagKey
    Value: TagValue


def _tag_problems(tags: list[Tag]) -> list[tuple[Path, str]]:
    """What SageMaker's TagList refuses beyond its pattern: a key twice, a key of AWS's reserved ``aws:`` prefix."""
    out: list[tuple[Path, str]] = []
    first: dict[str, int] = {}
    for i, tag in enumerate(tags):
        if tag.Key.lower().startswith("aws:"):
            out.append((("Tags", i, "Key"), f"{show(tag.Key)}: the aws: prefix is reserved for AWS's own tags"))
        if tag.Key in first:
            out.append((("Tags", i, "Key"), f"tag key {show(tag.Key)} given twice (also Tags[{first[tag.Key]}])"))
        first.setdefault(tag.Key, i)
    return out


Version = Annotated[int, Meta(ge=0, le=MAX_INT32)]
"""botocore's Integer: the version a write expects (a stale one is a 409)."""
TagList = Annotated[list[Tag], Meta(max_length=50)]


# ------------------------------------------------------------------------------------------ the requests
class Request(Shape, kw_only=True):
    """A request body. An optional field may be omitted, never null (a null would read as "remove it" to some,
    "keep it" to others): its type admits UNSET, not None."""

    REFUSED: ClassVar[Mapping[str, str]] = _REFUSED
    TITLE: ClassVar[str]
    NULLABLE: ClassVar[frozenset[str]] = frozenset()
    """The top-level fields a null may stand for (none else, at any depth: SageMaker's shapes have no null)."""


class CreateQuota(Request, kw_only=True):
    """SageMaker's CreateComputeQuota request without ClusterArn (the cluster is in the path)."""

    TITLE = "CreateComputeQuota"

    Name: EntityName
    Description: Description | UnsetType = UNSET
    ComputeQuotaConfig: ComputeQuotaConfig
    ComputeQuotaTarget: ComputeQuotaTarget
    ActivationState: Activation | UnsetType = UNSET
    Tags: TagList | UnsetType = UNSET

    def rules(self) -> list[tuple[Path, str]]:
        return [] if isinstance(self.Tags, UnsetType) else _tag_problems(self.Tags)


class UpdateQuota(Request, kw_only=True):
    """SageMaker's UpdateComputeQuota request without ComputeQuotaId (the name is in the path); fields not
    given keep their value."""

    TITLE = "UpdateComputeQuota"
    REFUSED: ClassVar[Mapping[str, str]] = {
        **_REFUSED,
        "Name": "a compute quota cannot be renamed (its name is in the path)",
        "Tags": "tags are set when the quota is created (UpdateComputeQuota has no Tags)",
    }

    TargetVersion: Annotated[Version, Meta(description="the ComputeQuotaVersion this update expects")]
    ComputeQuotaConfig: ComputeQuotaConfig | UnsetType = UNSET
    ComputeQuotaTarget: ComputeQuotaTarget | UnsetType = UNSET
    ActivationState: Activation | UnsetType = UNSET
    Description: Description | UnsetType = UNSET


class SchedulerConfigRequest(Request, kw_only=True):
    """Without TargetVersion: create (409 if one exists); with it: update that version."""

    TITLE = "PutSchedulerConfig"
    REFUSED: ClassVar[Mapping[str, str]] = {
        **_REFUSED,
        "Name": "not accepted here: a cluster has one scheduler config, the cluster in the path",
    }

    SchedulerConfig: SchedulerConfig
    TargetVersion: (
        Annotated[Version, Meta(description="the SchedulerConfigVersion this update expects")] | UnsetType
    ) = UNSET

    def target_version(self) -> int | None:
        return None if isinstance(self.TargetVersion, UnsetType) else self.TargetVersion

    def rules(self) -> list[tuple[Path, str]]:
        """A priority class whose WorkloadPriorityClass ``<Name>-priority`` no Job could name in its label (issue 35):
        refused here, at the edge. One stored before this bound is left out by the recompute, named in the pool."""
        return [
            (("SchedulerConfig", "PriorityClasses", i, "Name"), why)
            for i, pc in enumerate(self.SchedulerConfig.PriorityClasses or ())
            if (why := priority_class_name_problem(pc.Name)) is not None
        ]


class Recalculate(Request, kw_only=True):
    """A recalculation request: why (it goes on idleshare's bus with the request id)."""

    TITLE = "Recalculate"

    NULLABLE: ClassVar[frozenset[str]] = frozenset({"reason"})

    reason: Reason | None = None


class Pause(Request, kw_only=True):
    """Pause or resume a cluster's governance: why (recorded with the pause / resume, the same bound as
    :class:`Recalculate`'s)."""

    TITLE = "Pause"

    reason: Annotated[str, Meta(max_length=REASON_MAX)] | None = None


@dataclass(frozen=True, slots=True)
class Accepted(Generic[R]):
    """A body that passed its request Shape: ``fields`` typed, ``body`` as sent (stored as is: numbers stay exact)."""

    fields: R
    body: Mapping[str, Any]

    def given(self, *leave_out: str) -> dict[str, Any]:
        """What the request carried, but ``leave_out``."""
        return {k: v for k, v in self.body.items() if k not in leave_out}


# ------------------------------------------------------------------------------------------ parsing
def parse(model: type[R], body: object) -> Accepted[R]:
    """``body`` as a ``model`` request, or :class:`InputError` naming every offending field."""
    if not isinstance(body, Mapping):
        raise InputError(SOURCE, [FieldError("", f"expected a JSON object (got {show(body)})")])
    accepted = Accepted(convert(dict(body), model, SOURCE), body)
    nulls = [FieldError(loc(path), NULL) for path in _nulls(body, model.NULLABLE)]
    if nulls:
        raise InputError(SOURCE, capped(nulls))
    return accepted


def _nulls(body: Mapping[str, Any], nullable: frozenset[str]) -> list[Path]:
    """Where ``body`` holds a null, but its top-level ``nullable`` fields: a field the quota Shapes read from a file
    as "not given" (``FairShare: null``) would be stored as null, and read back as what?"""
    out: list[Path] = []
    stack: list[tuple[Path, object]] = [((k,), v) for k, v in reversed(list(body.items())) if k not in nullable]
    while stack and len(out) <= MAX_ERRORS:
        path, value = stack.pop()
        if value is None:
            out.append(path)
        elif isinstance(value, Mapping):
            stack.extend(((*path, k), v) for k, v in reversed(list(value.items())))
        elif isinstance(value, list):
            stack.extend(((*path, i), v) for i, v in reversed(list(enumerate(value))))
    return out


def name_problem(name: str) -> str | None:
    """What is wrong with ``name`` as a compute quota's Name (EntityName), or None."""
    return problem(name, EntityName)
