"""The Kueue objects (kueue.x-k8s.io/v1beta2) and namespaces a pool result stands for (docs/spec.md §3).

``desired_objects`` is deterministic and sorted; ``writable_objects`` is what the recompute and `idleshare plan`
write: those of them whose every name the API server takes (``naming.object_name_problems``), each other one named
in the pool's issues and left out. ``webhook_violations`` checks the rules that only Kueue's validating webhook
enforces (a bare apiserver with the CRDs would accept them), so that idleshare never pushes an object Kueue
would refuse.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from idleshare.domain.kueue_versions import HUB_API
from idleshare.domain.model import INSTANCE_TYPE_LABEL, Amount, PriorityClass, SchedulerConfig, Settings
from idleshare.domain.naming import (
    cluster_queue_name,
    is_label_key,
    local_queue_name,
    namespace_name,
    object_name_problems,
    priority_class_name,
)
from idleshare.domain.pool import Issue, PoolResult, TeamGrant
from idleshare.domain.quantity import QuantityError, format_quantity, parse_quantity

KUEUE_API = HUB_API
"""The one model's version: every object is built in it and written down to what the cluster serves."""
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "idleshare"
TEAM_LABEL = "idleshare.io/team"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"

KIND_ORDER = ("Namespace", "ResourceFlavor", "WorkloadPriorityClass", "Cohort", "ClusterQueue", "LocalQueue")
"""Apply order: what an object refers to is applied before it."""

Manifest = dict[str, Any]


def _meta(name: str, team: str | None = None, namespace: str | None = None) -> dict[str, Any]:
    labels = {MANAGED_BY_LABEL: MANAGED_BY}
    if team is not None:
        labels[TEAM_LABEL] = team
    meta: dict[str, Any] = {"name": name, "labels": labels}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def _quota_entries(
    result: PoolResult, fields: Iterable[tuple[str, Mapping[str, Mapping[str, Any]]]]
) -> list[dict[str, Any]]:
    materialized = list(fields)
    return [
        {
            "name": flavor,
            "resources": [
                {"name": r} | {key: format_quantity(values[flavor][r], r) for key, values in materialized}
                for r in result.resources
            ],
        }
        for flavor in result.flavors
    ]


def _resource_groups(result: PoolResult, fields: list[tuple[str, Mapping[str, Mapping[str, Any]]]]) -> list[Any]:
    if not result.flavors or not result.resources:
        return []
    return [{"coveredResources": list(result.resources), "flavors": _quota_entries(result, fields)}]


def _cluster_queue(result: PoolResult, grant: TeamGrant, settings: Settings) -> Manifest:
    spec: dict[str, Any] = {
        "cohortName": settings.cohort_name,
        "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: namespace_name(grant.team, settings)}},
        "resourceGroups": _resource_groups(
            result,
            [
                ("nominalQuota", grant.nominal),
                ("borrowingLimit", grant.borrowing_limit),
                ("lendingLimit", grant.lending_limit),
            ],
        ),
        "preemption": {
            "reclaimWithinCohort": "Any",
            "withinClusterQueue": "LowerPriority" if grant.preempt_team_tasks == "LowerPriority" else "Never",
        },
        "stopPolicy": "None" if grant.enabled else "Hold",
    }
    if result.fair_share and grant.fair_share_weight is not None:
        spec["fairSharing"] = {"weight": str(grant.fair_share_weight)}
    return {
        "apiVersion": KUEUE_API,
        "kind": "ClusterQueue",
        "metadata": _meta(cluster_queue_name(grant.team, settings), grant.team),
        "spec": spec,
    }


def desired_objects(result: PoolResult, scheduler: SchedulerConfig, settings: Settings) -> list[Manifest]:
    """Every object idleshare wants in the cluster for this result, in apply order."""
    cohort_quota = {
        f: {r: (result.unallocated[f][r] if result.idle_resource_sharing else 0) for r in result.resources}
        for f in result.flavors
    }
    objects: list[Manifest] = [
        {
            "apiVersion": KUEUE_API,
            "kind": "ResourceFlavor",
            "metadata": _meta(flavor),
            "spec": {"nodeLabels": {INSTANCE_TYPE_LABEL: flavor}},
        }
        for flavor in result.flavors
    ]
    objects += [_priority_class(pc) for pc in scheduler.priority_classes]
    objects.append(
        {
            "apiVersion": KUEUE_API,
            "kind": "Cohort",
            "metadata": _meta(settings.cohort_name),
            "spec": {"resourceGroups": _resource_groups(result, [("nominalQuota", cohort_quota)])},
        }
    )
    for grant in result.teams.values():
        ns = namespace_name(grant.team, settings)
        objects.append({"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(ns, grant.team)})
        objects.append(_cluster_queue(result, grant, settings))
        objects.append(
            {
                "apiVersion": KUEUE_API,
                "kind": "LocalQueue",
                "metadata": _meta(local_queue_name(grant.team, settings), grant.team, ns),
                "spec": {"clusterQueue": cluster_queue_name(grant.team, settings)},
            }
        )
    return sorted(objects, key=apply_order)


INVALID_OBJECT_NAME = "InvalidObjectName"
"""The pool issue of a desired object with a name the API server would refuse (or a Job could not use): left out,
every other object still written."""

SUBJECT_MAX = 100  # an issue's subject names the object: a hostile name is cut there (the message says how long)
_SOURCE_OF = {
    "Namespace": "a team's namespace",
    "ResourceFlavor": "an instance type",
    "WorkloadPriorityClass": "a priority class of the scheduler config",
    "Cohort": "the cluster's cohort name",
    "ClusterQueue": "a team's ClusterQueue",
    "LocalQueue": "a team's LocalQueue",
}


def writable_objects(
    result: PoolResult, scheduler: SchedulerConfig, settings: Settings
) -> tuple[PoolResult, list[Manifest]]:
    """The desired objects whose every name can be written, in apply order, and ``result`` with an
    ``InvalidObjectName`` error naming each one left out: one bad name never keeps the others from the cluster."""
    kept: list[Manifest] = []
    issues: list[Issue] = []
    for obj in desired_objects(result, scheduler, settings):
        problems = object_name_problems(obj)
        if not problems:
            kept.append(obj)
            continue
        kind, name = str(obj.get("kind")), str(obj.get("metadata", {}).get("name"))
        issues.append(
            Issue(
                "error",
                INVALID_OBJECT_NAME,
                f"{kind}/{name[:SUBJECT_MAX]}",
                f"{kind} ({_SOURCE_OF.get(kind, 'an object')}) not written: " + "; ".join(problems[:3]),
            )
        )
    return result.with_issues(issues), kept


def _priority_class(pc: PriorityClass) -> Manifest:
    return {
        "apiVersion": KUEUE_API,
        "kind": "WorkloadPriorityClass",
        "metadata": _meta(priority_class_name(pc.name)),
        "value": pc.weight,
        "description": f"SageMaker HyperPod priority class {pc.name} (weight {pc.weight})",
    }


def apply_order(obj: Manifest) -> tuple[int, str, str]:
    """Sort key of a manifest: its kind's place in :data:`KIND_ORDER`, then namespace and name."""
    meta = obj["metadata"]
    return (KIND_ORDER.index(obj["kind"]), meta.get("namespace", ""), meta["name"])


# -- rules only Kueue's webhook enforces ------------------------------------------------------

MAX_FLAVORS = 256
MAX_RESOURCES = 256
MAX_PAIRS_PER_GROUP = 512


NANO = 9
"""Kubernetes keeps a quantity to 1n (rounding up): a fair-sharing weight may be ``2n``."""


def _weight(value: Any) -> Amount | None:
    """A fair-sharing weight's value as Kubernetes stores it (to 1n); None if not a quantity."""
    if value is None or isinstance(value, bool):
        return None
    try:
        return parse_quantity(str(value), NANO)
    except QuantityError:
        return None


def webhook_violations(obj: Manifest) -> list[str]:
    """Rules of Kueue's ClusterQueue / Cohort webhooks that the CRD schema does not carry.

    The rules on values read quantities with the domain's one parser (the one the node parser uses, proven
    to read what lightkube's reads): no negative quota or limit, a ClusterQueue's lendingLimit at most its
    nominalQuota (a Cohort's may exceed it). A fair-sharing weight, read to 1n as Kubernetes keeps it, must
    be 0 or above 1e-9.
    Each rule is proven against the real Kueue webhook in ``tests/kube/test_crds.py``.
    """
    kind = obj.get("kind")
    if kind not in ("ClusterQueue", "Cohort"):
        return []
    spec = obj.get("spec", {})
    name = obj.get("metadata", {}).get("name", "?")
    has_parent = bool(spec.get("cohortName") if kind == "ClusterQueue" else spec.get("parentName"))
    groups = spec.get("resourceGroups", [])
    errors = _size_violations(f"{kind}/{name}", groups)
    errors += _groups_violations(kind, name, groups, has_parent)
    weight = _weight(spec.get("fairSharing", {}).get("weight"))
    if weight is not None and weight != 0 and weight <= Fraction(1, 10**9):
        errors.append(f"{kind}/{name}: spec.fairSharing.weight: must be 0 or more than 1e-9")
    return errors


def _size_violations(who: str, groups: list[Any]) -> list[str]:
    """Kueue's caps on the resources and flavors of all of an object's groups together."""
    errors: list[str] = []
    n_flavors = sum(len(g.get("flavors", [])) for g in groups)
    n_resources = sum(len(g.get("coveredResources", [])) for g in groups)
    if n_resources > MAX_RESOURCES:
        errors.append(f"{who}: spec.resourceGroups: more than {MAX_RESOURCES} resources in all groups")
    if n_flavors > MAX_FLAVORS:
        errors.append(f"{who}: spec.resourceGroups: more than {MAX_FLAVORS} flavors in all groups")
    return errors


def _groups_violations(kind: str, name: str, groups: list[Any], has_parent: bool) -> list[str]:
    """Each group's rules: pairs per group, resource names, a resource or flavor in two places, each quota."""
    errors: list[str] = []
    seen_flavors: set[str] = set()
    seen_resources: set[str] = set()
    for g, group in enumerate(groups):
        where = f"{kind}/{name}: spec.resourceGroups[{g}]"
        covered = group.get("coveredResources", [])
        flavors = group.get("flavors", [])
        if len(covered) * len(flavors) > MAX_PAIRS_PER_GROUP:
            errors.append(f"{where}: more than {MAX_PAIRS_PER_GROUP} flavor-resource pairs")
        for r in covered:
            if not is_label_key(r):
                errors.append(f"{where}.coveredResources: {r!r} is not a valid resource name")
            if r in seen_resources:
                errors.append(f"{where}.coveredResources: {r!r} appears in two resource groups")
            seen_resources.add(r)
        for fi, flavor in enumerate(flavors):
            if flavor.get("name") in seen_flavors:
                errors.append(f"{where}.flavors[{fi}]: flavor {flavor.get('name')!r} appears twice")
            seen_flavors.add(flavor.get("name"))
            for ri, res in enumerate(flavor.get("resources", [])):
                errors += _quota_violations(f"{where}.flavors[{fi}].resources[{ri}]", res, kind, has_parent)
    return errors


def _quota_violations(at: str, res: dict[str, Any], kind: str, has_parent: bool) -> list[str]:
    """One flavor-resource quota's rules: no lendingLimit without a parent, none negative, a ClusterQueue
    lends at most its nominalQuota."""
    errors: list[str] = []
    if "lendingLimit" in res and not has_parent:
        parent = "cohort" if kind == "ClusterQueue" else "parent"
        errors.append(f"{at}.lendingLimit: must be nil when {kind} has no {parent}")
    for field in ("nominalQuota", "borrowingLimit", "lendingLimit"):
        if res.get(field) is not None and parse_quantity(str(res[field])) < 0:
            errors.append(f"{at}.{field}: must be greater than or equal to 0")
    lend, nominal = res.get("lendingLimit"), res.get("nominalQuota")
    capped = kind == "ClusterQueue" and lend is not None and nominal is not None
    if capped and parse_quantity(str(lend)) > parse_quantity(str(nominal)):
        errors.append(f"{at}.lendingLimit: must be less than or equal to the nominalQuota")
    return errors
