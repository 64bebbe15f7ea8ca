"""Issue 40.3-40.5 on the real kube-apiserver + Kueue: a plain EKS cluster (EC2 names, one stray ``ml.`` node, Neuron
nodes of both device plugins, time-sliced GPUs, two nodes reporting 2^63-1 GPUs) with quotas naming EC2 types — every
object ``plan`` emits is accepted, every quantity is inside Kueue's int64, every team has its ClusterQueue, and the
quotas land on the flavors most nodes carry."""

from __future__ import annotations

import json
from typing import Any

from devkit.kube.client import Kube
from idleshare.domain.quantity import parse_quantity
from idleshare_cli.plan import plan
from tests.kube.test_manifests_crd import assert_all_accepted

INT64 = 2**63 - 1


def node(name: str, instance_type: str, allocatable: dict[str, str], ready: str = "True") -> dict[str, Any]:
    labels = {"node.kubernetes.io/instance-type": instance_type, "karpenter.sh/capacity-type": "on-demand"}
    status = {"allocatable": {"pods": "110", **allocatable}, "conditions": [{"type": "Ready", "status": ready}]}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}, "status": status}


P5 = {"cpu": "191450m", "memory": "2000Gi", "nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32"}
NODES = [
    *(node(f"p5-{i}", "p5.48xlarge", P5) for i in range(3)),
    node("p5-stray", "ml.p5.48xlarge", P5, ready="False"),
    *(node(f"trn-{i}", "trn1.2xlarge", {"cpu": "7910m", "memory": "29Gi", "aws.amazon.com/neuron": "1",
                                         "aws.amazon.com/neuroncore": "2"}) for i in range(2)),
    node("trn-old", "trn1.32xlarge", {"cpu": "127610m", "memory": "480Gi", "aws.amazon.com/neurondevice": "16",
                                       "aws.amazon.com/neuroncore": "32"}),
    node("g5-shared", "g5.12xlarge", {"cpu": "47810m", "memory": "180Gi", "nvidia.com/gpu.shared": "16"}),
    *(node(f"odd-{i}", "g6e.12xlarge", {"cpu": "47810m", "memory": "360Gi", "nvidia.com/gpu": str(INT64)})
      for i in range(2)),
]  # fmt: skip


def quota(team: str, instance_type: str, accelerators: int, borrow: int = 50) -> dict[str, Any]:
    return {
        "Name": f"{team}-quota",
        "ComputeQuotaTarget": {"TeamName": team},
        "ComputeQuotaConfig": {
            "ComputeQuotaResources": [{"InstanceType": instance_type, "Accelerators": accelerators}],
            "ResourceSharingConfig": {"Strategy": "LendAndBorrow", "BorrowLimit": borrow},
        },
    }


QUOTAS = [
    quota("llm", "ml.p5.48xlarge", 8),
    quota("vision", "p5.48xlarge", 8),
    quota("neuron", "trn1.2xlarge", 1),
    quota("neuron-old", "trn1.32xlarge", 8),
    quota("shared", "g5.12xlarge", 4),
    quota("odd", "g6e.12xlarge", 8, borrow=10_000),
]


def test_a_plain_eks_cluster_is_governed_whole_and_the_api_server_accepts_it(kube: Kube) -> None:
    result, manifests = plan(json.dumps({"kind": "List", "items": NODES}), json.dumps(QUOTAS))
    assert assert_all_accepted(kube, manifests) > 0
    queues = {m["metadata"]["name"] for m in manifests if m["kind"] == "ClusterQueue"}
    assert {f"hyperpod-ns-{q['ComputeQuotaTarget']['TeamName']}-clusterqueue" for q in QUOTAS} <= queues
    # both names of p5 govern the EC2 flavor (three nodes) and not the stray ml. node's
    assert result.teams["llm"].nominal["p5.48xlarge"]["nvidia.com/gpu"] == 8
    assert result.teams["vision"].nominal["p5.48xlarge"]["nvidia.com/gpu"] == 8
    assert result.teams["neuron"].nominal["trn1.2xlarge"]["aws.amazon.com/neuron"] == 1
    assert result.teams["neuron-old"].nominal["trn1.32xlarge"]["aws.amazon.com/neurondevice"] == 8
    assert result.teams["shared"].nominal["g5.12xlarge"]["nvidia.com/gpu.shared"] == 4
    codes = {(i.code, i.subject) for i in result.issues}
    assert ("QuantityOutOfRange", "g6e.12xlarge/nvidia.com/gpu") in codes
    assert ("TwoNamesForOneInstanceType", "ml.p5.48xlarge") in codes
    for m in manifests:
        for group in m.get("spec", {}).get("resourceGroups", []):
            for f in group["flavors"]:
                for r in f["resources"]:
                    for key in ("nominalQuota", "borrowingLimit", "lendingLimit"):
                        value = parse_quantity(str(r.get(key, "0")))
                        assert (value * 1000 if r["name"] == "cpu" else value) <= INT64, (m["metadata"]["name"], r)
