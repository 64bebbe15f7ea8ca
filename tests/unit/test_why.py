"""Why a team's pending Job waits (idleshare.domain.why): every cause, table-driven, and the same cause reaching
the usage sample (derive_usage) that every surface reads."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from idleshare.domain.usage import derive_usage, sample_document
from idleshare.domain.why import Cause, why_waits, worst
from idleshare.parse.kueue_status import cluster_queues as read_queues
from idleshare.parse.kueue_status import workloads as read_workloads

GPU = "nvidia.com/gpu"
P5 = "ml.p5.48xlarge"

# (case, kwargs of why_waits, expected cause, words the one-line text must hold)
CASES: list[tuple[str, dict[str, Any], Cause, list[str]]] = [
    ("disabled team holds whatever it asks",
     dict(request=1, nominal=8, in_use=0, borrowed=0, limit=0, free=32, disabled=True),
     Cause.DISABLED, ["Disabled"]),
    ("bound disabled without the flag",
     dict(request=1, nominal=8, in_use=0, borrowed=0, limit=0, free=32, bound="disabled"),
     Cause.DISABLED, ["Disabled"]),
    ("borrowing above a lowered limit",
     dict(request=8, nominal=24, in_use=40, borrowed=16, limit=12, free=8, bound="percentage of quota", percent=50),
     Cause.ABOVE_LIMIT, ["borrows 16", "limit of 12", "50% of its quota of 24", "does not evict"]),
    ("percentage of quota stops it",
     dict(request=16, nominal=24, in_use=24, borrowed=0, limit=12, free=32, bound="percentage of quota", percent=50),
     Cause.PERCENTAGE_OF_QUOTA, ["limit of 12", "50% of its quota of 24", "need 16 more"]),
    ("absolute cap stops it (ml-research: 8 borrowed of 8)",
     dict(request=8, nominal=24, in_use=32, borrowed=8, limit=8, free=24, bound="absolute", percent=100),
     Cause.ABSOLUTE, ["limit of 8", "AbsoluteBorrowLimits", "borrows 8", "need 8 more"]),
    ("not in quota: limit 0",
     dict(request=8, nominal=0, in_use=0, borrowed=0, limit=0, free=16, bound="not in quota"),
     Cause.NOT_IN_QUOTA, ["not in its quota", "may borrow none", "needs 8"]),
    ("strategy DontLend borrows nothing",
     dict(request=4, nominal=8, in_use=8, borrowed=0, limit=0, free=16, bound="strategy"),
     Cause.STRATEGY, ["strategy does not borrow", "needs 4"]),
    ("Pool basis: percentage of the pool",
     dict(request=20, nominal=8, in_use=8, borrowed=0, limit=16, free=32, bound="percentage", percent=50),
     Cause.PERCENTAGE, ["limit of 16", "50% of the pool"]),
    ("Pool basis: the pool itself",
     dict(request=20, nominal=8, in_use=8, borrowed=0, limit=16, free=32, bound="pool"),
     Cause.POOL, ["whole pool"]),
    ("a limit with no stored rule",
     dict(request=20, nominal=8, in_use=8, borrowed=0, limit=16, free=32),
     Cause.LIMIT, ["limit of 16"]),
    ("within its limit, too little free",
     dict(request=16, nominal=24, in_use=24, borrowed=0, limit=48, free=8, bound="percentage of quota", percent=200),
     Cause.NO_FREE_CAPACITY, ["asks 16", "8 is free"]),
    ("within its own quota, but lent out",
     dict(request=8, nominal=8, in_use=0, borrowed=0, limit=0, free=4, bound="strategy"),
     Cause.NO_FREE_CAPACITY, ["asks 8", "4 is free"]),
    ("fits: Kueue's message is the reason",
     dict(request=8, nominal=8, in_use=0, borrowed=0, limit=4, free=8, bound="percentage of quota", percent=50),
     Cause.KUEUE, ["Kueue's own message"]),
    ("unlimited and free",
     dict(request=100, nominal=8, in_use=8, borrowed=0, limit=None, free=100),
     Cause.KUEUE, ["fits"]),
    ("exactly at the limit after admission: fits",
     dict(request=4, nominal=8, in_use=12, borrowed=4, limit=8, free=4, bound="absolute"),
     Cause.KUEUE, ["fits"]),
]  # fmt: skip


@pytest.mark.parametrize(("kwargs", "cause", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_why_waits_names_the_cause(kwargs: dict[str, Any], cause: Cause, words: list[str]) -> None:
    got = why_waits(resource=GPU, **kwargs)
    assert got.cause is cause
    assert got.above_limit == (cause is Cause.ABOVE_LIMIT)
    for word in words:
        assert word in got.text, (word, got.text)
    assert "\n" not in got.text


def test_worst_names_the_first_cause_in_rank() -> None:
    free = why_waits(resource=GPU, request=8, nominal=8, in_use=0, borrowed=0, limit=None, free=0)
    capped = why_waits(resource="cpu", request=8, nominal=0, in_use=0, borrowed=0, limit=0, free=8, bound="absolute")
    assert worst([free, capped]) is capped
    assert worst([]) is None


# -- through the usage sample: the ClusterQueue's limit and use, the stored grant's rule ---------------------------


def _cq(team: str, nominal: int, limit: int, total: int, borrowed: int) -> dict[str, Any]:
    res = {"name": GPU, "nominalQuota": str(nominal), "borrowingLimit": str(limit)}
    return {
        "metadata": {"name": f"hyperpod-ns-{team}-clusterqueue", "labels": {"idleshare.io/team": team}},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": f"hyperpod-ns-{team}"}},
            "resourceGroups": [{"coveredResources": [GPU], "flavors": [{"name": P5, "resources": [res]}]}],
        },
        "status": {"flavorsUsage": [{"name": P5, "resources": [{"name": GPU, "total": str(total),
                                                                 "borrowed": str(borrowed)}]}]},
    }  # fmt: skip


def _pending(team: str, job: str, gpus: int) -> dict[str, Any]:
    pod = {"nodeSelector": {"node.kubernetes.io/instance-type": P5},
           "containers": [{"name": "c", "resources": {"requests": {GPU: str(gpus)}}}]}  # fmt: skip
    return {
        "metadata": {"name": f"job-{job}-abc", "namespace": f"hyperpod-ns-{team}", "creationTimestamp": "2026-01-01",
                     "ownerReferences": [{"kind": "Job", "name": job}]},
        "spec": {"podSets": [{"name": "main", "count": 1, "template": {"spec": pod}}]},
        "status": {"conditions": [{"type": "QuotaReserved", "status": "False", "message": "insufficient quota"}]},
    }  # fmt: skip


def _grant(bound: str, percent: int = 50) -> dict[str, Any]:
    return {"strategy": "LendAndBorrow", "activationState": "Enabled",
            "why": {P5: {GPU: {"bound": bound, "percent": percent}}}}  # fmt: skip


def _sample(queues: list[dict[str, Any]], wls: list[dict[str, Any]], pool: dict[str, Any]) -> dict[str, Any]:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    return sample_document(derive_usage("c1", read_queues(queues), read_workloads(wls), pool, since=now, until=now))


def test_the_sample_names_the_absolute_cap_beside_kueues_reason_and_idle_gpus() -> None:
    # ml-research: 24 of its own + 8 borrowed (its absolute cap); 24 more idle in the cohort; its sweep of 16 waits
    pool = {"capacity": {P5: {GPU: "64"}}, "unallocated": {P5: {GPU: "40"}}, "teams": {"ml": _grant("absolute")}}
    out = _sample([_cq("ml", 24, 8, 32, 8)], [_pending("ml", "sweep", 16)], pool)
    (waiting,) = out["idleWhilePending"]
    assert (waiting["team"], waiting["idle"], waiting["cause"]) == ("ml", "32", "absolute")
    assert waiting["pendingReason"] == "insufficient quota"
    (job,) = out["pending"]
    assert (job["job"], job["request"], job["cause"]) == ("sweep", "16", "absolute")
    assert "limit of 8" in job["why"]
    assert out["aboveLimit"] == []


def test_the_sample_flags_a_team_above_its_lowered_limit() -> None:
    # a node failed and the limit went from 16 to 8; Kueue keeps the 16 borrowed running
    pool = {"capacity": {P5: {GPU: "40"}}, "unallocated": {P5: {GPU: "16"}},
            "teams": {"ml": _grant("percentage of quota")}}  # fmt: skip
    out = _sample([_cq("ml", 24, 8, 40, 16)], [_pending("ml", "next", 8)], pool)
    assert out["aboveLimit"] == [{"team": "ml", "flavor": P5, "resource": GPU, "borrowed": "16", "limit": "8"}]
    (job,) = out["pending"]
    assert job["cause"] == "above limit"


def test_the_sample_says_no_free_capacity_when_the_limit_allows_it() -> None:
    # limit 48 (200% of 24); the cohort has 8 unallocated, another team borrows 4 of them
    pool = {"capacity": {P5: {GPU: "64"}}, "unallocated": {P5: {GPU: "8"}},
            "teams": {"ml": _grant("percentage of quota", 200), "nlp": _grant("percentage of quota")}}  # fmt: skip
    queues = [_cq("ml", 24, 48, 24, 0), _cq("nlp", 32, 16, 36, 4)]
    out = _sample(queues, [_pending("ml", "big", 16)], pool)
    (job,) = out["pending"]
    assert job["cause"] == "no free capacity"
    assert "4 is free" in job["why"]
    (waiting,) = out["idleWhilePending"]  # 64 - 60 in use: 4 idle, not the 16 it asks
    assert (waiting["idle"], waiting["cause"]) == ("4", "no free capacity")


# -- the surfaces: the demo's / replay's step output and `idleshare usage` ------------------------------------------


def _usage_with_causes() -> dict[str, Any]:
    pool = {"capacity": {P5: {GPU: "64"}}, "unallocated": {P5: {GPU: "40"}}, "teams": {"ml": _grant("absolute")}}
    return _sample([_cq("ml", 24, 8, 32, 8), _cq("nlp", 8, 4, 14, 6)], [_pending("ml", "sweep", 16)], pool)


def test_the_step_output_names_the_cause_beside_kueues_reason() -> None:
    from devkit import scenario
    from devkit.report import render_usage, render_workloads

    report = scenario.StepReport(1, "t", "submit")
    report.workloads = [{"team": "ml", "name": "sweep", "state": "Pending", "reason": "Pending",
                         "message": "couldn't assign flavors to pod set main: insufficient quota"}]  # fmt: skip
    report.usage = _usage_with_causes()
    (line,) = [x for x in render_workloads(report) if "sweep pending" in x]
    assert "insufficient quota [absolute: its limit of 8 (its AbsoluteBorrowLimits cap)" in line
    text = "\n".join(render_usage(report.usage))
    assert "18 gpu idle on p5 while ml waits: absolute — its limit of 8" in text
    assert "nlp borrows 6 gpu on p5, above its limit of 4" in text


def test_usage_cli_shows_the_cause_and_who_borrows_above_its_limit() -> None:
    from idleshare_cli.usage import table_text

    text = table_text(_usage_with_causes())
    (row,) = [x for x in text.splitlines() if x.startswith("ml ") and "insufficient quota" in x]
    assert "absolute" in row and "its limit of 8" in row
    assert "Borrowing above its limit" in text
    jobs = text.split("Pending Jobs and why")[1].split("\n\n")[0].splitlines()
    assert jobs[-1].split()[:6] == ["ml", "sweep", P5, GPU, "16", "absolute"]
    after = text.split("Borrowing above its limit")[1].splitlines()
    assert after[-1].split() == ["nlp", P5, GPU, "6", "4"]


def test_the_step_output_shows_limits_as_amounts_with_the_rule_in_parentheses() -> None:
    from devkit import scenario
    from devkit.report import render_step

    why = {"bound": "percentage of quota", "percent": 50, "limit": "140"}
    pool = {"flavors": [P5], "resources": [GPU], "capacity": {P5: {GPU: "280"}}, "idleResourceSharing": "Enabled",
            "teams": {"ml": {"strategy": "LendAndBorrow", "activationState": "Enabled", "nominal": {P5: {GPU: "280"}},
                             "borrowingLimit": {P5: {GPU: "140"}}, "why": {P5: {GPU: why}}, "bounds": {P5: "percentage of quota"}},
                      "lender": {"strategy": "DontLend", "activationState": "Enabled", "borrowingLimit": {},
                                 "why": {P5: {GPU: {"bound": "strategy", "percent": 50, "limit": "0"}}},
                                 "bounds": {P5: "strategy"}}}}  # fmt: skip
    report = scenario.StepReport(1, "t", "event")
    report.pool = pool
    lines = render_step(report, None).splitlines()
    (ml,) = [x for x in lines if x.strip().startswith("ml (")]
    assert ml.split(")", 1)[1].strip() == "140 (50% q)"
    assert "140 %" not in "\n".join(lines)
    (lender,) = [x for x in lines if x.strip().startswith("lender (")]
    assert lender.split(")", 1)[1].strip() == "-"


def test_the_report_leaves_out_a_flavors_resource_with_nothing_in_it() -> None:
    from idleshare_cli.report_html import render

    pool = {"capacity": {P5: {GPU: "64", "aws.amazon.com/neurondevice": "0"}}, "allocated": {P5: {GPU: "24"}},
            "unallocated": {P5: {GPU: "40"}}, "teams": {}}  # fmt: skip
    usage = {"flavors": {P5: {GPU: {"capacity": "64", "inUse": "32", "borrowed": "8", "idle": "32"},
                              "aws.amazon.com/neurondevice": {"capacity": "0", "inUse": "0", "borrowed": "0"}}}}  # fmt: skip
    page = render(pool, usage=usage)
    assert f'data-bar="{P5}|{GPU}"' in page
    assert "neurondevice" not in page


def test_the_report_lists_every_pending_job_with_its_cause() -> None:
    from idleshare_cli.report_html import render

    page = render({"capacity": {}, "teams": {}}, usage=_usage_with_causes())
    assert '<tr data-pending-job="sweep"><td>ml</td><td>sweep</td>' in page
    assert '<td data-cause="absolute"><b>absolute</b>: its limit of 8' in page


def test_the_cli_reads_every_page_of_pending_jobs_and_teams_above_their_limit() -> None:
    from idleshare_cli.remote import fetch_usage

    pages = [
        {"sampledAt": "t", "teams": {"a": {}}, "idleWhilePending": [], "aboveLimit": [{"team": "a"}],
         "pending": [{"team": "a", "job": "1"}], "NextToken": "x"},
        {"sampledAt": "t", "teams": {"b": {}}, "idleWhilePending": [{"team": "b"}], "aboveLimit": [],
         "pending": [{"team": "b", "job": "2"}]},
    ]  # fmt: skip

    class Api:
        def each_page(self, *args: Any, **kwargs: Any) -> Any:
            return iter(pages)

    whole = fetch_usage(Api(), "c1")  # type: ignore[arg-type]
    assert [p["job"] for p in whole["pending"]] == ["1", "2"]
    assert whole["aboveLimit"] == [{"team": "a"}] and whole["idleWhilePending"] == [{"team": "b"}]
    assert "NextToken" not in whole


def test_every_bound_of_a_limit_is_a_cause_of_its_own_name():
    from idleshare.domain.pool import Bound
    from idleshare.domain.why import _BY_BOUND

    assert set(_BY_BOUND) == {str(b) for b in Bound}
