"""docs/spec.md §3: the Kueue objects a pool result stands for."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lightkube.utils.quantity import parse_quantity

from idleshare.domain.kueue import webhook_violations
from idleshare.domain.model import BorrowLimitBasis, SchedulerConfig, Settings
from idleshare.domain.quantity import exact, format_quantity, percent_of, round_down
from tests.builders import CLUSTER, P4D, P5, QUOTAS, TRN1, objects

GPU = "nvidia.com/gpu"


def by_kind(objs, kind):
    return {o["metadata"]["name"]: o for o in objs if o["kind"] == kind}


def quota_of(group, flavor, resource):
    f = next(f for f in group["flavors"] if f["name"] == flavor)
    return next(r for r in f["resources"] if r["name"] == resource)


RESULT, OBJS = objects(CLUSTER, QUOTAS)  # read, never changed


def test_cohort_quota_is_the_unallocated_capacity_and_zero_without_idle_sharing():
    cohort = by_kind(OBJS, "Cohort")["shared-pool"]
    group = cohort["spec"]["resourceGroups"][0]
    assert group["coveredResources"] == list(RESULT.resources)
    assert quota_of(group, P5, GPU)["nominalQuota"] == "24"  # 32 - research 8 (paused is disabled)
    _, off = objects(CLUSTER, QUOTAS, sc=SchedulerConfig(idle_resource_sharing=False))
    group_off = by_kind(off, "Cohort")["shared-pool"]["spec"]["resourceGroups"][0]
    assert {r["nominalQuota"] for f in group_off["flavors"] for r in f["resources"]} == {"0"}


def test_cluster_queue_per_team():
    cqs = by_kind(OBJS, "ClusterQueue")
    assert sorted(cqs) == [f"hyperpod-ns-{t}-clusterqueue" for t in ("nlp", "paused", "research", "vision")]
    research = cqs["hyperpod-ns-research-clusterqueue"]["spec"]
    assert {k: v for k, v in research.items() if k != "resourceGroups"} == {
        "cohortName": "shared-pool",
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "hyperpod-ns-research"}},
        "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
        "fairSharing": {"weight": "10"},
        "stopPolicy": "None",
    }
    # on the Quota basis (the default) it may borrow BorrowLimit 100% of its own 8 p5 GPUs: 8
    gpu = quota_of(research["resourceGroups"][0], P5, GPU)
    assert gpu == {"name": GPU, "nominalQuota": "8", "borrowingLimit": "8", "lendingLimit": "8"}
    # and nothing where it has no quota: the flavor is listed with nominal 0 and borrowing limit 0
    trn = quota_of(research["resourceGroups"][0], TRN1, "aws.amazon.com/neurondevice")
    assert trn["nominalQuota"] == "0" and trn["borrowingLimit"] == "0"
    vision = quota_of(cqs["hyperpod-ns-vision-clusterqueue"]["spec"]["resourceGroups"][0], P4D, "nvidia.com/mig-1g.5gb")
    assert vision["lendingLimit"] == "0" and vision["nominalQuota"] == "28"
    paused = cqs["hyperpod-ns-paused-clusterqueue"]["spec"]
    assert paused["stopPolicy"] == "Hold"
    assert quota_of(paused["resourceGroups"][0], P5, GPU)["borrowingLimit"] == "0"
    assert cqs["hyperpod-ns-nlp-clusterqueue"]["spec"]["preemption"]["withinClusterQueue"] == "Never"


def test_on_the_pool_basis_a_cluster_queue_borrows_a_share_of_the_pool_on_every_flavor():
    _, objs = objects(CLUSTER, QUOTAS, settings=Settings(borrow_limit_basis=BorrowLimitBasis.POOL))
    research = by_kind(objs, "ClusterQueue")["hyperpod-ns-research-clusterqueue"]["spec"]["resourceGroups"][0]
    # 100% of the p5 pool research sees: 24 unallocated (32 - its own 8; paused is disabled) + its own 8 lent,
    # less its own 8 = 24
    gpu = quota_of(research, P5, GPU)
    assert gpu == {"name": GPU, "nominalQuota": "8", "borrowingLimit": "24", "lendingLimit": "8"}
    # it can borrow where it has no quota: 2 trn1 x 16 = 32 Neuron devices - nlp's 16 = 16 unallocated + 16 nlp lends
    trn = quota_of(research, TRN1, "aws.amazon.com/neurondevice")
    assert trn["nominalQuota"] == "0" and trn["borrowingLimit"] == "32"
    # and the Cohort is the same on both bases: the unallocated capacity
    assert by_kind(objs, "Cohort") == by_kind(OBJS, "Cohort")


def test_flavors_local_queues_namespaces_and_priority_classes():
    flavors = by_kind(OBJS, "ResourceFlavor")
    assert sorted(flavors) == sorted([P5, P4D, TRN1])  # one flavor each, with its node label
    assert flavors[P5]["spec"] == {"nodeLabels": {"node.kubernetes.io/instance-type": P5}}
    lq = by_kind(OBJS, "LocalQueue")["hyperpod-ns-nlp-localqueue"]
    assert lq["metadata"]["namespace"] == "hyperpod-ns-nlp"
    assert lq["spec"] == {"clusterQueue": "hyperpod-ns-nlp-clusterqueue"}
    assert "hyperpod-ns-nlp" in by_kind(OBJS, "Namespace")
    wpcs = by_kind(OBJS, "WorkloadPriorityClass")
    assert {n: o["value"] for n, o in wpcs.items()} == {"inference-priority": 90, "training-priority": 40}


def test_every_object_is_ours_team_objects_name_their_team_and_the_order_is_the_apply_order():
    for o in OBJS:
        assert o["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "idleshare"
        if o["kind"] in ("ClusterQueue", "LocalQueue", "Namespace"):
            assert o["metadata"]["labels"]["idleshare.io/team"] in {"research", "nlp", "vision", "paused"}
    kinds = [o["kind"] for o in OBJS]
    assert kinds.index("Namespace") < kinds.index("ResourceFlavor") < kinds.index("Cohort")
    assert max(i for i, k in enumerate(kinds) if k == "ClusterQueue") < kinds.index("LocalQueue")
    _, again = objects(list(reversed(CLUSTER)), list(reversed(QUOTAS)))
    assert again == OBJS
    assert [e for o in OBJS for e in webhook_violations(o)] == []  # the engine's output passes the webhook's rules


def test_prefix_and_cohort_name_are_configurable():
    _, objs = objects(CLUSTER, QUOTAS, settings=Settings(cohort_name="gpu-pool", namespace_prefix="team-"))
    assert "gpu-pool" in by_kind(objs, "Cohort")
    assert by_kind(objs, "ClusterQueue")["team-nlp-clusterqueue"]["spec"]["cohortName"] == "gpu-pool"


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda s: s.pop("cohortName"), "must be nil when ClusterQueue has no cohort"),
        (
            lambda s: s["resourceGroups"][0]["flavors"][0]["resources"][0].update(lendingLimit="999"),
            "less than or equal",
        ),
        (lambda s: s["resourceGroups"][0]["coveredResources"].append("bad resource!"), "not a valid resource name"),
        (lambda s: s["resourceGroups"].append(s["resourceGroups"][0]), "appears"),
    ],
)
def test_webhook_rules_catch_what_the_crd_does_not(mutate, message):
    _, objs = objects(CLUSTER, QUOTAS)
    cq = next(o for o in objs if o["kind"] == "ClusterQueue")
    mutate(cq["spec"])
    assert any(message in e for e in webhook_violations(cq))


@pytest.mark.parametrize(
    ("weight", "ok"),
    # the cases tests/kube/test_crds.py proves against the real webhook, and what no quantity is
    [
        *[(0, True), ("0", True), ("1n", False), ("1e-10", False), ("2n", True), ("0.5", True), ("-1", False)],
        *[(1, True), ("1.5x", True), (True, True), (None, True)],
    ],
)
def test_webhook_fair_sharing_weight_floor_is_read_to_1n(weight, ok):
    _, objs = objects(CLUSTER, QUOTAS)
    cq = next(o for o in objs if o["kind"] == "ClusterQueue")
    cq["spec"]["fairSharing"] = {"weight": weight}
    assert (webhook_violations(cq) == []) is ok


@pytest.mark.parametrize(
    ("value", "resource", "text"),
    [
        (8, GPU, "8"),
        (0, GPU, "0"),
        (Fraction(191450, 1000), "cpu", "191450m"),
        (Fraction(3, 2), "cpu", "1500m"),
        (96, "cpu", "96"),
        (2 * 1024**3, "memory", "2Gi"),
        (1536 * 1024**2, "memory", "1536Mi"),
        (1000, "memory", "1000"),
        (1024**3 + 1, "memory", "1073741825"),
        (Fraction(1024**3, 10), "memory", "107374182400m"),
    ],
)
def test_quantity_strings_round_trip_through_lightkube(value, resource, text):
    assert format_quantity(value, resource) == text
    assert Fraction(parse_quantity(text)) == value


def test_rounding_is_always_down():
    assert round_down("cpu", Fraction(19999, 10000)) == Fraction(1999, 1000)
    assert round_down("memory", 1024**2 * 3 - 1) == 1024**2 * 2
    assert round_down(GPU, Fraction(79, 10)) == 7
    assert round_down(GPU, -1) == 0


@given(
    resource=st.sampled_from(["cpu", "memory", GPU, "aws.amazon.com/neuron"]),
    percent=st.integers(0, 1000),
    value=st.one_of(st.integers(-5, 10**15), st.fractions(min_value=-5, max_value=10**9, max_denominator=10**6)),
)
def test_the_integer_fast_paths_agree_with_exact_fractions(resource, percent, value):
    # The reference: docs/spec.md's rounding applied to the exact product, as a Fraction throughout.
    want = round_down(resource, Fraction(percent, 100) * Fraction(value))
    got = percent_of(resource, percent, value)
    assert got == want and type(got) is type(exact(want))
    assert round_down(resource, value) == round_down(resource, Fraction(value))
    if value >= 0:
        assert format_quantity(value, resource) == format_quantity(Fraction(value), resource)
        milli = Fraction(math.floor(Fraction(value) * 1000), 1000)
        assert Fraction(parse_quantity(format_quantity(value, resource))) == milli
