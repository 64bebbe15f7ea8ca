"""The benchmark's synthetic cluster is deterministic, real-sized and valid."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from idleshare.domain.eligibility import exclusion_reason
from idleshare.domain.model import DEFAULT_TOLERATED_TAINT_KEYS, ExclusionReason
from idleshare.parse.nodes import parse_nodes
from idleshare.parse.quotas import parse_quotas
from idleshare_cli import plan
from tests.bench.botocore_shapes import violations
from tests.bench.synthetic import FLAVORS, OVERSUBSCRIBED, make_cluster, make_nodes_list

N = 600


@pytest.fixture(scope="module")
def cluster() -> tuple[bytes, bytes]:
    return make_cluster(N)


def test_same_seed_same_bytes_other_seed_other_bytes(cluster: tuple[bytes, bytes]) -> None:
    assert make_cluster(N) == cluster
    other_nodes, other_quotas = make_cluster(N, seed=1)
    assert other_nodes != cluster[0] and other_quotas != cluster[1]


def test_nodes_parse_with_every_flavor_and_real_sized_objects(cluster: tuple[bytes, bytes]) -> None:
    raw_nodes, _ = cluster
    document = json.loads(raw_nodes)
    assert document["kind"] == "NodeList"
    nodes = parse_nodes(raw_nodes, "synthetic")
    assert len(nodes) == N
    assert {n.instance_type for n in nodes} == {f.instance_type for f in FLAVORS}
    # the json.loads floor is only meaningful on nodes as big as real ones
    per_node = len(raw_nodes) / N
    assert 4_000 <= per_node <= 9_000, per_node
    assert all(item["metadata"]["managedFields"] and item["status"]["images"] for item in document["items"])


def test_mig_neuron_and_every_exclusion_reason_are_present(cluster: tuple[bytes, bytes]) -> None:
    nodes = parse_nodes(cluster[0])
    resources = {r for n in nodes for r in n.allocatable}
    assert {"nvidia.com/mig-1g.5gb", "nvidia.com/mig-3g.40gb", "aws.amazon.com/neurondevice"} <= resources
    reasons = Counter(exclusion_reason(n, DEFAULT_TOLERATED_TAINT_KEYS) for n in nodes)
    # the synthetic fleet's labels are all well formed; MigNotReady is the pool's (exclusion_reason never answers it)
    absent = {ExclusionReason.NO_INSTANCE_TYPE, ExclusionReason.UNREADABLE, ExclusionReason.INVALID_INSTANCE_TYPE}
    assert set(reasons) == {None, *ExclusionReason} - absent - {ExclusionReason.MIG_NOT_READY}
    assert 0.03 <= 1 - reasons[None] / N <= 0.07


def test_fewer_flavors_on_request() -> None:
    items, eligible = make_nodes_list(100, n_flavors=3)
    assert len(items) == 100 and len(eligible) == 3


def test_quotas_are_valid_per_botocore_and_cover_every_strategy(cluster: tuple[bytes, bytes]) -> None:
    quotas = json.loads(cluster[1])
    assert len(quotas) == 200
    assert {q["ComputeQuotaTarget"]["TeamName"] for q in quotas} == {f"team-{i:03d}" for i in range(200)}
    problems = [p for q in quotas for p in violations("CreateComputeQuotaRequest", q)]
    assert problems == []
    strategies = Counter(q["ComputeQuotaConfig"].get("ResourceSharingConfig", {}).get("Strategy") for q in quotas)
    assert set(strategies) == {"Lend", "DontLend", "LendAndBorrow", None}
    assert any("AbsoluteBorrowLimits" in q["ComputeQuotaConfig"].get("ResourceSharingConfig", {}) for q in quotas)
    assert any(q["ActivationState"] == "Disabled" for q in quotas)
    entries = [e for q in quotas for e in q["ComputeQuotaConfig"]["ComputeQuotaResources"]]
    for field in ("Count", "Accelerators", "AcceleratorPartition", "VCpu", "MemoryInGiB"):
        assert any(field in e for e in entries), field


def test_quotas_parse_and_oversubscribe_exactly_one_flavor(cluster: tuple[bytes, bytes]) -> None:
    assert len(parse_quotas(cluster[1], "synthetic-quotas")) == 200
    result = plan.plan_from_bytes(cluster[0], cluster[1], None)
    short = {flavor for flavor, per in result["shortfall"].items() if per}
    assert short == {OVERSUBSCRIBED}
    assert "nvidia.com/gpu" in result["shortfall"][OVERSUBSCRIBED]
