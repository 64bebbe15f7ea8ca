"""Other writers that can make the limits idleshare writes meaningless, seen in what the recompute reads
(docs/spec.md §3, "Other quota writers"). idleshare keeps writing its spec either way; these are named issues.

- **Kueue's Dynamic Quota Orchestration** (alpha in v0.20, feature gate ``DynamicQuotaOrchestration``): a
  ClusterQueue or Cohort whose ``status.effectiveQuotas`` is set is scheduled from that status
  (``{orchestratorRef: {apiGroup, kind, name}, resourceGroups: [...]}``), not from ``spec.resourceGroups``; the
  status stays in force after the orchestrator is deleted. Issue :data:`DYNAMIC_QUOTA_ORCHESTRATOR_ACTIVE`, one per
  object idleshare created, naming the orchestrator (its ``orchestratorRef`` and the field manager that wrote it).
- **HyperPod's own task governance**: its team namespaces (labelled :data:`HYPERPOD_MANAGED_NAMESPACE_LABEL`), its
  unallocated-resource-sharing lender ClusterQueues (:data:`HYPERPOD_LENDER_QUEUE_PREFIX`), or a field manager of
  its (:func:`is_hyperpod_manager`) on an object idleshare created. Issue :data:`HYPERPOD_TASK_GOVERNANCE_ACTIVE`,
  one per cluster, naming what was seen and how to switch one of the two off.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from idleshare.domain.kueue_diff import created_by_idleshare
from idleshare.domain.pool import Issue

DYNAMIC_QUOTA_ORCHESTRATOR_ACTIVE = "DynamicQuotaOrchestratorActive"
"""The pool issue of a ClusterQueue or Cohort idleshare writes whose ``status.effectiveQuotas`` is set: Kueue
schedules it from that status, not from idleshare's spec (an error; counted by the ``QuotaOverridden`` gauge)."""
HYPERPOD_TASK_GOVERNANCE_ACTIVE = "HyperPodTaskGovernanceActive"
"""The pool issue of HyperPod task governance seen governing the same cluster (an error)."""
OTHER_WRITER_ISSUES = (DYNAMIC_QUOTA_ORCHESTRATOR_ACTIVE, HYPERPOD_TASK_GOVERNANCE_ACTIVE)

QUOTA_KINDS = ("ClusterQueue", "Cohort")
"""The kinds whose ``status.effectiveQuotas`` overrides their spec."""
HYPERPOD_MANAGED_NAMESPACE_LABEL = "sagemaker.amazonaws.com/sagemaker-managed-queue"
"""Set to ``"true"`` by task governance on each team namespace ``hyperpod-ns-<team>`` it makes (with
``sagemaker.amazonaws.com/quota-allocation-id: <team>``); the HyperPod CLI finds the teams' namespaces by it."""
HYPERPOD_MANAGED_NAMESPACE_SELECTOR = f"{HYPERPOD_MANAGED_NAMESPACE_LABEL}=true"
HYPERPOD_LENDER_QUEUE_PREFIX = "hyperpod-ns-idle-resource-sharing-cq-"
"""Task governance's unallocated-resource-sharing ClusterQueues (``-cq-1``, one per flavor group), made when its
cluster policy sets ``IdleResourceSharing: Enabled``."""
HYPERPOD_MANAGER_MARKERS = ("hyperpod", "sagemaker")
"""A field manager whose name contains one of these (case aside) is taken for HyperPod's (its controllers' names
are not documented: docs/decisions.md)."""
SAMPLE = 5
"""How many of each kind of sign an issue names (namespaces are read only that far)."""
_EFFECTIVE_QUOTAS = "effectiveQuotas"


def is_hyperpod_manager(manager: str) -> bool:
    return any(marker in manager.lower() for marker in HYPERPOD_MANAGER_MARKERS)


def _name(obj: Mapping[str, Any]) -> str:
    return f"{obj.get('kind')}/{(obj.get('metadata') or {}).get('name')}"


def _entries(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    found = (obj.get("metadata") or {}).get("managedFields") or ()
    return [e for e in found if isinstance(e, Mapping)]


def _status_writers(obj: Mapping[str, Any]) -> list[str]:
    """The field managers whose status entry owns ``status.effectiveQuotas``."""
    out = []
    for entry in _entries(obj):
        fields = entry.get("fieldsV1")
        status = fields.get("f:status") if isinstance(fields, Mapping) else None
        if isinstance(status, Mapping) and f"f:{_EFFECTIVE_QUOTAS}" in status and entry.get("manager"):
            out.append(str(entry["manager"]))
    return sorted(set(out))


def _orchestrator(effective: Any) -> str:
    ref = effective.get("orchestratorRef") if isinstance(effective, Mapping) else None
    if not isinstance(ref, Mapping) or not ref.get("name"):
        return "an orchestrator that names none (no status.effectiveQuotas.orchestratorRef)"
    group = f" ({ref['apiGroup']})" if ref.get("apiGroup") else ""
    return f"{ref.get('kind') or 'orchestrator'} {ref['name']}{group}"


def dynamic_quota_issues(managed: Iterable[Mapping[str, Any]]) -> list[Issue]:
    """One :data:`DYNAMIC_QUOTA_ORCHESTRATOR_ACTIVE` error per ClusterQueue or Cohort idleshare created whose
    ``status.effectiveQuotas`` is set (present at all: an empty ``resourceGroups`` is a complete override too)."""
    issues = []
    for obj in managed:
        if obj.get("kind") not in QUOTA_KINDS or not created_by_idleshare(obj):
            continue
        effective = (obj.get("status") or {}).get(_EFFECTIVE_QUOTAS)
        if effective is None:
            continue
        writers = _status_writers(obj)
        by = f", written by field manager {', '.join(writers)}" if writers else ""
        name, kind = _name(obj), str(obj.get("kind")).lower()
        issues.append(
            Issue(
                "error",
                DYNAMIC_QUOTA_ORCHESTRATOR_ACTIVE,
                name,
                f"{name} has status.effectiveQuotas from {_orchestrator(effective)}{by}: with Kueue's "
                "DynamicQuotaOrchestration feature gate on, Kueue schedules it from that status, not from the spec "
                "idleshare writes, so idleshare's limits for it are not in force (idleshare keeps writing them). "
                "The status stays after the orchestrator is deleted: remove the orchestrator's capacityDistribution "
                f"for it, then clear the status (kubectl patch {kind} {name.partition('/')[2]} --subresource=status "
                '--type=merge -p \'{"status":{"effectiveQuotas":null}}\'), or turn the feature gate off',
            )
        )
    return issues


def hyperpod_signs(
    managed: Iterable[Mapping[str, Any]], labelled_namespaces: Sequence[str], cluster_queues: Iterable[str]
) -> list[str]:
    """What shows HyperPod task governance governing this cluster: ``labelled_namespaces`` (those carrying
    :data:`HYPERPOD_MANAGED_NAMESPACE_SELECTOR`, at most :data:`SAMPLE` read), its lender queues among
    ``cluster_queues`` (names of ClusterQueues idleshare did not label), its field managers on ``managed`` objects
    idleshare created. Each sign is a phrase; none: not seen."""
    signs = []
    if labelled_namespaces:
        shown = sorted(labelled_namespaces)[:SAMPLE]
        more = ", …" if len(labelled_namespaces) >= SAMPLE else ""
        signs.append(f"namespaces labelled {HYPERPOD_MANAGED_NAMESPACE_SELECTOR} ({', '.join(shown)}{more})")
    lenders = sorted(n for n in cluster_queues if n.startswith(HYPERPOD_LENDER_QUEUE_PREFIX))
    if lenders:
        more = f", … {len(lenders)} in all" if len(lenders) > SAMPLE else ""
        signs.append(f"its unallocated-resource-sharing ClusterQueues ({', '.join(lenders[:SAMPLE])}{more})")
    written: dict[str, set[str]] = {}
    for obj in managed:
        if created_by_idleshare(obj):
            for entry in _entries(obj):
                manager = str(entry.get("manager") or "")
                if is_hyperpod_manager(manager):
                    written.setdefault(manager, set()).add(_name(obj))
    for manager, objects in sorted(written.items()):
        more = f", … {len(objects)} in all" if len(objects) > SAMPLE else ""
        signs.append(f"field manager {manager} on {', '.join(sorted(objects)[:SAMPLE])}{more}")
    return signs


def hyperpod_issues(signs: Sequence[str]) -> list[Issue]:
    """The :data:`HYPERPOD_TASK_GOVERNANCE_ACTIVE` error naming ``signs``, or none."""
    if not signs:
        return []
    return [
        Issue(
            "error",
            HYPERPOD_TASK_GOVERNANCE_ACTIVE,
            "HyperPod task governance",
            "HyperPod task governance is active on this cluster (" + "; ".join(signs) + "): it and idleshare both "
            "write Kueue quotas here, and task governance may overwrite idleshare's queues. Only one of the two "
            "should govern the cluster. To keep idleshare (it is configured for this cluster): adopt the compute "
            "quotas (idleshare quota import), then delete task governance's policies (aws sagemaker "
            "delete-compute-quota for each, delete-cluster-scheduler-config), keeping the task-governance add-on if "
            "it is what installs the cluster's Kueue. To keep task governance: idleshare uninstall, and remove the "
            "cluster from idleshare's config. Meanwhile task governance's admission policy and idleshare's "
            "(idleshare-queue-name) both apply where both cover a namespace: a Job needs its team's queue label for "
            "each (set admission_policy false on this cluster to leave admission to task governance)",
        )
    ]


def other_writer_issues(
    managed: Iterable[Mapping[str, Any]], labelled_namespaces: Sequence[str], cluster_queues: Iterable[str]
) -> list[Issue]:
    """Every issue of this module, from one read of the cluster (see :func:`hyperpod_signs`)."""
    managed = list(managed)
    return dynamic_quota_issues(managed) + hyperpod_issues(hyperpod_signs(managed, labelled_namespaces, cluster_queues))
