#!/usr/bin/env python3
"""Generate the zoo: real cluster shapes, each a ``kubectl get nodes,daemonsets,pods -A -o json`` dump
(``<shape>/cluster.json``) and the teams' compute quotas (``<shape>/quotas.json``, CreateComputeQuota bodies).

Standard library only and deterministic (running it twice gives the same bytes). Nodes are built by
``events/examples/make_nodes.py``'s ``node_object`` (the API server's shape: labels, managedFields, conditions,
nodeInfo, allocatable after the EKS AMI's reservations), then given the labels, taints, resources and operating
system of each setup, as each publishes them:

- ``karpenter``: one NodePool allowed any instance type, so one node of each of 152 CPU types (x86 and Graviton,
  spot and on-demand) beside 2 p5.48xlarge and 2 g6e.12xlarge; Karpenter's labels (``karpenter.sh/nodepool``,
  ``karpenter.sh/capacity-type``, ``karpenter.k8s.aws/instance-*``), its ``karpenter.sh/unregistered`` taint on a
  node still starting.
- ``hyperpod``: ``ml.`` names, HyperPod's health and deep-health labels and taints (Schedulable, Unschedulable,
  UnschedulablePendingReplacement, a deep health check in progress), mixed MIG layouts and MIG states (``success``,
  ``pending``, ``failed``) on p4d.
- ``eks-gpu``: a plain EKS managed node group cluster: EC2 names, ``eks.amazonaws.com/*`` labels, time slicing
  (``nvidia.com/gpu.shared``, renameByDefault) on g5, MIG (mixed strategy) on p4d, whole GPUs on p5.
- ``neuron``: trn1.32xlarge on the Neuron device plugin up to 2.19 (``aws.amazon.com/neurondevice`` and
  ``neuroncore``), trn2.48xlarge and inf2 on the current one (``aws.amazon.com/neuron`` and ``neuroncore``).
- ``bottlerocket``: Bottlerocket OS nodes (NVIDIA variant on g6e, the aws-k8s variant on m7g): its osImage,
  kernel and runtime, no ``/etc`` of Amazon Linux.
- ``mixed-names``: a HyperPod cluster with an EKS managed node group beside it: ``ml.p5.48xlarge`` and
  ``p5.48xlarge`` nodes, ``ml.m5.2xlarge`` and ``m7i.4xlarge``.
- ``odd-quantities``: what the API server stores and a naive reader misreads: memory in ``G``, ``M`` and plain
  bytes, cpu in whole cores and as ``47.5``, memory as ``0.18Ti``, a node reporting ``1e3`` GPUs beside its peers'
  8, two nodes of 2^63 - 1 GPUs (a fraction of a device, which the API server refuses on a Node, is not here: plan
  refuses it naming the node).

Each dump also holds the DaemonSets an EKS cluster of that kind runs (kube-proxy, aws-node, the device plugins,
a monitoring agent) and pods bound to nodes: the DaemonSets' own and one pod of no controller.

Usage: ``python events/zoo/make_zoo.py`` (writes next to this script).
"""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("make_nodes", HERE.parent / "examples" / "make_nodes.py")
assert _spec is not None and _spec.loader is not None
mn = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = mn
_spec.loader.exec_module(mn)

Obj = dict[str, Any]
GIB_KI = 1024 * 1024
ITYPE = "node.kubernetes.io/instance-type"
KUBELET = "v1.32.3-eks-473151a"

# vCPU and GiB of the CPU types a Karpenter NodePool of any type may launch (EC2's published sizes)
_SIZES = {"large": 2, "xlarge": 4, "2xlarge": 8, "4xlarge": 16, "8xlarge": 32, "12xlarge": 48, "16xlarge": 64}
_FAMILIES = {  # family: GiB per vCPU, Graviton
    "c5": (2, False), "c6i": (2, False), "c6a": (2, False), "c7i": (2, False), "c6g": (2, True), "c7g": (2, True),
    "m5": (4, False), "m6i": (4, False), "m6a": (4, False), "m7i": (4, False), "m6g": (4, True), "m7g": (4, True),
    "r5": (8, False), "r6i": (8, False), "r6a": (8, False), "r7i": (8, False), "r6g": (8, True), "r7g": (8, True),
    "m8g": (4, True), "c8g": (2, True), "r8g": (8, True), "m7a": (4, False),
}  # fmt: skip
CPU_TYPES = [(f"{f}.{s}", v, v * g, arm) for f, (g, arm) in _FAMILIES.items() for s, v in _SIZES.items()]


def cpu_spec(instance_type: str, vcpu: int, gib: int) -> Any:
    pods = 29 if vcpu <= 2 else 58 if vcpu <= 8 else 234
    return mn.InstanceSpec(instance_type, vcpu, gib * GIB_KI * 97 // 100, pods, 83873772)


def gpu(instance_type: str, vcpu: int, gib: int, gpus: int, efa: int, product: str, mib: int, pods: int = 234) -> Any:
    return mn._gpu_spec(instance_type, vcpu, gib * GIB_KI * 97 // 100, pods, 209702892, gpus, efa, product, mib)


P5 = mn.SPECS["ml.p5.48xlarge"]
P4D = mn.SPECS["ml.p4d.24xlarge"]
G6E = gpu("g6e.12xlarge", 48, 384, 4, 1, "NVIDIA-L40S", 46068)
G5 = gpu("g5.12xlarge", 48, 192, 4, 1, "NVIDIA-A10G", 23028)
TRN1_OLD = mn.InstanceSpec(
    "trn1.32xlarge", 128, 528201284, 247, 524275692,
    {"aws.amazon.com/neurondevice": 16, "aws.amazon.com/neuroncore": 32, "vpc.amazonaws.com/efa": 8}, neuron=True,
)  # fmt: skip
TRN2 = mn.InstanceSpec(
    "trn2.48xlarge", 192, 2 * 1024 * GIB_KI * 97 // 100, 737, 524275692,
    {"aws.amazon.com/neuron": 16, "aws.amazon.com/neuroncore": 128, "vpc.amazonaws.com/efa": 16}, neuron=True,
)  # fmt: skip
INF2_XL = mn.InstanceSpec(
    "inf2.xlarge", 4, 16 * GIB_KI * 97 // 100, 58, 83873772,
    {"aws.amazon.com/neuron": 1, "aws.amazon.com/neuroncore": 2}, neuron=True,
)  # fmt: skip
INF2_48 = mn.InstanceSpec(
    "inf2.48xlarge", 192, 768 * GIB_KI * 97 // 100, 737, 524275692,
    {"aws.amazon.com/neuron": 12, "aws.amazon.com/neuroncore": 24}, neuron=True,
)  # fmt: skip


# ------------------------------------------------------------------------------------------ the setups' labels
def _renamed(spec: Any, instance_type: str) -> Any:
    return mn.InstanceSpec(**{**spec.__dict__, "instance_type": instance_type})


def _node(spec: Any, index: int, group: str, **kwargs: Any) -> Obj:
    return mn.node_object(spec, index, group=group, seed=group, n_images=3, **kwargs)


def eks(node: Obj, *, nodegroup: str | None = None, capacity: str = "ON_DEMAND", arm: bool = False) -> Obj:
    """A plain EKS node: no SageMaker label, taint, finalizer or provider id; an EC2 instance id and name."""
    node = copy.deepcopy(node)
    meta, labels = node["metadata"], node["metadata"]["labels"]
    for key in [k for k in labels if k.startswith("sagemaker.amazonaws.com/")]:
        del labels[key]
    node["spec"]["taints"] = [t for t in node["spec"].get("taints", []) if "sagemaker" not in t["key"]]
    if not node["spec"]["taints"]:
        del node["spec"]["taints"]
    meta.pop("finalizers", None)
    iid = "i-" + mn._hex("ec2", meta["uid"], n=17)
    ip = next(a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP")
    name = f"ip-{ip.replace('.', '-')}.{mn.REGION}.compute.internal"
    meta["name"] = labels["kubernetes.io/hostname"] = name
    zone = labels["topology.kubernetes.io/zone"]
    node["spec"]["providerID"] = f"aws:///{zone}/{iid}"
    node["status"]["addresses"] = [
        a if a["type"] != "Hostname" else {**a, "address": name} for a in node["status"]["addresses"]
    ]
    if nodegroup is not None:
        labels.update(
            {
                "eks.amazonaws.com/capacityType": capacity,
                "eks.amazonaws.com/nodegroup": nodegroup,
                "eks.amazonaws.com/nodegroup-image": "ami-0" + mn._hex("ami", nodegroup, n=16),
                "eks.amazonaws.com/sourceLaunchTemplateId": "lt-0" + mn._hex("lt", nodegroup, n=16),
                "eks.amazonaws.com/sourceLaunchTemplateVersion": "1",
            }
        )
    if arm:
        _arm(node)
    node["status"]["nodeInfo"]["kubeletVersion"] = KUBELET
    node["metadata"]["labels"] = dict(sorted(labels.items()))
    return node


def _arm(node: Obj) -> None:
    labels = node["metadata"]["labels"]
    labels["kubernetes.io/arch"] = labels["beta.kubernetes.io/arch"] = "arm64"
    node["status"]["nodeInfo"]["architecture"] = "arm64"
    node["status"]["nodeInfo"]["kernelVersion"] = "6.1.132-147.221.amzn2023.aarch64"
    node["status"]["nodeInfo"]["osImage"] = "Amazon Linux 2023.7.20250414"


def karpenter(
    node: Obj, *, nodepool: str, capacity: str, family: str, size: str, arm: bool, vcpu: int, gib: int
) -> Obj:
    node = eks(node, arm=arm)
    labels = node["metadata"]["labels"]
    labels.update(
        {
            "karpenter.sh/capacity-type": capacity,
            "karpenter.sh/initialized": "true",
            "karpenter.sh/nodepool": nodepool,
            "karpenter.sh/registered": "true",
            "karpenter.k8s.aws/ec2nodeclass": "default",
            "karpenter.k8s.aws/instance-category": family[0],
            "karpenter.k8s.aws/instance-cpu": str(vcpu),
            "karpenter.k8s.aws/instance-family": family,
            "karpenter.k8s.aws/instance-generation": "".join(c for c in family if c.isdigit()),
            "karpenter.k8s.aws/instance-hypervisor": "nitro",
            "karpenter.k8s.aws/instance-memory": str(gib * 1024),
            "karpenter.k8s.aws/instance-size": size,
        }
    )
    node["metadata"]["labels"] = dict(sorted(labels.items()))
    node["metadata"].setdefault("finalizers", []).append("karpenter.sh/termination")
    node["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "karpenter.sh/v1",
            "blockOwnerDeletion": True,
            "kind": "NodeClaim",
            "name": f"{nodepool}-{mn._hex('claim', node['metadata']['uid'], n=5)}",
            "uid": mn._uuid("claim", node["metadata"]["uid"]),
        }
    ]
    return node


def bottlerocket(node: Obj, variant: str) -> Obj:
    info = node["status"]["nodeInfo"]
    info["osImage"] = "Bottlerocket OS 1.36.0 (" + variant + ")"
    info["kernelVersion"] = "6.1.131"
    info["containerRuntimeVersion"] = "containerd://1.7.27+bottlerocket"
    node["metadata"]["labels"]["bottlerocket.aws/updater-interface-version"] = "2.0.0"
    node["metadata"]["labels"] = dict(sorted(node["metadata"]["labels"].items()))
    return node


def resources(node: Obj, **changes: str | None) -> Obj:
    """Set (or, None, drop) resources in allocatable and capacity alike."""
    for part in ("allocatable", "capacity"):
        for key, value in changes.items():
            name = key.replace("__", "/").replace("_", ".")
            if value is None:
                node["status"][part].pop(name, None)
            else:
                node["status"][part][name] = value
    return node


def time_sliced(node: Obj, replicas: int) -> Obj:
    """NVIDIA's device plugin with time slicing and renameByDefault: each GPU advertised as ``replicas`` shares."""
    gpus = int(node["status"]["allocatable"]["nvidia.com/gpu"])
    resources(node, **{"nvidia.com__gpu": None, "nvidia.com__gpu_shared": str(gpus * replicas)})
    labels = node["metadata"]["labels"]
    labels["nvidia.com/gpu.replicas"] = str(replicas)
    labels["nvidia.com/gpu.sharing-strategy"] = "time-slicing"
    labels["nvidia.com/gpu.product"] += "-SHARED"
    node["metadata"]["labels"] = dict(sorted(labels.items()))
    return node


def mig_state(node: Obj, state: str) -> Obj:
    node["metadata"]["labels"]["nvidia.com/mig.config.state"] = state
    return node


def health(node: Obj, status: str, deep: str = "Passed") -> Obj:
    labels = node["metadata"]["labels"]
    labels["sagemaker.amazonaws.com/node-health-status"] = status
    labels["sagemaker.amazonaws.com/deep-health-check-status"] = deep
    taints = [t for t in node["spec"].get("taints", []) if t["key"] != "sagemaker.amazonaws.com/node-health-status"]
    if status != "Schedulable":
        taints.append({"effect": "NoSchedule", "key": "sagemaker.amazonaws.com/node-health-status", "value": status})
    node["spec"]["taints"] = taints
    return node


# ------------------------------------------------------------------------------------------ DaemonSets and pods
def daemonset(name: str, namespace: str, requests: dict[str, str], **template: Any) -> Obj:
    uid = mn._uuid("ds", namespace, name)
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid,
            "generation": 1,
            "creationTimestamp": mn.CREATED,
        },
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": name}},
                "spec": {
                    "containers": [
                        {"name": name, "image": f"{mn.ECR}/eks/{name}:v1", "resources": {"requests": requests}}
                    ],
                    **template,
                },
            },
        },
    }


def _selected(ds: Obj, node: Obj) -> bool:
    selector = ds["spec"]["template"]["spec"].get("nodeSelector") or {}
    labels = node["metadata"]["labels"]
    if any(labels.get(k) != v for k, v in selector.items()):
        return False
    tolerated = {t.get("key") for t in ds["spec"]["template"]["spec"].get("tolerations") or []}
    return "" in tolerated or all(
        t["key"] in tolerated for t in node["spec"].get("taints", []) if t["effect"] != "PreferNoSchedule"
    )


def pod(name: str, namespace: str, node: str, requests: dict[str, str], owner: Obj | None = None) -> Obj:
    meta: Obj = {"name": name, "namespace": namespace, "uid": mn._uuid("pod", namespace, name)}
    if owner is not None:
        meta["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": owner["kind"], "name": owner["metadata"]["name"],
             "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
        ]  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "x", "resources": {"requests": requests}}]},
        "status": {"phase": "Running"},
    }


ALL = [{"operator": "Exists"}]
NVIDIA = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
NEURON = {"key": "aws.amazon.com/neuron", "operator": "Exists", "effect": "NoSchedule"}


def eks_daemonsets(*extra: Obj) -> list[Obj]:
    return [
        daemonset("kube-proxy", "kube-system", {"cpu": "100m"}, tolerations=ALL),
        daemonset("aws-node", "kube-system", {"cpu": "25m"}, tolerations=ALL),
        daemonset("ebs-csi-node", "kube-system", {"cpu": "10m", "memory": "40Mi"}, tolerations=ALL),
        daemonset("node-exporter", "monitoring", {"cpu": "100m", "memory": "180Mi"}),
        *extra,
    ]


def nvidia_plugin() -> Obj:
    return daemonset(
        "nvidia-device-plugin", "kube-system", {"cpu": "50m", "memory": "64Mi"},
        nodeSelector={"nvidia.com/gpu.present": "true"}, tolerations=[NVIDIA],
    )  # fmt: skip


def neuron_plugin() -> Obj:
    return daemonset(
        "neuron-device-plugin", "kube-system", {"cpu": "50m", "memory": "64Mi"},
        nodeSelector={"aws.amazon.com/neuron.present": "true"}, tolerations=[NEURON],
    )  # fmt: skip


def dump(nodes: list[Obj], daemonsets: list[Obj]) -> Obj:
    """The List ``kubectl get nodes,daemonsets,pods -A -o json`` prints: the DaemonSets' pods on the nodes they
    select, and one pod of no controller on the first node."""
    pods = [
        pod(f"{ds['metadata']['name']}-{mn._hex('p', ds['metadata']['name'], n['metadata']['name'], n=5)}",
            ds["metadata"]["namespace"], n["metadata"]["name"],
            ds["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"], ds)
        for ds in daemonsets for n in nodes if _selected(ds, n)
    ]  # fmt: skip
    pods.append(pod("debug-shell", "default", nodes[0]["metadata"]["name"], {"cpu": "500m", "memory": "1Gi"}))
    return {
        "apiVersion": "v1",
        "kind": "List",
        "items": [*nodes, *daemonsets, *pods],
        "metadata": {"resourceVersion": ""},
    }


def quota(
    team: str, entries: Iterable[Obj], *, strategy: str = "LendAndBorrow", borrow: int | None = 50, **more: Any
) -> Obj:
    sharing: Obj = {"Strategy": strategy}
    if borrow is not None and strategy == "LendAndBorrow":
        sharing["BorrowLimit"] = borrow
    return {
        "Name": f"{team}-quota",
        "ComputeQuotaConfig": {"ComputeQuotaResources": list(entries), "ResourceSharingConfig": sharing, **more},
        "ComputeQuotaTarget": {"TeamName": team, "FairShareWeight": 10},
        "ActivationState": "Enabled",
    }


# ------------------------------------------------------------------------------------------ the shapes
def karpenter_cluster() -> tuple[Obj, list[Obj]]:
    nodes = [
        karpenter(_node(_renamed(P5, "p5.48xlarge"), i, "gpu"), nodepool="gpu", capacity="on-demand",
                  family="p5", size="48xlarge", arm=False, vcpu=192, gib=2048)
        for i in range(2)
    ] + [
        karpenter(_node(G6E, i, "inference"), nodepool="inference", capacity="spot", family="g6e", size="12xlarge",
                  arm=False, vcpu=48, gib=384)
        for i in range(2)
    ]  # fmt: skip
    for i, (instance_type, vcpu, gib, arm) in enumerate(CPU_TYPES):
        family, size = instance_type.split(".")
        node = _node(cpu_spec(instance_type, vcpu, gib), i, "default")
        capacity = "spot" if i % 3 == 0 else "on-demand"
        nodes.append(
            karpenter(
                node, nodepool="default", capacity=capacity, family=family, size=size, arm=arm, vcpu=vcpu, gib=gib
            )
        )
    starting = nodes[-1]  # a node Karpenter launched that has not registered yet: its startup taint
    starting["spec"].setdefault("taints", []).append({"effect": "NoExecute", "key": "karpenter.sh/unregistered"})
    quotas = [
        quota("research", [{"InstanceType": "p5.48xlarge", "Count": 1}]),
        quota("inference", [{"InstanceType": "g6e.12xlarge", "Count": 1}], strategy="Lend"),
        quota("data", [{"InstanceType": "m7i.4xlarge", "Count": 1}, {"InstanceType": "c7g.2xlarge", "VCpu": 4}]),
    ]
    return dump(nodes, eks_daemonsets(nvidia_plugin())), quotas


def hyperpod_cluster() -> tuple[Obj, list[Obj]]:
    nodes = [_node(P5, i, "p5-training") for i in range(4)]
    health(nodes[1], "Unschedulable")
    health(nodes[2], "UnschedulablePendingReplacement")
    health(nodes[3], "Schedulable", deep="InProgress")
    layouts = [
        ({"mig-1g.5gb": 56}, "all-1g.5gb", "success"),
        ({"mig-3g.20gb": 16}, "all-3g.20gb", "success"),
        ({"mig-1g.5gb": 28, "mig-3g.20gb": 8}, "custom-mixed", "success"),
        ({"mig-1g.5gb": 56}, "all-1g.5gb", "pending"),
        ({"mig-3g.20gb": 16}, "all-3g.20gb", "failed"),
    ]
    for i, (layout, config, state) in enumerate(layouts):
        nodes.append(mig_state(_node(P4D, i, "p4d-mig", mig=layout, mig_config=config), state))
    nodes += [_node(mn.SPECS["ml.g5.12xlarge"], i, "g5-inference") for i in range(2)]
    quotas = [
        quota("training", [{"InstanceType": "ml.p5.48xlarge", "Count": 1}]),
        quota(
            "vision", [{"InstanceType": "ml.p4d.24xlarge", "AcceleratorPartition": {"Type": "mig-1g.5gb", "Count": 14}}]
        ),
        quota("serving", [{"InstanceType": "ml.g5.12xlarge", "Count": 1}], strategy="DontLend"),
    ]
    return dump(nodes, eks_daemonsets(nvidia_plugin())), quotas


def eks_gpu_cluster() -> tuple[Obj, list[Obj]]:
    nodes = [eks(_node(_renamed(P5, "p5.48xlarge"), i, "p5"), nodegroup="p5") for i in range(2)]
    nodes += [
        eks(
            _node(_renamed(P4D, "p4d.24xlarge"), i, "p4d", mig={"mig-1g.5gb": 56}, mig_config="all-1g.5gb"),
            nodegroup="p4d",
        )
        for i in range(2)
    ]
    nodes += [time_sliced(eks(_node(G5, i, "g5"), nodegroup="g5-shared", capacity="SPOT"), 4) for i in range(2)]
    nodes += [eks(_node(cpu_spec("m7i.4xlarge", 16, 64), i, "system"), nodegroup="system") for i in range(2)]
    quotas = [
        quota("llm", [{"InstanceType": "p5.48xlarge", "Count": 1}]),
        quota(
            "vision", [{"InstanceType": "p4d.24xlarge", "AcceleratorPartition": {"Type": "mig-1g.5gb", "Count": 28}}]
        ),
        quota("notebooks", [{"InstanceType": "g5.12xlarge", "Accelerators": 8}], strategy="Lend"),
    ]
    return dump(nodes, eks_daemonsets(nvidia_plugin())), quotas


def neuron_cluster() -> tuple[Obj, list[Obj]]:
    nodes = [eks(_node(TRN1_OLD, i, "trn1"), nodegroup="trn1") for i in range(2)]
    nodes += [eks(_node(TRN2, i, "trn2"), nodegroup="trn2") for i in range(2)]
    nodes += [eks(_node(INF2_XL, i, "inf2"), nodegroup="inf2") for i in range(3)]
    nodes += [eks(_node(INF2_48, 0, "inf2-large"), nodegroup="inf2-large")]
    quotas = [
        quota("pretrain", [{"InstanceType": "trn2.48xlarge", "Count": 1}]),
        quota("finetune", [{"InstanceType": "trn1.32xlarge", "Accelerators": 8}]),
        quota(
            "serving",
            [{"InstanceType": "inf2.xlarge", "Count": 2}, {"InstanceType": "inf2.48xlarge", "Accelerators": 6}],
        ),
    ]
    return dump(nodes, eks_daemonsets(neuron_plugin())), quotas


def bottlerocket_cluster() -> tuple[Obj, list[Obj]]:
    nodes = [bottlerocket(eks(_node(G6E, i, "gpu"), nodegroup="gpu"), "aws-k8s-1.32-nvidia") for i in range(3)]
    arm = [cpu_spec("m7g.4xlarge", 16, 64)] * 2
    nodes += [
        bottlerocket(eks(_node(s, i, "arm"), nodegroup="arm", arm=True), "aws-k8s-1.32") for i, s in enumerate(arm)
    ]
    quotas = [
        quota("ml", [{"InstanceType": "g6e.12xlarge", "Count": 2}]),
        quota("web", [{"InstanceType": "m7g.4xlarge", "VCpu": 16, "MemoryInGiB": 48}], strategy="Lend"),
    ]
    return dump(nodes, eks_daemonsets(nvidia_plugin())), quotas


def mixed_names_cluster() -> tuple[Obj, list[Obj]]:
    nodes = [_node(P5, i, "hyperpod-p5") for i in range(2)]
    nodes += [_node(mn.SPECS["ml.m5.2xlarge"], i, "hyperpod-cpu") for i in range(2)]
    nodes += [eks(_node(_renamed(P5, "p5.48xlarge"), i, "eks-p5"), nodegroup="eks-p5") for i in range(1)]
    nodes += [eks(_node(cpu_spec("m7i.4xlarge", 16, 64), i, "eks-cpu"), nodegroup="eks-cpu") for i in range(2)]
    quotas = [
        quota("hp-team", [{"InstanceType": "ml.p5.48xlarge", "Count": 1}]),
        quota("eks-team", [{"InstanceType": "m7i.4xlarge", "Count": 1}], strategy="Lend"),
    ]
    return dump(nodes, eks_daemonsets(nvidia_plugin())), quotas


def odd_quantities_cluster() -> tuple[Obj, list[Obj]]:
    p5 = _renamed(P5, "p5.48xlarge")
    nodes = [eks(_node(p5, i, "p5"), nodegroup="p5") for i in range(3)]
    resources(nodes[0], memory="2100G", cpu="191")  # decimal units, whole cores
    resources(nodes[1], memory=str(2147483648 * 1000))  # plain bytes
    resources(nodes[2], **{"nvidia.com__gpu": "1e3"})  # one outlier among its peers' 8
    huge = eks(_node(_renamed(P5, "p4de.24xlarge"), 0, "huge"), nodegroup="huge")
    resources(huge, **{"nvidia.com__gpu": str(2**63 - 1)})
    huge2 = eks(_node(_renamed(P5, "p4de.24xlarge"), 1, "huge"), nodegroup="huge")
    resources(huge2, **{"nvidia.com__gpu": str(2**63 - 1)})
    decimal = eks(_node(G5, 0, "g5"), nodegroup="g5")
    resources(decimal, cpu="47.5", memory="0.18Ti")  # a decimal core count, a fraction of a binary suffix
    nodes += [huge, huge2, decimal, eks(_node(cpu_spec("m7i.4xlarge", 16, 64), 0, "cpu"), nodegroup="cpu")]
    quotas = [
        quota("big", [{"InstanceType": "p5.48xlarge", "Count": 2}]),
        quota("greedy", [{"InstanceType": "p4de.24xlarge", "Accelerators": 8}]),
        quota("small", [{"InstanceType": "m7i.4xlarge", "VCpu": 8}], strategy="Lend"),
    ]
    return dump(nodes, eks_daemonsets(nvidia_plugin())), quotas


SHAPES: dict[str, Callable[[], tuple[Obj, list[Obj]]]] = {
    "karpenter": karpenter_cluster,
    "hyperpod": hyperpod_cluster,
    "eks-gpu": eks_gpu_cluster,
    "neuron": neuron_cluster,
    "bottlerocket": bottlerocket_cluster,
    "mixed-names": mixed_names_cluster,
    "odd-quantities": odd_quantities_cluster,
}


def dumps(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":")) + "\n"


def files() -> dict[Path, str]:
    """Every file the zoo holds, path -> text."""
    out: dict[Path, str] = {}
    for name, build in SHAPES.items():
        cluster, quotas = build()
        out[HERE / name / "cluster.json"] = dumps(cluster)
        out[HERE / name / "quotas.json"] = dumps(quotas)
    return out


def main() -> None:
    for path, text in files().items():
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
        print(f"{path.relative_to(HERE)}: {len(text) // 1024} KiB")


if __name__ == "__main__":
    main()
