"""The stack places pods (issue 31): kube-scheduler and kube-controller-manager run beside Kueue, no kubelet.

Kueue admits a Job on a flavor and unsuspends it, the job controller creates its pods, the scheduler binds them to
a node of that flavor (by the node selector Kueue injects from the flavor's ``nodeLabels``); a bound pod stays
``Pending`` with ``PodScheduled=True``. A DaemonSet gets a pod on every node. A Job ends as a kubelet reports it
(its pods ``Succeeded``): the job controller completes it and Kueue finishes its Workload. A preempted Job's pods
are deleted and ended (the kubelet stand-in), so the preemptor's pods bind on the node they freed. And a pod that
fits no node is left unbound with the scheduler's reason: the placement check fails.
"""

from __future__ import annotations

from typing import Any

import pytest

from devkit.kube import placement as kube_placement
from devkit.kube import workloads as wl
from devkit.kube.client import Kube
from devkit.kube.stack import KubeStack
from tests.kube.fixtures import make_node

P5, P4D, GPU = "ml.p5.48xlarge", "ml.p4d.24xlarge", "nvidia.com/gpu"
TEAM = "placed"
ALLOCATABLE = {"cpu": "8", "memory": "64Gi", GPU: "8", "pods": "110"}


def team_queue(
    kube: Kube, stack: KubeStack, flavors: dict[str, str], *, cpu: str | None = None, preemption: bool = False
) -> str:
    """One team's namespace, LocalQueue and ClusterQueue (``{flavor: GPUs}``, in that order, and ``cpu`` of each
    flavor if given), written by hand."""
    facts = stack.kueue_facts
    ns = wl.namespace_of(TEAM)
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    for flavor in flavors:
        kube.create({"apiVersion": facts.api_version_of("ResourceFlavor"), "kind": "ResourceFlavor",
                     "metadata": {"name": flavor},
                     "spec": {"nodeLabels": {"node.kubernetes.io/instance-type": flavor}}})  # fmt: skip
    covered = {GPU: None, **({"cpu": cpu} if cpu else {})}
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": list(covered),
                "flavors": [
                    {"name": f, "resources": [{"name": r, "nominalQuota": q if r == GPU else cpu} for r in covered]}
                    for f, q in flavors.items()
                ],
            }
        ],
    }
    if preemption:
        spec["preemption"] = {"withinClusterQueue": "LowerPriority"}
    kube.create({"apiVersion": facts.api_version_of("ClusterQueue"), "kind": "ClusterQueue",
                 "metadata": {"name": wl.cluster_queue_of(TEAM)}, "spec": spec})  # fmt: skip
    kube.create({"apiVersion": facts.api_version_of("LocalQueue"), "kind": "LocalQueue",
                 "metadata": {"name": wl.local_queue_of(TEAM), "namespace": ns},
                 "spec": {"clusterQueue": wl.cluster_queue_of(TEAM)}})  # fmt: skip
    wl.wait_active(kube, TEAM)
    return ns


def submit(kube: Kube, job: dict[str, Any], *before: dict[str, Any]) -> dict[str, Any]:
    kube.create(job)
    kube.wait_for(lambda: wl.workload_of_job(kube, job), f"the Workload of Job {job['metadata']['name']}")
    wl.settle_jobs(kube, [*before, job], quiet=0.5)
    return job


def conditions(obj: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or []}


def test_a_job_is_placed_on_the_nodes_of_the_flavor_kueue_chose_and_finishes_as_a_kubelet_reports(
    kube: Kube, kube_stack: KubeStack
) -> None:
    # Given a p5 and a p4d node, and a team with 8 GPUs of each flavor, p5 first
    for name, flavor in (("node-p5", P5), ("node-p4d", P4D)):
        kube.create(make_node(name, flavor, allocatable=ALLOCATABLE))
    team_queue(kube, kube_stack, {P5: "8", P4D: "8"})
    # When it submits two Jobs of 8 GPUs that name no instance type
    first = submit(kube, wl.batch_job(TEAM, "first", {GPU: 8}))
    second = submit(kube, wl.batch_job(TEAM, "second", {GPU: 8}), first)
    # Then Kueue admits the first on p5 and the second on p4d, and the scheduler binds each pod to that flavor's node
    placed = {p.job: p for p in wl.wait_placed(kube, [first, second])}
    assert placed["first"].flavors == (P5,) and list(placed["first"].pods.values()) == ["node-p5"]
    assert placed["second"].flavors == (P4D,) and list(placed["second"].pods.values()) == ["node-p4d"]
    # And a bound pod stays Pending (no kubelet), scheduled
    (pod,) = wl.pods_of_job(kube, first)
    assert pod["status"]["phase"] == "Pending" and conditions(pod)["PodScheduled"] == "True"
    # And no node lifecycle controller tainted the heartbeat-less nodes
    assert all(not (n["spec"].get("taints")) for n in kube.objects("Node"))
    # When the first Job's pod succeeds, as its kubelet would report it
    wl.finish_job(kube, first)
    # Then the job controller completes the Job, Kueue finished its Workload and released its quota
    job = kube.get("Job", "first", wl.namespace_of(TEAM))
    assert job is not None and conditions(job).get("Complete") == "True"
    kube.wait_for(lambda: P5 not in wl.cluster_queue_usage(kube, TEAM) or
                  wl.cluster_queue_usage(kube, TEAM)[P5][GPU]["total"] == "0", "p5 quota released")  # fmt: skip


def test_a_daemonset_has_a_pod_on_every_node_and_a_pod_no_node_fits_stays_unbound(
    kube: Kube, kube_stack: KubeStack
) -> None:
    # Given two p5 nodes of 8 cpus, a DaemonSet asking 1 cpu on each, and a team with 16 GPUs and 16 cpus of p5
    for i in range(2):
        kube.create(make_node(f"node-{i}", P5, allocatable=ALLOCATABLE))
    ns = team_queue(kube, kube_stack, {P5: "16"}, cpu="16")
    kube.create({
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "log-agent", "namespace": ns},
        "spec": {"selector": {"matchLabels": {"app": "log-agent"}},
                 "template": {"metadata": {"labels": {"app": "log-agent"}},
                              "spec": {"containers": [{"name": "agent", "image": "agent",
                                                       "resources": {"requests": {"cpu": "1"}}}]}}},
    })  # fmt: skip
    # Then the daemonset controller makes a pod for each node and the scheduler binds it there
    kube.wait_for(
        lambda: (
            sorted(p["spec"].get("nodeName", "") for p in kube.objects("Pod", ns, labels="app=log-agent"))
            == ["node-0", "node-1"]
        ),
        "a log-agent pod bound on each node",
    )
    # When the team runs a Job of 2 pods each asking a node's whole 8 cpus (its quota has room: 16)
    job = submit(kube, wl.batch_job(TEAM, "whole-nodes", {GPU: 8, "cpu": "8"}, count=2))
    # Then Kueue admits it, but no node has 8 cpus left: its pods stay unbound with the scheduler's reason
    assert wl.state_of(wl.workload_of_job(kube, job) or {}).state == wl.ADMITTED

    def unschedulable() -> wl.Placement | None:
        p = wl.placement(kube, job)
        return p if p is not None and len(p.unschedulable) == 2 else None

    seen = kube.wait_for(unschedulable, "both pods unschedulable")
    assert not seen.placed and set(seen.pods.values()) == {""}
    assert all("Insufficient cpu" in why for why in seen.unschedulable.values()), seen.unschedulable
    with pytest.raises(AssertionError, match="whole-nodes"):
        wl.wait_placed(kube, [job], timeout=2)


def test_a_preempted_jobs_pods_are_deleted_and_ended_so_the_preemptors_bind_where_they_ran(
    kube: Kube, kube_stack: KubeStack
) -> None:
    # Given one p5 node, a team with its 8 GPUs that preempts lower priorities within its queue, and a low Job on it
    kube.create(make_node("node-p5", P5, allocatable=ALLOCATABLE))
    team_queue(kube, kube_stack, {P5: "8"}, preemption=True)
    facts = kube_stack.kueue_facts
    for name, value in (("low", 1), ("high", 100)):
        kube.create({"apiVersion": facts.api_version_of("WorkloadPriorityClass"), "kind": "WorkloadPriorityClass",
                     "metadata": {"name": name}, "value": value})  # fmt: skip
    low = submit(kube, wl.batch_job(TEAM, "low", {GPU: 8}, priority_class="low"))
    wl.wait_placed(kube, [low])
    completed = kube_stack.kubelet.completed if kube_stack.kubelet else 0
    # When a high-priority Job needs the node
    high = submit(kube, wl.batch_job(TEAM, "high", {GPU: 8}, priority_class="high"), low)
    # Then Kueue preempts the low one, the job controller deletes its pod, the kubelet stand-in ends it, and the
    # high Job's pod binds to the node it freed
    (placed,) = wl.wait_placed(kube, [high])
    assert list(placed.pods.values()) == ["node-p5"]
    assert wl.placement(kube, low) is None  # not admitted: queued again
    assert wl.pods_of_job(kube, low) == []
    assert kube_stack.kubelet is not None and kube_stack.kubelet.completed > completed


def test_the_stack_runs_the_controllers_placement_needs_and_never_the_node_lifecycle_one() -> None:
    # The node-lifecycle controller would taint every heartbeat-less test node unreachable: the scheduler would
    # place nothing
    assert "node-lifecycle-controller" not in kube_placement.CONTROLLERS
    assert {"job-controller", "daemonset-controller", "replicaset-controller", "garbage-collector-controller",
            "namespace-controller"} <= set(kube_placement.CONTROLLERS)  # fmt: skip


def test_reset_leaves_no_pod_job_or_daemonset(kube: Kube, kube_stack: KubeStack) -> None:
    # Given a bound Job's pod and a DaemonSet's
    kube.create(make_node("node-p5", P5, allocatable=ALLOCATABLE))
    ns = team_queue(kube, kube_stack, {P5: "8"})
    job = submit(kube, wl.batch_job(TEAM, "running", {GPU: 8}))
    wl.wait_placed(kube, [job])
    kube.create({
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "cni", "namespace": ns},
        "spec": {"selector": {"matchLabels": {"app": "cni"}},
                 "template": {"metadata": {"labels": {"app": "cni"}},
                              "spec": {"containers": [{"name": "cni", "image": "cni"}]}}},
    })  # fmt: skip
    kube.wait_for(lambda: len(kube.objects("Pod")) == 2, "two pods")
    # When the cluster is reset
    kube.reset()
    # Then nothing of them is left, in etcd either (a namespace of the same name starts empty)
    assert [kube.objects(k) for k in ("Pod", "Job", "DaemonSet", "Workload")] == [[], [], [], []]
    assert kube.get("Namespace", ns) is None
