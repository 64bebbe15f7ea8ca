"""The Kueue objects (kueue.x-k8s.io/v1beta2) and namespaces a pool result stands for (docs/spec.md §3).

``desired_objects`` is deterministic and sorted; ``writable_objects`` is what the recompute and `idleshare plan`
write: those of them whose every name the API server takes (``naming.object_name_problems``), each other one named
in the pool's issues and left out. ``webhook_violations`` checks the rules that only Kueue's validating webhook
enforces (a bare apiserver with the CRDs would accept them), so that idleshare never pushes an object Kueue
would refuse.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from fractions import Fraction
from typing import Any

from idleshare.domain.admission import admission_objects
from idleshare.domain.kueue_versions import HUB_API, HUB_ONLY, KueueApi, KueueLimits, release_limits
from idleshare.domain.model import (
    CPU,
    INSTANCE_TYPE_LABEL,
    MEMORY,
    Amount,
    PriorityClass,
    SchedulerConfig,
    Settings,
    is_accelerator,
)
from idleshare.domain.naming import (
    cluster_queue_name,
    is_label_key,
    local_queue_name,
    namespace_name,
    object_name_problems,
    priority_class_name,
)
from idleshare.domain.pool import NAMED_MAX, Issue, PoolResult, TeamGrant
from idleshare.domain.quantity import QuantityError, format_quantity, parse_quantity

KUEUE_API = HUB_API
"""The one model's version: every object is built in it and written down to what the cluster serves."""
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "idleshare"
TEAM_LABEL = "idleshare.io/team"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"

KIND_ORDER = (
    "Namespace",
    "ResourceFlavor",
    "WorkloadPriorityClass",
    "Cohort",
    "ClusterQueue",
    "LocalQueue",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
)
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
    objects += admission_objects(
        (namespace_name(team, settings) for team in result.teams), _meta, enabled=settings.admission_policy
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
    "ValidatingAdmissionPolicy": "the admission policy",
    "ValidatingAdmissionPolicyBinding": "the admission policy's binding",
}


def writable_objects(
    result: PoolResult, scheduler: SchedulerConfig, settings: Settings, api: KueueApi = HUB_ONLY
) -> tuple[PoolResult, list[Manifest]]:
    """The desired objects Kueue ``api`` serves can hold, whose every name can be written, in apply order, and
    ``result`` as they stand for it: first :func:`govern` (the flavors and resources past Kueue's schema limits
    left out, named), then each object checked against the API server's name rules and the CRDs' bounds
    (:func:`limit_problems`), an ``InvalidObjectName`` / ``KueueLimitExceeded`` error naming each one left out: one
    bad object never keeps the others from the cluster. The recompute and ``idleshare plan`` both write this."""
    result = govern(result, api)
    limits = api.limits
    kept: list[Manifest] = []
    issues: list[Issue] = []
    for obj in desired_objects(result, scheduler, settings):
        problems = object_name_problems(obj)
        code = INVALID_OBJECT_NAME
        if not problems:
            problems, code = limit_problems(obj, limits), KUEUE_LIMIT_EXCEEDED
        if not problems:
            kept.append(obj)
            continue
        kind, name = str(obj.get("kind")), str(obj.get("metadata", {}).get("name"))
        issues.append(
            Issue(
                "error",
                code,
                f"{kind}/{name[:SUBJECT_MAX]}",
                f"{kind} ({_SOURCE_OF.get(kind, 'an object')}) not written: " + "; ".join(problems[:3]),
            )
        )
    return result.with_issues(issues), kept


# -- Kueue's schema limits: what one resource group holds (docs/spec.md §3) ------------------------------------

FLAVORS_NOT_GOVERNED = "FlavorsNotGoverned"
"""The pool issue of the flavors past what Kueue holds in the one resource group idleshare writes: no
ResourceFlavor, in no Cohort or ClusterQueue (an error when a quota names one of them, else a warning)."""
RESOURCES_NOT_GOVERNED = "ResourcesNotGoverned"
"""The pool issue of the resources past what that group can cover: in no Cohort or ClusterQueue."""
KUEUE_LIMIT_EXCEEDED = "KueueLimitExceeded"
"""The pool issue of an object that breaks a bound of Kueue's CRDs all the same (:func:`limit_problems`): left out."""


def quota_flavors(result: PoolResult) -> frozenset[str]:
    """The flavors a team's quota names: a nominal quota in them (ComputeQuotaResources) or an absolute limit."""
    return frozenset(
        f
        for grant in result.teams.values()
        for f in result.flavors
        if any(grant.nominal.get(f, {}).values())
        or any(d.absolute_cap is not None for d in grant.why.get(f, {}).values())
    )


def _has_accelerators(result: PoolResult, flavor: str) -> bool:
    amounts = {**result.shapes.get(flavor, {}), **{r: q for r, q in result.capacity.get(flavor, {}).items() if q}}
    return any(is_accelerator(r) and q > 0 for r, q in amounts.items())


def flavor_order(result: PoolResult) -> list[str]:
    """The result's flavors in the order they are governed: those a quota names, then those with accelerators,
    then the rest; within each, the greater eligible capacity first (accelerators, then vCPU, then memory), then
    by name. Deterministic: the same cluster always keeps the same flavors."""
    named = quota_flavors(result)

    def key(flavor: str) -> tuple[int, Amount, Amount, Amount, str]:
        cap = result.capacity.get(flavor, {})
        rank = 0 if flavor in named else 1 if _has_accelerators(result, flavor) else 2
        accelerators = sum((q for r, q in cap.items() if is_accelerator(r)), start=0)
        return rank, -accelerators, -cap.get(CPU, 0), -cap.get(MEMORY, 0), flavor

    return sorted(result.flavors, key=key)


def resource_order(result: PoolResult) -> list[str]:
    """The result's resources in the order they are covered: cpu and memory, then those a quota holds, then
    accelerators, then the rest, by name within each."""
    held = {r for g in result.teams.values() for per in g.nominal.values() for r, q in per.items() if q}

    def key(resource: str) -> tuple[int, str]:
        rank = 0 if resource in (CPU, MEMORY) else 1 if resource in held else 2 if is_accelerator(resource) else 3
        return rank, resource

    return sorted(result.resources, key=key)


def govern(result: PoolResult, api: KueueApi = HUB_ONLY) -> PoolResult:
    """``result`` cut to what one resource group of Kueue ``api`` holds (idleshare writes one: every flavor carries
    cpu and memory, and a resource may be in one group only): at most :attr:`KueueLimits.resources` resources
    (:func:`resource_order`), then at most :meth:`KueueLimits.flavors` flavors (:func:`flavor_order`). What is cut
    is left out of every table, listed in ``ungoverned_flavors`` / ``ungoverned_resources`` and named, with
    counts, in a ``FlavorsNotGoverned`` / ``ResourcesNotGoverned`` issue. ``result`` itself when it all fits."""
    limits = api.limits
    resources = resource_order(result)[: limits.resources]
    flavors = flavor_order(result)[: limits.flavors(len(resources))]
    if len(resources) == len(result.resources) and len(flavors) == len(result.flavors):
        return result
    keep_f, keep_r = set(flavors), set(resources)
    issues = _not_governed_issues(result, api, flavors, resources)
    narrowed = _narrow(result, keep_f, keep_r)
    return replace(
        narrowed,
        ungoverned_flavors=tuple(sorted(set(result.flavors) - keep_f)),
        ungoverned_resources=tuple(sorted(set(result.resources) - keep_r)),
    ).with_issues(issues)


def _narrow(result: PoolResult, flavors: set[str], resources: set[str]) -> PoolResult:
    def table(t: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
        return {f: {r: q for r, q in per.items() if r in resources} for f, per in t.items() if f in flavors}

    teams = {
        team: replace(
            g,
            nominal=table(g.nominal),
            borrowing_limit=table(g.borrowing_limit),
            lending_limit=table(g.lending_limit),
            why=table(g.why),
        )
        for team, g in result.teams.items()
    }
    return replace(
        result,
        flavors=tuple(f for f in result.flavors if f in flavors),
        resources=tuple(r for r in result.resources if r in resources),
        capacity=table(result.capacity),
        allocated=table(result.allocated),
        unallocated=table(result.unallocated),
        shortfall=table(result.shortfall),
        teams=teams,
        node_counts={f: n for f, n in result.node_counts.items() if f in flavors},
        shapes={f: dict(per) for f, per in result.shapes.items() if f in flavors},
        headroom_by_flavor=table(result.headroom_by_flavor),
    )


def _listed(names: list[str], counts: Mapping[str, tuple[int, int]] | None = None) -> str:
    def one(name: str) -> str:
        if counts is None or name not in counts:
            return name if counts is None else f"{name} (no nodes)"
        return f"{name} ({counts[name][1]} node{'s' if counts[name][1] != 1 else ''})"

    shown = ", ".join(one(n) for n in names[:NAMED_MAX])
    return shown + (f" and {len(names) - NAMED_MAX} more" if len(names) > NAMED_MAX else "")


def _flavor_bound(limits: KueueLimits, resources: int) -> str:
    """Which of Kueue's limits sets the flavors one group holds beside ``resources`` resources, and its source."""
    held = limits.flavors(resources)
    if held == limits.flavors_per_group:
        return f"spec.resourceGroups[].flavors: at most {limits.flavors_per_group} (maxItems, the Cohort and ClusterQueue CRDs)"
    if held == limits.flavors_total:
        return f"at most {limits.flavors_total} flavors in all resource groups (Kueue's ClusterQueue webhook)"
    return (
        f"at most {limits.pairs_per_group} flavor-resource pairs in a resource group (Kueue's ClusterQueue webhook), "
        f"{resources} resources each"
    )


def _not_governed_issues(result: PoolResult, api: KueueApi, flavors: list[str], resources: list[str]) -> list[Issue]:
    limits, issues = api.limits, []
    named = quota_flavors(result)
    dropped_r = [r for r in resource_order(result) if r not in set(resources)]
    if dropped_r:
        issues.append(
            Issue(
                "error"
                if any(r for g in result.teams.values() for per in g.nominal.values() for r in dropped_r if per.get(r))
                else "warning",
                RESOURCES_NOT_GOVERNED,
                "resources",
                f"{len(result.resources)} resources; Kueue {api.release} covers at most {limits.resources} in a "
                f"resource group (spec.resourceGroups[].coveredResources and flavors[].resources: maxItems "
                f"{min(limits.covered_resources, limits.resources_per_flavor)}, the CRDs): {len(dropped_r)} not "
                f"governed, in no Cohort or ClusterQueue: {_listed(dropped_r)}; covered first: cpu and memory, "
                "then what quotas hold, then accelerators, then by name",
            )
        )
    dropped = [f for f in flavor_order(result) if f not in set(flavors)]
    if dropped:
        lost = [f for f in dropped if f in named]
        accelerated = sum(1 for f in result.flavors if f not in named and _has_accelerators(result, f))
        quota_part = (
            f"; {len(lost)} of them named by a quota, whose teams get no quota there: {_listed(lost)}" if lost else ""
        )
        issues.append(
            Issue(
                "error" if lost else "warning",
                FLAVORS_NOT_GOVERNED,
                "ResourceFlavor",
                f"{len(result.flavors)} flavors; Kueue {api.release} holds at most {len(flavors)} in the one resource "
                f"group idleshare writes ({_flavor_bound(limits, len(resources))}): {len(dropped)} not governed "
                f"(no ResourceFlavor, in no Cohort or ClusterQueue; their capacity lends nothing): "
                f"{_listed(dropped, result.node_counts)}{quota_part}. Governed first: the {len(named)} flavors "
                f"quotas name, then the {accelerated} with accelerators, then the rest by capacity (accelerators, "
                "vCPU, memory), then by name",
            )
        )
    return issues


def flavor_named(instance_type: str, flavors: Iterable[str]) -> str:
    """The flavor a quota's instance type stands for among a cluster's ``flavors``: itself, or its EC2 name when
    the cluster's nodes carry that (``ml.p5.48xlarge`` -> ``p5.48xlarge``), as the engine maps it."""
    known = set(flavors)
    bare = instance_type.removeprefix("ml.")
    return bare if instance_type not in known and bare in known else instance_type


def quota_flavors_problem(
    named: Sequence[str], others: Iterable[str], flavors: Iterable[str], release: str, resources: int
) -> tuple[int, str] | None:
    """Whether a quota naming ``named`` (its ComputeQuotaResources' instance types, in order), beside the cluster's
    other quotas naming ``others``, would take the flavors the quotas name past what one resource group of Kueue
    ``release`` holds beside ``resources`` resources (:meth:`KueueLimits.flavors`): ``(index of the first entry
    past it, why)``, or None. Only a quota that adds a flavor is refused (one already past it may shrink)."""
    known = tuple(flavors)
    limits = release_limits(release)
    most = limits.flavors(max(resources, 2))
    taken = {flavor_named(t, known) for t in others}
    after = set(taken)
    first: int | None = None
    for i, instance_type in enumerate(named):
        flavor = flavor_named(instance_type, known)
        if flavor not in after:
            after.add(flavor)
            if len(after) > most and first is None:
                first = i
    if first is None:
        return None
    added = len(after) - len(taken)
    return first, (
        f"the cluster's quotas would name {len(after)} instance types ({added} of them only this quota's); Kueue "
        f"{release} holds at most {most} flavors in the one resource group idleshare writes "
        f"({_flavor_bound(limits, max(resources, 2))}): name at most {max(most - len(taken), 0)} instance types no "
        "other quota names, or remove some from another quota first"
    )


def limit_problems(obj: Manifest, limits: KueueLimits) -> list[str]:
    """The bounds of Kueue's CRDs (``limits``) ``obj`` breaks, as ``<field>: <why>``: what the API server would
    refuse it for (names are :func:`naming.object_name_problems`' to check)."""
    kind, spec = obj.get("kind"), obj.get("spec") or {}
    out: list[str] = []
    if kind in ("ClusterQueue", "Cohort"):
        out += _group_bounds(spec.get("resourceGroups") or [], limits)
    if kind == "ResourceFlavor" and len(spec.get("nodeLabels") or {}) > limits.node_labels:
        out.append(f"spec.nodeLabels: at most {limits.node_labels} labels")
    if kind == "WorkloadPriorityClass" and len(str(obj.get("description", ""))) > limits.description_length:
        out.append(f"description: at most {limits.description_length} characters")
    return out


def _group_bounds(groups: list[Any], limits: KueueLimits) -> list[str]:
    out: list[str] = []
    if len(groups) > limits.resource_groups:
        out.append(f"spec.resourceGroups: at most {limits.resource_groups} items (got {len(groups)})")
    for g, group in enumerate(groups):
        where = f"spec.resourceGroups[{g}]"
        flavors, covered = group.get("flavors") or [], group.get("coveredResources") or []
        if len(flavors) > limits.flavors_per_group:
            out.append(f"{where}.flavors: at most {limits.flavors_per_group} items (got {len(flavors)})")
        if len(covered) > limits.covered_resources:
            out.append(f"{where}.coveredResources: at most {limits.covered_resources} items (got {len(covered)})")
        for f, flavor in enumerate(flavors):
            n = len(flavor.get("resources") or [])
            if n > limits.resources_per_flavor:
                out.append(f"{where}.flavors[{f}].resources: at most {limits.resources_per_flavor} items (got {n})")
    return out


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


def webhook_violations(obj: Manifest, limits: KueueLimits = HUB_ONLY.limits) -> list[str]:
    """Rules of Kueue's ClusterQueue / Cohort webhooks that the CRD schema does not carry, and the CRDs' bounds on
    the groups (``limits``: the served Kueue's, :func:`limit_problems`).

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
    errors = [f"{kind}/{name}: {p}" for p in _group_bounds(groups, limits)]
    errors += _size_violations(f"{kind}/{name}", groups, limits)
    errors += _groups_violations(kind, name, groups, has_parent, limits)
    weight = _weight(spec.get("fairSharing", {}).get("weight"))
    if weight is not None and weight != 0 and weight <= Fraction(1, 10**9):
        errors.append(f"{kind}/{name}: spec.fairSharing.weight: must be 0 or more than 1e-9")
    return errors


def _size_violations(who: str, groups: list[Any], limits: KueueLimits) -> list[str]:
    """Kueue's caps on the resources and flavors of all of an object's groups together."""
    errors: list[str] = []
    n_flavors = sum(len(g.get("flavors", [])) for g in groups)
    n_resources = sum(len(g.get("coveredResources", [])) for g in groups)
    if n_resources > limits.resources_total:
        errors.append(f"{who}: spec.resourceGroups: more than {limits.resources_total} resources in all groups")
    if n_flavors > limits.flavors_total:
        errors.append(f"{who}: spec.resourceGroups: more than {limits.flavors_total} flavors in all groups")
    return errors


def _groups_violations(kind: str, name: str, groups: list[Any], has_parent: bool, limits: KueueLimits) -> list[str]:
    """Each group's rules: pairs per group, resource names, a resource or flavor in two places, each quota."""
    errors: list[str] = []
    seen_flavors: set[str] = set()
    seen_resources: set[str] = set()
    for g, group in enumerate(groups):
        where = f"{kind}/{name}: spec.resourceGroups[{g}]"
        covered = group.get("coveredResources", [])
        flavors = group.get("flavors", [])
        if len(covered) * len(flavors) > limits.pairs_per_group:
            errors.append(f"{where}: more than {limits.pairs_per_group} flavor-resource pairs")
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
