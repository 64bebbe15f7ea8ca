"""Scenario steps for weights and priorities: a ``submit`` naming a priority class, the expectations of what Kueue
did per team (``workloadCounts``, ``borrowed``), and the step report's fair-sharing lines."""

from __future__ import annotations

from typing import Any

import pytest

from devkit import scenario
from devkit.kube.workloads import PRIORITY_LABEL, batch_job, lendable
from devkit.report import BOUND_SHORT, render_fair_sharing
from idleshare.domain.kueue import desired_objects
from idleshare.domain.model import PriorityClass, SchedulerConfig, Settings, Snapshot
from idleshare.domain.naming import priority_class_name
from idleshare.domain.pool import Bound, compute
from idleshare.parse.errors import InputError
from tests.builders import P5, entry, nodes, quota

CLASSES = [{"Name": "inference", "Weight": 100}, {"Name": "training", "Weight": 10}]


def doc(*steps: dict[str, Any], scheduler_config: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {"quotas": [], "steps": [{"title": "first", "recalculate": True}, *steps]}
    if scheduler_config is not None:
        out["schedulerConfig"] = scheduler_config
    return out


def job(**fields: Any) -> dict[str, Any]:
    return {"team": "serving", "name": "chat", "requests": {"gpu": 4}, **fields}


def refused(document: dict[str, Any]) -> tuple[str, str]:
    with pytest.raises(InputError) as err:
        scenario.parse(document, "s.yaml")
    assert err.value.source == "s.yaml" and len(err.value.errors) == 1
    return err.value.errors[0].loc, err.value.errors[0].message


# -- submit: priorityClass ------------------------------------------------------------------------------------------
def test_a_submitted_job_names_a_priority_class_as_the_scheduler_config_does():
    submit = {"submit": [job(priorityClass="inference"), job(name="eval")]}
    items = scenario.parse(doc(submit, scheduler_config={"PriorityClasses": CLASSES}), "s.yaml").steps[1].arg
    assert items[0]["priorityClass"] == "inference" and "priorityClass" not in items[1]


def test_the_job_carries_the_workload_priority_class_idleshare_writes_for_that_name():
    # idleshare's own objects for a SchedulerConfig with the two classes
    config = SchedulerConfig(priority_classes=tuple(PriorityClass(c["Name"], c["Weight"]) for c in CLASSES))
    snapshot = Snapshot(
        nodes=tuple(nodes("p5", P5, 1)), quotas=(quota("a", entry(P5, count=1)),), scheduler_config=config
    )
    objects = desired_objects(compute(snapshot), config, Settings())
    written = {o["metadata"]["name"]: o["value"] for o in objects if o["kind"] == "WorkloadPriorityClass"}
    # the Job a scenario submits for each class names one of them, with that class's weight
    for c in CLASSES:
        label = batch_job("a", "j", {"nvidia.com/gpu": 1}, priority_class=priority_class_name(c["Name"]))
        assert written[label["metadata"]["labels"][PRIORITY_LABEL]] == c["Weight"]


LISTED = "(its PriorityClasses: inference, training)"
PC, WC = "steps[1].submit[1].priorityClass", "steps[1].expect.workloadCounts.alpha"


def pc(value: Any) -> dict[str, Any]:
    """A submit step whose second Job names ``value`` as its priority class."""
    return {"submit": [job(name="eval"), job(priorityClass=value)]}


def counts(value: Any) -> dict[str, Any]:
    return {"expect": {"workloadCounts": {"alpha": value}}}


@pytest.mark.parametrize(
    ("step", "loc", "says"),
    [
        (pc(100), PC, f"must be the Name of one of the SchedulerConfig's priority classes {LISTED}"),
        (pc(""), PC, "must be the Name of one of"),
        (pc(["inference"]), PC, "must be the Name of one of"),
        (pc("batch"), PC, f"no priority class 'batch' in the SchedulerConfig at this step {LISTED}"),
        (
            pc("inference-priority"),
            PC,
            "'inference-priority' is the WorkloadPriorityClass idleshare writes for 'inference'",
        ),
        ({"submit": job(name="Chat_1")}, "steps[1].submit.name", ""),
        ({"submit": job(priority="inference")}, "steps[1].submit.priority", ""),
        ({"submit": job(count=0)}, "steps[1].submit.count", ""),
        # expectations of what Kueue did per team
        (counts({"Running": 1}), f"{WC}.Running", ""),
        (counts({"Admitted": -1}), f"{WC}.Admitted", ""),
        (counts({"Admitted": True}), f"{WC}.Admitted", ""),
        (counts(3), WC, ""),
        ({"expect": {"borrowed": {"alpha": {P5: {"gpu": "lots"}}}}}, f"steps[1].expect.borrowed.alpha.{P5}.gpu", ""),
        ({"expect": {"borrowed": {"alpha": 8}}}, "steps[1].expect.borrowed.alpha", ""),
    ],
)
def test_a_bad_submit_or_expectation_is_refused_naming_the_field(step, loc, says):
    step = step if "submit" in step else {"recalculate": True, **step}
    named, message = refused(doc(step, scheduler_config={"PriorityClasses": CLASSES}))
    assert named == loc and says in message


def test_the_classes_are_those_of_the_scheduler_config_at_the_step():
    loc, message = refused(doc({"submit": job(priorityClass="inference")}))  # none: a priority class is unknown
    assert loc == "steps[1].submit.priorityClass" and "it lists no PriorityClasses" in message
    # Given classes set by a schedulerConfig step (wrapped, as the store keeps it), then replaced by another
    steps = (
        {"schedulerConfig": {"SchedulerConfig": {"PriorityClasses": CLASSES}}},
        {"submit": job(priorityClass="training")},
        {"schedulerConfig": {"PriorityClasses": [{"Name": "inference", "Weight": 100}]}},
        {"submit": job(name="later", priorityClass="training")},
    )
    # Then a Job may name training after the first and not after the second
    loc, message = refused(doc(*steps))
    assert loc == "steps[4].submit.priorityClass" and "its PriorityClasses: inference" in message
    assert scenario.parse(doc(*steps[:2]), "s.yaml").steps[2].arg[0]["priorityClass"] == "training"


def report(workloads: list[tuple[str, str, str]], borrowed: dict[str, Any] | None = None) -> scenario.StepReport:
    r = scenario.StepReport(1, "t", "submit")
    r.workloads = [{"team": t, "name": n, "state": s, "reason": "", "message": ""} for t, n, s in workloads]
    r.borrowed = borrowed or {}
    return r


def check(expect: dict[str, Any], r: scenario.StepReport) -> tuple[list[str], int]:
    sc = scenario.parse(doc({"recalculate": True, "expect": expect}), "s.yaml")
    return scenario.check(sc.steps[1].expect, r, {}, sc)


def test_workload_counts_are_exact_and_borrowed_is_kueues_per_flavor():
    states = [("alpha", "a1", "Admitted"), ("alpha", "a2", "Preempted"), ("alpha", "a3", "Pending")]
    r = report([*states, ("beta", "b1", "Admitted")], {"alpha": {P5: {"nvidia.com/gpu": "8"}}})
    # Given the counts as they are, and the borrowed GPUs: every expectation holds (one per state, per team)
    counts = {"alpha": {"Admitted": 1, "Preempted": 1, "Pending": 1}}
    assert check({"workloadCounts": counts, "borrowed": {"alpha": {P5: {"gpu": 8}}}}, r) == ([], 5)
    # A state left out is expected to be empty; a team that borrows nothing borrows 0
    expect = {"workloadCounts": {"alpha": {"Admitted": 1, "Pending": 1}}, "borrowed": {"beta": {P5: {"gpu": 8}}}}
    bad = ["team alpha Preempted workloads: expected 0, got 1 (a2)", f"team beta borrows {P5}/gpu: expected 8, got 0"]
    assert check(expect, r)[0] == bad


# -- the report: the shares Kueue gave and why ---------------------------------------------------------------------
def shared(weights: dict[str, Any], shares: dict[str, Any]) -> scenario.StepReport:
    r = report([], {"alpha": {P5: {"nvidia.com/gpu": "8"}}, "beta": {P5: {"nvidia.com/gpu": "24"}}})
    teams = {t: {"weight": weights[t], "weightedShare": shares[t]} for t in weights}
    r.fair_sharing = {"lendable": {"nvidia.com/gpu": "84", "cpu": "400"}, "teams": teams}
    limits, gpu = {"alpha": ("24", "percentage of quota"), "beta": ("40", "pool")}, "nvidia.com/gpu"
    teams = {t: {"borrowingLimit": {P5: {gpu: n}}, "why": {P5: {gpu: {"bound": b, "percent": 300}}}}
             for t, (n, b) in limits.items()}  # fmt: skip
    r.pool = {"teams": teams}
    return r


def test_two_borrowers_are_shown_with_their_weights_limits_and_shares_worked_out():
    lines = render_fair_sharing(shared({"alpha": "1", "beta": "3"}, {"alpha": 96, "beta": 96}))
    text = "\n".join(lines)
    assert "fair sharing (Kueue)" in lines[0]
    assert "alpha  weight 1  borrows 8 gpu on p5 (limit 24 (300% q))" in text
    assert "8 x 1000 / 84 gpu / 1 = 95.2 -> Kueue's share 96" in text
    assert "beta   weight 3  borrows 24 gpu on p5 (limit 40 (pool))" in text
    assert "24 x 1000 / 84 gpu / 3 = 95.2 -> Kueue's share 96" in text


def test_no_fair_sharing_lines_for_one_borrower_and_first_come_first_served_when_kueues_is_off():
    one = shared({"alpha": "1", "beta": "3"}, {"alpha": 96, "beta": 96})
    one.borrowed.pop("beta")
    assert render_fair_sharing(one) == []
    off = render_fair_sharing(shared({"alpha": None, "beta": None}, {"alpha": None, "beta": None}))
    assert "off in Kueue" in off[0] and "first come, first served" in off[0]
    assert "weight - (1)" in off[1] and "share" not in off[1]


def test_lendable_is_the_cohorts_own_and_what_each_queue_in_it_may_lend_over_flavors():
    def cq(name: str, cohort: str | None, flavors: dict[str, dict[str, str]]) -> dict[str, Any]:
        resources = [{"name": f, "resources": [{"name": "nvidia.com/gpu", **v}]} for f, v in flavors.items()]
        spec = {"resourceGroups": [{"flavors": resources}]} | ({"cohortName": cohort} if cohort else {})
        return {"kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}

    objects = [
        {**cq("pool", None, {P5: {"nominalQuota": "32"}, "g5": {"nominalQuota": "28"}}), "kind": "Cohort"},
        cq("a", "pool", {P5: {"nominalQuota": "8", "lendingLimit": "8"}}),
        cq("b", "pool", {P5: {"nominalQuota": "16"}}),
        cq("dont-lend", "pool", {"g5": {"nominalQuota": "4", "lendingLimit": "0"}}),
        cq("alone", None, {P5: {"nominalQuota": "100"}}),
    ]
    assert lendable(objects) == {"nvidia.com/gpu": 32 + 28 + 8 + 16}


def test_the_shares_are_shown_again_only_when_kueue_decided_something():
    before, same = (shared({"alpha": "1", "beta": "3"}, {"alpha": 96, "beta": 96}) for _ in range(2))
    assert render_fair_sharing(same, before) == []
    same.workloads = [{"team": "beta", "name": "b1", "state": "Admitted", "reason": "", "message": ""}]
    assert render_fair_sharing(same, before) != []


def test_every_bound_has_its_column_text():
    assert set(BOUND_SHORT) == {str(b) for b in Bound}
