"""docs/spec.md §2 on absolute borrow caps and mixed-MIG fleets; every expected number is worked out from the spec and
the node shapes written here, never read from the engine. How an entry sizes its caps is the same on both bases; the
tables run on the Pool basis (a team with no quota there still borrows, so every cap shows against the pool), and
``test_on_the_quota_basis_a_cap_replaces_the_percentage_of_the_quota`` checks the Quota basis's use of them."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from idleshare.domain import catalog
from idleshare.domain.model import GIB, BorrowLimitBasis, SchedulerConfig, Settings, Snapshot
from idleshare.domain.pool import Bound, compute
from tests.builders import (
    ALL_3G,
    BALANCED,
    MIG1,
    MIG2,
    MIG3,
    P4D,
    P4D_MIG_ALLOC,
    P5,
    P5_ALLOC,
    R1,
    R2,
    R3,
    TRN1,
    WHOLE,
    entry,
    node,
    nodes,
    quota,
)
from tests.strategies import mixed_fleet, teams_with_caps

GPU = "nvidia.com/gpu"
NEURON = "aws.amazon.com/neurondevice"
MI = 1024**2
CPU_P5 = P5_ALLOC["cpu"]  # 191.45
MEM_P5 = P5_ALLOC["memory"]  # 1900 GiB


def fleet(whole=3, all_3g=2, balanced=1):
    """A p5 fleet mixing layouts; the whole-GPU nodes are the most common by default."""
    out = [node(f"p5-whole-{i}", P5, allocatable=dict(WHOLE)) for i in range(whole)]
    out += [node(f"p5-3g-{i}", P5, allocatable=dict(ALL_3G)) for i in range(all_3g)]
    out += [node(f"p5-bal-{i}", P5, allocatable=dict(BALANCED)) for i in range(balanced)]
    return out


def run(nodes_, quotas=(), basis=BorrowLimitBasis.POOL, **sc):
    settings = Settings(borrow_limit_basis=basis)
    return compute(
        Snapshot(nodes=tuple(nodes_), quotas=tuple(quotas), scheduler_config=SchedulerConfig(**sc), settings=settings)
    )


def half(resource, amount):
    """50% (the default BorrowLimit) rounded down as docs/spec.md §2 says: devices to 1, cpu to 1m, memory to 1Mi."""
    x = Fraction(amount) / 2
    if resource == "cpu":
        return Fraction(int(x * 1000), 1000)
    if resource == "memory":
        return int(x // MI) * MI
    return int(x)


def errors(result):
    return [i for i in result.issues if i.severity == "error"]


def test_absolute_count_zero_borrows_nothing_of_the_flavor_and_leaves_others_alone():
    cluster = [*fleet(), *nodes("trn", TRN1, 2)]
    result = run(cluster, [quota("a", absolute=(entry(P5, count=0),))])
    g = result.teams["a"]
    assert {r: g.borrowing_limit[P5][r] for r in result.resources} == dict.fromkeys(result.resources, 0)
    assert g.why[P5][GPU].bound == Bound.ABSOLUTE and g.why[P5][R3].absolute_cap == 0
    # trn1: no entry -> no cap: half of the 2 x 16 devices the team sees
    assert g.borrowing_limit[TRN1][NEURON] == 16 and g.why[TRN1][NEURON].absolute_cap is None
    assert not errors(result)


# -- a field caps only what it names, never scaled onto other resources; Count: 0 borrows nothing of the flavor
CAP_CASES = {
    # name -> (absolute entry, resource -> expected borrowing limit on the fleet of 3 whole + 2 all-3g + 1 balanced)
    # capacity: gpu 3x8 + 4 = 28; 3g 2x16 + 4 = 36; 1g 14; cpu 6 x 191.45; memory 6 x 1900 GiB.
    "Accelerators caps GPUs at what is written, cpu and memory stay at the percentage": (
        entry(P5, accelerators=3),
        {GPU: 3, "cpu": half("cpu", 6 * CPU_P5), "memory": half("memory", 6 * MEM_P5), R3: 18, R1: 7},
    ),
    "VCpu caps cpu only": (
        entry(P5, vcpu=Fraction(5, 2)),
        {GPU: 14, "cpu": Fraction(5, 2), "memory": half("memory", 6 * MEM_P5), R3: 18},
    ),
    "MemoryInGiB caps memory only, exactly": (
        entry(P5, memory_gib=10),
        {GPU: 14, "cpu": half("cpu", 6 * CPU_P5), "memory": 10 * GIB},
    ),
    # a MIG profile the most common node lacks: capped at 5, nothing else touched, no error
    "AcceleratorPartition caps its profile even when the most common node has none": (
        entry(P5, partition=(MIG3, 5)),
        {R3: 5, GPU: 14, "cpu": half("cpu", 6 * CPU_P5), "memory": half("memory", 6 * MEM_P5), R1: 7},
    ),
    "AcceleratorPartition of a profile no node exposes still caps it (at what is written)": (
        entry(P5, partition=(MIG2, 4)),
        {R2: 0, GPU: 14, R3: 18},  # nothing of it in the pool: the pool bounds it
    ),
    # Count n caps every resource at n x S(f)[r]: S(f) is the whole-GPU node, which has no 3g slices
    "Count 1 caps every resource at one most-common node, 0 where that node has none": (
        entry(P5, count=1),
        {GPU: 8, "cpu": CPU_P5, "memory": MEM_P5, R3: 0, R1: 0},
    ),
    "Count 1 with AcceleratorPartition beside it: the field overrides its own resource": (
        entry(P5, count=1, partition=(MIG3, 6)),
        {GPU: 8, R3: 6, R1: 0},
    ),
    "Count 0 beside a field: that field at what is written, the rest at 0": (
        entry(P5, count=0, accelerators=3),
        {GPU: 3, "cpu": 0, R3: 0},
    ),
}


@pytest.mark.parametrize(("cap", "expected"), CAP_CASES.values(), ids=CAP_CASES)
def test_absolute_caps_by_field(cap, expected):
    result = run(fleet(), [quota("a", absolute=(cap,))])
    g = result.teams["a"]
    assert {r: g.borrowing_limit[P5][r] for r in expected} == expected
    assert not errors(result)


def test_on_the_quota_basis_a_cap_replaces_the_percentage_of_the_quota():
    # quota Count 2 of p5 (S(f) the whole-GPU node): 16 GPUs, 2 x 191.45 cpu, 0 3g slices; BorrowLimit 50 -> half;
    # AcceleratorPartition 3g x 6 replaces the 3g limit (its quota is 0, so the percentage alone gives 0)
    cap = entry(P5, partition=(MIG3, 6))
    result = run(fleet(), [quota("a", entry(P5, count=2), absolute=(cap,))], basis=BorrowLimitBasis.QUOTA)
    g = result.teams["a"]
    assert (g.borrowing_limit[P5][R3], g.why[P5][R3].bound) == (6, Bound.ABSOLUTE)
    assert (g.borrowing_limit[P5][GPU], g.why[P5][GPU].bound) == (8, Bound.PERCENTAGE_OF_QUOTA)
    assert g.borrowing_limit[P5]["cpu"] == CPU_P5
    # Count 0 replaces every resource of the flavor with 0
    zero = run(fleet(), [quota("a", entry(P5, count=2), absolute=(entry(P5, count=0),))], basis=BorrowLimitBasis.QUOTA)
    assert set(zero.teams["a"].borrowing_limit[P5].values()) == {0}


def test_a_cap_that_cannot_be_sized_is_zero_never_no_cap():
    # Count 2 of a type with no node and no catalog entry: its size is unknown -> zero cap, reported.
    result = run(fleet(), [quota("a", absolute=(entry("ml.x9.unknown", count=2),))])
    assert [(i.code, i.subject) for i in errors(result)] == [("NoInstanceShape", "a-quota/ml.x9.unknown")]
    assert result.teams["a"].borrowing_limit[P5][GPU] == 14  # other flavors untouched


# -- mixed MIG fleets: S(f, r) -----------------------------------------------------------------
NOMINAL_CASES = {
    "3g slices sized by the all-3g nodes (most common among those exposing 3g)": (
        {},
        entry(P5, partition=(MIG3, 8)),
        # S(f, 3g) = ALL_3G (2 nodes vs 1 balanced): ratio 8/16
        {R3: 8, "cpu": Fraction(int(CPU_P5 * 8 / 16 * 1000), 1000), "memory": MEM_P5 // 2},
    ),
    "1g slices sized by the only layout that has them": (
        {},
        entry(P5, partition=(MIG1, 7)),
        # S(f, 1g) = BALANCED: ratio 7/14
        {R1: 7, "cpu": Fraction(int(CPU_P5 / 2 * 1000), 1000), "memory": MEM_P5 // 2},
    ),
    "Accelerators sized by the whole-GPU nodes": (
        {},
        entry(P5, accelerators=2),
        {GPU: 2, "cpu": Fraction(int(CPU_P5 * 2 / 8 * 1000), 1000), "memory": MEM_P5 // 4},
    ),
    # S(f) = ALL_3G (4 nodes), which has no whole GPU; S(f, gpu): BALANCED (2) beats WHOLE (1): 4 GPUs a node
    "most nodes all-3g: Accelerators sized by the nodes with whole GPUs": (
        {"whole": 1, "all_3g": 4, "balanced": 2},
        entry(P5, accelerators=2),
        {GPU: 2, "cpu": Fraction(int(CPU_P5 * 2 / 4 * 1000), 1000), "memory": MEM_P5 // 2},
    ),
    # the issue's report: two nodes expose 16 x 3g each, yet "no node exposes mig-3g.40gb"
    "a profile only the fewer nodes expose: no error, sized by them": (
        {"whole": 5, "all_3g": 2, "balanced": 0},
        entry(P5, partition=(MIG3, 4)),
        {R3: 4, "cpu": Fraction(int(CPU_P5 * 4 / 16 * 1000), 1000), "memory": MEM_P5 // 4},
    ),
}


@pytest.mark.parametrize(("layouts", "given", "expected"), NOMINAL_CASES.values(), ids=NOMINAL_CASES)
def test_nominal_on_a_mixed_mig_fleet(layouts, given, expected):
    result = run(fleet(**layouts), [quota("a", given)])
    got = {r: q for r, q in result.teams["a"].nominal[P5].items() if q}
    assert got == expected
    assert not errors(result)


def test_the_instance_shape_is_still_the_most_common_node():
    assert run(fleet(whole=1, all_3g=4, balanced=2)).shapes[P5][R3] == 16


def test_accelerators_on_an_all_mig_fleet_fall_back_to_the_catalog():
    spec = catalog.lookup(P4D)
    assert spec is not None and spec.accelerators == 8
    result = run(nodes("p4d", P4D, 2), [quota("a", entry(P4D, accelerators=2))])
    assert P4D_MIG_ALLOC[GPU] == 0  # no node has a whole GPU
    assert result.teams["a"].nominal[P4D] == {
        **dict.fromkeys(result.resources, 0),
        GPU: 2,
        "cpu": Fraction(spec.vcpu * 2, 8),
        "memory": spec.memory_gib * GIB * 2 // 8 // MI * MI,
    }
    assert not errors(result)


def test_a_profile_no_node_exposes_and_the_catalog_lacks_is_an_error_that_says_so():
    result = run(fleet(), [quota("a", entry(P5, partition=(MIG2, 3)))])
    (issue,) = errors(result)
    assert (issue.code, issue.subject) == ("NoPartitionOnFlavor", "a-quota/ml.p5.48xlarge")
    assert MIG2 in issue.message and "catalog" in issue.message
    assert result.teams["a"].nominal[P5].get(R2, 0) == 0  # the entry contributes nothing


# -- properties -----------------------------------------------------------------------------------
def spec_shape(flavor_nodes, spec):
    """S(f) as docs/spec.md §2 says: the layout (all but cpu and memory) most nodes have — a tie: the one with the
    catalog's device count, else the greatest —, then cpu and memory each the most common among its nodes (a tie:
    the greatest). None without nodes."""

    def layout(n):
        return tuple(sorted((r, q) for r, q in n.allocatable.items() if r not in ("cpu", "memory")))

    def key(items):
        return tuple((r, Fraction(q)) for r, q in items)

    votes = Counter(layout(n) for n in flavor_nodes)
    if not votes:
        return None
    top = max(votes.values())
    tied = [lay for lay, v in votes.items() if v == top]
    if len(tied) > 1:
        devices = [
            lay for lay in tied if next((q for r, q in lay if r in (GPU, NEURON) and q > 0), None) == spec.accelerators
        ]
        tied = devices or tied
    chosen = max(tied, key=key)
    shape = dict(chosen)
    for r in ("cpu", "memory"):
        values = Counter(n.allocatable[r] for n in flavor_nodes if layout(n) == chosen and r in n.allocatable)
        if values:
            shape[r] = max(values.items(), key=lambda kv: (kv[1], Fraction(kv[0])))[0]
    return shape


def written_caps(cap, flavor_nodes):
    """resource -> the cap the admin wrote, from docs/spec.md §2 (computed here, independently of the engine)."""
    out = {}
    if cap.count is not None:
        shape = spec_shape(flavor_nodes, catalog.lookup(cap.instance_type))
        if shape is None:  # no node of the flavor: S(f) is the catalog's
            shape = catalog.lookup(cap.instance_type).allocatable()
        for r, q in shape.items():
            out[r] = cap.count * q
        out["*"] = 0  # resources absent from S(f)
    accelerator = NEURON if any(n.allocatable.get(NEURON, 0) > 0 for n in flavor_nodes) else GPU
    if cap.accelerators is not None:
        out[accelerator] = cap.accelerators
    if cap.vcpu is not None:
        out["cpu"] = cap.vcpu
    if cap.memory_gib is not None:
        out["memory"] = cap.memory_gib * GIB
    if cap.accelerator_partition is not None:
        out[f"nvidia.com/{cap.accelerator_partition.type}"] = cap.accelerator_partition.count
    return out


@settings(max_examples=150, deadline=None)
@given(mixed_fleet(), teams_with_caps(), st.booleans())
def test_no_borrowing_limit_exceeds_an_absolute_cap_the_admin_wrote(nodes_, quotas_, sharing):
    result = run(nodes_, quotas_, idle_resource_sharing=sharing)
    for q in quotas_:
        grant = result.teams[q.team]
        for cap in q.absolute_borrow_limits:
            flavor_nodes = [n for n in nodes_ if n.instance_type == cap.instance_type]
            caps = written_caps(cap, flavor_nodes)
            for r, limit in grant.borrowing_limit.get(cap.instance_type, {}).items():
                bound = caps.get(r, caps.get("*"))
                if bound is not None:
                    assert limit <= bound, (cap, r, limit, bound)


@settings(max_examples=100, deadline=None)
@given(mixed_fleet(), st.data())
def test_every_mig_profile_some_node_exposes_can_be_given_as_quota(nodes_, data):
    exposed = sorted({r for n in nodes_ if n.instance_type == P5 for r, q in n.allocatable.items() if q > 0})
    profiles = [r.removeprefix("nvidia.com/") for r in exposed if r.startswith("nvidia.com/mig-")]
    if not profiles:
        return
    profile = data.draw(st.sampled_from(profiles))
    count = data.draw(st.integers(1, 64))
    result = run(nodes_, [quota("a", entry(P5, partition=(profile, count)))])
    assert not errors(result)
    nominal = result.teams["a"].nominal[P5]
    assert nominal[f"nvidia.com/{profile}"] == count
    assert nominal["cpu"] > 0 and nominal["memory"] > 0  # sized by a node that has the profile
