"""Issue 40, finding 1: more flavors than Kueue holds in the one resource group idleshare writes. The flavors quotas
name and those with accelerators are governed first, then the rest by capacity; the rest are named with counts;
every object written is one Kueue's schema and webhook take (domain/kueue.govern, writable_objects)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from idleshare.domain import kueue_versions as kv
from idleshare.domain.document import pool_document
from idleshare.domain.kueue import (
    FLAVORS_NOT_GOVERNED,
    RESOURCES_NOT_GOVERNED,
    flavor_order,
    govern,
    limit_problems,
    webhook_violations,
    writable_objects,
)
from idleshare.domain.model import SchedulerConfig, Settings, Snapshot
from idleshare.domain.pool import PoolResult, compute
from tests.builders import EC2_CPU_TYPES, G5, P5, cpu_fleet, entry, node, nodes, quota

SC = SchedulerConfig()
V012 = kv.KueueApi(tuple((kind, ("v1beta1",) if kind != "Cohort" else ("v1alpha1",)) for kind in kv.VERSIONS))


def _pool(nodes_: list[Any], quotas: list[Any], settings: Settings | None = None) -> PoolResult:
    return compute(
        Snapshot(nodes=tuple(nodes_), quotas=tuple(quotas), scheduler_config=SC, settings=settings or Settings())
    )


def _written(result: PoolResult, api: kv.KueueApi = kv.HUB_ONLY) -> tuple[PoolResult, list[dict[str, Any]]]:
    return writable_objects(result, SC, Settings(), api)


def _groups(manifests: list[dict[str, Any]], kind: str) -> list[list[dict[str, Any]]]:
    return [o["spec"]["resourceGroups"] for o in manifests if o["kind"] == kind]


def _issue(result: PoolResult, code: str) -> Any:
    (found,) = [i for i in result.issues if i.code == code]
    return found


def test_two_p5_and_66_cpu_types_write_64_flavors_and_name_the_other_three() -> None:
    # Given 2 p5 nodes and 66 CPU nodes of distinct instance types, two teams with p5 quotas
    result = _pool(
        [*nodes("p5", P5, 2), *cpu_fleet(66)],
        [quota("alpha", entry(P5, count=1), borrow=50), quota("beta", entry(P5, count=1))],
    )
    assert len(result.flavors) == 67
    # When the objects are built for the newest Kueue
    governed, manifests = _written(result)
    # Then 64 flavors are written (the CRD's maxItems), the p5 among them, in every group of the Cohort and both queues
    flavors = [o["metadata"]["name"] for o in manifests if o["kind"] == "ResourceFlavor"]
    assert len(flavors) == kv.HUB_ONLY.limits.flavors_per_group == 64 and P5 in flavors
    for kind in ("Cohort", "ClusterQueue"):
        for groups in _groups(manifests, kind):
            assert len(groups) == 1 and [f["name"] for f in groups[0]["flavors"]] == sorted(flavors)
    assert Counter(o["kind"] for o in manifests)["ClusterQueue"] == 2
    # And Kueue would take every object: the CRDs' bounds and the webhook's rules
    assert [p for o in manifests for p in limit_problems(o, kv.HUB_ONLY.limits) + webhook_violations(o)] == []
    # And the three left out are the smallest (by vCPU, then memory, then name), named with their node counts
    assert governed.ungoverned_flavors == ("c5.large", "c6i.large", "c7i.large")
    issue = _issue(governed, FLAVORS_NOT_GOVERNED)
    assert issue.severity == "warning"  # no quota names them
    assert "67 flavors" in issue.message and "at most 64" in issue.message and "3 not governed" in issue.message
    assert "c5.large (1 node)" in issue.message and "maxItems" in issue.message
    # And the stored pool lists them and no table holds them
    document = pool_document(governed)
    assert document["ungoverned"] == {"flavors": ["c5.large", "c6i.large", "c7i.large"], "resources": []}
    assert "c5.large" not in document["capacity"] and "c5.large" not in document["teams"]["alpha"]["nominal"]
    assert P5 in document["teams"]["alpha"]["borrowingLimit"]


def test_the_current_code_would_have_written_67_flavors_in_one_group() -> None:
    """The bug: the desired objects before the cut hold every flavor, past the CRD's 64 (the apiserver refuses)."""
    result = _pool([*nodes("p5", P5, 2), *cpu_fleet(66)], [quota("alpha", entry(P5, count=1))])
    from idleshare.domain.kueue import desired_objects

    cohort = next(o for o in desired_objects(result, SC, Settings()) if o["kind"] == "Cohort")
    assert limit_problems(cohort, kv.HUB_ONLY.limits) == ["spec.resourceGroups[0].flavors: at most 64 items (got 67)"]
    assert webhook_violations(cohort) != []


def test_what_quotas_name_and_accelerators_come_first_then_capacity() -> None:
    # Given 70 CPU types, a g5 node no quota names, and a quota naming the smallest CPU type (c5.large)
    result = _pool(
        [*cpu_fleet(70), node("g5-0", G5)],
        [quota("alpha", entry("c5.large", vcpu=1))],
    )
    order = flavor_order(result)
    # Then the quota's flavor is first, the accelerated one next, then the rest by vCPU, memory, name
    assert order[:2] == ["c5.large", G5]
    cpus = [dict((t, v) for t, v, _ in EC2_CPU_TYPES)[f] for f in order[2:]]
    assert cpus == sorted(cpus, reverse=True)
    governed, _ = _written(result)
    assert "c5.large" in governed.flavors and G5 in governed.flavors and len(governed.flavors) == 64
    assert set(governed.ungoverned_flavors) == set(order[64:])
    # And the order is the same whatever order the nodes come in
    again = _pool([node("g5-0", G5), *reversed(cpu_fleet(70))], [quota("alpha", entry("c5.large", vcpu=1))])
    assert flavor_order(again) == order


def test_five_teams_naming_fifteen_types_each_lose_some_named_with_an_error() -> None:
    # Given five teams naming 15 distinct CPU types each (75), one node of each type
    types = [t for t, _, _ in EC2_CPU_TYPES[:75]]
    quotas = [quota(f"team{i}", *(entry(t, vcpu=1) for t in types[i * 15 : (i + 1) * 15])) for i in range(5)]
    result = _pool(cpu_fleet(75), quotas)
    governed, manifests = _written(result)
    # Then 64 are governed, every object is one Kueue takes, and an error names the 11 quota flavors left out
    assert len(governed.flavors) == 64 and len(governed.ungoverned_flavors) == 11
    assert [p for o in manifests for p in limit_problems(o, kv.HUB_ONLY.limits) + webhook_violations(o)] == []
    issue = _issue(governed, FLAVORS_NOT_GOVERNED)
    assert issue.severity == "error" and "11 of them named by a quota" in issue.message
    assert "and 1 more" in issue.message  # ten named, the rest counted


def test_an_older_kueue_holds_sixteen() -> None:
    # Given Kueue v0.12 (v1beta1, Cohort v1alpha1): 16 flavors per group
    assert V012.release == "v0.12"
    result = _pool([*nodes("p5", P5, 1), *cpu_fleet(20)], [quota("alpha", entry(P5, count=1))])
    governed, manifests = _written(result, V012)
    assert len(governed.flavors) == 16 and P5 in governed.flavors
    assert [p for o in manifests for p in limit_problems(o, V012.limits) + webhook_violations(o, V012.limits)] == []
    assert "Kueue v0.12 holds at most 16" in _issue(governed, FLAVORS_NOT_GOVERNED).message


def test_more_resources_than_a_group_covers_keep_cpu_memory_and_quotas_first() -> None:
    # Given Kueue v0.12 (16 covered resources) and nodes carrying 20 extra resources idleshare tracks
    extra = tuple(f"example.com/r{i:02d}" for i in range(20))
    settings = Settings(extra_resources=frozenset(extra))
    alloc = {"cpu": 8, "memory": 32 * 1024**3, **dict.fromkeys(extra, 1)}
    result = _pool(
        [node("a", "m5.2xlarge", allocatable=alloc)], [quota("alpha", entry("m5.2xlarge", vcpu=1))], settings
    )
    governed, manifests = writable_objects(result, SC, settings, V012)
    assert len(governed.resources) == 16 and {"cpu", "memory"} <= set(governed.resources)
    assert governed.ungoverned_resources == extra[-6:]
    assert _issue(governed, RESOURCES_NOT_GOVERNED).severity == "warning"
    assert [p for o in manifests for p in limit_problems(o, V012.limits) + webhook_violations(o, V012.limits)] == []


def test_a_cluster_that_fits_is_left_as_it_is() -> None:
    result = _pool([*nodes("p5", P5, 2), *cpu_fleet(10)], [quota("alpha", entry(P5, count=1))])
    assert govern(result) is result
    governed, _ = _written(result)
    assert not [i for i in governed.issues if i.code in (FLAVORS_NOT_GOVERNED, RESOURCES_NOT_GOVERNED)]
    assert "ungoverned" not in pool_document(governed)


def test_the_pairs_bound_the_flavors_when_there_are_many_resources() -> None:
    # Given 9 resources: 512 pairs / 9 = 56 flavors, fewer than the CRD's 64
    extra = tuple(f"example.com/r{i}" for i in range(7))
    settings = Settings(extra_resources=frozenset(extra))
    fleet = [
        node(n.name, n.instance_type, allocatable={**n.allocatable, **dict.fromkeys(extra, 1)}) for n in cpu_fleet(70)
    ]
    result = _pool(fleet, [], settings)
    governed, manifests = writable_objects(result, SC, settings, kv.HUB_ONLY)
    assert len(governed.resources) == 9 and len(governed.flavors) == 56
    assert "512 flavor-resource pairs" in _issue(governed, FLAVORS_NOT_GOVERNED).message
    assert [p for o in manifests for p in webhook_violations(o)] == []


def test_the_flavors_left_out_are_a_gauge_per_cluster(capsys) -> None:
    from idleshare import names
    from idleshare.runtime.metrics import emit_recompute
    from idleshare.service.recompute import Outcome
    from tests.fakes import emf_documents

    for fleet, expected in ((66, [("c1", [3.0])]), (10, [])):  # none left out: no gauge (its alarm: missing is fine)
        result, _ = _written(_pool([*nodes("p5", P5, 2), *cpu_fleet(fleet)], [quota("a", entry(P5, count=1))]))
        capsys.readouterr()
        emit_recompute(Outcome("c1", 1, True, result=result))
        gauges = [r for r in emf_documents(capsys.readouterr().out) if names.METRIC_UNGOVERNED_FLAVORS in r]
        assert [(r[names.METRIC_DIM_CLUSTER], r[names.METRIC_UNGOVERNED_FLAVORS]) for r in gauges] == expected
