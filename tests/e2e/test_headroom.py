"""Headroom on the real stack (issue 31, docs/spec.md §2): DaemonSet objects in the real kube-apiserver — a device
plugin, a CNI, a log agent on labelled nodes only, a metrics agent that does not tolerate the GPU taint — and a
pod that is not Kueue's, bound to a node at create (``spec.nodeName``). The stack runs no DaemonSet controller, so
no DaemonSet pod exists: each node is charged before its DaemonSet pods do. The Cohort's quota in the real Kueue
equals the numbers worked out by hand below.

Whose a pod is (issue 41.3): on `all`, a pod carrying Kueue's labels that no admitted Workload owns holds 8 GPUs
and is charged, while a real Kueue Job's pod (admitted by the real Kueue, bound by the real kube-scheduler) is not;
the node whose every GPU it holds stays eligible (issue 40.5: AcceleratorsNotReady reads what the node reports)."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import pytest

from devkit.embedded import ClusterSpec, Embedded
from devkit.kube import workloads as wl
from devkit.kube.client import Kube, KubeRequestError
from idleshare.domain.cluster_settings import ClusterSettings
from idleshare.domain.model import Headroom
from idleshare.domain.quantity import parse_quantity
from tests.e2e.conftest import GPU, P5, P5_ALLOCATABLE, Cluster, p5_nodes, quota
from tests.kube.fixtures import make_node

LOGGED, PLAIN, GPU_TAINTED = "hyperpod-i-p5hr0000", "hyperpod-i-p5hr0001", "hyperpod-i-p5hr0002"
MI = 1024**2
EVERYTHING = [{"operator": "Exists"}]
# name -> (cpu millicores, memory Mi, node selector, tolerations)
DAEMONSETS: dict[str, tuple[int, int, dict[str, str], list[dict[str, Any]]]] = {
    "nvidia-device-plugin": (100, 200, {}, [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]),
    "aws-node": (250, 500, {}, EVERYTHING),  # the CNI
    "fluent-bit": (200, 1024, {"idleshare.test/logs": "on"}, EVERYTHING),  # only where the label is
    "node-exporter": (300, 300, {}, []),  # does not tolerate nvidia.com/gpu: not on the tainted node
}
FOREIGN_POD = (1000, 2048)  # a pod no Kueue admitted, bound to PLAIN: counted on `all` only


def daemonset(name: str) -> dict[str, Any]:
    cpu, mem, selector, tolerations = DAEMONSETS[name]
    container = {"name": "c", "image": "x", "resources": {"requests": {"cpu": f"{cpu}m", "memory": f"{mem}Mi"}}}
    spec: dict[str, Any] = {"containers": [container], "tolerations": tolerations}
    if selector:
        spec["nodeSelector"] = selector
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "kube-system"},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
        },
    }


def runs_on(name: str, node: str) -> bool:
    _, _, selector, tolerations = DAEMONSETS[name]
    if selector and node != LOGGED:
        return False
    return not (node == GPU_TAINTED and not tolerations)


def expected_headroom(mode: Headroom) -> dict[str, tuple[Fraction, int]]:
    """node -> (cpu cores, memory bytes) charged, from the table above."""
    out = {}
    for node in (LOGGED, PLAIN, GPU_TAINTED):
        cpu = sum(DAEMONSETS[d][0] for d in DAEMONSETS if runs_on(d, node))
        mem = sum(DAEMONSETS[d][1] for d in DAEMONSETS if runs_on(d, node))
        if mode is Headroom.ALL and node == PLAIN:
            cpu, mem = cpu + FOREIGN_POD[0], mem + FOREIGN_POD[1]
        out[node] = (Fraction(cpu, 1000), mem * MI)
    return out


@pytest.fixture
def headroom_cluster(kube: Kube) -> Iterator[Any]:
    opened: list[Embedded] = []
    created: list[tuple[str, str]] = []

    def post(path: str, body: dict[str, Any]) -> None:
        kube.request("POST", path, body, ok=(200, 201, 409))
        created.append((path, body["metadata"]["name"]))

    def _make(mode: Headroom) -> Cluster:
        for name in DAEMONSETS:
            post("/apis/apps/v1/namespaces/kube-system/daemonsets", daemonset(name))
        # no controller manager: the namespace's default ServiceAccount is made by hand, for the pod's admission
        post("/api/v1/namespaces/default/serviceaccounts", {"metadata": {"name": "default"}})
        cpu, mem = FOREIGN_POD
        pod_spec = {
            "nodeName": PLAIN,
            "automountServiceAccountToken": False,
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": f"{cpu}m", "memory": f"{mem}Mi"}}}],
        }  # fmt: skip
        post("/api/v1/namespaces/default/pods", {"metadata": {"name": "notebook"}, "spec": pod_spec})
        nodes = [
            make_node(LOGGED, P5, allocatable=P5_ALLOCATABLE, labels={"idleshare.test/logs": "on"}),
            make_node(PLAIN, P5, allocatable=P5_ALLOCATABLE),
            make_node(GPU_TAINTED, P5, allocatable=P5_ALLOCATABLE, taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]),
        ]  # fmt: skip
        pipeline = Embedded(
            copy.deepcopy(nodes), cluster=ClusterSpec(settings=ClusterSettings(headroom=mode)), sim=kube
        )
        pipeline.__enter__()
        opened.append(pipeline)
        return Cluster(pipeline, kube)

    yield _make
    for pipeline in reversed(opened):
        pipeline.__exit__(None, None, None)
    for path, name in reversed(created):  # the stack's reset knows neither kind: every other test sees none
        with contextlib.suppress(KubeRequestError):  # a leftover shows in the next test's own numbers
            kube.request("DELETE", f"{path}/{name}", params={"gracePeriodSeconds": "0"}, ok=(200, 202, 404))


@pytest.mark.parametrize("mode", [Headroom.DAEMONSETS, Headroom.ALL, Headroom.OFF])
def test_the_cohort_lends_allocatable_less_headroom(headroom_cluster, mode):
    # Given three p5 nodes, the four DaemonSets and the foreign pod, and team a owning 2 GPUs
    cluster = headroom_cluster(mode)
    cluster.put_quota(quota("a", [{"InstanceType": P5, "Accelerators": 2}]))
    charged = expected_headroom(mode) if mode is not Headroom.OFF else {}
    alloc_cpu, alloc_mem = parse_quantity(P5_ALLOCATABLE["cpu"]), parse_quantity(P5_ALLOCATABLE["memory"])
    # Then capacity is the nodes' allocatable less what each is charged
    cap_cpu = 3 * alloc_cpu - sum((c for c, _ in charged.values()), Fraction(0))
    cap_mem = 3 * alloc_mem - sum(m for _, m in charged.values())
    # S(p5): the three nodes differ, the tie goes to the greatest shape: the least charged node's
    least = min(charged.values(), default=(Fraction(0), 0))
    shape_cpu, shape_mem = alloc_cpu - least[0], alloc_mem - least[1]
    # team a's 2 of 8 GPUs scale cpu (rounded down to 1m) and memory (to 1Mi) of S(p5)
    own_cpu = Fraction(int(Fraction(2, 8) * shape_cpu * 1000), 1000)
    own_mem = int(Fraction(2, 8) * shape_mem) // MI * MI
    # and the Cohort lends the rest, in the real Kueue
    assert parse_quantity(cluster.cohort_quota(P5, "cpu")) == cap_cpu - own_cpu
    assert parse_quantity(cluster.cohort_quota(P5, "memory")) == cap_mem - own_mem
    assert cluster.cohort_quota(P5, "nvidia.com/gpu") == "22"  # no DaemonSet requests a GPU: 3 x 8 - 2
    stored = cluster.pipeline.store.get_pool(cluster.spec.cluster_id).pool["headroom"]
    assert stored["mode"] == str(mode)
    assert {n: (parse_quantity(q["cpu"]), parse_quantity(q["memory"])) for n, q in stored["nodes"].items()} == charged


# -- whose a pod is: what was read, never what the pod says (issue 41.3), and AcceleratorsNotReady before headroom
# (issue 40.5) ----------------------------------------------------------------------------------------------------
FORGED_LABELS = {"kueue.x-k8s.io/queue-name": "whatever", "kueue.x-k8s.io/podset": "main"}


def test_on_all_a_pod_with_kueues_labels_that_no_admitted_workload_owns_is_charged_and_kueues_own_pod_is_not(
    make_cluster: Any, kube: Kube
) -> None:
    # Given two p5 nodes, headroom `all`, team a owning 2 GPUs: the Cohort lends the other 14
    cluster = make_cluster(p5_nodes(2), headroom=Headroom.ALL)
    cluster.put_quota(quota("a", [{"InstanceType": P5, "Accelerators": 2}]))
    assert cluster.cohort_quota(P5, GPU) == "14"
    cluster.wait_active("a")
    # And team a's Job, admitted by the real Kueue, its pod bound to a node by the real kube-scheduler
    job = cluster.submit_job("a", "train", {"nvidia.com/gpu": 2, "cpu": "1", "memory": "1Gi"})
    placed = wl.placement(kube, job)
    assert placed is not None and placed.placed
    (job_node,) = set(placed.pods.values())
    cluster.recalculate()
    # Then the Job's pod is Kueue's (its admitted Workload's owner is the Job that owns it): not charged
    assert cluster.cohort_quota(P5, GPU) == "14"
    stored = cluster.pipeline.store.get_pool(cluster.spec.cluster_id).pool
    assert not any(GPU in by for by in (stored["headroom"].get("nodes") or {}).values()), stored["headroom"]

    # When a pod in the team's namespace, labelled as Kueue's but submitted past it, takes all 8 GPUs of the other
    (other,) = {n["metadata"]["name"] for n in p5_nodes(2)} - {job_node}
    namespace = wl.namespace_of("a")
    gpus = {"nvidia.com/gpu": "8", "cpu": "2", "memory": "4Gi"}
    forged = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "forged", "namespace": namespace, "labels": FORGED_LABELS},
        "spec": {
            "nodeName": other,
            "automountServiceAccountToken": False,
            "containers": [{"name": "c", "image": "x", "resources": {"requests": gpus, "limits": gpus}}],
        },
    }
    kube.create(forged)
    try:
        cluster.recalculate()
        # Then its 8 GPUs are charged: the Cohort lends 16 - 8 - 2 = 6 GPUs, not 8 that do not exist
        assert cluster.cohort_quota(P5, GPU) == "6"
        # And its node stays eligible (its device plugin reports 8: in use, not missing): its cpu and memory are
        # lent, less the pod's, and its headroom is shown
        pool = cluster.pipeline.store.get_pool(cluster.spec.cluster_id).pool
        assert other not in (pool.get("excludedNodes") or {}), pool.get("excludedNodes")
        charged = pool["headroom"]["nodes"][other]
        assert (charged["nvidia.com/gpu"], parse_quantity(charged["cpu"]), parse_quantity(charged["memory"])) == (
            "8",
            2,
            4 * 1024**3,
        )
        # (excluded, as before issue 40.5, the Cohort would lend one node's cpu less a's share: under 191.45)
        assert parse_quantity(cluster.cohort_quota(P5, "cpu")) > parse_quantity(P5_ALLOCATABLE["cpu"])
    finally:
        kube.request(
            "DELETE",
            f"/api/v1/namespaces/{namespace}/pods/forged",
            params={"gracePeriodSeconds": "0"},
            ok=(200, 202, 404),
        )
