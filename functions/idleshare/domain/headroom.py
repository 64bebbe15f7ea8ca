"""Headroom: what a node's allocatable keeps for the pods that are not Kueue's to admit (docs/spec.md §2).

``reserve(nodes, daemonsets, pods, mode, kueue_owners)`` returns the nodes with their allocatable reduced, and per
node what was taken. Pure: the DaemonSets and pods come parsed (``idleshare.parse.workloads``), matched here the way
the DaemonSet controller and kube-scheduler match them.

Whose a bound pod is, is decided by what was read, never by what the pod says of itself (issue 41: its labels and
owner references are whatever its creator wrote): a DaemonSet's when its controlling owner is an ``apps/v1``
DaemonSet read (:func:`daemonset_of`, by uid); Kueue's when an admitted Workload read owns it
(:func:`kueue_owners`, :func:`is_kueue_pod`: the usage sample's match, by uid). :func:`pod_charge` is what each
bound pod adds.
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


Templates = Mapping[tuple[str, str], tuple[DaemonSet, Mapping[str, Amount]]]
"""Every DaemonSet read with its template's request (:func:`pod_request`), by (namespace, uid)."""


def daemonsets_by_uid(daemonsets: Iterable[DaemonSet]) -> dict[tuple[str, str], tuple[DaemonSet, dict[str, Amount]]]:
    """:data:`Templates` of ``daemonsets`` (one without a uid, as a hand-written file may hold: none)."""
    return {(ds.namespace, ds.uid): (ds, pod_request(ds.requests)) for ds in daemonsets if ds.uid}


def daemonset_of(pod: Pod, daemonsets: Templates) -> tuple[DaemonSet, Mapping[str, Amount]] | None:
    """The DaemonSet read (``daemonsets``: :func:`daemonsets_by_uid`), and its template's request, that the pod's
    controlling owner reference (``controller: true``, ``apps/v1``, ``DaemonSet``) names by uid, in the pod's
    namespace; None for any other owner of kind DaemonSet (not the controller, another group or version, a uid not
    read): it proves nothing."""
    controller = next((o for o in pod.owners if o.controller), None)
    if controller is None or controller.api_version != DAEMONSET_API_VERSION or controller.kind != "DaemonSet":
        return None
    return daemonsets.get((pod.namespace, controller.uid))


def is_kueue_pod(pod: Pod, kueue: Owners) -> bool:
    """Whether an admitted Workload read owns the pod (``kueue``: :func:`kueue_owners`): the pod's own uid (a plain
    pod Kueue manages) or one of its owners' (the Job of a Workload) is the Workload's owner, in the pod's
    namespace. Its requests are in Kueue's usage. Kueue's labels on a pod prove nothing."""
    return any((pod.namespace, uid) in kueue for uid in (pod.uid, *(o.uid for o in pod.owners)) if uid)


def pod_charge(pod: Pod, node: Node | None, daemonsets: Templates, kueue: Owners) -> dict[str, Amount]:
    """What a bound pod adds to its node's headroom on ``all`` (``node``: the pod's node, None if not read).
    Nothing for a finished or unbound pod, or Kueue's (:func:`is_kueue_pod`: in Kueue's usage). A DaemonSet's pod
    (:func:`daemonset_of`) on a node its DaemonSet runs on: what it requests beyond the template, which is charged
    there already (a pod from an older template, or one written with its DaemonSet's uid, holds the rest). Any
    other pod: its request."""
    if not pod.node_name or pod.phase in FINISHED_PHASES or is_kueue_pod(pod, kueue):
        return {}
    request = pod_request(pod.requests)
    owner = daemonset_of(pod, daemonsets)
    if owner is None or node is None or not runs_on(owner[0], node):
        return request
    template = owner[1]
    return {r: exact(q - template.get(r, 0)) for r, q in request.items() if q > template.get(r, 0)}


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
        by_uid = daemonsets_by_uid(daemonsets)
        by_name = {n.name: n for n in nodes if not n.unreadable}
        for pod in pods:
            adds = pod_charge(pod, by_name.get(pod.node_name), by_uid, kueue)
            if adds:
                _add(charges[pod.node_name], adds)
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
