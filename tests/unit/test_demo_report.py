"""The demo's step output (devkit/report.py) as a new operator reads it: a column per instance type, "changed" only
where something changed, the rule that set a limit stable when only idle sharing changes, and admitted work whose
pods no node took said once, with its cause, then only when it changes."""

from __future__ import annotations

from typing import Any

from devkit import scenario
from devkit.report import render_step

G5_8, G5_1, P4D = "ml.g5.8xlarge", "ml.g5.xlarge", "ml.p4d.24xlarge"
GPU, MIG1, MIG3 = "nvidia.com/gpu", "nvidia.com/mig-1g.5gb", "nvidia.com/mig-3g.20gb"


def _report(index: int, pool: dict[str, Any], usage: dict[str, Any] | None = None) -> scenario.StepReport:
    report = scenario.StepReport(index, f"step {index}", "event")
    report.pool = pool
    report.usage = usage or {}
    return report


def _pool(capacity: dict[str, dict[str, str]], teams: dict[str, Any] | None = None, sharing: str = "Enabled"):
    return {"flavors": sorted(capacity), "resources": [GPU, MIG1, MIG3], "capacity": capacity,
            "idleResourceSharing": sharing, "teams": teams or {}}  # fmt: skip


def test_two_instance_types_of_one_family_get_a_column_each():
    pool = _pool({G5_8: {GPU: "8"}, G5_1: {GPU: "4"}})
    text = render_step(_report(1, pool), None)
    head = next(x for x in text.splitlines() if "gpu" in x)
    assert "g5.8xlarge gpu" in head and "g5.xlarge gpu" in head
    assert "g5 gpu" not in text


def test_a_family_alone_keeps_its_short_column():
    text = render_step(_report(1, _pool({P4D: {MIG1: "56"}})), None)
    assert "p4d mig-1g.5gb" in text


def test_the_pool_is_marked_changed_only_when_it_changed():
    pool = _pool({G5_8: {GPU: "8"}})
    first = _report(1, pool)
    same = render_step(_report(2, pool), first)
    assert "  pool\n" in same + "\n" and "(* changed)" not in same
    grown = render_step(_report(3, _pool({G5_8: {GPU: "16"}})), first)
    assert "pool (* changed)" in grown and "16*" in grown


def _vision(sharing: str) -> dict[str, Any]:
    """A LendAndBorrow team with a p4d quota of 1g slices; its 3g limit is 0 (100% of its 0 3g quota): with idle
    sharing on there is a pool to explain, with it off there is nothing (no derivation stored)."""
    why_1g = {"bound": "percentage of quota", "percent": 100, "limit": "56", "basis": "Quota"}
    why = {P4D: {MIG1: why_1g}}
    if sharing == "Enabled":
        why[P4D][MIG3] = {"bound": "percentage of quota", "percent": 100, "limit": "0", "basis": "Quota"}
    grant = {"strategy": "LendAndBorrow", "activationState": "Enabled", "nominal": {P4D: {MIG1: "56"}},
             "borrowingLimit": {P4D: {MIG1: "56"}}, "why": why, "bounds": {P4D: "percentage of quota"}}  # fmt: skip
    return _pool({P4D: {MIG1: "112", MIG3: "48"}}, {"vision": grant}, sharing)


def test_the_rule_of_a_mig_limit_stays_when_only_idle_sharing_changes():
    on, off = _report(1, _vision("Enabled")), _report(2, _vision("Disabled"))
    rows = [next(x for x in render_step(r, None).splitlines() if x.strip().startswith("vision (")) for r in (on, off)]
    assert rows[0].split(")", 1)[1].split() == ["56", "(100%", "q)", "0", "(100%", "q)"]
    assert rows[1] == rows[0]
    assert "(n/q)" not in rows[1]


def _unbound(pods: int, seconds: int) -> dict[str, Any]:
    reason = "0/36 nodes are available: 33 node(s) had untolerated taint(s)."
    return {"unbound": [{"team": "infra", "flavor": "ml.trn1.32xlarge", "pods": pods, "seconds": seconds,
                         "reason": reason}]}  # fmt: skip


def test_pods_without_a_node_are_said_once_with_the_cause_then_only_when_it_changes():
    pool = _pool({G5_8: {GPU: "8"}})
    steps = [_report(i, pool, u) for i, u in enumerate([_unbound(6, 3), _unbound(6, 5), _unbound(4, 8), {}], 1)]
    texts = [render_step(r, steps[i - 1] if i else None) for i, r in enumerate(steps)]
    said = [[x for x in t.splitlines() if "infra's admitted work" in x] for t in texts]
    assert len(said[0]) == 1 and "6 pods" in said[0][0]
    assert "the Kubernetes scheduler places its pods on no node: 0/36 nodes are available" in said[0][0]
    assert said[1] == []  # the same 6 pods: not said again
    assert len(said[2]) == 1 and "4 pods" in said[2][0]  # it changed
    assert len(said[3]) == 1 and "no pod without a node now" in said[3][0]
