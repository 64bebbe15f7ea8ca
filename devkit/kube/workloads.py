"""Teams' work as Kueue sees it: submit ``Workload`` s or ``batch/v1`` Jobs to a team's LocalQueue, finish them,
and read what the real Kueue decided — admitted (and how much the team borrows), pending with Kueue's own
reason, preempted.

A ``Workload`` here is what Kueue's job integrations create for a Job (:func:`workload_of`); submitting it
directly keeps the tests about admission alone (no pods: Kueue admits by quota). What a Job controller does when Kueue evicts its
workload — stop the pods, then release the quota — is :func:`release_evicted`. A Job (:func:`batch_job`, what
users submit, and what the scenarios' ``submit`` steps create) goes through Kueue's Job integration instead:
Kueue makes its Workload (resolving its priority class) and unsuspends the Job when it admits it; the stack's
job controller creates its pods and kube-scheduler binds them to nodes of the flavor Kueue chose (its node
labels, which Kueue injects as the pods' node selector): :func:`placement` reads where they went. Kueue suspends
the Job again when it preempts it: the job controller deletes its pods and Kueue releases the quota. A Job
finishes as a kubelet would report it (:func:`finish_job`: its pods ``Succeeded``), and the job controller and
Kueue do the rest. No kubelet runs: a bound pod stays ``Pending`` (:mod:`devkit.kube.placement`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from devkit.kube.client import KUEUE, Kube
from idleshare.domain.model import DEFAULT_NAMESPACE_PREFIX, Settings
from idleshare.domain.naming import cluster_queue_name, local_queue_name, namespace_name, priority_class_name
from idleshare.domain.quantity import parse_quantity

ADMITTED, PENDING, PREEMPTED, EVICTED, FINISHED = "Admitted", "Pending", "Preempted", "Evicted", "Finished"


def namespace_of(team: str, prefix: str = DEFAULT_NAMESPACE_PREFIX) -> str:
    return namespace_name(team, Settings(namespace_prefix=prefix))


def local_queue_of(team: str, prefix: str = DEFAULT_NAMESPACE_PREFIX) -> str:
    return local_queue_name(team, Settings(namespace_prefix=prefix))


def cluster_queue_of(team: str, prefix: str = DEFAULT_NAMESPACE_PREFIX) -> str:
    return cluster_queue_name(team, Settings(namespace_prefix=prefix))


QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"


def batch_job(
    team: str,
    name: str,
    requests: Mapping[str, str | int],
    *,
    count: int = 1,
    priority_class: str | None = None,
    instance_type: str | None = None,
    prefix: str = DEFAULT_NAMESPACE_PREFIX,
) -> dict[str, Any]:
    """What a user submits: a suspended ``batch/v1`` Job of ``count`` pods (parallelism and completions) each asking
    for ``requests`` (as requests and limits), labelled with the team's LocalQueue (and ``priority_class``, a
    WorkloadPriorityClass name); Kueue makes its Workload. ``instance_type``: the pods' node selector."""
    labels = {QUEUE_LABEL: local_queue_of(team, prefix), "idleshare.io/team": team}
    if priority_class:
        labels[PRIORITY_LABEL] = priority_class
    amounts = {k: str(v) for k, v in requests.items()}
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "train",
                "image": "public.ecr.aws/docker/library/busybox:stable",
                "resources": {"requests": amounts, "limits": dict(amounts)},
            }
        ],
    }
    if instance_type:
        pod["nodeSelector"] = {"node.kubernetes.io/instance-type": instance_type}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace_of(team, prefix), "labels": labels},
        "spec": {"parallelism": count, "completions": count, "suspend": True, "template": {"spec": pod}},
    }


def workload_of(job: Mapping[str, Any]) -> dict[str, Any]:
    """The v1beta2 Workload Kueue's Job integration makes for ``job`` (:func:`batch_job`): its pods as one pod set,
    its LocalQueue, its priority class. Submitted directly, it keeps a test about admission alone (no Job controller,
    no pods)."""
    meta, labels = job["metadata"], job["metadata"]["labels"]
    spec: dict[str, Any] = {
        "queueName": labels[QUEUE_LABEL],
        "podSets": [{"name": "main", "count": job["spec"]["parallelism"], "template": job["spec"]["template"]}],
    }
    if PRIORITY_LABEL in labels:
        spec["priorityClassRef"] = {
            "group": "kueue.x-k8s.io",
            "kind": "WorkloadPriorityClass",
            "name": labels[PRIORITY_LABEL],
        }
    return {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "labels": {"idleshare.io/team": labels["idleshare.io/team"]},
        },
        "spec": spec,
    }


def _owned_by_job(w: Mapping[str, Any]) -> str | None:
    for o in w["metadata"].get("ownerReferences") or []:
        if o.get("kind") == "Job":
            return str(o.get("name"))
    return None


def workload_of_job(kube: Kube, job: Mapping[str, Any]) -> dict[str, Any] | None:
    """The Workload Kueue made for ``job`` (its owner), or None while there is none."""
    meta = job["metadata"]
    return next((w for w in kube.objects("Workload", meta["namespace"]) if _owned_by_job(w) == meta["name"]), None)


def job_running(kube: Kube, job: Mapping[str, Any]) -> bool:
    """Kueue admitted the Job: it unsuspended it (and has not suspended it again)."""
    current = kube.get("Job", job["metadata"]["name"], job["metadata"]["namespace"])
    return current is not None and current["spec"].get("suspend") is False


def settle_jobs(kube: Kube, jobs: Iterable[Mapping[str, Any]], *, quiet: float = 1.0, timeout: float = 60.0) -> None:
    """Until Kueue decided about every Job (its Workload exists and no eviction is half done: a preempted Job's
    quota is released once Kueue has suspended it) and nothing moved for ``quiet`` seconds. Kueue writes a reason
    on the first pending Workload of a queue it tried; the ones behind it wait without one, so a pending Workload
    counts as decided once nothing moves."""
    wanted = [(j["metadata"]["namespace"], j["metadata"]["name"]) for j in jobs]

    def look() -> tuple[list[Any], bool]:
        workloads: dict[tuple[str, str], dict[str, Any]] = {}
        suspended: dict[tuple[str, str], Any] = {}
        for ns in sorted({ns for ns, _ in wanted}):
            for w in kube.objects("Workload", ns):
                if (owner := _owned_by_job(w)) is not None:
                    workloads[(ns, owner)] = w
            for j in kube.objects("Job", ns):
                suspended[(ns, j["metadata"]["name"])] = j["spec"].get("suspend")
        snapshot = []
        for key in wanted:
            w = workloads.get(key)
            conds = conditions(w) if w else {}
            evicting = conds.get("QuotaReserved", {}).get("status") == "True" and (
                conds.get("Evicted", {}).get("status") == "True"
            )
            state = state_of(w).state if w else ""
            snapshot.append((key[1], suspended.get(key), state, w is not None and not evicting))
        return snapshot, all(s[3] for s in snapshot)

    _until_quiet(look, "the Jobs", quiet=quiet, timeout=timeout)


def _until_quiet(look: Callable[[], tuple[list[Any], bool]], what: str, *, quiet: float, timeout: float) -> None:
    """Poll ``look`` (a snapshot, and whether Kueue has decided about everything in it) until it is decided and
    has not changed for ``quiet`` seconds; TimeoutError (naming ``what`` and the last snapshot) after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: Any = None
    since = time.monotonic()
    while time.monotonic() < deadline:
        snapshot, decided = look()
        if snapshot != last:
            last, since = snapshot, time.monotonic()
        elif decided and time.monotonic() - since >= quiet:
            return
        time.sleep(0.1)
    raise TimeoutError(f"Kueue did not settle {what} in {timeout:.0f} s: {last}")


def submit(kube: Kube, wl: dict[str, Any]) -> dict[str, Any]:
    return kube.create(wl)


def conditions(wl: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (wl.get("status") or {}).get("conditions") or []}


@dataclass(frozen=True)
class WorkloadState:
    team: str
    name: str
    state: str  # Admitted | Pending | Preempted | Evicted | Finished
    message: str = ""
    reason: str = ""
    flavors: Mapping[str, str] = field(default_factory=dict)  # resource -> flavor it was admitted on


def state_of(wl: Mapping[str, Any]) -> WorkloadState:
    conds = conditions(wl)
    meta = wl["metadata"]
    team = (meta.get("labels") or {}).get("idleshare.io/team", meta.get("namespace", ""))

    def is_true(kind: str) -> bool:
        return conds.get(kind, {}).get("status") == "True"

    flavors: dict[str, str] = {}
    for psa in ((wl.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []:
        flavors.update(psa.get("flavors") or {})
    if is_true("Finished"):
        return WorkloadState(team, meta["name"], FINISHED, conds["Finished"].get("message", ""))
    if is_true("Preempted"):
        c = conds["Preempted"]
        return WorkloadState(team, meta["name"], PREEMPTED, c.get("message", ""), c.get("reason", ""), flavors)
    if is_true("Evicted"):
        c = conds["Evicted"]
        return WorkloadState(team, meta["name"], EVICTED, c.get("message", ""), c.get("reason", ""), flavors)
    if is_true("QuotaReserved"):
        return WorkloadState(team, meta["name"], ADMITTED, "", "", flavors)
    c = conds.get("QuotaReserved", {})
    return WorkloadState(team, meta["name"], PENDING, c.get("message", ""), c.get("reason", ""))


def states(kube: Kube, namespace: str | None = None) -> dict[str, WorkloadState]:
    """Every workload's state, by name."""
    return {w["metadata"]["name"]: state_of(w) for w in kube.objects("Workload", namespace)}


def wait_state(kube: Kube, wl: Mapping[str, Any], *wanted: str, timeout: float = 30.0) -> WorkloadState:
    """Poll until the workload is in one of ``wanted`` states (and, for Pending, Kueue has said why)."""
    meta = wl["metadata"]

    def reached() -> WorkloadState | None:
        current = kube.get("Workload", meta["name"], meta["namespace"])
        if current is None:
            return None
        st = state_of(current)
        if st.state in wanted and (st.state != PENDING or st.message):
            return st
        return None

    try:
        return kube.wait_for(reached, f"workload {meta['name']} {'/'.join(wanted)}", timeout=timeout)
    except TimeoutError as exc:
        current = kube.get("Workload", meta["name"], meta["namespace"])
        seen = [
            (c["type"], c["status"], c.get("reason")) for c in (current or {}).get("status", {}).get("conditions") or []
        ]
        raise TimeoutError(f"{exc}: it is {state_of(current) if current else 'gone'}; conditions {seen}") from None


def wait_any(kube: Kube, wls: Iterable[Mapping[str, Any]], *wanted: str, timeout: float = 30.0) -> WorkloadState:
    """The first of ``wls`` to reach one of ``wanted`` states."""
    metas = [w["metadata"] for w in wls]

    def reached() -> WorkloadState | None:
        for meta in metas:
            current = kube.get("Workload", meta["name"], meta["namespace"])
            if current is not None and (st := state_of(current)).state in wanted:
                return st
        return None

    return kube.wait_for(reached, f"one of {[m['name'] for m in metas]} {'/'.join(wanted)}", timeout=timeout)


def settle(kube: Kube, names: Iterable[tuple[str, str]], *, quiet: float = 1.5, timeout: float = 30.0) -> None:
    """Wait until Kueue has decided about every named workload ((namespace, name): admitted, or pending with a
    reason) and nothing changed for ``quiet`` seconds."""
    wanted = list(names)

    def look() -> tuple[list[Any], bool]:
        snapshot = []
        for ns, name in wanted:
            wl = kube.get("Workload", name, ns)
            st = state_of(wl) if wl else None
            snapshot.append((name, st.state if st else None, st.message if st else None))
        return snapshot, all(s is not None and (s != PENDING or m) for _, s, m in snapshot)

    _until_quiet(look, "the workloads", quiet=quiet, timeout=timeout)


def finish(kube: Kube, wl: Mapping[str, Any], message: str = "the job completed") -> None:
    """Mark a workload Finished, as its job's controller does when the job ends: Kueue releases its quota."""
    meta = wl["metadata"]
    kube.set_status(
        "Workload",
        meta["name"],
        {
            "conditions": [
                *(
                    (kube.get("Workload", meta["name"], meta["namespace"]) or {}).get("status", {}).get("conditions")
                    or []
                ),
                {
                    "type": "Finished",
                    "status": "True",
                    "reason": "Succeeded",
                    "message": message,
                    "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                },
            ]
        },
        meta["namespace"],
    )


JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
"""The label the job controller puts on every pod of a Job."""


def pods_of_job(kube: Kube, job: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The Job's pods that still count: not ended, not being deleted (a preempted Job's old pods are)."""
    meta = job["metadata"]
    pods = kube.objects("Pod", meta["namespace"], labels=f"{JOB_NAME_LABEL}={meta['name']}")
    return [
        p
        for p in pods
        if not p["metadata"].get("deletionTimestamp") and (p.get("status") or {}).get("phase") not in ENDED_PHASES
    ]


ENDED_PHASES = ("Succeeded", "Failed")


@dataclass(frozen=True)
class Placement:
    """Where a Job's pods went, against the flavor Kueue admitted it on."""

    job: str
    state: str
    """Its Workload's state (:func:`state_of`)."""
    flavors: tuple[str, ...]
    """The ResourceFlavors Kueue assigned its pod set."""
    expected: int
    """The pods the Job runs at once (``parallelism``)."""
    pods: dict[str, str]
    """pod -> the node it is bound to ("" while unbound)."""
    wrong_nodes: dict[str, str]
    """pod -> node, for pods bound to a node none of whose labels match the flavor's ``nodeLabels``."""
    unschedulable: dict[str, str]
    """pod -> the scheduler's message, for pods it could not place (``PodScheduled=False``)."""

    @property
    def placed(self) -> bool:
        """Every pod of the admitted Job exists and is bound to a node of its flavor."""
        return (
            self.state == ADMITTED
            and len(self.pods) == self.expected
            and all(self.pods.values())
            and not self.wrong_nodes
        )


def placement(kube: Kube, job: Mapping[str, Any]) -> Placement | None:
    """Where the pods of ``job`` are, if Kueue admitted it (else None): each bound to a node, or not yet, and
    whether that node carries every ``nodeLabels`` of the flavor Kueue chose."""
    current = workload_of_job(kube, job)
    if current is None:
        return None
    st = state_of(current)
    if st.state != ADMITTED:
        return None
    flavors = tuple(sorted(set(st.flavors.values())))
    wanted: dict[str, str] = {}
    for name in flavors:
        rf = kube.get("ResourceFlavor", name) or {}
        wanted.update((rf.get("spec") or {}).get("nodeLabels") or {})
    nodes = {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in kube.objects("Node")}
    pods: dict[str, str] = {}
    wrong: dict[str, str] = {}
    unschedulable: dict[str, str] = {}
    for pod in pods_of_job(kube, job):
        name, node = pod["metadata"]["name"], (pod.get("spec") or {}).get("nodeName", "")
        pods[name] = node
        if node and any(nodes.get(node, {}).get(k) != v for k, v in wanted.items()):
            wrong[name] = node
        for c in (pod.get("status") or {}).get("conditions") or []:
            if c.get("type") == "PodScheduled" and c.get("status") == "False":
                unschedulable[name] = f"{c.get('reason', '')}: {c.get('message', '')}"
    expected = int((job.get("spec") or {}).get("parallelism", 1))
    return Placement(job["metadata"]["name"], st.state, flavors, expected, pods, wrong, unschedulable)


def wait_placed(kube: Kube, jobs: Iterable[Mapping[str, Any]], *, timeout: float = 30.0) -> list[Placement]:
    """Until every pod of every admitted Job of ``jobs`` is bound to a node of the flavor Kueue chose (Jobs not
    admitted have no pods to place); AssertionError naming the pods that are not after ``timeout`` seconds."""
    jobs = list(jobs)
    last: list[Placement] = []

    def all_placed() -> bool:
        last[:] = [p for j in jobs if (p := placement(kube, j)) is not None]
        return all(p.placed for p in last)

    try:
        kube.wait_for(all_placed, "every admitted Job's pods placed", timeout=timeout, interval=0.2)
    except TimeoutError as exc:
        bad = [p for p in last if not p.placed]
        raise AssertionError(f"{exc}: {bad}") from None
    return last


def finish_job(kube: Kube, job: Mapping[str, Any], *, timeout: float = 30.0) -> None:
    """The Job completes as its kubelet reports it: each of its pods ``Succeeded`` (exit 0); the job controller
    completes the Job, Kueue finishes its Workload and releases its quota (waited for). A Job with no pods (a
    stack without the job controller, or not running) has its Workload marked Finished instead (:func:`finish`)."""
    from devkit.kube.placement import complete_pods

    meta = job["metadata"]
    current = workload_of_job(kube, job)
    if current is None:
        raise RuntimeError(f"finish {meta['name']!r}: Kueue made no Workload for the Job")
    pods: list[dict[str, Any]] = []
    if job_running(kube, job) and getattr(kube.stack, "kubelet", None) is not None:  # the stack places pods
        expected = int((job.get("spec") or {}).get("parallelism", 1))

        def created() -> list[dict[str, Any]]:
            found = pods_of_job(kube, job)
            return found if len(found) >= expected else []

        pods = kube.wait_for(created, f"the pods of Job {meta['name']}", timeout=timeout)
    if not pods:
        finish(kube, current)
        return
    unbound = {
        p["metadata"]["name"]: " ".join(
            c.get("message", "") for c in (p.get("status") or {}).get("conditions") or [] if c["type"] == "PodScheduled"
        )
        for p in pods
        if not (p.get("spec") or {}).get("nodeName")
    }
    if unbound:
        raise RuntimeError(f"finish {meta['name']!r}: pods not bound to a node (no kubelet could run them): {unbound}")
    complete_pods(pods, lambda pod, status: kube.set_status("Pod", pod["metadata"]["name"], status, meta["namespace"]))
    wait_state(kube, current, FINISHED, timeout=timeout)


def wait_active(kube: Kube, team: str, prefix: str = DEFAULT_NAMESPACE_PREFIX, timeout: float = 30.0) -> None:
    """Until Kueue marks the team's ClusterQueue Active (its flavors and cohort exist): before that it admits
    nothing, and workloads queued meanwhile would all be decided at once, in an order Kueue picks."""

    def active() -> bool:
        cq = kube.get("ClusterQueue", cluster_queue_of(team, prefix)) or {}
        return any(
            c["type"] == "Active" and c["status"] == "True" for c in (cq.get("status") or {}).get("conditions") or []
        )

    kube.wait_for(active, f"ClusterQueue of {team} active", timeout=timeout)


def release_evicted(kube: Kube, wl: Mapping[str, Any]) -> None:
    """What a Job controller does when Kueue evicts its workload: once the pods are gone, the quota reservation
    is released (``QuotaReserved`` False, no ``admission``) and the workload queues again."""
    meta = wl["metadata"]
    current = kube.get("Workload", meta["name"], meta["namespace"]) or {}
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    conds = [
        c
        for c in (current.get("status") or {}).get("conditions") or []
        if c["type"] not in ("QuotaReserved", "Admitted")
    ]
    conds += [
        {
            "type": "QuotaReserved",
            "status": "False",
            "reason": "Pending",
            "message": "evicted: the job stopped",
            "lastTransitionTime": now,
        },
        {
            "type": "Admitted",
            "status": "False",
            "reason": "NoReservation",
            "message": "evicted",
            "lastTransitionTime": now,
        },
    ]
    kube.request(
        "PATCH",
        kube.path("Workload", meta["name"], meta["namespace"], "status"),
        {"status": {"admission": None, "conditions": conds}},
        content_type="application/merge-patch+json",
    )


def cluster_queue_usage(
    kube: Kube, team: str, prefix: str = DEFAULT_NAMESPACE_PREFIX
) -> dict[str, dict[str, dict[str, str]]]:
    """``{flavor: {resource: {"total": q, "borrowed": q}}}`` from the team's ClusterQueue status (what Kueue
    has reserved for admitted workloads, and how much of it is borrowed from the cohort)."""
    cq = kube.get("ClusterQueue", cluster_queue_of(team, prefix)) or {}
    out: dict[str, dict[str, dict[str, str]]] = {}
    for fl in (cq.get("status") or {}).get("flavorsReservation") or []:
        for res in fl.get("resources") or []:
            out.setdefault(fl["name"], {})[res["name"]] = {
                "total": str(res.get("total", "0")),
                "borrowed": str(res.get("borrowed", "0")),
            }
    return out


def reserved_by_workloads(kube: Kube, team: str, prefix: str = DEFAULT_NAMESPACE_PREFIX) -> dict[tuple[str, str], Any]:
    """``{(flavor, resource): quantity}`` the team's Workloads hold now (quota reserved, not finished), from their
    own ``status.admission``: what its ClusterQueue's status must add up to once Kueue has written it."""
    out: dict[tuple[str, str], Any] = {}
    for w in kube.objects("Workload", namespace_of(team, prefix)):
        conds = conditions(w)
        if conds.get("QuotaReserved", {}).get("status") != "True" or conds.get("Finished", {}).get("status") == "True":
            continue
        for psa in ((w.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []:
            flavors = psa.get("flavors") or {}
            for resource, q in (psa.get("resourceUsage") or {}).items():
                key = (flavors.get(resource, ""), resource)
                out[key] = out.get(key, 0) + parse_quantity(str(q))
    return {k: v for k, v in out.items() if v}


def wait_usage_caught_up(kube: Kube, teams: Iterable[str], timeout: float = 10.0) -> bool:
    """Until each team's ClusterQueue status (``flavorsReservation``, which Kueue writes a moment after it admits or
    releases) adds up to what its Workloads hold, at most ``timeout`` seconds; whether it did."""

    def caught_up() -> bool:
        for team in teams:
            cq = {
                (flavor, resource): parse_quantity(per["total"])
                for flavor, by_resource in cluster_queue_usage(kube, team).items()
                for resource, per in by_resource.items()
                if parse_quantity(per["total"])
            }
            if cq != reserved_by_workloads(kube, team):
                return False
        return True

    deadline = time.monotonic() + timeout
    while not caught_up():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


@dataclass
class Observed:
    """What Kueue did after a scenario step (:meth:`Workloads.observe`)."""

    workloads: list[dict[str, Any]] = field(default_factory=list)
    """``{team, name, state, reason, message, priorityClass}`` for every submitted Job, in submission order."""
    borrowed: dict[str, dict[str, dict[str, str]]] = field(default_factory=dict)
    """``{team: {flavor: {resource: quantity}}}`` each team's ClusterQueue borrows from the cohort (its status)."""
    fair_sharing: dict[str, Any] = field(default_factory=dict)
    """Why Kueue shared the borrowed capacity so: ``{"lendable": {resource: quantity}, "teams": {team: {"weight":
    "1" | None, "weightedShare": int | None}}}`` — each ClusterQueue's ``spec.fairSharing.weight`` (None: Kueue's
    default 1) and the dominant resource share Kueue reports in its status (None: Kueue's fair sharing is off);
    ``lendable``: what the cohort's ClusterQueues and the Cohort itself may lend, per resource over every flavor
    (Kueue's denominator of the share)."""


def lendable(objects: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Per resource name, summed over flavors: what the Cohort holds and each ClusterQueue may lend (its
    ``lendingLimit``, else its ``nominalQuota``) — Kueue's denominator of a ClusterQueue's dominant resource share
    in a one-level cohort. Whole units (``1k`` cpu, ``2Gi`` memory as bytes)."""
    out: dict[str, int] = {}
    for obj in objects:
        if obj.get("kind") == "ClusterQueue" and not (obj.get("spec") or {}).get("cohortName"):
            continue  # not in a cohort: lends nothing
        if obj.get("kind") not in ("ClusterQueue", "Cohort"):
            continue
        for group in (obj.get("spec") or {}).get("resourceGroups") or []:
            for flavor in group.get("flavors") or []:
                for res in flavor.get("resources") or []:
                    amount = res.get("lendingLimit", res.get("nominalQuota", "0"))
                    out[res["name"]] = out.get(res["name"], 0) + int(parse_quantity(str(amount)))
    return out


class Workloads:
    """The teams' work in a scenario (``submit`` / ``finish`` steps) on the real cluster, as users submit it:
    ``batch/v1`` Jobs in the team's LocalQueue, with the priority class they name. After every step
    :meth:`observe` waits until Kueue has decided about each Job (a Job Kueue preempted queues again)."""

    def __init__(self, kube: Any, *, source: str = "scenario") -> None:
        self.kube = kube if isinstance(kube, Kube) else None
        self.source = source
        self.submitted: dict[str, dict[str, Any]] = {}
        """Job name -> the Job as submitted."""
        self.priority: dict[str, str] = {}
        """Job name -> the SchedulerConfig priority class it names."""

    def _require(self, what: str) -> Kube:
        if self.kube is None:
            raise RuntimeError(f"{self.source}: {what} needs the real Kueue (devkit.kube.stack)")
        return self.kube

    def submit(self, items: Iterable[Mapping[str, Any]]) -> None:
        kube = self._require("submit")
        for item in items:
            if item["name"] in self.submitted:
                raise RuntimeError(f"{self.source}: submit {item['name']!r}: a Job of that name was submitted before")
            wait_active(kube, item["team"])
            pc = item.get("priorityClass")
            body = batch_job(
                item["team"],
                item["name"],
                item["requests"],
                count=int(item.get("count", 1)),
                instance_type=item.get("instanceType"),
                priority_class=priority_class_name(pc) if pc else None,
            )
            kube.create(body)
            self.submitted[item["name"]] = body
            if pc:
                self.priority[item["name"]] = pc
            kube.wait_for(lambda body=body: workload_of_job(kube, body), f"the Workload of Job {item['name']}")
            # one after the other, as people submit (Kueue orders ties in creation time arbitrarily), each decided
            # with whatever it preempted before the next
            settle_jobs(kube, self.submitted.values(), quiet=0.3)

    def finish(self, names: Iterable[str]) -> None:
        """Each Job completes as a kubelet reports it (its pods ``Succeeded``, :func:`finish_job`): the job
        controller completes it, Kueue finishes its Workload and releases its quota."""
        kube = self._require("finish")
        for name in names:
            if name not in self.submitted:
                raise RuntimeError(f"{self.source}: finish {name!r}: no workload of that name was submitted")
            try:
                finish_job(kube, self.submitted[name])
            except RuntimeError as exc:
                raise RuntimeError(f"{self.source}: {exc}") from None

    def observe(self) -> Observed:
        """Once Kueue has settled: every Job's state, what each team borrows, and the shares Kueue gave them."""
        if self.kube is None or not self.submitted:
            return Observed()
        kube = self.kube
        settle_jobs(kube, self.submitted.values(), quiet=1.0)
        wait_usage_caught_up(kube, {b["metadata"]["labels"]["idleshare.io/team"] for b in self.submitted.values()})
        out = Observed()
        teams: list[str] = []
        for name, body in self.submitted.items():
            team = body["metadata"]["labels"]["idleshare.io/team"]
            if team not in teams:
                teams.append(team)
            current = workload_of_job(kube, body)
            st = state_of(current) if current else WorkloadState(team, name, "Gone")
            out.workloads.append(
                {
                    "team": team,
                    "name": name,
                    "state": st.state,
                    "reason": st.reason,
                    "message": st.message,
                    **({"priorityClass": self.priority[name]} if name in self.priority else {}),
                }
            )
        queues = {cq["metadata"]["name"]: cq for cq in kube.objects("ClusterQueue")}
        shares: dict[str, Any] = {}
        for team in sorted(teams):
            for flavor, per in cluster_queue_usage(kube, team).items():
                for resource, usage in per.items():
                    if usage["borrowed"] not in ("0", ""):
                        out.borrowed.setdefault(team, {}).setdefault(flavor, {})[resource] = usage["borrowed"]
            cq = queues.get(cluster_queue_of(team), {})
            weight = ((cq.get("spec") or {}).get("fairSharing") or {}).get("weight")
            share = ((cq.get("status") or {}).get("fairSharing") or {}).get("weightedShare")
            shares[team] = {
                "weight": None if weight is None else str(weight),
                "weightedShare": None if share is None else int(share),
            }
        out.fair_sharing = {
            "lendable": {r: str(q) for r, q in sorted(lendable([*queues.values(), *kube.objects("Cohort")]).items())},
            "teams": shares,
        }
        return out
