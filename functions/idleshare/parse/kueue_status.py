"""Kueue's ClusterQueue and Workload objects -> :class:`idleshare.domain.usage.QueueStatus` /
:class:`~idleshare.domain.usage.WorkloadStatus`: what the usage sample reads of them, one schema each.

Declared (and so checked) is what usage reads, and nothing else: of a ClusterQueue its name and team label, its
namespace selector, every flavor's resources in ``spec.resourceGroups`` (``nominalQuota``, ``borrowingLimit``,
``lendingLimit``) and ``status.flavorsUsage`` (``total``, ``borrowed``) and the workload counts; of a Workload its
name, namespace, creation time and owners, ``spec.active``, each pod set's ``count``, instance-type node selector
and containers' requests, ``status.conditions`` and ``status.admission.podSetAssignments``. Unknown members are
ignored.

Nothing here fails the sample. A value that does not read — a quantity such as ``"12x"``, a count that is not a
non-negative integer — is left out and named (:class:`~idleshare.domain.usage.Unreadable`: the object, the field,
the problem, and the flavor and resource it leaves unknown): the sample shows a gap there, never zero usage. An
object whose shape does not read (a member of the wrong type) is named field by field and read as nothing: a
ClusterQueue then leaves every flavor unknown (its use is part of every total), a Workload is left out.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Generic, TypeVar

import msgspec

from idleshare.domain.kueue import NAMESPACE_NAME_LABEL, TEAM_LABEL
from idleshare.domain.model import INSTANCE_TYPE_LABEL, Amount
from idleshare.domain.usage import Condition, QueueStatus, Table, Unreadable, WorkloadStatus, parse_time
from idleshare.parse import schema
from idleshare.parse.errors import InputError
from idleshare.parse.nodes import parse_quantity_value
from idleshare.parse.schema import show

# -- ClusterQueue ----------------------------------------------------------------------------------------------


class _Metadata(msgspec.Struct):
    name: str = ""
    namespace: str = ""
    labels: dict[str, str] | None = None
    creationTimestamp: str | None = None


R = TypeVar("R")


class _Quota(msgspec.Struct):
    name: str
    nominalQuota: Any = None
    borrowingLimit: Any = None
    lendingLimit: Any = None


class _Flavor(msgspec.Struct, Generic[R]):
    """A flavor's entry in a ClusterQueue's spec (its quotas) or status (its usage): its name and its resources."""

    name: str
    resources: list[R] | None = None


class _ResourceGroup(msgspec.Struct):
    flavors: list[_Flavor[_Quota]] | None = None


class _Selector(msgspec.Struct):
    matchLabels: dict[str, str] | None = None


class _QueueSpec(msgspec.Struct):
    namespaceSelector: _Selector | None = None
    resourceGroups: list[_ResourceGroup] | None = None


class _Used(msgspec.Struct):
    name: str
    total: Any = None
    borrowed: Any = None


class _QueueStatus(msgspec.Struct):
    flavorsUsage: list[_Flavor[_Used]] | None = None
    pendingWorkloads: Any = None
    reservingWorkloads: Any = None
    admittedWorkloads: Any = None


class _ClusterQueue(msgspec.Struct):
    metadata: _Metadata
    spec: _QueueSpec | None = None
    status: _QueueStatus | None = None


class _Reader:
    """Reads the values of one object, naming each that does not read."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.unreadable: list[Unreadable] = []

    def amount(self, value: Any, where: str, flavor: str, resource: str) -> Amount | None:
        try:
            return parse_quantity_value(value)
        except ValueError as exc:
            self.unreadable.append(Unreadable(self.what, where, str(exc), flavor, resource))
            return None

    def count(self, value: Any, where: str) -> int | None:
        if value is None:
            return 0
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        self.unreadable.append(Unreadable(self.what, where, f"must be a non-negative integer (got {show(value)})"))
        return None


def _shape_problems(obj: object, kind: type, what: str) -> list[Unreadable]:
    """Each field of ``obj`` that does not fit ``kind``, named."""
    try:
        schema.convert(obj, kind, what)
    except InputError as exc:
        return [Unreadable(what, e.loc, e.message) for e in exc.errors]
    return [Unreadable(what, "", "does not read")]  # pragma: no cover - msgspec and the walk agree


def _name(obj: object) -> str:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) else ""


def cluster_queue(obj: object) -> QueueStatus:
    """One ClusterQueue as read from the cluster (module docstring)."""
    name = _name(obj)
    what = f"ClusterQueue/{name}"
    try:
        cq = msgspec.convert(obj, _ClusterQueue)
    except msgspec.ValidationError:
        problems = _shape_problems(obj, _ClusterQueue, what)
        return QueueStatus(
            name, name, "", pending=None, reserving=None, admitted=None, unreadable=tuple(problems), readable=False
        )
    read = _Reader(what)
    spec, status = cq.spec or _QueueSpec(), cq.status or _QueueStatus()
    nominal: Table = {}
    borrowing: dict[str, dict[str, Amount | None]] = {}
    lending: dict[str, dict[str, Amount | None]] = {}
    for g, group in enumerate(spec.resourceGroups or ()):
        for i, flavor in enumerate(group.flavors or ()):
            for j, quota in enumerate(flavor.resources or ()):
                f, r, at = flavor.name, quota.name, f"spec.resourceGroups[{g}].flavors[{i}].resources[{j}]"
                amounts = {
                    key: read.amount(value, f"{at}.{key}", f, r) if value is not None else None
                    for key, value in (("nominalQuota", quota.nominalQuota), ("borrowingLimit", quota.borrowingLimit),
                                       ("lendingLimit", quota.lendingLimit))
                }  # fmt: skip
                nominal.setdefault(f, {})[r] = amounts["nominalQuota"] or 0
                borrowing.setdefault(f, {})[r] = amounts["borrowingLimit"]
                lending.setdefault(f, {})[r] = amounts["lendingLimit"]
    in_use: Table = {}
    borrowed: Table = {}
    for i, usage in enumerate(status.flavorsUsage or ()):
        for j, used in enumerate(usage.resources or ()):
            f, r, at = usage.name, used.name, f"status.flavorsUsage[{i}].resources[{j}]"
            for table, key, value in ((in_use, "total", used.total), (borrowed, "borrowed", used.borrowed)):
                amount = read.amount(value, f"{at}.{key}", f, r) if value is not None else 0
                if amount is not None:
                    table.setdefault(f, {})[r] = amount
    labels = cq.metadata.labels or {}
    selector = (spec.namespaceSelector.matchLabels if spec.namespaceSelector else None) or {}
    return QueueStatus(
        name=cq.metadata.name,
        team=labels.get(TEAM_LABEL) or cq.metadata.name,
        namespace=selector.get(NAMESPACE_NAME_LABEL, ""),
        nominal=nominal,
        borrowing_limit=borrowing,
        lending_limit=lending,
        in_use=in_use,
        borrowed=borrowed,
        pending=read.count(status.pendingWorkloads, "status.pendingWorkloads"),
        reserving=read.count(status.reservingWorkloads, "status.reservingWorkloads"),
        admitted=read.count(status.admittedWorkloads, "status.admittedWorkloads"),
        unreadable=tuple(read.unreadable),
    )


# -- Workload --------------------------------------------------------------------------------------------------


class _Owner(msgspec.Struct):
    kind: str = ""
    name: str = ""
    uid: str = ""


class _WorkloadMetadata(_Metadata):
    ownerReferences: list[_Owner] | None = None


class _Requests(msgspec.Struct):
    requests: dict[str, Any] | None = None


class _Container(msgspec.Struct):
    resources: _Requests | None = None


class _PodSpec(msgspec.Struct):
    nodeSelector: dict[str, str] | None = None
    containers: list[_Container] | None = None


class _Template(msgspec.Struct):
    spec: _PodSpec | None = None


class _PodSet(msgspec.Struct):
    name: str = ""
    count: Any = None
    template: _Template | None = None


class _WorkloadSpec(msgspec.Struct):
    active: bool | None = None
    podSets: list[_PodSet] | None = None


class _Condition(msgspec.Struct):
    type: str
    status: str = ""
    reason: str = ""
    message: str = ""
    lastTransitionTime: str | None = None


class _Assignment(msgspec.Struct):
    name: str = ""
    flavors: dict[str, str] | None = None


class _Admission(msgspec.Struct):
    podSetAssignments: list[_Assignment] | None = None


class _WorkloadStatus(msgspec.Struct):
    conditions: list[_Condition] | None = None
    admission: _Admission | None = None


class _Workload(msgspec.Struct):
    metadata: _WorkloadMetadata
    spec: _WorkloadSpec | None = None
    status: _WorkloadStatus | None = None


def workload(obj: object) -> WorkloadStatus:
    """One Workload as read from the cluster (module docstring)."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    namespace = meta.get("namespace") if isinstance(meta, dict) else None
    name = _name(obj)
    what = f"Workload/{namespace}/{name}" if isinstance(namespace, str) else f"Workload/{name}"
    try:
        wl = msgspec.convert(obj, _Workload)
    except msgspec.ValidationError:
        problems = tuple(_shape_problems(obj, _Workload, what))
        return WorkloadStatus(name, "", active=False, unreadable=problems, readable=False)
    read = _Reader(what)
    spec, status = wl.spec or _WorkloadSpec(), wl.status or _WorkloadStatus()
    requests: dict[str, Amount] = {}
    pinned: str | None = None
    for p, pod_set in enumerate(spec.podSets or ()):
        count = read.count(pod_set.count, f"spec.podSets[{p}].count")
        pod = (pod_set.template.spec if pod_set.template else None) or _PodSpec()
        if (pod.nodeSelector or {}).get(INSTANCE_TYPE_LABEL):
            pinned = (pod.nodeSelector or {})[INSTANCE_TYPE_LABEL]
        for c, container in enumerate(pod.containers or ()):
            asked = (container.resources.requests if container.resources else None) or {}
            for r, value in asked.items():
                at = f"spec.podSets[{p}].template.spec.containers[{c}].resources.requests[{r!r}]"
                amount = read.amount(value, at, "", r)
                if amount is not None and count is not None:
                    requests[r] = requests.get(r, 0) + (count or 1) * amount
    owners = wl.metadata.ownerReferences or []
    job = next((o.name for o in owners if o.kind == "Job" and o.name), wl.metadata.name)
    conditions = {
        c.type: Condition(c.status, c.reason, c.message, parse_time(c.lastTransitionTime))
        for c in status.conditions or ()
    }
    assigned = (
        {a.name: dict(a.flavors or {}) for a in (status.admission.podSetAssignments or ())} if status.admission else {}
    )
    return WorkloadStatus(
        name=wl.metadata.name,
        namespace=wl.metadata.namespace,
        created=wl.metadata.creationTimestamp or "",
        active=spec.active is not False,
        job=job,
        owner_uids=tuple(o.uid for o in owners if o.uid),
        requests=requests,
        pinned=pinned,
        conditions=conditions,
        assigned=assigned,
        unreadable=tuple(read.unreadable),
    )


def cluster_queues(objects: Iterable[object]) -> list[QueueStatus]:
    return [cluster_queue(o) for o in objects]


def workloads(objects: Iterable[object]) -> list[WorkloadStatus]:
    return [workload(o) for o in objects]
