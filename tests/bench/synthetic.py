"""A synthetic HyperPod cluster of any size, for the benchmark and the scale tests.

``make_cluster(n)`` returns the bytes the Kubernetes API would send for ``GET /api/v1/nodes`` (a
compact ``NodeList`` of real-sized Node objects: labels, managedFields, conditions, images, nodeInfo;
built by ``events/examples/make_nodes.py``'s ``node_object``) and a JSON array of compute quotas in
the ``CreateComputeQuota`` shape that stays inside botocore's bounds. Deterministic for a seed.

Shape of the cluster:

- up to 8 flavors: H100 (p5), A100 cut into MIG 1g.5gb slices (p4d), A100-80GB with a mixed MIG
  layout (p4de), Trainium (trn1), A10G (g5.12xlarge, g5.48xlarge), L40S (g6e), system CPU nodes (m5);
- about 5% of the nodes ineligible, cycling through every exclusion reason;
- quotas for ``n_teams`` teams using every entry kind (Count, Accelerators, AcceleratorPartition,
  VCpu/MemoryInGiB, Count with overrides), every Strategy (and no ResourceSharingConfig at all),
  BorrowLimit from 0 to 10000, AbsoluteBorrowLimits on about a quarter of the borrowers, a few
  Disabled quotas, a few teams with no resources (pure borrowers);
- the enabled quotas add up to about 70% of each flavor's eligible capacity, except on
  ``OVERSUBSCRIBED`` where they ask for about 130% (a shortfall).
"""

from __future__ import annotations

import importlib.util
import json
import math
import random
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

_MAKE_NODES = Path(__file__).resolve().parents[2] / "events" / "examples" / "make_nodes.py"


def _load_make_nodes() -> ModuleType:
    spec = importlib.util.spec_from_file_location("idleshare_example_make_nodes", _MAKE_NODES)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


make_nodes = _load_make_nodes()

CLUSTER_ARN = "arn:aws:sagemaker:us-west-2:123456789012:cluster/k1ft7ynfs0qz"
OVERSUBSCRIBED = "ml.g5.12xlarge"
INELIGIBLE_EVERY = 20  # one node in 20 is ineligible


@dataclass(frozen=True)
class Flavor:
    instance_type: str
    weight: float  # share of the nodes
    accelerator: str | None  # the resource "Accelerators" counts, None on CPU-only flavors
    mig: dict[str, int] | None = None  # MIG profile -> slices per node (mixed strategy)
    mig_config: str | None = None


FLAVORS: tuple[Flavor, ...] = (
    Flavor("ml.p5.48xlarge", 0.20, "nvidia.com/gpu"),
    Flavor("ml.p4d.24xlarge", 0.10, None, {"mig-1g.5gb": 56}, "all-1g.5gb"),
    Flavor("ml.p4de.24xlarge", 0.08, None, {"mig-1g.10gb": 16, "mig-2g.20gb": 8, "mig-3g.40gb": 8}, "all-balanced"),
    Flavor("ml.trn1.32xlarge", 0.15, "aws.amazon.com/neurondevice"),
    Flavor("ml.g5.12xlarge", 0.20, "nvidia.com/gpu"),
    Flavor("ml.g5.48xlarge", 0.10, "nvidia.com/gpu"),
    Flavor("ml.g6e.12xlarge", 0.12, "nvidia.com/gpu"),
    Flavor("ml.m5.2xlarge", 0.05, None),
)

_INELIGIBLE = (
    "NotReady",
    "Unschedulable",
    "Unhealthy",
    "UntoleratedTaint",
    "Deleting",
    "AcceleratorsNotReady",
    "NoReadyCondition",
)
_DEVICE_PLUGIN_RESOURCES = ("nvidia.com/", "aws.amazon.com/neuron")


def _node(flavor: Flavor, index: int, seed: int, ineligible: str | None, n_images: int = 1) -> dict[str, Any]:
    spec = make_nodes.SPECS[flavor.instance_type]
    node: dict[str, Any] = make_nodes.node_object(
        spec,
        index,
        group=flavor.instance_type.removeprefix("ml.").replace(".", "-"),
        zone=index % 3,
        mig=flavor.mig,
        mig_config=flavor.mig_config,
        ready=ineligible not in ("NotReady", "NoReadyCondition"),
        unschedulable=ineligible == "Unschedulable",
        health="UnschedulablePendingReboot" if ineligible == "Unhealthy" else "Schedulable",
        deleting=ineligible == "Deleting",
        extra_taints=[{"effect": "NoSchedule", "key": "dedicated", "value": "inference"}]
        if ineligible == "UntoleratedTaint"
        else None,
        n_images=n_images,
        seed=seed,
    )
    if ineligible == "NoReadyCondition":  # a node whose kubelet never posted its Ready condition
        node["status"]["conditions"] = [c for c in node["status"]["conditions"] if c["type"] != "Ready"]
    if ineligible == "AcceleratorsNotReady":  # its device plugin has not registered: no accelerator reported yet
        for field in ("allocatable", "capacity"):
            resources = node["status"][field]
            for r in [r for r in resources if r.startswith(_DEVICE_PLUGIN_RESOURCES)]:
                del resources[r]
    return node


def _flavor_counts(n_nodes: int, flavors: tuple[Flavor, ...]) -> list[int]:
    total = sum(f.weight for f in flavors)
    counts = [math.floor(n_nodes * f.weight / total) for f in flavors]
    for i in range(n_nodes - sum(counts)):  # hand the remainder out round-robin
        counts[i % len(counts)] += 1
    return counts


def make_nodes_list(
    n_nodes: int, n_flavors: int = 8, seed: int = 0, *, n_images: int = 1
) -> tuple[list[dict[str, Any]], Counter[str]]:
    """The Node objects and, per flavor, how many of them are eligible; ``n_images``: the container images each
    node lists in ``status.images`` (a kubelet reports up to 50; 1 keeps the 7 KB nodes of ``make bench``, 12 —
    ``make_nodes``' default, ~9.5 KB a node — is a node that has run a few training images)."""
    items: list[dict[str, Any]] = []
    eligible: Counter[str] = Counter()
    for node, ok in iter_nodes(n_nodes, n_flavors, seed, n_images=n_images):
        items.append(node)
        if ok:
            eligible[node["metadata"]["labels"]["node.kubernetes.io/instance-type"]] += 1
    names = [item["metadata"]["name"] for item in items]
    if len(set(names)) != len(names):  # pragma: no cover - 64-bit hashes; would need a new seed
        raise RuntimeError("node name collision; use another seed")
    return items, eligible


def iter_nodes(
    n_nodes: int, n_flavors: int = 8, seed: int = 0, *, n_images: int = 1
) -> Iterator[tuple[dict[str, Any], bool]]:
    """:func:`make_nodes_list`'s nodes one at a time, each with whether it is eligible (the scale bench loads 100k
    without holding them)."""
    if not 1 <= n_flavors <= len(FLAVORS):
        raise ValueError(f"n_flavors must be 1..{len(FLAVORS)}")
    flavors = FLAVORS[:n_flavors]
    rng = random.Random(seed)
    plan: list[tuple[Flavor, int]] = []
    for flavor, count in zip(flavors, _flavor_counts(n_nodes, flavors), strict=True):
        plan += [(flavor, i) for i in range(count)]
    rng.shuffle(plan)  # kubectl lists by name, which is random with respect to the flavor
    for position, (flavor, index) in enumerate(plan):
        ineligible = _INELIGIBLE[(position // INELIGIBLE_EVERY) % len(_INELIGIBLE)]
        if ineligible == "AcceleratorsNotReady" and flavor.accelerator is None and flavor.mig is None:
            ineligible = "NotReady"  # a CPU-only node has no device plugin to wait for
        reason = ineligible if position % INELIGIBLE_EVERY == INELIGIBLE_EVERY - 1 else None
        yield _node(flavor, index, seed, reason, n_images), reason is None


def _node_list_bytes(items: list[dict[str, Any]]) -> bytes:
    doc = {
        "kind": "NodeList",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": "187233541"},
        "items": items,
    }
    return json.dumps(doc, separators=(",", ":")).encode()  # what the API server sends


def _entry(flavor: Flavor, share: float, rng: random.Random) -> dict[str, Any] | None:
    """One ComputeQuotaResources entry worth ``share`` nodes of ``flavor`` (rounded down)."""
    spec = make_nodes.SPECS[flavor.instance_type]
    entry: dict[str, Any] = {"InstanceType": flavor.instance_type}
    kinds = ["count", "count_override", "vcpu_memory"]
    if flavor.accelerator:
        kinds += ["accelerators", "accelerators"]
    if flavor.mig:
        kinds += ["partition", "partition"]
    if flavor.instance_type == OVERSUBSCRIBED:  # short of everything, accelerators included
        kinds = ["count", "accelerators"]
    kind = rng.choice(kinds)
    if kind in ("count", "count_override") and share >= 1:
        entry["Count"] = math.floor(share)
        if kind == "count_override":  # Count sets every resource; a field beside it overrides its own
            entry["VCpu"] = math.floor(share) * spec.vcpu // 2
    elif kind == "accelerators" and flavor.accelerator:
        per_node = spec.devices[flavor.accelerator]
        entry["Accelerators"] = math.floor(share * per_node)
    elif kind == "partition" and flavor.mig:
        profile, per_node = rng.choice(sorted(flavor.mig.items()))
        entry["AcceleratorPartition"] = {"Type": profile, "Count": math.floor(share * per_node)}
    else:
        entry["VCpu"] = math.floor(share * spec.vcpu * 10) / 10  # one decimal, as a console would
        if rng.random() < 0.7:
            entry["MemoryInGiB"] = math.floor(share * spec.memory_capacity_ki / 2**20 * 0.9 * 4) / 4
    amounts = [v["Count"] if isinstance(v, dict) else v for k, v in entry.items() if k != "InstanceType"]
    return entry if any(amounts) else None  # a share below one unit: no entry


def make_quotas(eligible: Counter[str], n_flavors: int = 8, n_teams: int = 200, seed: int = 0) -> list[dict[str, Any]]:
    """Compute quotas (CreateComputeQuota shape) for ``n_teams`` teams over the given capacity."""
    rng = random.Random(seed * 7919 + 1)
    flavors = FLAVORS[:n_flavors]
    strategies = ("LendAndBorrow", "Lend", "DontLend", None)  # None: no ResourceSharingConfig
    teams = [f"team-{i:03d}" for i in range(n_teams)]
    disabled = {t for i, t in enumerate(teams) if i % 37 == 36}
    # which teams hold quota on which flavors (1-3 flavors each; every 25th team holds none)
    holdings: dict[str, list[Flavor]] = {}
    for i, team in enumerate(teams):
        holdings[team] = [] if i % 25 == 24 else rng.sample(flavors, k=min(len(flavors), rng.randint(1, 3)))
    holders: dict[str, int] = Counter(
        f.instance_type for team, held in holdings.items() if team not in disabled for f in held
    )
    quotas: list[dict[str, Any]] = []
    for i, team in enumerate(teams):
        resources = []
        for flavor in holdings[team]:
            target = 1.3 if flavor.instance_type == OVERSUBSCRIBED else 0.7
            share = target * eligible[flavor.instance_type] / max(1, holders[flavor.instance_type])
            entry = _entry(flavor, share, rng)
            if entry is not None:
                resources.append(entry)
        strategy = strategies[i % len(strategies)]
        config: dict[str, Any] = {"ComputeQuotaResources": resources}
        if strategy is not None:
            sharing: dict[str, Any] = {"Strategy": strategy}
            if strategy == "LendAndBorrow":
                sharing["BorrowLimit"] = rng.choice((0, 10, 50, 100, 250, 10000))
                if i % 4 == 0 and flavors:
                    target_flavor = rng.choice(flavors)
                    spec = make_nodes.SPECS[target_flavor.instance_type]
                    limit: dict[str, Any] = {"InstanceType": target_flavor.instance_type}
                    if target_flavor.accelerator:
                        limit["Accelerators"] = rng.randint(0, 4) * spec.devices[target_flavor.accelerator]
                    else:
                        limit["Count"] = rng.randint(0, 4)
                    sharing["AbsoluteBorrowLimits"] = [limit]
            config["ResourceSharingConfig"] = sharing
        config["PreemptTeamTasks"] = rng.choice(("Never", "LowerPriority"))
        quota: dict[str, Any] = {
            "Name": f"{team}-quota",
            "ClusterArn": CLUSTER_ARN,
            "ComputeQuotaConfig": config,
            "ComputeQuotaTarget": {"TeamName": team, "FairShareWeight": rng.randint(0, 100)},
            "ActivationState": "Disabled" if team in disabled else "Enabled",
        }
        quotas.append(quota)
    return quotas


def make_cluster(n_nodes: int, n_flavors: int = 8, n_teams: int = 200, seed: int = 0) -> tuple[bytes, bytes]:
    """``(NodeList JSON bytes, quotas JSON bytes)`` of a synthetic cluster; same seed, same bytes."""
    items, eligible = make_nodes_list(n_nodes, n_flavors, seed)
    quotas = make_quotas(eligible, n_flavors, n_teams, seed)
    return _node_list_bytes(items), json.dumps(quotas, separators=(",", ":")).encode()
