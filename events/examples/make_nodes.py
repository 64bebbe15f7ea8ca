#!/usr/bin/env python3
"""Generate ``nodes.json``: ``kubectl get nodes -o json`` of a realistic SageMaker HyperPod EKS cluster.

Standard library only and deterministic (no clock, no randomness): running it twice gives the same
bytes. ``node_object`` builds one Node the way the API server returns it (labels, annotations,
managedFields, taints, conditions, addresses, images, nodeInfo), and is reused by the benchmark's
synthetic cluster generator (``tests/bench/synthetic.py``).

Allocatable numbers follow the EKS AMI's reservations: kube-reserved cpu (6% of the first core, 1% of
the second, 0.5% of the next two, 0.25% of the rest), kube-reserved memory (255Mi + 11Mi per pod,
pods capped at 110 for the calculation) plus the 100Mi hard-eviction threshold.

Usage: ``python events/examples/make_nodes.py [output-path]`` (default: next to this script).
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

REGION = "us-west-2"
ZONES = (("us-west-2a", "usw2-az1"), ("us-west-2b", "usw2-az2"), ("us-west-2c", "usw2-az3"))
CLUSTER_NAME = "ml-cluster"
CLUSTER_ID = "k1ft7ynfs0qz"
KUBELET_VERSION = "v1.31.4-eks-aeac579"
CREATED = "2025-03-11T08:14:52Z"
HEARTBEAT = "2025-06-02T14:03:11Z"
ECR = f"602401143452.dkr.ecr.{REGION}.amazonaws.com"


@dataclass(frozen=True)
class InstanceSpec:
    """What one instance type reports to Kubernetes."""

    instance_type: str
    vcpu: int
    memory_capacity_ki: int  # what the kernel sees, below the nominal size
    max_pods: int
    ephemeral_storage_capacity_ki: int
    devices: dict[str, int] = field(default_factory=dict)  # extended resources in allocatable
    gpu_product: str | None = None
    gpu_memory_mib: int | None = None
    neuron: bool = False
    hugepages_2mi: int = 0

    @property
    def cpu_allocatable(self) -> str:
        reserved = 60 + (10 if self.vcpu > 1 else 0) + 5 * max(0, min(self.vcpu, 4) - 2)
        reserved += (25 * max(0, self.vcpu - 4) + 9) // 10
        return f"{self.vcpu * 1000 - reserved}m"

    @property
    def memory_allocatable_ki(self) -> int:
        reserved_mi = 255 + 11 * min(self.max_pods, 110) + 100
        return self.memory_capacity_ki - reserved_mi * 1024

    def capacity(self, mig: dict[str, int] | None = None) -> dict[str, str]:
        return self._resources(str(self.vcpu), f"{self.ephemeral_storage_capacity_ki}Ki", self.memory_capacity_ki, mig)

    def allocatable(self, mig: dict[str, int] | None = None) -> dict[str, str]:
        # ephemeral-storage: 10% reserved for eviction, printed in bytes as the kubelet does
        storage = self.ephemeral_storage_capacity_ki * 1024 * 9 // 10
        memory_ki = self.memory_allocatable_ki - self.hugepages_2mi * 1024
        return self._resources(self.cpu_allocatable, str(storage), memory_ki, mig)

    def _resources(self, cpu: str, storage: str, memory_ki: int, mig: dict[str, int] | None) -> dict[str, str]:
        out = {
            "cpu": cpu,
            "ephemeral-storage": storage,
            "hugepages-1Gi": "0",
            "hugepages-2Mi": f"{self.hugepages_2mi}Mi" if self.hugepages_2mi else "0",
            "memory": f"{memory_ki}Ki",
            "pods": str(self.max_pods),
        }
        out.update(_devices(self, mig))
        return dict(sorted(out.items()))


def _devices(spec: InstanceSpec, mig: dict[str, int] | None) -> dict[str, str]:
    devices = dict(spec.devices)
    if mig is not None:  # MIG "mixed" strategy: whole GPUs become 0, each profile its own resource
        devices["nvidia.com/gpu"] = 0
        devices.update({f"nvidia.com/{profile}": count for profile, count in mig.items()})
    return {name: str(count) for name, count in devices.items()}


def _gpu_spec(
    instance_type: str,
    vcpu: int,
    memory_ki: int,
    max_pods: int,
    disk_ki: int,
    gpus: int,
    efa: int,
    product: str,
    mib: int,
) -> InstanceSpec:
    """An NVIDIA instance type: its GPUs and EFA interfaces, the GPU's product label and memory (MiB)."""
    devices = {"nvidia.com/gpu": gpus, "vpc.amazonaws.com/efa": efa}
    return InstanceSpec(instance_type, vcpu, memory_ki, max_pods, disk_ki, devices, product, mib)


NEURON_DEVICES = {
    "aws.amazon.com/neuron": 16,
    "aws.amazon.com/neuroncore": 32,
    "aws.amazon.com/neurondevice": 16,
    "vpc.amazonaws.com/efa": 8,
}

SPECS: dict[str, InstanceSpec] = {
    s.instance_type: s
    for s in (
        # instance type, vCPU, memory capacity (KiB), max pods, ephemeral storage (KiB), GPUs, EFA, GPU product, MiB
        _gpu_spec("ml.p5.48xlarge", 192, 2097041540, 100, 524275692, 8, 32, "NVIDIA-H100-80GB-HBM3", 81559),
        _gpu_spec("ml.p4d.24xlarge", 96, 1176958036, 737, 524275692, 8, 4, "NVIDIA-A100-SXM4-40GB", 40960),
        _gpu_spec("ml.p4de.24xlarge", 96, 1176958036, 737, 524275692, 8, 4, "NVIDIA-A100-SXM4-80GB", 81920),
        InstanceSpec("ml.trn1.32xlarge", 128, 528201284, 247, 524275692, NEURON_DEVICES, neuron=True),
        _gpu_spec("ml.g5.12xlarge", 48, 195757292, 737, 209702892, 4, 1, "NVIDIA-A10G", 23028),
        _gpu_spec("ml.g5.48xlarge", 192, 790484612, 345, 209702892, 8, 1, "NVIDIA-A10G", 23028),
        _gpu_spec("ml.g6e.12xlarge", 48, 391592292, 234, 209702892, 4, 1, "NVIDIA-L40S", 46068),
        InstanceSpec("ml.m5.2xlarge", 8, 32386648, 58, 104845292),
    )
}


def _hex(*parts: object, n: int = 64) -> str:
    return hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:n]


def instance_id(*parts: object) -> str:
    return "i-0" + _hex("instance", *parts, n=16)


def _uuid(*parts: object) -> str:
    h = _hex("uuid", *parts, n=32)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"


def _images(spec: InstanceSpec, count: int) -> list[dict[str, object]]:
    repos = [
        (f"{ECR}/amazon-k8s-cni", "v1.19.2-eksbuild.1", 58_371_215),
        (f"{ECR}/amazon-k8s-cni-init", "v1.19.2-eksbuild.1", 61_470_553),
        (f"{ECR}/eks/kube-proxy", "v1.31.3-minimal-eksbuild.2", 36_519_624),
        (f"{ECR}/amazon/aws-network-policy-agent", "v1.1.6-eksbuild.1", 33_217_910),
        (f"{ECR}/eks/pause", "3.5", 298_689),
        (f"{ECR}/eks/aws-ebs-csi-driver", "v1.38.1", 41_230_077),
        ("public.ecr.aws/eks-distro/kubernetes-csi/livenessprobe", "v2.14.0-eks-1-31-7", 20_871_337),
        ("public.ecr.aws/aws-observability/aws-for-fluent-bit", "2.32.4", 119_203_551),
        ("registry.k8s.io/kueue/kueue", "v0.13.4", 28_113_408),
    ]
    if spec.gpu_product:
        repos += [
            ("nvcr.io/nvidia/k8s-device-plugin", "v0.17.0", 229_716_542),
            ("nvcr.io/nvidia/k8s/dcgm-exporter", "3.3.9-3.6.1-ubuntu22.04", 387_445_098),
            ("nvcr.io/nvidia/cloud-native/k8s-mig-manager", "v0.10.0-ubuntu20.04", 151_004_117),
            ("nvcr.io/nvidia/pytorch", "24.12-py3", 10_413_880_321),
        ]
    if spec.neuron:
        repos += [
            ("public.ecr.aws/neuron/neuron-device-plugin", "2.23.30.0", 68_107_020),
            ("public.ecr.aws/neuron/neuron-monitor", "1.3.0", 245_066_301),
            ("public.ecr.aws/neuron/pytorch-training-neuronx", "2.5.1-neuronx-py310-sdk2.21.0", 9_841_224_180),
        ]
    repos += [
        (f"{ECR}/hyperpod/health-monitoring-agent", "1.0.643.0_1.0.192.0", 1_028_300_644),
        ("public.ecr.aws/efa-device-plugin/efa-device-plugin", "v0.5.6", 12_882_413),
    ]
    chosen = sorted(repos[:count], key=lambda r: -r[2])  # the kubelet lists the largest first
    return [
        {"names": [f"{repo}@sha256:{_hex(repo, tag)}", f"{repo}:{tag}"], "sizeBytes": size}
        for repo, tag, size in chosen
    ]


def _managed_fields(
    labels: dict[str, str], taints: list[dict[str, str]], extended: list[str]
) -> list[dict[str, object]]:
    label_fields: dict[str, object] = {f"f:{k}": {} for k in sorted(labels)}
    kubelet_meta: dict[str, object] = {
        "f:metadata": {
            "f:annotations": {
                ".": {},
                "f:alpha.kubernetes.io/provided-node-ip": {},
                "f:node.alpha.kubernetes.io/ttl": {},
                "f:volumes.kubernetes.io/controller-managed-attach-detach": {},
            },
            "f:labels": {".": {}, **label_fields},
        },
        "f:spec": {"f:providerID": {}},
    }
    entries: list[dict[str, object]] = [
        {
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": kubelet_meta,
            "manager": "kubelet",
            "operation": "Update",
            "time": CREATED,
        },
        {
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {"f:labels": {"f:sagemaker.amazonaws.com/node-health-status": {}}},
                "f:spec": {"f:taints": {}} if taints else {},
            },
            "manager": "sagemaker-hyperpod-health-monitoring-agent",
            "operation": "Update",
            "time": HEARTBEAT,
        },
        {
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:status": {
                    "f:allocatable": {f"f:{r}": {} for r in extended},
                    "f:capacity": {f"f:{r}": {} for r in extended},
                    "f:conditions": {
                        f'k:{{"type":"{t}"}}': {
                            ".": {},
                            "f:lastHeartbeatTime": {},
                            "f:lastTransitionTime": {},
                            "f:message": {},
                            "f:reason": {},
                            "f:status": {},
                            "f:type": {},
                        }
                        for t in ("DiskPressure", "MemoryPressure", "PIDPressure", "Ready")
                    },
                    "f:images": {},
                    "f:nodeInfo": {"f:bootID": {}, "f:kubeletVersion": {}},
                },
            },
            "manager": "kubelet",
            "operation": "Update",
            "subresource": "status",
            "time": HEARTBEAT,
        },
    ]
    return entries


def _conditions(ready: bool) -> list[dict[str, str]]:
    def cond(kind: str, status: str, reason: str, message: str) -> dict[str, str]:
        return {
            "lastHeartbeatTime": HEARTBEAT,
            "lastTransitionTime": CREATED,
            "message": message,
            "reason": reason,
            "status": status,
            "type": kind,
        }

    out = [
        cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        cond("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ]
    if ready:
        out.append(cond("Ready", "True", "KubeletReady", "kubelet is posting ready status"))
    else:
        out = [
            {**c, "status": "Unknown", "reason": "NodeStatusUnknown", "message": "Kubelet stopped posting node status."}
            for c in out
        ]
        out.append(cond("Ready", "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status."))
    return out


def node_object(
    spec: InstanceSpec,
    index: int,
    *,
    group: str,
    zone: int = 0,
    mig: dict[str, int] | None = None,
    mig_config: str | None = None,
    ready: bool = True,
    unschedulable: bool = False,
    deleting: bool = False,
    health: str = "Schedulable",
    extra_taints: list[dict[str, str]] | None = None,
    n_images: int = 12,
    seed: object = "",
) -> dict[str, object]:
    """One Node as ``kubectl get node -o json`` prints it."""
    iid = instance_id(seed, group, index)
    name = f"hyperpod-{iid}"
    zone_name, zone_id = ZONES[zone % len(ZONES)]
    octets = int(_hex("ip", seed, group, index, n=6), 16)
    ip = f"10.1.{(octets >> 8) % 256}.{octets % 254 + 1}"
    labels: dict[str, str] = {
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/instance-type": spec.instance_type,
        "beta.kubernetes.io/os": "linux",
        "failure-domain.beta.kubernetes.io/region": REGION,
        "failure-domain.beta.kubernetes.io/zone": zone_name,
        "k8s.io/cloud-provider-aws": _hex("cloud-provider", CLUSTER_NAME, n=32),
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": spec.instance_type,
        "sagemaker.amazonaws.com/cluster-name": CLUSTER_NAME,
        "sagemaker.amazonaws.com/compute-type": "hyperpod",
        "sagemaker.amazonaws.com/deep-health-check-status": "Passed",
        "sagemaker.amazonaws.com/instance-group-name": group,
        "sagemaker.amazonaws.com/node-health-status": health,
        "topology.k8s.aws/network-node-layer-1": "nn-" + _hex("nn1", zone, n=17),
        "topology.k8s.aws/network-node-layer-2": "nn-" + _hex("nn2", zone, index // 8, n=17),
        "topology.k8s.aws/network-node-layer-3": "nn-" + _hex("nn3", zone, index // 4, n=17),
        "topology.k8s.aws/zone-id": zone_id,
        "topology.kubernetes.io/region": REGION,
        "topology.kubernetes.io/zone": zone_name,
    }
    if spec.gpu_product:
        gpus = spec.devices.get("nvidia.com/gpu", 0)
        labels.update(
            {
                "nvidia.com/cuda.driver.major": "550",
                "nvidia.com/cuda.driver.minor": "127",
                "nvidia.com/cuda.runtime.major": "12",
                "nvidia.com/cuda.runtime.minor": "4",
                "nvidia.com/gpu.count": str(gpus),
                "nvidia.com/gpu.family": "hopper" if "H100" in spec.gpu_product else "ampere",
                "nvidia.com/gpu.memory": str(spec.gpu_memory_mib),
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": spec.gpu_product + ("-MIG-" + mig_config if mig_config else ""),
                "nvidia.com/mig.capable": str("A100" in spec.gpu_product or "H100" in spec.gpu_product).lower(),
            }
        )
        if mig is not None:
            labels["nvidia.com/mig.config"] = mig_config or "all-balanced"
            labels["nvidia.com/mig.config.state"] = "success"
            labels["nvidia.com/mig.strategy"] = "mixed"
    if spec.neuron:
        labels["aws.amazon.com/neuron.present"] = "true"
    labels = dict(sorted(labels.items()))

    taints: list[dict[str, str]] = []
    if spec.gpu_product:
        taints.append({"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "true"})
    if spec.neuron:
        taints.append({"effect": "NoSchedule", "key": "aws.amazon.com/neuron", "value": "true"})
    if health != "Schedulable":
        taints.append({"effect": "NoSchedule", "key": "sagemaker.amazonaws.com/node-health-status", "value": health})
    if not ready:
        taints += [
            {"effect": "NoSchedule", "key": "node.kubernetes.io/unreachable", "timeAdded": HEARTBEAT},
            {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "timeAdded": HEARTBEAT},
        ]
    if unschedulable:
        taints.append({"effect": "NoSchedule", "key": "node.kubernetes.io/unschedulable", "timeAdded": HEARTBEAT})
    taints += extra_taints or []

    extended = sorted(r for r in spec.allocatable(mig) if "/" in r)
    metadata: dict[str, object] = {
        "annotations": {
            "alpha.kubernetes.io/provided-node-ip": ip,
            "node.alpha.kubernetes.io/ttl": "0",
            "volumes.kubernetes.io/controller-managed-attach-detach": "true",
        },
        "creationTimestamp": CREATED,
        "labels": labels,
        "managedFields": _managed_fields(labels, taints, extended),
        "name": name,
        "resourceVersion": str(1_000_000 + int(_hex("rv", seed, group, index, n=6), 16)),
        "uid": _uuid(seed, group, index),
    }
    if deleting:
        metadata["deletionTimestamp"] = HEARTBEAT
        metadata["deletionGracePeriodSeconds"] = 0
        metadata["finalizers"] = ["sagemaker.amazonaws.com/node-protection"]
    node_spec: dict[str, object] = {
        "providerID": f"aws:///{zone_id}/sagemaker/cluster/hyperpod-{CLUSTER_ID}-{iid}",
    }
    if taints:
        node_spec["taints"] = taints
    if unschedulable:
        node_spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": metadata,
        "spec": node_spec,
        "status": {
            "addresses": [
                {"address": ip, "type": "InternalIP"},
                {"address": name, "type": "Hostname"},
                {"address": f"ip-{ip.replace('.', '-')}.{REGION}.compute.internal", "type": "InternalDNS"},
            ],
            "allocatable": spec.allocatable(mig),
            "capacity": spec.capacity(mig),
            "conditions": _conditions(ready),
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "images": _images(spec, n_images),
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": _uuid("boot", seed, group, index),
                "containerRuntimeVersion": "containerd://1.7.25",
                "kernelVersion": "5.10.234-225.895.amzn2.x86_64",
                "kubeProxyVersion": "",
                "kubeletVersion": KUBELET_VERSION,
                "machineID": _hex("machine", seed, group, index, n=32),
                "operatingSystem": "linux",
                "osImage": "Amazon Linux 2",
                "systemUUID": "ec2" + _uuid("system", seed, group, index)[3:],
            },
            "runtimeHandlers": [
                {"features": {"recursiveReadOnlyMounts": True, "userNamespaces": True}, "name": "nvidia"},
                {"features": {"recursiveReadOnlyMounts": True, "userNamespaces": True}, "name": ""},
            ]
            if spec.gpu_product
            else [{"features": {"recursiveReadOnlyMounts": True, "userNamespaces": True}, "name": ""}],
        },
    }


def kubectl_list(items: list[dict[str, object]]) -> dict[str, object]:
    """What ``kubectl get nodes -o json`` wraps the nodes in."""
    return {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}


def dumps(obj: object) -> str:
    """kubectl's formatting: 4-space indent, a trailing newline."""
    return json.dumps(obj, indent=4) + "\n"


# MIG layouts on an A100 40GB (8 GPUs per p4d): 7 x 1g.5gb or 2 x 3g.20gb per GPU.
MIG_ALL_1G = {"mig-1g.5gb": 56}
MIG_ALL_3G = {"mig-3g.20gb": 16}


def example_cluster() -> dict[str, object]:
    """36 nodes; the special cases are named in the README's walkthrough of ``idleshare plan``."""
    p5, p4d, trn1, g5, m5 = (
        SPECS[t] for t in ("ml.p5.48xlarge", "ml.p4d.24xlarge", "ml.trn1.32xlarge", "ml.g5.12xlarge", "ml.m5.2xlarge")
    )
    items: list[dict[str, object]] = []
    # 8 x p5: one NotReady (kubelet stopped posting status)
    for i in range(8):
        items.append(node_object(p5, i, group="p5-training", zone=2, ready=i != 5))
    # 8 x p4d, MIG "mixed": 5 cut into 1g.5gb slices, 3 into 3g.20gb slices
    for i in range(8):
        layout, config = (MIG_ALL_1G, "all-1g.5gb") if i < 5 else (MIG_ALL_3G, "all-3g.20gb")
        items.append(node_object(p4d, i, group="p4d-mig", zone=1, mig=layout, mig_config=config))
    # 8 x trn1: one flagged by HyperPod's health agent, waiting for replacement
    for i in range(8):
        health = "UnschedulablePendingReplacement" if i == 3 else "Schedulable"
        items.append(node_object(trn1, i, group="trn1-training", zone=0, health=health))
    # 10 x g5.12xlarge: one cordoned for maintenance, one reserved with a taint nobody tolerates
    for i in range(10):
        extra = [{"effect": "NoSchedule", "key": "dedicated", "value": "inference"}] if i == 9 else None
        items.append(node_object(g5, i, group="g5-dev", zone=i % 3, unschedulable=i == 7, extra_taints=extra))
    # 2 x m5.2xlarge system nodes (controllers, CoreDNS, Kueue)
    for i in range(2):
        items.append(node_object(m5, i, group="system", zone=i, n_images=9))
    return kubectl_list(items)


def main(argv: list[str]) -> int:
    out = Path(argv[1]) if len(argv) > 1 else Path(__file__).with_name("nodes.json")
    out.write_text(dumps(example_cluster()))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
