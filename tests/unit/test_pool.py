"""docs/spec.md §2, rule by rule: Given a cluster and quotas, When the pool is computed, Then ..."""

from __future__ import annotations

from fractions import Fraction

import pytest

from idleshare.domain.eligibility import exclusion_reason
from idleshare.domain.model import (
    DEFAULT_TOLERATED_TAINT_KEYS,
    GIB,
    BorrowLimitBasis,
    ExclusionReason,
    SchedulerConfig,
    Settings,
    Snapshot,
    Strategy,
    Taint,
)
from idleshare.domain.pool import Bound, compute
from tests.builders import G5, P4D, P5, P5_ALLOC, TRN1, TRN1_ALLOC, entry, node, nodes, quota, tainted

GPU = "nvidia.com/gpu"
NEURON = "aws.amazon.com/neurondevice"
MIG = "nvidia.com/mig-1g.5gb"
MI = 1024**2


QUOTA, POOL = BorrowLimitBasis.QUOTA, BorrowLimitBasis.POOL


def run(nodes_, quotas=(), basis=QUOTA, **sc):
    settings = Settings(borrow_limit_basis=basis)
    return compute(
        Snapshot(nodes=tuple(nodes_), quotas=tuple(quotas), scheduler_config=SchedulerConfig(**sc), settings=settings)
    )


# -- eligibility ------------------------------------------------------------------------------
ELIGIBILITY_CASES = [
    ("ready schedulable healthy", node("n"), None),
    ("deleting", node("n", deleting=True), ExclusionReason.DELETING),
    ("deleting wins over NotReady", node("n", deleting=True, ready=False), ExclusionReason.DELETING),
    ("NotReady", node("n", ready=False), ExclusionReason.NOT_READY),
    ("no Ready condition at all", node("n", ready=False, ready_condition=False), ExclusionReason.NO_READY_CONDITION),
    ("NotReady wins over cordoned", node("n", ready=False, unschedulable=True), ExclusionReason.NOT_READY),
    ("cordoned", node("n", unschedulable=True), ExclusionReason.UNSCHEDULABLE),
    ("HyperPod unhealthy", node("n", health_status="Unschedulable"), ExclusionReason.UNHEALTHY),
    ("HyperPod pending replacement", node("n", health_status="UnschedulablePendingReplacement"), "Unhealthy"),
    ("no health label counts", node("n", health_status=None), None),
    ("untolerated NoSchedule taint", tainted("n", "dedicated"), ExclusionReason.UNTOLERATED_TAINT),
    ("untolerated NoExecute taint", tainted("n", "dedicated", "NoExecute"), ExclusionReason.UNTOLERATED_TAINT),
    ("PreferNoSchedule never excludes", tainted("n", "dedicated", "PreferNoSchedule"), None),
    ("tolerated nvidia.com/gpu taint", tainted("n", "nvidia.com/gpu"), None),
    ("tolerated neuron taint", tainted("n", "aws.amazon.com/neuron", flavor=TRN1), None),
    ("unhealthy wins over taint", node("n", health_status="Unknown", taints=(Taint("x", "NoSchedule"),)), "Unhealthy"),
    ("no instance type", node("n", flavor=None), ExclusionReason.NO_INSTANCE_TYPE),
    ("unreadable wins over every other reason", node("n", unreadable=True, deleting=True), ExclusionReason.UNREADABLE),
    ("taint wins over missing type", node("n", flavor=None, taints=(Taint("x", "NoSchedule"),)), "UntoleratedTaint"),
    ("GPU type, no GPU reported", node("n", allocatable={"cpu": 192, "memory": 2048 * GIB}), "AcceleratorsNotReady"),
    ("GPU type, 0 GPUs reported", node("n", allocatable={"cpu": 192, GPU: 0}), "AcceleratorsNotReady"),
    ("MIG node: 0 whole GPUs, profiles up", node("n", allocatable={"cpu": 192, GPU: 0, MIG: 56}), None),
    ("Neuron type, no device", node("n", flavor=TRN1, allocatable={"cpu": 128}), "AcceleratorsNotReady"),
    ("Neuron type, cores only", node("n", flavor=TRN1, allocatable={"aws.amazon.com/neuroncore": 32}), None),
    ("CPU type reporting no GPU", node("n", flavor="ml.c5.4xlarge", allocatable={"cpu": 16}), None),
    ("type the catalog lacks", node("n", flavor="ml.zz9.metal", allocatable={"cpu": 16}), None),
    ("NotReady wins over no GPU", node("n", ready=False, allocatable={"cpu": 192}), ExclusionReason.NOT_READY),
]


@pytest.mark.parametrize(("name", "given", "expected"), ELIGIBILITY_CASES, ids=[c[0] for c in ELIGIBILITY_CASES])
def test_exclusion_reason(name, given, expected):
    assert exclusion_reason(given, DEFAULT_TOLERATED_TAINT_KEYS) == expected


def test_excluded_nodes_leave_capacity_and_are_reported_by_name():
    result = run([*nodes("p5", P5, 3), node("p5-bad", ready=False), node("p5-cordoned", unschedulable=True)])
    assert result.capacity[P5][GPU] == 24
    assert result.capacity[P5]["cpu"] == 3 * Fraction(191450, 1000)
    assert result.excluded_nodes == {"p5-bad": ExclusionReason.NOT_READY, "p5-cordoned": "Unschedulable"}
    assert result.node_counts[P5] == (3, 5)
    assert "excluded: NotReady=1, Unschedulable=1" in result.summary()


def test_a_gpu_node_whose_device_plugin_is_not_up_lends_nothing_and_does_not_shape_its_flavor():
    # Given 2 p5 nodes reporting their GPUs and 3 whose device plugin is not up (full cpu and memory, no GPU)
    plugin_down = {k: v for k, v in P5_ALLOC.items() if k != GPU}
    down = [node(f"p5-down-{i}", allocatable=plugin_down) for i in range(3)]
    result = run([*nodes("p5", P5, 2), *down], [quota("a", entry(P5, count=1))])
    # Then only the two count, for cpu and memory too, and S(p5) is a whole p5 (the majority has no GPUs)
    assert result.capacity[P5][GPU] == 16
    assert result.capacity[P5]["cpu"] == 2 * P5_ALLOC["cpu"]
    assert result.excluded_nodes == {f"p5-down-{i}": ExclusionReason.ACCELERATORS_NOT_READY for i in range(3)}
    assert result.node_counts[P5] == (2, 5)
    assert result.teams["a"].nominal[P5][GPU] == 8
    # When the plugin comes up on one, it counts again
    up = run([*nodes("p5", P5, 2), node("p5-down-0"), *down[1:]], [quota("a", entry(P5, count=1))])
    assert up.capacity[P5][GPU] == 24 and "p5-down-0" not in up.excluded_nodes


def test_mig_profiles_and_neuron_devices_count_as_their_own_resources_untracked_ones_not_at_all():
    p5 = node("p5", allocatable={**P5_ALLOC, "pods": 110, "ephemeral-storage": 10**12, "hugepages-1Gi": 0})
    result = run([*nodes("p4d", P4D, 2), p5, *nodes("trn", TRN1, 2)])
    assert (result.capacity[P4D][MIG], result.capacity[P4D][GPU]) == (112, 0)  # GPU is what the node reports
    assert result.capacity[P5][MIG] == 0  # covered everywhere, zero where absent
    assert (result.capacity[TRN1][NEURON], result.capacity[TRN1][GPU]) == (32, 0)
    assert MIG in result.resources and "pods" not in result.resources and "ephemeral-storage" not in result.resources


# -- nominal from quota entries -----------------------------------------------------------------
CPU_P5 = Fraction(191450, 1000)
MEM_P5 = 1900 * GIB


def floor_cpu(x):
    return Fraction(int(x * 1000), 1000)


def floor_mem(x):
    return int(x // MI) * MI


NOMINAL_CASES = {
    "Count: n x shape": (
        entry(P5, count=2),
        {GPU: 16, "cpu": 2 * CPU_P5, "memory": 2 * MEM_P5, "vpc.amazonaws.com/efa": 64},
    ),
    "Count + Accelerators overrides the accelerator only": (
        entry(P5, count=2, accelerators=4),
        {GPU: 4, "cpu": 2 * CPU_P5, "memory": 2 * MEM_P5, "vpc.amazonaws.com/efa": 64},
    ),
    "Count + VCpu + MemoryInGiB override their own": (
        entry(P5, count=1, vcpu=Fraction(3, 2), memory_gib=10),
        {GPU: 8, "cpu": Fraction(3, 2), "memory": 10 * GIB, "vpc.amazonaws.com/efa": 32},
    ),
    "Accelerators scale cpu and memory, rounded down to 1m / 1Mi": (
        entry(P5, accelerators=3),
        {GPU: 3, "cpu": floor_cpu(CPU_P5 * 3 / 8), "memory": floor_mem(MEM_P5 * 3 / 8)},
    ),
    "Accelerators with VCpu given: cpu as given": (
        entry(P5, accelerators=2, vcpu=10),
        {GPU: 2, "cpu": 10, "memory": floor_mem(MEM_P5 / 4)},
    ),
    "Accelerators on a Neuron flavor mean Neuron devices": (
        entry(TRN1, accelerators=4),
        {NEURON: 4, "cpu": floor_cpu(Fraction(127500, 1000) / 4), "memory": floor_mem(480 * GIB / 4)},
    ),
    "AcceleratorPartition: the MIG profile, scaling cpu and memory": (
        entry(P4D, partition=("mig-1g.5gb", 7)),
        {MIG: 7, "cpu": floor_cpu(Fraction(95690, 1000) * 7 / 56), "memory": floor_mem(1100 * GIB * 7 / 56)},
    ),
    "VCpu only: memory scales by the cpu ratio": (
        entry(P5, vcpu=20),
        {"cpu": 20, "memory": floor_mem(MEM_P5 * 20 / CPU_P5)},
    ),
    "MemoryInGiB only: cpu scales by the memory ratio": (
        entry(P5, memory_gib=95),
        {"memory": 95 * GIB, "cpu": floor_cpu(CPU_P5 * 95 / 1900)},
    ),
    "VCpu and MemoryInGiB: as given, exact": (
        entry(P5, vcpu=Fraction(1, 10), memory_gib=Fraction(1, 10)),
        {"cpu": Fraction(1, 10), "memory": Fraction(GIB, 10)},
    ),
    "Count 0 and nothing else: nothing": (entry(P5, count=0), {}),
}


@pytest.mark.parametrize(("given", "expected"), NOMINAL_CASES.values(), ids=NOMINAL_CASES)
def test_nominal(given, expected):
    result = run([*nodes("p5", P5, 4), *nodes("trn", TRN1, 2), *nodes("p4d", P4D, 2)], [quota("a", given)])
    flavor = given.instance_type
    got = {r: q for r, q in result.teams["a"].nominal[flavor].items() if q}
    assert got == expected
    assert not [i for i in result.issues if i.severity == "error"]


def test_shape_is_the_most_common_allocatable_of_the_flavor_eligible_or_not():
    odd = node("p5-odd", allocatable={**P5_ALLOC, "nvidia.com/gpu": 7})
    down = [node(f"p5-down-{i}", ready=False) for i in range(2)]
    result = run([odd, *down], [quota("a", entry(P5, count=1))])
    assert result.teams["a"].nominal[P5][GPU] == 8  # two NotReady nodes outvote the eligible odd one


def test_shape_falls_back_to_the_catalog_when_the_cluster_has_no_node_of_the_flavor():
    result = run(nodes("p5", P5, 1), [quota("a", entry("ml.g5.12xlarge", count=2))])
    assert (result.teams["a"].nominal[G5][GPU], result.teams["a"].nominal[G5]["cpu"]) == (8, 96)  # 2 x catalog's
    assert result.shortfall[G5][GPU] == 8  # no such node: all of it is shortfall


def test_neither_nodes_nor_catalog_is_a_named_misconfiguration_not_zero():
    result = run(nodes("p5", P5, 1), [quota("a", entry("ml.x9.unknown", count=1))])
    errors = [i for i in result.issues if i.severity == "error"]
    assert [(i.code, i.subject) for i in errors] == [("NoInstanceShape", "a-quota/ml.x9.unknown")]


def test_quota_with_ml_name_governs_plain_eks_nodes_with_ec2_names():
    result = run(nodes("p5", "p5.48xlarge", 2), [quota("a", entry(P5, accelerators=8))])
    assert "p5.48xlarge" in result.flavors and P5 not in result.flavors
    assert result.teams["a"].nominal["p5.48xlarge"][GPU] == 8
    assert result.unallocated["p5.48xlarge"][GPU] == 8


# -- allocation, pool and borrowing ---------------------------------------------------------------
def test_unallocated_and_shortfall():
    result = run(nodes("p5", P5, 2), [quota("a", entry(P5, accelerators=10)), quota("b", entry(P5, accelerators=4))])
    assert (result.allocated[P5][GPU], result.unallocated[P5][GPU], result.shortfall[P5][GPU]) == (14, 2, 0)
    over = run(nodes("p5", P5, 1), [quota("a", entry(P5, accelerators=10))])
    assert (over.unallocated[P5][GPU], over.shortfall[P5][GPU]) == (0, 2)
    assert any(i.code == "Shortfall" and i.subject == P5 for i in over.issues)


# -- borrow limits on the Quota basis (HyperPod's, the default) ------------------------------------
@pytest.mark.parametrize(
    ("basis", "a_limit", "a_bound"),
    [
        (QUOTA, 4, Bound.PERCENTAGE_OF_QUOTA),  # default 50% of its own 8; the pool it sees caps nothing
        (POOL, 8, Bound.PERCENTAGE),  # default 50% of the pool it sees (idleshare's earlier reading)
    ],
)
def test_borrow_limits_by_strategy_on_either_basis(basis, a_limit, a_bound):
    # 4 p5 nodes = 32 GPUs; a=8 LendAndBorrow, b=8 Lend, c=8 DontLend -> unallocated 8
    result = run(
        nodes("p5", P5, 4),
        [
            quota("a", entry(P5, accelerators=8)),
            quota("b", entry(P5, accelerators=8), strategy=Strategy.LEND),
            quota("c", entry(P5, accelerators=8), strategy=Strategy.DONT_LEND),
        ],
        basis=basis,
    )
    a, b, c = (result.teams[t] for t in "abc")
    d = a.why[P5][GPU]
    # the pool a sees, named: unallocated + b's lent nominal; c lends nothing, a's own excluded
    assert (d.basis, d.nominal, d.pool) == (basis, 8, 8 + 8)
    assert (a.borrowing_limit[P5][GPU], d.bound) == (a_limit, a_bound)
    assert (b.borrowing_limit[P5][GPU], b.why[P5][GPU].bound) == (0, Bound.STRATEGY)
    assert (c.borrowing_limit[P5][GPU], c.why[P5][GPU].bound) == (0, Bound.STRATEGY)  # DontLend borrows nothing
    assert (a.lending_limit[P5][GPU], b.lending_limit[P5][GPU], c.lending_limit[P5][GPU]) == (8, 8, 0)


LEAST_BOUND_CASES = [
    # team a: 16 GPUs of p5 on a cluster of 4 p5 (32 GPUs): the pool it sees is 16
    # the percentage: of the team's own quota (Quota basis), of the pool it sees and at most the pool (Pool basis)
    ("default 50% of its 16", QUOTA, None, (), 8, Bound.PERCENTAGE_OF_QUOTA),
    ("25%", QUOTA, 25, (), 4, Bound.PERCENTAGE_OF_QUOTA),
    ("0%", QUOTA, 0, (), 0, Bound.PERCENTAGE_OF_QUOTA),
    ("500%: 80, never capped at the pool of 16", QUOTA, 500, (), 80, Bound.PERCENTAGE_OF_QUOTA),
    ("10,000%, the API's top", QUOTA, 10000, (), 1600, Bound.PERCENTAGE_OF_QUOTA),
    ("percentage of the pool", POOL, 25, (), 4, Bound.PERCENTAGE),
    ("0 percent", POOL, 0, (), 0, Bound.PERCENTAGE),
    ("over 100 percent: the pool itself", POOL, 500, (), 16, Bound.POOL),
    # an absolute limit: replaces the percentage (Quota basis), is one more bound, the least wins (Pool basis)
    ("an absolute limit below the percentage replaces it", QUOTA, 100, (entry(P5, accelerators=3),), 3, Bound.ABSOLUTE),
    ("an absolute limit above the percentage too", QUOTA, 25, (entry(P5, accelerators=30),), 30, Bound.ABSOLUTE),
    ("absolute Count 1: one instance's GPUs", QUOTA, 100, (entry(P5, count=1),), 8, Bound.ABSOLUTE),
    ("absolute Count 0: nothing", QUOTA, 100, (entry(P5, count=0),), 0, Bound.ABSOLUTE),
    ("absolute cap by Accelerators", POOL, 100, (entry(P5, accelerators=3),), 3, Bound.ABSOLUTE),
    ("absolute cap by Count", POOL, 100, (entry(P5, count=1),), 8, Bound.ABSOLUTE),
    ("absolute cap above the percentage", POOL, 25, (entry(P5, accelerators=10),), 4, Bound.PERCENTAGE),
    ("absolute cap above the pool", POOL, 100, (entry(P5, count=5),), 16, Bound.POOL),
]


@pytest.mark.parametrize(
    ("name", "basis", "borrow", "absolute", "expected", "bound"),
    LEAST_BOUND_CASES,
    ids=[c[0] for c in LEAST_BOUND_CASES],
)
def test_the_bound_that_sets_a_limit_on_either_basis(name, basis, borrow, absolute, expected, bound):
    result = run(
        nodes("p5", P5, 4), [quota("a", entry(P5, accelerators=16), borrow=borrow, absolute=absolute)], basis=basis
    )
    d = result.teams["a"].why[P5][GPU]
    assert (d.nominal, d.pool, d.limit, d.bound) == (16, 16, expected, bound)
    assert result.teams["a"].borrowing_limit[P5][GPU] == expected


def test_quota_basis_a_team_of_4_instances_at_50_percent_borrows_2_instances_worth_of_every_resource():
    # HyperPod's policies page: the percentage "applies uniformly across all resource types ... in the team's quota"
    result = run(nodes("p5", P5, 8), [quota("a", entry(P5, count=4), borrow=50)])
    assert result.teams["a"].borrowing_limit[P5] == {r: 2 * q for r, q in P5_ALLOC.items()}


def test_quota_basis_an_absolute_limit_replaces_the_percentage_only_on_the_resources_it_names():
    # Count 1 = 8 GPUs, 191.45 cpu; BorrowLimit 100 -> 8 GPUs, 191.45 cpu; VCpu 10 replaces the cpu only
    result = run(nodes("p5", P5, 4), [quota("a", entry(P5, count=1), borrow=100, absolute=(entry(P5, vcpu=10),))])
    g = result.teams["a"]
    assert (g.borrowing_limit[P5]["cpu"], g.why[P5]["cpu"].bound) == (10, Bound.ABSOLUTE)
    assert (g.borrowing_limit[P5][GPU], g.why[P5][GPU].bound) == (8, Bound.PERCENTAGE_OF_QUOTA)
    assert g.borrowing_limit[P5]["memory"] == 1900 * GIB


def test_quota_basis_borrow_limits_round_down():
    # Count 3 = 24 GPUs, 3 x 191.45 cpu, 3 x 1900Gi; 33% -> 7.92 -> 7 GPUs; cpu to 1m; memory to 1Mi
    result = run(nodes("p5", P5, 8), [quota("a", entry(P5, count=3), borrow=33)])
    g = result.teams["a"]
    assert g.borrowing_limit[P5][GPU] == 7
    assert g.borrowing_limit[P5]["cpu"] == floor_cpu(3 * CPU_P5 * Fraction(33, 100))
    assert g.borrowing_limit[P5]["memory"] == floor_mem(3 * MEM_P5 * Fraction(33, 100))


def test_quota_basis_an_instance_type_outside_the_quota_borrows_nothing_unless_an_absolute_limit_names_it():
    fleet = [*nodes("p5", P5, 2), *nodes("trn", TRN1, 1)]
    plain = run(fleet, [quota("a", entry(P5, accelerators=8))]).teams["a"]
    assert (plain.borrowing_limit[TRN1][NEURON], plain.why[TRN1][NEURON].bound) == (0, Bound.NOT_IN_QUOTA)
    assert plain.why[TRN1][NEURON].pool == 16  # it sees the idle trn1; its quota lets it borrow none of it
    # an absolute limit on an instance type outside the quota is honoured (an extension), and named
    result = run(fleet, [quota("a", entry(P5, accelerators=8), absolute=(entry(TRN1, accelerators=4),))])
    capped = result.teams["a"]
    assert (capped.borrowing_limit[TRN1][NEURON], capped.why[TRN1][NEURON].bound) == (4, Bound.ABSOLUTE)
    assert (capped.borrowing_limit[TRN1]["cpu"], capped.why[TRN1]["cpu"].bound) == (0, Bound.NOT_IN_QUOTA)
    assert [(i.severity, i.code, i.subject) for i in result.issues] == [
        ("warning", "AbsoluteLimitOutsideQuota", f"a-quota/{TRN1}")
    ]


def test_quota_basis_limits_stay_put_when_nodes_change_only_the_pool_moves():
    q = [quota("a", entry(P5, accelerators=8)), quota("b", entry(P5, count=1), borrow=150)]
    before = run(nodes("p5", P5, 4), q)
    after = run([*nodes("p5", P5, 3), node("p5-3", ready=False)], q)
    assert (before.unallocated[P5][GPU], after.unallocated[P5][GPU]) == (16, 8)
    assert {t: g.borrowing_limit for t, g in before.teams.items()} == {
        t: g.borrowing_limit for t, g in after.teams.items()
    }
    assert (after.teams["a"].borrowing_limit[P5][GPU], after.teams["b"].borrowing_limit[P5][GPU]) == (4, 12)


def test_quota_basis_idle_resource_sharing_disabled_keeps_the_limits_and_shrinks_what_the_team_sees():
    q = [quota("a", entry(P5, accelerators=8)), quota("b", entry(P5, accelerators=8))]
    on, off = run(nodes("p5", P5, 4), q), run(nodes("p5", P5, 4), q, idle_resource_sharing=False)
    assert (on.teams["a"].why[P5][GPU].pool, off.teams["a"].why[P5][GPU].pool) == (16 + 8, 8)
    assert on.teams["a"].borrowing_limit[P5][GPU] == off.teams["a"].borrowing_limit[P5][GPU] == 4


def test_the_policies_pages_example_in_numbers():
    # HyperPod's task-governance policies page: Team A quota 6 instances, Team B quota 5; B borrows idle compute of A.
    # B at BorrowLimit 100 may borrow 5 instances' worth; at the default 50, 2.5 (20 GPUs: 2 whole p5 instances).
    for borrow, gpus in ((100, 40), (None, 20)):
        result = run(
            nodes("p5", P5, 11), [quota("a", entry(P5, count=6)), quota("b", entry(P5, count=5), borrow=borrow)]
        )
        assert result.teams["b"].borrowing_limit[P5][GPU] == gpus
        assert result.teams["b"].why[P5][GPU].pool == 48  # A lends its 6 instances; nothing else is idle


# -- borrow limits on the Pool basis (idleshare's earlier reading, per cluster) ---------------------
def test_pool_basis_absolute_cap_by_field_caps_only_its_resource():
    result = run(
        nodes("p5", P5, 4), [quota("a", entry(P5, count=1), borrow=100, absolute=(entry(P5, vcpu=10),))], basis=POOL
    )
    assert result.teams["a"].borrowing_limit[P5]["cpu"] == 10
    assert result.teams["a"].borrowing_limit[P5][GPU] == 24  # no cap on GPUs: the whole pool


def test_pool_basis_borrow_limits_round_down():
    # pool 3 p5 = 24 GPUs, 3 x 191.45 cpu; 33% -> 7.92 -> 7 GPUs; cpu to 1m; memory to 1Mi
    result = run(nodes("p5", P5, 3), [quota("a", borrow=33)], basis=POOL)
    g = result.teams["a"]
    assert g.borrowing_limit[P5][GPU] == 7
    assert g.borrowing_limit[P5]["cpu"] == floor_cpu(3 * CPU_P5 * Fraction(33, 100))
    assert g.borrowing_limit[P5]["memory"] == floor_mem(3 * MEM_P5 * Fraction(33, 100))


def test_pool_basis_a_team_can_borrow_on_flavors_where_it_has_no_quota():
    result = run([*nodes("p5", P5, 2), *nodes("trn", TRN1, 1)], [quota("a", entry(P5, accelerators=8))], basis=POOL)
    assert result.teams["a"].nominal[TRN1][NEURON] == 0
    assert result.teams["a"].borrowing_limit[TRN1][NEURON] == 8
    assert not result.issues  # no AbsoluteLimitOutsideQuota on the Pool basis: every flavor is borrowable


def test_pool_basis_idle_resource_sharing_disabled_leaves_only_what_lenders_lend():
    q = [quota("a", entry(P5, accelerators=8)), quota("b", entry(P5, accelerators=8))]
    on = run(nodes("p5", P5, 4), q, basis=POOL)
    off = run(nodes("p5", P5, 4), q, basis=POOL, idle_resource_sharing=False)
    assert on.teams["a"].why[P5][GPU].pool == 16 + 8
    assert (off.teams["a"].why[P5][GPU].pool, off.teams["a"].borrowing_limit[P5][GPU]) == (8, 4)
    assert off.unallocated[P5][GPU] == 16  # still reported; just not lendable


def test_disabled_quota_allocates_nothing_lends_nothing_borrows_nothing():
    result = run(
        nodes("p5", P5, 2),
        [quota("a", entry(P5, accelerators=8)), quota("off", entry(P5, accelerators=4), enabled=False)],
    )
    off = result.teams["off"]
    assert result.allocated[P5][GPU] == 8
    assert off.nominal[P5][GPU] == 4  # isolation: its own quota is kept
    assert off.lending_limit[P5][GPU] == 0 and off.borrowing_limit[P5][GPU] == 0
    assert off.why[P5][GPU].bound == Bound.DISABLED
    assert result.teams["a"].why[P5][GPU].pool == 8  # sees the unallocated 8, nothing from "off"


def test_an_absolute_limit_on_an_unknown_flavor_is_a_warning_two_quotas_for_one_team_an_error():
    result = run(nodes("p5", P5, 1), [quota("a", absolute=(entry(G5, accelerators=2),))])
    warnings = [i for i in result.issues if i.code == "AbsoluteLimitOnUnknownFlavor"]
    assert len(warnings) == 1 and warnings[0].severity == "warning"
    # two quotas for one team is an error, and only one counts
    result = run(nodes("p5", P5, 2), [quota("a", entry(P5, accelerators=2)), quota("a", entry(P5, accelerators=4))])
    assert [i.code for i in result.issues if i.severity == "error"] == ["DuplicateTeam"]
    assert result.allocated[P5][GPU] in (2, 4)


def test_explicit_memory_stays_exact_and_neuron_capacity_is_exact():
    result = run(nodes("trn", TRN1, 2), [quota("a", entry(TRN1, vcpu=Fraction(1, 2), memory_gib=Fraction(1, 3)))])
    assert result.teams["a"].nominal[TRN1]["memory"] == Fraction(GIB, 3)
    assert result.capacity[TRN1]["memory"] == 2 * TRN1_ALLOC["memory"]


def test_the_contract_names_every_exclusion_reason_and_bound():
    from pathlib import Path

    spec = (Path(__file__).parents[2] / "docs" / "spec.md").read_text()
    section = spec[spec.index("## 2.") : spec.index("## 3.")]
    assert [r for r in ExclusionReason if f"`{r}`" not in section] == []
    assert [b for b in Bound if f"`{b}`" not in section] == []


# -- issue 40.3: ml.X and X are one instance type, decided once per cluster ------------------------
EC2_P5 = "p5.48xlarge"


@pytest.mark.parametrize(
    "odd", [node("odd", flavor=P5), node("odd", flavor=P5, ready=False)], ids=["ready", "notready"]
)
@pytest.mark.parametrize("named", [P5, EC2_P5])
def test_one_node_labelled_ml_on_an_ec2_named_cluster_moves_no_quota(odd, named):
    # Given 4 p5 nodes labelled with the EC2 name and one (Ready or not) labelled ml.p5.48xlarge
    result = run([*nodes("p5", EC2_P5, 4), odd], [quota("a", entry(named, accelerators=8))])
    # Then the team's quota is on the flavor most nodes carry, whichever name the quota wrote
    assert result.teams["a"].nominal[EC2_P5][GPU] == 8
    assert result.teams["a"].nominal[P5][GPU] == 0
    assert result.unallocated[EC2_P5][GPU] == 24
    two = [i for i in result.issues if i.code == "TwoNamesForOneInstanceType"]
    assert [(i.severity, i.subject) for i in two] == [("warning", P5)]
    assert "a quota naming either governs p5.48xlarge" in two[0].message


def test_the_eligible_majority_decides_then_all_nodes_then_the_clusters_naming():
    # 3 ml. nodes of which 2 NotReady vs 2 Ready EC2 nodes: eligible 1 vs 2 -> the EC2 name
    down = [node(f"m{i}", flavor=P5, ready=False) for i in range(2)]
    result = run([*down, node("m2", flavor=P5), *nodes("e", EC2_P5, 2)], [quota("a", entry(P5, accelerators=8))])
    assert result.teams["a"].nominal[EC2_P5][GPU] == 8
    # 1 eligible each, 2 ml. nodes in all vs 1: the ml. name
    result = run([node("m0", flavor=P5), node("m1", flavor=P5, ready=False), node("e0", flavor=EC2_P5)],
                 [quota("a", entry(EC2_P5, accelerators=8))])  # fmt: skip
    assert result.teams["a"].nominal[P5][GPU] == 8
    # a tie on the type itself: the cluster's naming (its other nodes are EC2-named)
    result = run(
        [node("m0", flavor=P5), node("e0", flavor=EC2_P5), *nodes("g", "g5.12xlarge", 2)],
        [quota("a", entry(P5, accelerators=8))],
    )
    assert result.teams["a"].nominal[EC2_P5][GPU] == 8


@pytest.mark.parametrize("order", [1, -1])
def test_two_teams_naming_the_type_either_way_share_one_flavor_in_any_node_order(order):
    fleet = [node("m0", flavor=P5), node("e0", flavor=EC2_P5), node("e1", flavor=EC2_P5)][::order]
    result = run(fleet, [quota("a", entry(P5, accelerators=4)), quota("b", entry(EC2_P5, accelerators=4))])
    assert result.allocated[EC2_P5][GPU] == 8 and result.allocated[P5][GPU] == 0


def test_without_nodes_of_the_type_the_clusters_naming_decides():
    ec2_cluster = run(nodes("g", "g5.12xlarge", 3), [quota("a", entry(P5, accelerators=8))])
    assert EC2_P5 in ec2_cluster.teams["a"].nominal and P5 not in ec2_cluster.teams["a"].nominal
    hyperpod = run(nodes("g", G5, 3), [quota("a", entry(EC2_P5, accelerators=8))])
    assert P5 in hyperpod.teams["a"].nominal
    empty = run([], [quota("a", entry(EC2_P5, count=1)), quota("b", entry("trn1.2xlarge", accelerators=1))])
    assert P5 in empty.teams["a"].nominal  # SageMaker's name when its enum has it
    (unsized,) = [i for i in empty.issues if i.code == "NoInstanceShape"]  # no node, no catalog entry: named
    assert "no node of flavor trn1.2xlarge " in unsized.message  # not ml.trn1.2xlarge: no such SageMaker type


# -- issue 40.5: S(f) is never one outlier's when a majority exists -------------------------------
def test_a_one_node_outlier_in_a_two_node_flavor_does_not_set_the_shape():
    # one node reporting 1e3 GPUs beside a real p5: the catalog breaks the tie (8 GPUs), the outlier's shape loses
    outlier = node("odd", allocatable={**P5_ALLOC, GPU: 1000})
    result = run([node("ok"), outlier], [quota("a", entry(P5, accelerators=8))])
    assert result.shapes[P5][GPU] == 8
    nominal = result.teams["a"].nominal[P5]
    assert (nominal["cpu"], nominal["memory"]) == (P5_ALLOC["cpu"], P5_ALLOC["memory"])  # a whole node, not 1531m


def test_the_majority_layout_wins_though_its_nodes_memory_differs_by_a_few_kib():
    # three real p5s whose allocatable memory differs a little (as real nodes do) and one outlier: the layout most
    # nodes have (8 GPUs) wins, and cpu and memory are the most common among its nodes (a tie: the greatest)
    fleet = [node(f"p{i}", allocatable={**P5_ALLOC, "memory": P5_ALLOC["memory"] - i * 1024}) for i in range(3)]
    outlier = node("odd", allocatable={**P5_ALLOC, "memory": P5_ALLOC["memory"] + 1024, GPU: 1000})
    for order in (1, -1):
        result = run([*fleet, outlier][::order], [quota("a", entry(P5, accelerators=4))])
        assert result.shapes[P5] == {**P5_ALLOC}
        assert result.teams["a"].nominal[P5]["cpu"] == P5_ALLOC["cpu"] / 2


def test_without_a_catalog_entry_a_tie_between_layouts_still_goes_to_the_greatest():
    small = node("a", flavor="x9.big", allocatable={"cpu": 8, "memory": 64 * GIB, GPU: 1})
    large = node("b", flavor="x9.big", allocatable={"cpu": 8, "memory": 64 * GIB, GPU: 2})
    assert run([small, large]).shapes["x9.big"][GPU] == 2


def test_an_instance_type_no_node_carries_and_the_catalog_lacks_gets_the_closest_name_the_cluster_knows():
    # the parser cannot tell a typo of an EC2 name from a type the cluster will carry: the engine names the closest
    result = run(nodes("p5", EC2_P5, 1), [quota("a", entry("p5.48xlage", accelerators=8))])
    (issue,) = [i for i in result.issues if i.code == "NoInstanceShape"]
    assert issue.message.endswith("; did you mean p5.48xlarge?")
    far = run(nodes("p5", EC2_P5, 1), [quota("a", entry("zz9.tiny", accelerators=1))])
    assert "did you mean" not in next(i.message for i in far.issues if i.code == "NoInstanceShape")
