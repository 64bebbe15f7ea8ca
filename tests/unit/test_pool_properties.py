"""Properties of the engine that must hold for every cluster and every set of quotas."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from idleshare.domain.kueue import desired_objects
from idleshare.domain.model import BorrowLimitBasis, SchedulerConfig, Settings, Snapshot, Strategy
from idleshare.domain.pool import compute
from tests.builders import ALLOC, G5, P4D, P5, TRN1, entry, node, quota
from tests.strategies import mixed_fleet, teams_with_caps

FLAVORS = [P5, P4D, TRN1, G5]


@st.composite
def cluster_nodes(draw, min_size=0):
    health, out = st.sampled_from(["Schedulable", "Schedulable", "Unschedulable", None]), []
    for i in range(draw(st.integers(min_value=min_size, max_value=14))):
        flavor, ready = draw(st.sampled_from(FLAVORS)), draw(st.booleans()) or draw(st.booleans())
        cordoned = draw(st.integers(0, 5)) == 0
        out.append(node(f"n{i}", flavor, ready=ready, unschedulable=cordoned, health_status=draw(health)))
    return out


@st.composite
def resource_entry(draw, flavor):
    kind = draw(st.sampled_from(["count", "accelerators", "vcpu", "memory", "partition", "mixed"]))
    if kind == "count":
        return entry(flavor, count=draw(st.integers(1, 3)))
    if kind == "accelerators" and flavor != P4D:
        return entry(flavor, accelerators=draw(st.integers(0, 20)))
    if kind == "partition" and flavor == P4D:
        return entry(flavor, partition=("mig-1g.5gb", draw(st.integers(0, 60))))
    if kind == "memory":
        return entry(flavor, memory_gib=draw(st.integers(1, 900)))
    if kind == "mixed":
        return entry(flavor, count=1, vcpu=draw(st.integers(1, 50)))
    return entry(flavor, vcpu=draw(st.integers(1, 200)))


@st.composite
def team_quotas(draw):
    out = []
    for t in range(draw(st.integers(0, 5))):
        entries = tuple(
            draw(resource_entry(f)) for f in draw(st.lists(st.sampled_from(FLAVORS), unique=True, max_size=3))
        )
        absolute = tuple(
            draw(resource_entry(f)) for f in draw(st.lists(st.sampled_from(FLAVORS), unique=True, max_size=2))
        )
        out.append(
            quota(
                f"team-{t}",
                *entries,
                strategy=draw(st.sampled_from(list(Strategy))),
                borrow=draw(st.one_of(st.none(), st.integers(0, 10000))),
                absolute=absolute,
                enabled=draw(st.integers(0, 4)) > 0,
                fair_share_weight=draw(st.one_of(st.none(), st.integers(0, 100))),
            )
        )
    return out


def snap(nodes_, quotas_, sharing=True, basis=BorrowLimitBasis.QUOTA):
    return Snapshot(
        nodes=tuple(nodes_),
        quotas=tuple(quotas_),
        scheduler_config=SchedulerConfig(idle_resource_sharing=sharing),
        settings=Settings(borrow_limit_basis=basis),
    )


@settings(max_examples=150, deadline=None)
@given(cluster_nodes(), team_quotas(), st.booleans())
def test_on_the_quota_basis_every_limit_is_the_percentage_of_the_quota_or_the_absolute_limit(nodes_, quotas_, sharing):
    result = compute(snap(nodes_, quotas_, sharing))
    for q in quotas_:
        grant = result.teams.get(q.team)
        if grant is None or grant.quota_name != q.name:
            continue  # a duplicate team's second quota: not the one that counts
        percent = 50 if q.borrow_limit is None else q.borrow_limit
        for f, per in grant.borrowing_limit.items():
            for r, limit in per.items():
                d = grant.why[f][r]
                assert limit == d.limit and limit >= 0
                if not q.enabled or q.strategy is not Strategy.LEND_AND_BORROW:
                    assert limit == 0
                elif d.absolute_cap is not None:
                    assert limit <= d.absolute_cap and d.bound == "absolute"
                else:
                    assert limit <= Fraction(percent, 100) * grant.nominal[f][r]
                    unit = {"memory": 1024**2, "cpu": Fraction(1, 1000)}.get(r, 1)  # docs/spec.md §2, "Rounding"
                    assert limit > Fraction(percent, 100) * grant.nominal[f][r] - unit  # rounded down, by < 1 unit
                    if f not in {e.instance_type for e in q.resources}:
                        assert d.bound == "not in quota" and limit == 0


@settings(max_examples=150, deadline=None)
@given(cluster_nodes(min_size=1), team_quotas(), st.data())
def test_a_flip_moves_no_teams_own_quota_nor_its_limit_on_the_quota_basis(nodes_, quotas_, data):
    """Cordoning, draining or failing nodes, or switching idle sharing, changes the pool and the Cohort's quota,
    never anyone's own quota nor (on the quota basis) a team's limit."""
    before = compute(snap(nodes_, quotas_))
    flipped = [replace(n, unschedulable=not n.unschedulable) if data.draw(st.booleans()) else n for n in nodes_]
    after = compute(snap(flipped, quotas_, sharing=data.draw(st.booleans())))
    for team, grant in before.teams.items():
        assert after.teams[team].nominal == grant.nominal
        assert after.teams[team].borrowing_limit == grant.borrowing_limit


@settings(max_examples=150, deadline=None)
@given(cluster_nodes(), team_quotas(), st.booleans())
def test_on_the_pool_basis_every_borrowing_limit_is_within_the_pool_the_team_sees(nodes_, quotas_, sharing):
    result = compute(snap(nodes_, quotas_, sharing, basis=BorrowLimitBasis.POOL))
    for grant in result.teams.values():
        for f, per in grant.borrowing_limit.items():
            for r, limit in per.items():
                d = grant.why[f][r]
                assert 0 <= limit <= d.pool
                assert limit == d.limit
                if d.absolute_cap is not None:
                    assert limit <= d.absolute_cap


@settings(max_examples=150, deadline=None)
@given(cluster_nodes(), team_quotas(), st.sampled_from(FLAVORS))
def test_adding_an_eligible_node_never_lowers_unallocated(nodes_, quotas_, flavor):
    # the new node has the flavor's usual shape, so instance shapes (and so quotas) stay put
    base = [*nodes_, node("seed", flavor)]
    before = compute(snap(base, quotas_))
    after = compute(snap([*base, node("added", flavor, allocatable=dict(ALLOC[flavor]))], quotas_))
    for f in before.flavors:
        for r in before.resources:
            assert after.unallocated[f][r] >= before.unallocated[f][r]
    # the node's capacity shows up: as more unallocated, or as less shortfall
    gained = sum(after.unallocated[flavor].values()) - sum(before.unallocated[flavor].values())
    covered = sum(before.shortfall[flavor].values()) - sum(after.shortfall[flavor].values())
    assert gained + covered > 0


@settings(max_examples=200, deadline=None)
@given(cluster_nodes() | mixed_fleet(), team_quotas() | teams_with_caps(), st.randoms(use_true_random=False))
def test_results_are_identical_for_any_input_order(nodes_, quotas_, rnd):
    # mixed MIG layouts too: ties between layouts (S(f), S(f, r)) are broken by the shapes themselves
    shuffled_nodes, shuffled_quotas = list(nodes_), list(quotas_)
    rnd.shuffle(shuffled_nodes)
    rnd.shuffle(shuffled_quotas)
    a, b = compute(snap(nodes_, quotas_)), compute(snap(shuffled_nodes, shuffled_quotas))
    assert a == b
    sc, st_ = SchedulerConfig(), Snapshot(nodes=()).settings
    assert desired_objects(a, sc, st_) == desired_objects(b, sc, st_)
