"""Headroom: what a node's allocatable keeps for the pods that are not Kueue's to admit (docs/spec.md §2).

``reserve(nodes, daemonsets, pods, mode)`` returns the nodes with their allocatable reduced, and per node what was
taken. Pure: the DaemonSets and pods come parsed (``idleshare.parse.workloads``), matched here the way the
DaemonSet controller and kube-scheduler match them.
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

KUEUE_POD_LABELS = ("kueue.x-k8s.io/podset", "kueue.x-k8s.io/queue-name")
"""A pod carrying either label is Kueue's: ``podset`` is set by Kueue on every pod of an admitted Workload (its job
framework's ``PodSetInfo``), ``queue-name`` on a plain pod Kueue manages. Its requests are in Kueue's usage."""
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


def counts_as_foreign(pod: Pod) -> bool:
    """A bound pod whose requests are headroom on ``all``: running or pending on its node, not a DaemonSet's (its
    DaemonSet is counted instead) and not Kueue's (:data:`KUEUE_POD_LABELS`)."""
    if not pod.node_name or pod.phase in FINISHED_PHASES or "DaemonSet" in pod.owner_kinds:
        return False
    return not any(label in pod.labels for label in KUEUE_POD_LABELS)


# -- the nodes, reduced -----------------------------------------------------------------------------------------
def reserve(
    nodes: Iterable[Node], daemonsets: Iterable[DaemonSet], pods: Iterable[Pod], mode: Headroom
) -> tuple[tuple[Node, ...], dict[str, dict[str, Amount]]]:
    """The nodes with ``allocatable'`` = max(0, allocatable - headroom), and per node the amount each resource was
    actually reduced by (only nodes and resources reduced above 0, sorted). ``off``: the nodes as given."""
    nodes = tuple(nodes)
    if mode is Headroom.OFF:
        return nodes, {}
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
        for pod in pods:
            if counts_as_foreign(pod):
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
