"""Headroom: what a node's allocatable keeps for the pods that are not Kueue's to admit (docs/spec.md §2).

``reserve(nodes, daemonsets, pods, mode, kueue_owners)`` returns the nodes with their allocatable reduced, and per
node what was taken. Pure: the DaemonSets and pods come parsed (``idleshare.parse.workloads``), matched here the way
the DaemonSet controller and kube-scheduler match them.

Whose a bound pod is, is decided by what was read, never by what the pod says of itself (issue 41: its labels and
owner references are whatever its creator wrote): a DaemonSet's when its controlling owner is an ``apps/v1``
DaemonSet read (:func:`is_daemonset_pod`, by uid); Kueue's when an admitted Workload read owns it
(:func:`kueue_owners`, :func:`is_kueue_pod`: the usage sample's match, by uid).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import replace

from idleshare.domain.model import (
    BLOCKING_TAINT_EFFECTS,
    Amount,
    DaemonSet,
    Headroom,
    Node,
    Pod,
    PodRequests,
    Requirement,
    Resources,
    SelectorTerm,
    Taint,
    Toleration,
)
from idleshare.domain.quantity import exact
from idleshare.domain.usage import WorkloadStatus, is_admitted

FINISHED_PHASES = frozenset({"Succeeded", "Failed"})
DAEMONSET_TOLERATIONS = (
    Toleration("node.kubernetes.io/not-ready", "Exists", None, "NoExecute"),
    Toleration("node.kubernetes.io/unreachable", "Exists", None, "NoExecute"),
    Toleration("node.kubernetes.io/disk-pressure", "Exists", None, "NoSchedule"),
    Toleration("node.kubernetes.io/memory-pressure", "Exists", None, "NoSchedule"),
    Toleration("node.kubernetes.io/pid-pressure", "Exists", None, "NoSchedule"),
    Toleration("node.kubernetes.io/unschedulable", "Exists", None, "NoSchedule"),
)
"""What the DaemonSet controller adds to every DaemonSet pod (``AddOrUpdateDaemonPodTolerations``)."""


# -- a pod's request ----------------------------------------------------------------------------------------
def _add(into: dict[str, Amount], amounts: Mapping[str, Amount]) -> None:
    for r, q in amounts.items():
        into[r] = into.get(r, 0) + q


def pod_request(requests: PodRequests) -> dict[str, Amount]:
    """What kube-scheduler reserves for one pod (``resourcehelper.PodRequests``): per resource,
    max(Σ containers + Σ sidecars, max over init containers i of (i + the sidecars started before i)) + overhead."""
    total: dict[str, Amount] = {}
    for container in requests.containers:
        _add(total, container)
    sidecars: dict[str, Amount] = {}
    init_peak: dict[str, Amount] = {}
    for amounts, sidecar in requests.init_containers:
        if sidecar:
            _add(total, amounts)  # runs beside the containers for the pod's whole life
            _add(sidecars, amounts)
            during = dict(sidecars)
        else:
            during = dict(sidecars)
            _add(during, amounts)
        for r, q in during.items():
            if q > init_peak.get(r, 0):
                init_peak[r] = q
    for r, q in init_peak.items():
        if q > total.get(r, 0):
            total[r] = q
    _add(total, requests.overhead)
    return {r: exact(q) for r, q in sorted(total.items()) if q > 0}


# -- where a DaemonSet runs -----------------------------------------------------------------------------------
def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """Kubernetes' ``Toleration.ToleratesTaint``: an empty effect matches every effect, an empty key with
    ``Exists`` every key; ``Equal`` (the default) compares values."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == "Exists":
        return True
    if toleration.operator in ("Equal", ""):
        return bool(toleration.key) and (toleration.value or "") == (taint.value or "")
    return False


def _requirement_holds(req: Requirement, value: str | None) -> bool:
    """One ``matchExpressions`` requirement against a label's value (None: no such label)."""
    op = req.operator
    if op == "In":
        return value is not None and value in req.values
    if op == "NotIn":
        return value is None or value not in req.values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and len(req.values) == 1:
        try:
            have, bound = int(value), int(req.values[0])
        except ValueError:
            return False
        return have > bound if op == "Gt" else have < bound
    return False


def _term_matches(term: SelectorTerm, node: Node) -> bool:
    """A node selector term: every expression on the node's labels and every field (``metadata.name`` only, ``In``
    or ``NotIn``) holds; a term with neither matches nothing (Kubernetes' ``NodeSelectorTerm``)."""
    if not term.match_expressions and not term.match_fields:
        return False
    for req in term.match_expressions:
        if not _requirement_holds(req, node.labels.get(req.key)):
            return False
    for req in term.match_fields:
        if req.key != "metadata.name" or req.operator not in ("In", "NotIn"):
            return False
        if not _requirement_holds(req, node.name):
            return False
    return True


def runs_on(daemonset: DaemonSet, node: Node) -> bool:
    """Whether the DaemonSet controller places a pod of ``daemonset`` on ``node``: its ``nodeSelector`` matches the
    node's labels, its required node affinity (any term) matches, and it tolerates every NoSchedule / NoExecute taint
    (its own tolerations and the controller's)."""
    labels = node.labels
    for key, value in daemonset.node_selector.items():
        if labels.get(key) != value:
            return False
    if daemonset.affinity_terms is not None and not any(_term_matches(t, node) for t in daemonset.affinity_terms):
        return False
    for taint in node.taints:
        if taint.effect not in BLOCKING_TAINT_EFFECTS:
            continue
        if not any(tolerates(t, taint) for t in (*daemonset.tolerations, *DAEMONSET_TOLERATIONS)):
            return False
    return True


# -- whose a bound pod is ----------------------------------------------------------------------------------------
DAEMONSET_API_VERSION = "apps/v1"
"""The one group and version whose DaemonSets the recompute reads (``list`` on ``apps/daemonsets``)."""

Owners = frozenset[tuple[str, str]]
"""(namespace, uid) pairs: owner references are namespaced, a uid only counts in its own namespace."""


def kueue_owners(workloads: Iterable[WorkloadStatus]) -> Owners:
    """(namespace, uid) of every owner of a Workload Kueue admits now (``Admitted`` True, not ``Finished``): a pod
    that is one, or is owned by one, is Kueue's. A Workload whose shape did not read owns nothing."""
    return frozenset((wl.namespace, uid) for wl in workloads if is_admitted(wl) for uid in wl.owner_uids if uid)


def daemonset_uids(daemonsets: Iterable[DaemonSet]) -> Owners:
    """(namespace, uid) of every DaemonSet read (one without a uid, as a hand-written file may hold: none)."""
    return frozenset((ds.namespace, ds.uid) for ds in daemonsets if ds.uid)


def is_daemonset_pod(pod: Pod, daemonsets: Owners) -> bool:
    """Whether the pod's controlling owner reference (``controller: true``) is an ``apps/v1`` DaemonSet that was
    read (``daemonsets``: :func:`daemonset_uids`): that DaemonSet's template is charged instead. Any other owner of
    kind DaemonSet (not the controller, another group or version, a uid not read) proves nothing."""
    controller = next((o for o in pod.owners if o.controller), None)
    return (
        controller is not None
        and controller.api_version == DAEMONSET_API_VERSION
        and controller.kind == "DaemonSet"
        and (pod.namespace, controller.uid) in daemonsets
    )


def is_kueue_pod(pod: Pod, kueue: Owners) -> bool:
    """Whether an admitted Workload read owns the pod (``kueue``: :func:`kueue_owners`): the pod's own uid (a plain
    pod Kueue manages) or one of its owners' (the Job of a Workload) is the Workload's owner, in the pod's
    namespace. Its requests are in Kueue's usage. Kueue's labels on a pod prove nothing."""
    return any((pod.namespace, uid) in kueue for uid in (pod.uid, *(o.uid for o in pod.owners)) if uid)


def counts_as_foreign(pod: Pod, daemonsets: Owners = frozenset(), kueue: Owners = frozenset()) -> bool:
    """A bound pod whose requests are headroom on ``all``: running or pending on its node, not a DaemonSet's (its
    DaemonSet is counted instead: :func:`is_daemonset_pod`) and not Kueue's (:func:`is_kueue_pod`)."""
    if not pod.node_name or pod.phase in FINISHED_PHASES:
        return False
    return not is_daemonset_pod(pod, daemonsets) and not is_kueue_pod(pod, kueue)


# -- the nodes, reduced -----------------------------------------------------------------------------------------
def reserve(
    nodes: Iterable[Node],
    daemonsets: Iterable[DaemonSet],
    pods: Iterable[Pod],
    mode: Headroom,
    kueue: Owners = frozenset(),
) -> tuple[tuple[Node, ...], dict[str, dict[str, Amount]]]:
    """The nodes with ``allocatable'`` = max(0, allocatable - headroom), and per node the amount each resource was
    actually reduced by (only nodes and resources reduced above 0, sorted). ``off``: the nodes as given. ``kueue``:
    the owners of the admitted Workloads read (:func:`kueue_owners`; on ``all``)."""
    nodes = tuple(nodes)
    if mode is Headroom.OFF:
        return nodes, {}
    daemonsets = tuple(daemonsets)
    charges: dict[str, dict[str, Amount]] = defaultdict(dict)
    requests = [(ds, pod_request(ds.requests)) for ds in daemonsets]
    requests = [(ds, req) for ds, req in requests if req]
    for node in nodes:
        if node.unreadable:
            continue
        for ds, req in requests:
            if runs_on(ds, node):
                _add(charges[node.name], req)
    if mode is Headroom.ALL:
        read = daemonset_uids(daemonsets)
        for pod in pods:
            if counts_as_foreign(pod, read, kueue):
                _add(charges[pod.node_name], pod_request(pod.requests))
    out: list[Node] = []
    taken: dict[str, dict[str, Amount]] = {}
    for node in nodes:
        charge = charges.get(node.name)
        if not charge:
            out.append(node)
            continue
        reduced, by = _reduced(node.allocatable, charge)
        out.append(replace(node, allocatable=reduced))
        if by:
            taken[node.name] = by
    return tuple(out), dict(sorted(taken.items()))


def _reduced(allocatable: Resources, charge: Mapping[str, Amount]) -> tuple[dict[str, Amount], dict[str, Amount]]:
    """allocatable less ``charge`` (never below 0: a resource the node does not report stays unreported), and what
    each resource actually lost."""
    reduced: dict[str, Amount] = {}
    by: dict[str, Amount] = {}
    for r, q in allocatable.items():
        c = charge.get(r, 0)
        left = exact(max(q - c, 0)) if c else q
        reduced[r] = left
        if left != q:
            by[r] = exact(q - left)
    return reduced, dict(sorted(by.items()))
