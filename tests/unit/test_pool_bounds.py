"""Issue 40.5: sums and products the pool computes stay inside Kueue's int64 (cpu in millicores, memory in bytes,
devices in units); past it, a named error issue and nothing of that resource on that flavor is written — never a
number the API server stores unchecked and Kueue overflows on (docs/spec.md §2, "Range")."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from idleshare.domain.model import SchedulerConfig, Settings
from idleshare.domain.quantity import parse_quantity
from idleshare.parse.nodes import parse_nodes
from tests.builders import P5, entry, k8s_node, objects, quota

INT64 = 2**63 - 1
GPU = "nvidia.com/gpu"


def amounts(manifests: list[dict[str, Any]]) -> list[tuple[str, str, str, str, Any]]:
    """(object, flavor, resource, field, value) of every quantity in the Cohort's and the ClusterQueues' groups."""
    out = []
    for m in manifests:
        for group in m.get("spec", {}).get("resourceGroups", []):
            for f in group["flavors"]:
                for r in f["resources"]:
                    for key in ("nominalQuota", "borrowingLimit", "lendingLimit"):
                        if key in r:
                            out.append((m["metadata"]["name"], f["name"], r["name"], key, parse_quantity(str(r[key]))))
    return out


def in_range(resource: str, value: Any) -> bool:
    return (value * 1000 if resource == "cpu" else value) <= INT64


def test_two_nodes_of_int64_gpus_give_a_named_issue_and_no_unchecked_number():
    # Given two nodes each reporting 2^63-1 GPUs (each alone parses) and a team with 10000% of 8 GPUs of them
    nodes = parse_nodes([*(k8s_node(f"n{i}", gpus=INT64) for i in range(2)), k8s_node("n2")])
    q = quota("a", entry(P5, accelerators=INT64 // 2), borrow=10_000)
    result, manifests = objects(nodes, [q])
    # Then every quantity written is inside int64, and the flavor's GPUs are out of range, named
    bad = [a for a in amounts(manifests) if not in_range(a[2], a[4])]
    assert bad == []
    (issue,) = [i for i in result.issues if i.code == "QuantityOutOfRange"]
    assert (issue.severity, issue.subject) == ("error", f"{P5}/{GPU}")
    assert "int64" in issue.message and "n0" in issue.message
    assert result.capacity[P5][GPU] == 0 and result.teams["a"].borrowing_limit[P5][GPU] == 0
    why = result.teams["a"].why[P5][GPU]
    assert (why.limit, why.nominal, why.pool, why.percent_cap) == (0, 0, 0, 0)
    # and the other resources of the flavor are governed as ever
    assert result.capacity[P5]["cpu"] == 3 * Fraction(191450, 1000)


def test_a_percentage_past_int64_is_out_of_range_too():
    nodes = parse_nodes([k8s_node("n0", gpus=INT64)])
    result, manifests = objects(nodes, [quota("a", entry(P5, accelerators=INT64), borrow=200)])
    assert [i.subject for i in result.issues if i.code == "QuantityOutOfRange"] == [f"{P5}/{GPU}"]
    assert all(in_range(a[2], a[4]) for a in amounts(manifests))


def test_amounts_at_the_edge_are_written_as_they_are():
    # one node of 2^63-1 GPUs, no quota: the Cohort holds exactly 2^63-1
    result, manifests = objects(parse_nodes([k8s_node("n0", gpus=INT64)]), [], SchedulerConfig(), Settings())
    assert not [i for i in result.issues if i.code == "QuantityOutOfRange"]
    cohort = [a for a in amounts(manifests) if a[2] == GPU and a[3] == "nominalQuota" and a[0] == "shared-pool"]
    assert [a[4] for a in cohort] == [INT64]


def test_an_absolute_limit_of_ten_million_instances_is_out_of_range_on_memory_only():
    # Count 10,000,000 x 2000Gi of memory passes int64 (bytes); its cpu (millicores) and GPUs do not
    nodes = parse_nodes([k8s_node("n0")])
    cap = entry(P5, count=10_000_000)
    result, manifests = objects(nodes, [quota("a", entry(P5, accelerators=8), absolute=(cap,))])
    assert [i.subject for i in result.issues if i.code == "QuantityOutOfRange"] == [f"{P5}/memory"]
    assert result.teams["a"].borrowing_limit[P5][GPU] == 80_000_000
    assert all(in_range(a[2], a[4]) for a in amounts(manifests))


def test_a_zeroed_resource_is_no_shortfall():
    nodes = parse_nodes([k8s_node("n0")])
    result, _ = objects(nodes, [quota("a", entry(P5, count=10_000_000), absolute=(entry(P5, count=1),))])
    assert [i.subject for i in result.issues if i.code == "QuantityOutOfRange"] == [f"{P5}/memory"]
    (short,) = [i for i in result.issues if i.code == "Shortfall"]
    assert "memory" not in short.message and "nvidia.com/gpu" in short.message
