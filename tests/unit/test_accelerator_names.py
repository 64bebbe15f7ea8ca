"""Issue 40.4: every accelerator resource name a device plugin advertises, on real-shaped Node objects (docs/spec.md
§2, "Accelerators"): what a quota's ``Accelerators`` counts on each, what capacity holds, what Kueue is given."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from idleshare.domain.eligibility import exclusion_reason
from idleshare.domain.kueue import writable_objects
from idleshare.domain.model import DEFAULT_TOLERATED_TAINT_KEYS, SchedulerConfig, Settings, Snapshot, is_accelerator
from idleshare.domain.pool import compute
from idleshare.domain.quantity import round_down
from idleshare.parse.nodes import parse_nodes
from tests.builders import entry, quota

NEURON, NEURON_DEVICE, CORE = "aws.amazon.com/neuron", "aws.amazon.com/neurondevice", "aws.amazon.com/neuroncore"
GPU, SHARED = "nvidia.com/gpu", "nvidia.com/gpu.shared"
MI = 1024**2


def k8s_node(name: str, instance_type: str, allocatable: dict[str, str], **labels: str) -> dict[str, Any]:
    """A Node as `kubectl get nodes -o json` prints one of an EKS managed node group (the fields idleshare reads and
    a few it skips)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "node.kubernetes.io/instance-type": instance_type,
                "beta.kubernetes.io/instance-type": instance_type,
                "eks.amazonaws.com/nodegroup": "accel",
                "kubernetes.io/arch": "amd64",
                "topology.kubernetes.io/zone": "us-west-2d",
                **labels,
            },
        },
        "spec": {"providerID": f"aws:///us-west-2d/i-0{name}"},
        "status": {
            "allocatable": {"ephemeral-storage": "95491281146", "hugepages-1Gi": "0", "pods": "58", **allocatable},
            "capacity": dict(allocatable),
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


# the Neuron device plugin from Neuron 2.20 on: aws.amazon.com/neuron (devices) and aws.amazon.com/neuroncore
TRN1_2XL = {"cpu": "7910m", "memory": "31441636Ki", NEURON: "1", CORE: "2"}
INF2_XL = {"cpu": "3920m", "memory": "15153500Ki", NEURON: "1", CORE: "2"}
TRN2_48XL = {"cpu": "191450m", "memory": "2058810000Ki", NEURON: "16", CORE: "64", "vpc.amazonaws.com/efa": "16"}
# up to Neuron 2.19: aws.amazon.com/neurondevice (devices) and aws.amazon.com/neuroncore
TRN1_32XL_OLD = {
    "cpu": "127610m",
    "memory": "518975216Ki",
    NEURON_DEVICE: "16",
    CORE: "32",
    "vpc.amazonaws.com/efa": "8",
}
# NVIDIA's device plugin, time-slicing with renameByDefault: 4 A10G, 4 replicas each
G5_12XL_SHARED = {"cpu": "47810m", "memory": "192687360Ki", SHARED: "16"}


def run(raw_nodes: list[dict[str, Any]], quotas: tuple[Any, ...] = (), **settings: Any):
    nodes = parse_nodes({"kind": "List", "items": raw_nodes})
    snapshot = Snapshot(nodes=nodes, quotas=quotas, settings=Settings(**settings))
    return compute(snapshot), snapshot


@pytest.mark.parametrize(
    ("instance_type", "allocatable", "device", "devices", "cores"),
    [
        ("trn1.2xlarge", TRN1_2XL, NEURON, 1, 2),
        ("inf2.xlarge", INF2_XL, NEURON, 1, 2),
        ("trn2.48xlarge", TRN2_48XL, NEURON, 16, 64),
        ("trn1.32xlarge", TRN1_32XL_OLD, NEURON_DEVICE, 16, 32),
    ],
)
def test_a_neuron_node_of_either_plugin_lends_its_devices_and_cores(instance_type, allocatable, device, devices, cores):
    # Given two Neuron nodes as their device plugin reports them
    result, _ = run([k8s_node(f"n{i}", instance_type, allocatable) for i in range(2)])
    # Then they are eligible and their devices and cores are capacity (not "no accelerators")
    assert result.excluded_nodes == {}
    assert (result.capacity[instance_type][device], result.capacity[instance_type][CORE]) == (2 * devices, 2 * cores)
    assert is_accelerator(device) and is_accelerator(CORE)


def test_accelerators_on_a_neuron_flavor_count_devices_and_give_their_cores():
    fleet = [k8s_node(f"t{i}", "trn2.48xlarge", TRN2_48XL) for i in range(2)]
    result, _ = run(fleet, (quota("a", entry("trn2.48xlarge", accelerators=4)),))
    nominal = result.teams["a"].nominal["trn2.48xlarge"]
    assert (nominal[NEURON], nominal[CORE]) == (4, 16)  # 4 devices, and their 4 x 64/16 cores
    assert nominal["cpu"] == round_down("cpu", Fraction(191450, 1000) / 4)  # a quarter of the node
    assert nominal["memory"] == 2058810000 * 1024 // 4 // MI * MI
    assert nominal.get(NEURON_DEVICE, 0) == 0 and nominal.get(GPU, 0) == 0
    assert result.teams["a"].bounds()["trn2.48xlarge"] == "percentage of quota"


def test_accelerators_on_the_old_plugin_count_neurondevice():
    fleet = [k8s_node("t0", "trn1.32xlarge", TRN1_32XL_OLD)]
    result, _ = run(fleet, (quota("a", entry("ml.trn1.32xlarge", accelerators=8)),))
    nominal = result.teams["a"].nominal["trn1.32xlarge"]
    assert (nominal[NEURON_DEVICE], nominal[CORE], nominal.get(NEURON, 0)) == (8, 16, 0)


def test_accelerators_on_a_time_sliced_flavor_count_the_replicas_the_plugin_advertises():
    fleet = [k8s_node(f"g{i}", "g5.12xlarge", G5_12XL_SHARED) for i in range(3)]
    result, _ = run(fleet, (quota("a", entry("g5.12xlarge", accelerators=4)),))
    assert result.capacity["g5.12xlarge"][SHARED] == 48
    nominal = result.teams["a"].nominal["g5.12xlarge"]
    assert (nominal[SHARED], nominal.get(GPU, 0)) == (4, 0)
    assert nominal["cpu"] == round_down("cpu", Fraction(47810, 1000) / 4)  # 4 of the node's 16 replicas


def test_a_configured_extra_resource_is_tracked_and_is_what_accelerators_counts_where_nothing_else_is():
    amd = {"cpu": "191450m", "memory": "2058810000Ki", "amd.com/gpu": "8"}
    fleet = [k8s_node("m0", "mi300x.48xlarge", amd)]
    untracked, _ = run(fleet, (quota("a", entry("mi300x.48xlarge", accelerators=2)),))
    assert "amd.com/gpu" not in untracked.resources
    result, _ = run(
        fleet, (quota("a", entry("mi300x.48xlarge", accelerators=2)),), extra_resources=frozenset({"amd.com/gpu"})
    )
    assert result.capacity["mi300x.48xlarge"]["amd.com/gpu"] == 8
    nominal = result.teams["a"].nominal["mi300x.48xlarge"]
    assert (nominal["amd.com/gpu"], nominal["cpu"]) == (2, round_down("cpu", Fraction(191450, 1000) / 4))


def test_every_accelerator_name_reaches_kueue_and_the_cohort_lends_it():
    fleet = [
        k8s_node("t0", "trn1.2xlarge", TRN1_2XL),
        k8s_node("t1", "trn1.32xlarge", TRN1_32XL_OLD),
        k8s_node("g0", "g5.12xlarge", G5_12XL_SHARED),
    ]
    result, snapshot = run(fleet, (quota("a", entry("trn1.2xlarge", accelerators=1)),))
    result, manifests = writable_objects(result, SchedulerConfig(), snapshot.settings)
    (cohort,) = [m for m in manifests if m["kind"] == "Cohort"]
    covered = {r for group in cohort["spec"]["resourceGroups"] for r in group["coveredResources"]}
    assert {NEURON, NEURON_DEVICE, CORE, SHARED} <= covered
    quotas = {
        (f["name"], r["name"]): r["nominalQuota"]
        for group in cohort["spec"]["resourceGroups"]
        for f in group["flavors"]
        for r in f["resources"]
    }
    assert quotas[("trn1.32xlarge", NEURON_DEVICE)] == "16" and quotas[("g5.12xlarge", SHARED)] == "16"
    assert quotas[("trn1.2xlarge", NEURON)] == "0" and quotas[("trn1.2xlarge", CORE)] == "0"  # team a holds them


def test_a_neuron_node_whose_plugin_is_not_up_is_accelerators_not_ready():
    (node,) = parse_nodes([k8s_node("t0", "trn1.2xlarge", {"cpu": "7910m", "memory": "31441636Ki"})])
    assert exclusion_reason(node, DEFAULT_TOLERATED_TAINT_KEYS) == "AcceleratorsNotReady"


def test_a_plugin_advertising_both_device_names_gives_a_quota_the_devices_under_both():
    # a node advertising aws.amazon.com/neuron and aws.amazon.com/neurondevice (the same 16 devices, as
    # events/examples/nodes.json's trn1 nodes do): a pod may request either, so a quota holds both, and its cores
    both = {**TRN1_32XL_OLD, NEURON: "16"}
    limit = entry("trn1.32xlarge", accelerators=2)
    result, _ = run(
        [k8s_node("t0", "trn1.32xlarge", both)],
        (quota("a", entry("trn1.32xlarge", accelerators=8), absolute=(limit,)),),
    )
    nominal = result.teams["a"].nominal["trn1.32xlarge"]
    assert (nominal[NEURON], nominal[NEURON_DEVICE], nominal[CORE]) == (8, 8, 16)
    borrowing = result.teams["a"].borrowing_limit["trn1.32xlarge"]
    assert (borrowing[NEURON], borrowing[NEURON_DEVICE]) == (2, 2)  # the absolute cap names the device: both names
