"""Headroom (docs/spec.md §2): a node's allocatable less the DaemonSets that will run there and, on ``all``, the bound
pods that are not Kueue's; kube-scheduler's request arithmetic; the pool computed on what is left."""

from __future__ import annotations

import json
from dataclasses import replace
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from idleshare.domain.cluster_settings import ClusterSettings
from idleshare.domain.headroom import kueue_owners, pod_request, reserve, runs_on, tolerates
from idleshare.domain.model import (
    GIB,
    DaemonSet,
    ExclusionReason,
    Headroom,
    OwnerReference,
    Pod,
    PodRequests,
    Requirement,
    SelectorTerm,
    Settings,
    Snapshot,
    Taint,
    Toleration,
)
from idleshare.domain.pool import compute
from idleshare.domain.usage import Condition, Unreadable, WorkloadStatus
from idleshare.parse.errors import InputError
from idleshare.parse.workloads import cluster_daemonsets, cluster_pods, parse_daemonsets, parse_pods, split_dump
from tests.builders import G5, P5, P5_ALLOC, entry, node, quota

MI = 1024**2
m = Fraction(1, 1000)


def ds(name: str, cpu_m: int, mem_mi: int, **fields: object) -> DaemonSet:
    requests = PodRequests(containers=({"cpu": cpu_m * m, "memory": mem_mi * MI},))
    return DaemonSet(namespace="kube-system", name=name, requests=requests, **fields)  # type: ignore[arg-type]


def bound(name: str, node_name: str, cpu: int, **fields: object) -> Pod:
    return Pod("default", name, node_name, PodRequests(containers=({"cpu": cpu},)), **fields)  # type: ignore[arg-type]


# -- kube-scheduler's arithmetic -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("requests", "expected"),
    [
        (PodRequests(containers=({"cpu": 1}, {"cpu": 2, "memory": 5})), {"cpu": 3, "memory": 5}),
        # an init container larger than the containers sets the pod's request
        (PodRequests(containers=({"cpu": 1},), init_containers=(({"cpu": 4}, False),)), {"cpu": 4}),
        (PodRequests(containers=({"cpu": 5},), init_containers=(({"cpu": 4}, False),)), {"cpu": 5}),
        # a sidecar (restartPolicy Always) runs beside the containers, and beside the init containers after it
        (
            PodRequests(containers=({"cpu": 1},), init_containers=(({"cpu": 2}, True), ({"cpu": 2}, False))),
            {"cpu": 4},  # max(1 + 2, 2 + 2)
        ),
        (
            PodRequests(containers=({"cpu": 3},), init_containers=(({"cpu": 5}, False), ({"cpu": 1}, True))),
            {"cpu": 5},  # the init container ran before the sidecar: max(3 + 1, 5)
        ),
        (PodRequests(containers=({"cpu": 1},), overhead={"cpu": Fraction(1, 4)}), {"cpu": Fraction(5, 4)}),
        (PodRequests(), {}),
    ],
)
def test_a_pods_request_is_kube_schedulers(requests, expected):
    assert pod_request(requests) == expected


# -- where a DaemonSet runs ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        (Toleration("nvidia.com/gpu", "Exists"), Taint("nvidia.com/gpu", "NoSchedule"), True),
        (Toleration("nvidia.com/gpu", "Equal", "true"), Taint("nvidia.com/gpu", "NoSchedule", "true"), True),
        (Toleration("nvidia.com/gpu", "Equal", "false"), Taint("nvidia.com/gpu", "NoSchedule", "true"), False),
        (Toleration("nvidia.com/gpu", "Exists", None, "NoExecute"), Taint("nvidia.com/gpu", "NoSchedule"), False),
        (Toleration(None, "Exists"), Taint("anything", "NoExecute"), True),  # tolerate everything
        (Toleration("other", "Exists"), Taint("nvidia.com/gpu", "NoSchedule"), False),
        (Toleration(None, "Equal"), Taint("k", "NoSchedule"), False),  # Equal needs a key
    ],
)
def test_tolerations(toleration, taint, expected):
    assert tolerates(toleration, taint) is expected


LABELLED = node("n1", P5, labels={"role": "gpu", "gen": "5", "zone": "a"})


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, True),
        ({"node_selector": {"role": "gpu"}}, True),
        ({"node_selector": {"role": "gpu", "zone": "b"}}, False),
        ({"affinity_terms": (SelectorTerm((Requirement("role", "In", ("gpu", "cpu")),)),)}, True),
        ({"affinity_terms": (SelectorTerm((Requirement("role", "NotIn", ("gpu",)),)),)}, False),
        ({"affinity_terms": (SelectorTerm((Requirement("missing", "NotIn", ("x",)),)),)}, True),
        ({"affinity_terms": (SelectorTerm((Requirement("role", "Exists"),)),)}, True),
        ({"affinity_terms": (SelectorTerm((Requirement("role", "DoesNotExist"),)),)}, False),
        ({"affinity_terms": (SelectorTerm((Requirement("gen", "Gt", ("4",)),)),)}, True),
        ({"affinity_terms": (SelectorTerm((Requirement("gen", "Lt", ("4",)),)),)}, False),
        ({"affinity_terms": (SelectorTerm((Requirement("role", "Gt", ("4",)),)),)}, False),  # not a number
        # terms are ORed, a term's requirements ANDed
        (
            {
                "affinity_terms": (
                    SelectorTerm((Requirement("role", "In", ("cpu",)),)),
                    SelectorTerm((Requirement("zone", "In", ("a",)), Requirement("gen", "In", ("5",)))),
                )
            },
            True,
        ),
        (
            {"affinity_terms": (SelectorTerm((Requirement("zone", "In", ("a",)), Requirement("gen", "In", ("4",)))),)},
            False,
        ),
        ({"affinity_terms": (SelectorTerm(match_fields=(Requirement("metadata.name", "In", ("n1",)),)),)}, True),
        ({"affinity_terms": (SelectorTerm(match_fields=(Requirement("metadata.name", "NotIn", ("n1",)),)),)}, False),
        ({"affinity_terms": (SelectorTerm(),)}, False),  # an empty term matches nothing
        ({"affinity_terms": ()}, False),  # no terms: nothing
    ],
)
def test_node_selector_and_required_affinity(fields, expected):
    assert runs_on(ds("x", 1, 1, **fields), LABELLED) is expected


def test_taints_keep_a_daemonset_off_unless_tolerated():
    tainted = replace(LABELLED, taints=(Taint("dedicated", "NoSchedule", "ml"), Taint("soft", "PreferNoSchedule")))
    assert not runs_on(ds("x", 1, 1), tainted)
    assert runs_on(ds("x", 1, 1, tolerations=(Toleration("dedicated", "Equal", "ml"),)), tainted)
    # the DaemonSet controller's own tolerations: a cordoned or not-ready node still gets its DaemonSet pods
    cordoned = replace(LABELLED, taints=(Taint("node.kubernetes.io/unschedulable", "NoSchedule"),))
    assert runs_on(ds("x", 1, 1), cordoned)


# -- the nodes, reduced ------------------------------------------------------------------------------------------
def test_daemonsets_take_only_what_they_request_and_never_below_zero():
    small = node("s", G5, allocatable={"cpu": 1, "memory": 4 * GIB, "nvidia.com/gpu": 4})
    big_agent = ds("agent", 1500, 1024)  # more cpu than the node has
    (after,), taken = reserve([small], [big_agent], (), Headroom.DAEMONSETS)
    assert after.allocatable == {"cpu": 0, "memory": 3 * GIB, "nvidia.com/gpu": 4}  # GPUs untouched
    assert taken == {"s": {"cpu": 1, "memory": GIB}}  # what was actually taken, not the request


def test_a_device_plugin_that_requests_gpus_takes_them():
    plugin = DaemonSet("kube-system", "odd", PodRequests(containers=({"nvidia.com/gpu": 1, "cpu": m},)))
    (after,), _ = reserve([node("p", P5)], [plugin], (), Headroom.DAEMONSETS)
    assert after.allocatable["nvidia.com/gpu"] == 7


def controlled_by(kind: str, uid: str, api_version: str = "apps/v1", controller: bool = True) -> OwnerReference:
    return OwnerReference(api_version, kind, uid, controller)


def admitted(namespace: str, owner_uid: str, **conditions: str) -> WorkloadStatus:
    states = {"Admitted": "True", **conditions}
    return WorkloadStatus(
        "wl", namespace, owner_uids=(owner_uid,), conditions={k: Condition(v) for k, v in states.items()}
    )


def test_modes_and_which_pods_count():
    n1, n2 = node("n1", P5), node("n2", P5)
    agent = replace(ds("agent", 500, 0), uid="ds-uid")
    kueue = kueue_owners([admitted("default", "job-uid"), admitted("default", "plain-pod-uid")])
    pods = [
        bound("web", "n1", 2),
        bound("done", "n1", 50, phase="Succeeded"),
        bound("failed", "n1", 50, phase="Failed"),
        # counted with its DaemonSet (its template, 500m)
        Pod("kube-system", "ds-pod", "n1", agent.requests, owners=(controlled_by("DaemonSet", "ds-uid"),)),
        bound("kueue-job", "n1", 50, owners=(controlled_by("Job", "job-uid", "batch/v1"),)),  # its Workload's owner
        bound("kueue-pod", "n1", 50, uid="plain-pod-uid"),  # a plain pod Kueue manages owns its Workload
        bound("other", "n2", 3, labels={"app": "x"}),
        bound("unbound", "", 50),
    ]
    assert reserve([n1, n2], [agent], pods, Headroom.OFF, kueue) == ((n1, n2), {})
    _, taken = reserve([n1, n2], [agent], pods, Headroom.DAEMONSETS, kueue)
    assert taken == {"n1": {"cpu": Fraction(1, 2)}, "n2": {"cpu": Fraction(1, 2)}}
    _, taken = reserve([n1, n2], [agent], pods, Headroom.ALL, kueue)
    assert taken == {"n1": {"cpu": Fraction(5, 2)}, "n2": {"cpu": Fraction(7, 2)}}


@pytest.mark.parametrize(
    "owners",
    [
        pytest.param((controlled_by("DaemonSet", "ds-uid", controller=False),), id="not-the-controller"),
        pytest.param((controlled_by("DaemonSet", "ds-uid", "apps.example.com/v1"),), id="another-group"),
        pytest.param((controlled_by("DaemonSet", "ds-uid", "extensions/v1beta1"),), id="another-version"),
        pytest.param((controlled_by("DaemonSet", "no-such-uid"),), id="a-uid-not-read"),
        pytest.param((controlled_by("ReplicaSet", "ds-uid"),), id="another-kind"),
        pytest.param(
            (controlled_by("ReplicaSet", "rs"), controlled_by("DaemonSet", "ds-uid", controller=False)),
            id="a-daemonset-beside-the-controller",
        ),
    ],
)
def test_a_pod_is_a_daemonsets_only_when_its_controller_is_an_apps_v1_daemonset_that_was_read(owners):
    agent = replace(ds("agent", 1000, 0), uid="ds-uid")  # its template, 1 cpu, charged on n1
    pod = Pod("kube-system", "p", "n1", agent.requests, owners=owners)
    _, taken = reserve([node("n1", P5)], [agent], [pod], Headroom.ALL)
    assert taken == {"n1": {"cpu": 2}}  # the template, and the pod: no DaemonSet's
    # the same pod, controlled by the DaemonSet read, is counted with it (its template) instead
    real = replace(pod, owners=(controlled_by("DaemonSet", "ds-uid"),))
    assert reserve([node("n1", P5)], [agent], [real], Headroom.ALL)[1] == {"n1": {"cpu": 1}}
    # a DaemonSet of that uid in another namespace is not its DaemonSet
    assert reserve([node("n1", P5)], [agent], [replace(real, namespace="x")], Headroom.ALL)[1] == {"n1": {"cpu": 2}}


def test_a_daemonsets_pod_is_charged_what_it_requests_beyond_the_template_and_all_of_it_where_the_ds_does_not_run():
    agent = replace(ds("agent", 1000, 0, node_selector={"role": "gpu"}), uid="ds-uid")
    gpu_node, other = node("n1", P5, labels={"role": "gpu"}), node("n2", P5)
    owner = (controlled_by("DaemonSet", "ds-uid"),)
    greedy = Pod(
        "kube-system", "greedy", "n1", PodRequests(containers=({"cpu": 1, "nvidia.com/gpu": 8},)), owners=owner
    )
    stray = Pod("kube-system", "stray", "n2", agent.requests, owners=owner)  # its DaemonSet no longer runs there
    _, taken = reserve([gpu_node, other], [agent], [greedy, stray], Headroom.ALL)
    assert taken == {"n1": {"cpu": 1, "nvidia.com/gpu": 8}, "n2": {"cpu": 1}}
    # a pod that asks less than its template: the template stands
    small = replace(greedy, requests=PodRequests(containers=({"cpu": Fraction(1, 2)},)))
    assert reserve([gpu_node], [agent], [small], Headroom.ALL)[1] == {"n1": {"cpu": 1}}


@pytest.mark.parametrize(
    ("workload", "pod_fields"),
    [
        pytest.param(admitted("team", "job-uid"), {"namespace": "other"}, id="another-namespace"),
        pytest.param(admitted("team", "someone-else"), {}, id="another-workloads-owner"),
        pytest.param(replace(admitted("team", "job-uid"), conditions={}), {}, id="not-admitted"),
        pytest.param(admitted("team", "job-uid", Admitted="False", QuotaReserved="True"), {}, id="reserved-only"),
        pytest.param(admitted("team", "job-uid", Finished="True"), {}, id="finished"),
        pytest.param(
            WorkloadStatus(
                "wl", "", active=False, readable=False, unreadable=(Unreadable("Workload/team/wl", "", "x"),)
            ),
            {},
            id="unreadable",
        ),
    ],
)
def test_a_pod_is_kueues_only_when_an_admitted_workload_read_owns_it(workload, pod_fields):
    pod = Pod(
        "team",
        "trainer-0",
        "n1",
        PodRequests(containers=({"nvidia.com/gpu": 8},)),
        labels={"kueue.x-k8s.io/podset": "main", "kueue.x-k8s.io/queue-name": "team-lq"},
        owners=(controlled_by("Job", "job-uid", "batch/v1"),),
    )
    pod = replace(pod, **pod_fields)
    _, taken = reserve([node("n1", P5)], (), [pod], Headroom.ALL, kueue_owners([workload]))
    assert taken == {"n1": {"nvidia.com/gpu": 8}}
    # the same pod owned by the admitted Workload's owner, in its namespace, is in Kueue's usage: not charged
    assert reserve([node("n1", P5)], (), [replace(pod, namespace="team")], Headroom.ALL,
                   kueue_owners([admitted("team", "job-uid")]))[1] == {}  # fmt: skip


def test_kueues_labels_on_a_pod_no_admitted_workload_owns_prove_nothing():
    """Issue 41.3: whoever creates a pod writes its labels; 8 GPUs held under ``kueue.x-k8s.io/queue-name`` left
    the pool lending 8 GPUs that did not exist."""
    gpus = PodRequests(containers=({"nvidia.com/gpu": 8},))
    forged = (
        Pod("default", "queue-name", "n1", gpus, labels={"kueue.x-k8s.io/queue-name": "whatever"}),
        Pod("default", "podset", "n2", gpus, labels={"kueue.x-k8s.io/podset": "main"}),
    )
    _, taken = reserve([node("n1", P5), node("n2", P5)], (), forged, Headroom.ALL)
    assert taken == {"n1": {"nvidia.com/gpu": 8}, "n2": {"nvidia.com/gpu": 8}}


@settings(max_examples=60, deadline=None)
@given(
    cpu=st.lists(st.integers(0, 300_000), min_size=1, max_size=4),
    gpu=st.integers(0, 9),
    pod_cpu=st.integers(0, 300),
    mode=st.sampled_from(list(Headroom)),
    labelled=st.booleans(),
)
def test_headroom_never_increases_capacity(cpu, gpu, pod_cpu, mode, labelled):
    daemonsets = [
        DaemonSet("k", f"d{i}", PodRequests(containers=({"cpu": c * m, "nvidia.com/gpu": gpu},)),
                  node_selector={"role": "gpu"} if labelled and i % 2 else {})
        for i, c in enumerate(cpu)
    ]  # fmt: skip
    nodes = [node("a", P5, labels={"role": "gpu"}), node("b", P5), node("c", G5)]
    pods = [bound("p", "b", pod_cpu)]
    plain = compute(Snapshot(nodes=tuple(nodes), settings=Settings(headroom=Headroom.OFF)))
    reduced = compute(
        Snapshot(nodes=tuple(nodes), daemonsets=tuple(daemonsets), pods=tuple(pods), settings=Settings(headroom=mode))
    )
    for f, per in reduced.capacity.items():
        for r, q in per.items():
            assert 0 <= q <= plain.capacity[f][r]
    for name, by in reduced.headroom.items():
        assert all(q > 0 for q in by.values()), name


def test_the_pool_with_headroom_equals_hand_worked_numbers():
    """Three p5 nodes (191.45 cpu, 1900 GiB, 8 GPUs each); one labelled for the log agent, one tainted.

    Device plugin 100m/200Mi (tolerates the taint), CNI 250m/500Mi (tolerates everything), log agent 200m/1Gi on
    role=logged only, a metrics agent 300m/300Mi that does not tolerate the taint; on ``all`` a foreign pod of 1 cpu
    on p5-0.
      p5-0 (logged):  100+250+200+300 m = 850m,  200+500+1024+300 Mi = 2024Mi
      p5-1:           100+250+300     m = 650m,  200+500+300      Mi = 1000Mi
      p5-2 (tainted): 100+250         m = 350m,  200+500          Mi =  700Mi
    capacity(cpu) = 3 x 191.45 - 1.85 = 572.5; capacity(memory) = 5700Gi - 3724Mi; GPUs 24.
    S(p5): three different shapes, a tie -> the greatest: p5-2's (191.1 cpu), so Count 1 -> 191.1 cpu.
    """
    nodes = (
        node("p5-0", P5, labels={"role": "logged"}),
        node("p5-1", P5),
        node("p5-2", P5, taints=(Taint("dedicated", "NoSchedule", "x"),)),
    )
    everything = (Toleration(None, "Exists"),)
    daemonsets = (
        ds("device-plugin", 100, 200, tolerations=(Toleration("dedicated", "Exists"),)),
        ds("cni", 250, 500, tolerations=everything),
        ds("log-agent", 200, 1024, node_selector={"role": "logged"}, tolerations=everything),
        ds("metrics", 300, 300),
    )
    settings_ = Settings(tolerated_taint_keys=frozenset({"dedicated"}))
    snap = Snapshot(nodes=nodes, daemonsets=daemonsets, quotas=(quota("a", entry(P5, count=1)),), settings=settings_)
    result = compute(snap)
    cap = result.capacity[P5]
    assert cap["cpu"] == 3 * P5_ALLOC["cpu"] - Fraction(1850, 1000) == Fraction(5725, 10)
    assert cap["memory"] == 3 * P5_ALLOC["memory"] - 3724 * MI
    assert cap["nvidia.com/gpu"] == 24 and cap["vpc.amazonaws.com/efa"] == 96
    assert result.headroom == {
        "p5-0": {"cpu": Fraction(850, 1000), "memory": 2024 * MI},
        "p5-1": {"cpu": Fraction(650, 1000), "memory": 1000 * MI},
        "p5-2": {"cpu": Fraction(350, 1000), "memory": 700 * MI},
    }
    assert result.shapes[P5]["cpu"] == P5_ALLOC["cpu"] - Fraction(350, 1000)
    assert result.teams["a"].nominal[P5]["cpu"] == Fraction(1911, 10)
    assert result.unallocated[P5]["cpu"] == Fraction(5725, 10) - Fraction(1911, 10)

    on_all = compute(
        replace(snap, pods=(bound("foreign", "p5-0", 1),), settings=replace(settings_, headroom=Headroom.ALL))
    )
    assert on_all.capacity[P5]["cpu"] == Fraction(5715, 10)
    off = compute(replace(snap, settings=replace(settings_, headroom=Headroom.OFF)))
    assert off.capacity[P5]["cpu"] == 3 * P5_ALLOC["cpu"] and off.headroom == {}


@pytest.mark.parametrize("mode", [Headroom.DAEMONSETS, Headroom.ALL])
def test_a_node_whose_every_gpu_is_in_use_is_eligible_and_lends_its_cpu_and_memory(mode):
    """AcceleratorsNotReady reads the allocatable the node reports, before headroom (issue 40.5): 8 GPUs held by a
    DaemonSet (``daemonsets``) or by a pod no Kueue admitted (``all``) are in use, not missing."""
    busy, idle = node("p5-busy", P5, labels={"role": "busy"}), node("p5-idle", P5)
    holder = PodRequests(containers=({"nvidia.com/gpu": 8, "cpu": 1, "memory": GIB},))
    daemonsets = (DaemonSet("kube-system", "gpu-burner", holder, node_selector={"role": "busy"}),)
    pods = (Pod("default", "burner", "p5-busy", holder),)
    snap = Snapshot(nodes=(busy, idle), settings=Settings(headroom=mode))
    snap = replace(snap, daemonsets=daemonsets) if mode is Headroom.DAEMONSETS else replace(snap, pods=pods)
    result = compute(snap)
    assert result.excluded_nodes == {}
    assert result.node_counts[P5] == (2, 2)
    assert result.capacity[P5]["nvidia.com/gpu"] == 8  # the idle node's; the busy node's are held
    assert result.capacity[P5]["cpu"] == 2 * P5_ALLOC["cpu"] - 1  # the busy node's ~190 cpu are lent
    assert result.capacity[P5]["memory"] == 2 * P5_ALLOC["memory"] - GIB
    assert result.headroom == {"p5-busy": {"cpu": 1, "memory": GIB, "nvidia.com/gpu": 8}}  # and shown


def test_a_node_whose_plugin_reports_no_gpu_is_still_accelerators_not_ready_whatever_headroom():
    down = node("p5-down", P5, allocatable={**P5_ALLOC, "nvidia.com/gpu": 0})
    result = compute(Snapshot(nodes=(down,), daemonsets=(ds("cni", 250, 0),)))
    assert result.excluded_nodes == {"p5-down": ExclusionReason.ACCELERATORS_NOT_READY}
    assert result.headroom == {} and result.capacity[P5]["cpu"] == 0


def test_an_excluded_node_shows_no_headroom():
    result = compute(Snapshot(nodes=(node("down", P5, ready=False),), daemonsets=(ds("cni", 250, 0),)))
    assert result.headroom == {} and result.capacity[P5]["cpu"] == 0


# -- parsing ---------------------------------------------------------------------------------------------------------
DS_OBJECT = {
    "apiVersion": "apps/v1",
    "kind": "DaemonSet",
    "metadata": {"name": "nvidia-device-plugin", "namespace": "kube-system"},
    "spec": {
        "selector": {"matchLabels": {"app": "x"}},
        "template": {
            "metadata": {"labels": {"app": "x"}},
            "spec": {
                "nodeSelector": {"role": "gpu"},
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["4"]}],
                                    "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}],
                                }
                            ]
                        }
                    }
                },
                "tolerations": [{"operator": "Exists"}],
                "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "2"}}}],
                "containers": [
                    {"name": "c", "resources": {"requests": {"cpu": "100m"}, "limits": {"memory": "200Mi"}}}
                ],
            },
        },
    },
}


def test_a_daemonset_parses_to_what_headroom_reads():
    (parsed,) = parse_daemonsets({"kind": "List", "items": [DS_OBJECT]})
    assert parsed.node_selector == {"role": "gpu"}
    assert parsed.affinity_terms == (
        SelectorTerm((Requirement("gen", "Gt", ("4",)),), (Requirement("metadata.name", "In", ("n1",)),)),
    )
    assert parsed.tolerations == (Toleration(None, "Exists"),)
    assert pod_request(parsed.requests) == {"cpu": 2, "memory": 200 * MI}  # the limit stands for the request
    assert runs_on(parsed, LABELLED)
    assert parsed.uid == ""  # none in the file
    (parsed,) = parse_daemonsets([{**DS_OBJECT, "metadata": {**DS_OBJECT["metadata"], "uid": "ds-1"}}])
    assert parsed.uid == "ds-1"


def test_bad_objects_are_named_never_a_traceback():
    bad = {**DS_OBJECT, "spec": {"template": {"spec": {"containers": [{"resources": {"requests": {"cpu": "lots"}}}]}}}}
    with pytest.raises(InputError) as caught:
        parse_daemonsets([bad], "ds.json")
    assert str(caught.value) == (
        'ds.json: items[0] (kube-system/nvidia-device-plugin).spec.template.spec.containers[0].resources.requests["cpu"]:'
        ' invalid quantity "lots"'
    )
    wrong_op = {"metadata": {"name": "p"}, "spec": {"template": {"spec": {"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "k", "operator": "Near"}]}]}}}}}}}  # fmt: skip
    with pytest.raises(InputError, match=r"matchExpressions\[0\]\.operator"):
        parse_daemonsets([wrong_op])
    with pytest.raises(InputError, match="DaemonSetList"):
        parse_daemonsets({"kind": "PodList", "items": []})
    found, problems = cluster_daemonsets([DS_OBJECT, bad, "junk"])
    assert [d.name for d in found] == ["nvidia-device-plugin"] and len(problems) == 2
    assert "lots" in str(problems[0])


def test_pods_and_one_dump():
    pod = {
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": "team-a", "uid": "pod-uid", "labels": {"app": "web"},
                     "ownerReferences": [{"kind": "ReplicaSet", "name": "web-1", "uid": "u", "apiVersion": "apps/v1"}]},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                 "overhead": {"cpu": "250m"}},
        "status": {"phase": "Running"},
    }  # fmt: skip
    (parsed,) = parse_pods([pod])
    assert (parsed.node_name, parsed.phase) == ("n1", "Running")
    assert parsed.owners == (OwnerReference("apps/v1", "ReplicaSet", "u", False),) and parsed.uid == "pod-uid"
    controlled = {**pod["metadata"]["ownerReferences"][0], "controller": True}
    (parsed,) = parse_pods([{**pod, "metadata": {**pod["metadata"], "ownerReferences": [controlled]}}])
    assert parsed.owners == (OwnerReference("apps/v1", "ReplicaSet", "u", True),)
    assert pod_request(parsed.requests) == {"cpu": Fraction(5, 4)}
    split = split_dump({"kind": "List", "items": [{"kind": "Node", "metadata": {"name": "n1"}}, DS_OBJECT, pod]})
    assert split is not None
    rest, daemonsets, pods, workloads = split
    assert [i["kind"] for i in rest["items"]] == ["Node"] and daemonsets == [DS_OBJECT] and pods == [pod]
    assert workloads == []
    assert split_dump({"kind": "List", "items": [{"kind": "Node"}]}) is None
    found, problems = cluster_pods([{**pod, "spec": {"nodeName": 5}}])
    assert found == [] and "nodeName" in str(problems[0])


# -- the recompute reads them ----------------------------------------------------------------------------------------
@pytest.fixture
def recompute():
    from idleshare.adapters.ports import ClusterRecord
    from idleshare.service.recompute import Recomputer
    from tests.builders import k8s_node
    from tests.fakes import FakeKube, FakePublisher, FakeStore

    def make(mode: Headroom = Headroom.DAEMONSETS):
        store = FakeStore([ClusterRecord("demo", "demo-eks", settings=ClusterSettings(headroom=mode))])
        kube = FakeKube([k8s_node(f"p5-{i}") for i in range(2)])
        kube.daemonsets = [DS_OBJECT | {"spec": {"template": {"spec": {"containers": [CNI_CONTAINER]}}}}]
        return store, kube, Recomputer(store, lambda c: kube, FakePublisher())

    return make


CNI_CONTAINER = {"name": "cni", "resources": {"requests": {"cpu": "250m", "memory": "500Mi"}}}


def test_the_recompute_charges_daemonsets_and_a_failed_read_keeps_the_last_pool(recompute):
    from idleshare.errors import ClusterReadError, RetryableError

    store, kube, r = recompute()
    outcome = r.recompute("demo")
    assert outcome.result is not None
    assert outcome.result.headroom == {f"p5-{i}": {"cpu": Fraction(1, 4), "memory": 500 * MI} for i in range(2)}
    kept = store.pools["demo"]
    kube.daemonsets = RetryableError("the API server is busy", operation="list DaemonSet")
    with pytest.raises(ClusterReadError, match="DaemonSets, pods or Workloads"):
        r.recompute("demo")
    assert store.pools["demo"].generation == kept.generation and store.pools["demo"].pool == kept.pool
    assert "busy" in (store.pools["demo"].read_failure or "")


def test_on_all_a_failed_list_of_workloads_is_a_failed_read_never_kueues_pods_charged(recompute):
    from idleshare.errors import ClusterReadError, RetryableError

    store, kube, r = recompute(Headroom.ALL)
    r.recompute("demo")
    kept = store.pools["demo"]
    kube.workloads = RetryableError("the API server is busy", operation="list Workload")
    with pytest.raises(ClusterReadError, match="Workloads"):
        r.recompute("demo")
    assert store.pools["demo"].generation == kept.generation and store.pools["demo"].pool == kept.pool


def test_an_unreadable_daemonset_is_a_named_issue_and_pods_are_read_only_on_all(recompute):
    _, kube, r = recompute(Headroom.ALL)
    assert isinstance(kube.daemonsets, list)
    kube.daemonsets.append({"metadata": {"name": "broken", "namespace": "ops"}, "spec": {"template": {"spec": {
        "containers": [{"resources": {"requests": {"memory": "-1Gi"}}}]}}}})  # fmt: skip
    job = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "job-uid", "controller": True}
    kueue_labels = {"kueue.x-k8s.io/podset": "main", "kueue.x-k8s.io/queue-name": "hyperpod-ns-a-localqueue"}
    kube.pods = [
        {"metadata": {"name": "web", "namespace": "x"}, "spec": {"nodeName": "p5-0", "containers": [CNI_CONTAINER]}},
        {"metadata": {"name": "train-0", "namespace": "hyperpod-ns-a", "labels": kueue_labels, "ownerReferences": [job]},
         "spec": {"nodeName": "p5-1", "containers": [CNI_CONTAINER]}},
        # Kueue's labels, no Workload: charged (issue 41.3)
        {"metadata": {"name": "forged", "namespace": "hyperpod-ns-a", "labels": kueue_labels},
         "spec": {"nodeName": "p5-1", "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": 8}}}]}},
    ]  # fmt: skip
    admitted = {"type": "Admitted", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    kube.workloads = [
        {"metadata": {"name": "job-train", "namespace": "hyperpod-ns-a", "ownerReferences": [job]},
         "status": {"conditions": [admitted]}},
        {"metadata": {"name": "broken", "namespace": "hyperpod-ns-a", "ownerReferences": "not a list"}},
    ]  # fmt: skip
    result = r.recompute("demo").result
    assert result is not None
    (issue,) = [i for i in result.issues if i.code == "UnreadableDaemonSet"]
    assert issue.subject == "ops/broken" and 'containers[0].resources.requests["memory"]' in issue.message
    (issue,) = [i for i in result.issues if i.code == "UnreadableWorkload"]
    assert issue.subject == "hyperpod-ns-a/broken" and "ownerReferences" in issue.message
    assert result.headroom["p5-0"] == {"cpu": Fraction(1, 2), "memory": 1000 * MI}  # the CNI and the foreign pod
    # the CNI, and the forged pod's 8 GPUs; the Job's pod is in Kueue's usage (its admitted Workload's owner)
    assert result.headroom["p5-1"] == {"cpu": Fraction(1, 4), "memory": 500 * MI, "nvidia.com/gpu": 8}
    assert result.capacity["ml.p5.48xlarge"]["nvidia.com/gpu"] == 8


# -- every node's headroom is visible ----------------------------------------------------------------------------
def test_plan_reads_one_dump_and_shows_every_nodes_headroom(tmp_path, capsys):
    from idleshare_cli.main import main
    from tests.builders import k8s_node

    dump = {"kind": "List", "items": [k8s_node("p5-0"), k8s_node("p5-1"), DS_OBJECT | {"spec": {"template": {"spec": {
        "containers": [CNI_CONTAINER]}}}}]}  # fmt: skip
    (tmp_path / "all.json").write_text(json.dumps(dump))
    assert main(["plan", "--nodes", str(tmp_path / "all.json"), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["headroom"]["mode"] == "daemonsets"
    assert doc["headroom"]["nodes"] == {f"p5-{i}": {"cpu": "250m", "memory": "500Mi"} for i in range(2)}
    assert doc["headroom"]["byFlavor"] == {P5: {"cpu": "500m", "memory": "1000Mi"}}
    assert main(["plan", "--nodes", str(tmp_path / "all.json"), "--format", "table"]) == 0
    table = capsys.readouterr().out
    assert "Headroom (daemonsets)" in table and any(
        line.split() == ["p5-0", "0.25", "0.4Gi"] for line in table.splitlines()
    )
    assert main(["plan", "--nodes", str(tmp_path / "all.json"), "--headroom", "off", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["headroom"] == {"mode": "off", "byFlavor": {}, "nodes": {}}
    # a bad DaemonSet file: the field named, exit 2, no traceback
    (tmp_path / "ds.json").write_text(json.dumps([{"metadata": {"name": "x"}, "spec": {"template": {"spec": {
        "tolerations": [{"operator": "Maybe"}]}}}}]))  # fmt: skip
    assert main(["plan", "--nodes", str(tmp_path / "all.json"), "--daemonsets", str(tmp_path / "ds.json")]) == 2
    err = capsys.readouterr().err
    assert "tolerations[0].operator" in err and "Traceback" not in err


JOB_OWNER = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "job-uid", "controller": True}
KUEUE_LABELS = {"kueue.x-k8s.io/podset": "main", "kueue.x-k8s.io/queue-name": "hyperpod-ns-a-localqueue"}


def gpu_pod(name: str, node_name: str, **metadata: object) -> dict:
    container = {"name": "c", "resources": {"requests": {"nvidia.com/gpu": 4}, "limits": {"nvidia.com/gpu": 4}}}
    return {"kind": "Pod", "metadata": {"name": name, "namespace": "hyperpod-ns-a", **metadata},
            "spec": {"nodeName": node_name, "containers": [container]}, "status": {"phase": "Running"}}  # fmt: skip


def test_plan_on_all_charges_a_pod_no_admitted_workload_in_the_dump_owns(tmp_path, capsys):
    """``plan`` reads the Workloads of a ``kubectl get nodes,daemonsets,pods,workloads -A -o json`` (or
    ``--workloads``) as the recompute does: preview = deployment (issue 41.3)."""
    from idleshare_cli.main import main
    from tests.builders import k8s_node

    workload = {"kind": "Workload", "metadata": {"name": "job-train", "namespace": "hyperpod-ns-a",
                "ownerReferences": [JOB_OWNER]}, "status": {"conditions": [{"type": "Admitted", "status": "True"}]}}  # fmt: skip
    pods = [
        gpu_pod("train-0", "p5-0", labels=KUEUE_LABELS, ownerReferences=[JOB_OWNER]),  # Kueue's: its Workload's
        gpu_pod("forged", "p5-1", labels=KUEUE_LABELS),  # Kueue's labels, no Workload: charged
    ]
    dump = {"kind": "List", "items": [k8s_node("p5-0"), k8s_node("p5-1"), *pods, workload]}
    (tmp_path / "all.json").write_text(json.dumps(dump))
    assert main(["plan", "--nodes", str(tmp_path / "all.json"), "--headroom", "all", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["headroom"]["nodes"] == {"p5-1": {"nvidia.com/gpu": "4"}}
    # the same with the Workloads in a file of their own; without them, both pods are charged
    (tmp_path / "nodes.json").write_text(json.dumps({"kind": "List", "items": [*dump["items"][:4]]}))
    (tmp_path / "wl.json").write_text(json.dumps({"kind": "WorkloadList", "items": [workload]}))
    args = ["plan", "--nodes", str(tmp_path / "nodes.json"), "--headroom", "all", "--format", "json"]
    assert main([*args, "--workloads", str(tmp_path / "wl.json")]) == 0
    assert json.loads(capsys.readouterr().out)["headroom"]["nodes"] == {"p5-1": {"nvidia.com/gpu": "4"}}
    assert main(args) == 0
    assert set(json.loads(capsys.readouterr().out)["headroom"]["nodes"]) == {"p5-0", "p5-1"}
    # a Workload that does not read: named, exit 2, no traceback
    (tmp_path / "bad.json").write_text(
        json.dumps([{"metadata": {"name": "w", "namespace": "n", "ownerReferences": 7}}])
    )
    assert main([*args, "--workloads", str(tmp_path / "bad.json")]) == 2
    err = capsys.readouterr().err
    assert "n/w" in err and "ownerReferences" in err and "Traceback" not in err


def test_get_pool_shows_a_sample_of_nodes_and_every_flavors_sum(recompute):
    from idleshare.service.admin import Admin
    from idleshare_cli.report_html import render

    store, kube, r = recompute()
    kube.nodes = [k8s_node_named(f"p5-{i:03d}") for i in range(150)]
    r.recompute("demo")
    shown = Admin(store, None).pool("demo")["headroom"]
    assert (shown["total"], shown["shown"], len(shown["nodes"])) == (150, 100, 100)
    assert shown["byFlavor"] == {P5: {"cpu": "37500m", "memory": "75000Mi"}}  # 150 x 250m, 150 x 500Mi
    page = render(shown and Admin(store, None).pool("demo"))
    assert '<tr data-headroom-node="p5-000"><td>p5-000</td>' in page and "The first 100 of 150 nodes" in page
    assert f'<tr data-headroom-flavor="{P5}">' in page


def k8s_node_named(name: str) -> dict:
    from tests.builders import k8s_node

    return k8s_node(name)
