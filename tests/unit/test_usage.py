"""Usage read back from Kueue: the derivation (table-driven), exact hours, the history's compaction and
gaps — on the in-memory fake and on DynamoStore (moto) — and the API route and CLI over them."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from typing import Any

import boto3
import pytest
from moto import mock_aws

from idleshare import timings
from idleshare.adapters.ports import ClusterRecord, PoolRecord
from idleshare.adapters.store import DynamoStore
from idleshare.adapters.store.usage import MAX_GAPS, merge_gaps
from idleshare.domain.usage import derive_usage, hours_text, sample_document, split_lent
from idleshare.errors import NotFoundError
from idleshare.parse.kueue_status import cluster_queues as read_queues
from idleshare.parse.kueue_status import workloads as read_workloads
from idleshare.service.paging import BadRequestError
from idleshare.service.usage import sample_usage, split_hours, usage_report
from idleshare_cli import usage as usage_cli
from tests.aws_env import create_table, fake_aws_env
from tests.fakes import FakeKube, FakeStore

P5, G5 = "ml.p5.48xlarge", "ml.g5.8xlarge"
GPU = "nvidia.com/gpu"
T0 = datetime(2026, 12, 3, 13, 58, tzinfo=UTC)


def cq(team: str, quotas: dict[str, dict[str, Any]], usage: dict[str, dict[str, tuple[str, str]]] | None = None,
       *, pending: int = 0, admitted: int = 0) -> dict[str, Any]:  # fmt: skip
    """A ClusterQueue as Kueue reports it: ``quotas`` {flavor: {resource: nominal | (nominal, lendingLimit)}},
    ``usage`` {flavor: {resource: (total, borrowed)}}."""

    def resource(name: str, quota: Any) -> dict[str, str]:
        nominal, lend = quota if isinstance(quota, tuple) else (quota, None)
        entry = {"name": name, "nominalQuota": str(nominal), "borrowingLimit": "100"}
        return entry if lend is None else {**entry, "lendingLimit": str(lend)}

    flavors = [{"name": f, "resources": [resource(r, q) for r, q in per.items()]} for f, per in quotas.items()]
    used = [{"name": f, "resources": [{"name": r, "total": t, "borrowed": b} for r, (t, b) in per.items()]}
            for f, per in (usage or {}).items()]  # fmt: skip
    namespace = {"matchLabels": {"kubernetes.io/metadata.name": f"hyperpod-ns-{team}"}}
    return {
        "kind": "ClusterQueue",
        "metadata": {"name": f"hyperpod-ns-{team}-clusterqueue", "labels": {"idleshare.io/team": team}},
        "spec": {"namespaceSelector": namespace, "resourceGroups": [{"coveredResources": [GPU], "flavors": flavors}]},
        "status": {"flavorsUsage": used, "pendingWorkloads": pending, "admittedWorkloads": admitted},
    }


def workload(team, name, gpus, *, flavor=None, pending=True, preempted_at=None):
    reason = {"message": f"couldn't assign flavors to pod set main: insufficient quota for {GPU}"}
    conditions = [{"type": "QuotaReserved", "status": "False", "reason": "Pending", **reason} if pending
                  else {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved"}]  # fmt: skip
    if preempted_at:
        conditions.append({"type": "Preempted", "status": "True", "reason": "InCohortReclamation",
                           "lastTransitionTime": preempted_at})  # fmt: skip
    pod: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {GPU: str(gpus)}}}]}
    if flavor:
        pod["nodeSelector"] = {"node.kubernetes.io/instance-type": flavor}
    spec = {"podSets": [{"name": "main", "count": 1, "template": {"spec": pod}}]}
    metadata = {"name": name, "namespace": f"hyperpod-ns-{team}"}
    return {"kind": "Workload", "metadata": metadata, "spec": spec, "status": {"conditions": conditions}}


def pool(capacity: dict[str, int], unallocated: dict[str, int], sharing: str = "Enabled") -> dict[str, Any]:
    return {
        "idleResourceSharing": sharing,
        "capacity": {f: {GPU: str(n)} for f, n in capacity.items()},
        "unallocated": {f: {GPU: str(n)} for f, n in unallocated.items() if n},
    }


def doc(queues: list[dict[str, Any]], workloads: list[dict[str, Any]] = (), pool_doc: dict[str, Any] | None = None,  # type: ignore[assignment]
        since: datetime = T0 - timedelta(minutes=1)) -> dict[str, Any]:  # fmt: skip
    return sample_document(
        derive_usage("c1", read_queues(queues), read_workloads(workloads), pool_doc, since=since, until=T0)
    )


# -- the derivation, case by case -----------------------------------------------------------------------------

USE, FLAVOR = ("nominal", "inUse", "borrowed", "lent"), ("capacity", "pool", "inUse", "borrowed", "idle")
CASES = [  # the queues, the pool document, then (nominal, inUse, borrowed, lent) per team and the flavor's totals
    pytest.param(  # alpha runs its 8 and borrows 8 of the cohort's own 16: nobody lends
        [cq("alpha", {P5: {GPU: 8}}, {P5: {GPU: ("16", "8")}}), cq("beta", {P5: {GPU: 8}})], pool({P5: 32}, {P5: 16}),
        {"alpha": ("8", "16", "8", "0"), "beta": ("8", "0", "0", "0")}, ("32", "16", "16", "8", "16"),
        id="borrowing-from-the-cohort-own-quota",
    ),
    pytest.param(  # no cohort quota: alpha's 8 borrowed are beta's idle quota
        [cq("alpha", {P5: {GPU: 8}}, {P5: {GPU: ("16", "8")}}), cq("beta", {P5: {GPU: 8}})], pool({P5: 16}, {P5: 0}),
        {"alpha": ("8", "16", "8", "0"), "beta": ("8", "0", "0", "8")}, ("16", "0", "16", "8", "0"),
        id="a-lender-lends-its-idle-quota",
    ),
    pytest.param(  # 20 borrowed beyond a cohort quota of 8: 12 from beta (idle 8) and gamma (idle 16), 1:2
        [cq("alpha", {P5: {GPU: 8}}, {P5: {GPU: ("28", "20")}}), cq("beta", {P5: {GPU: 8}}),
         cq("gamma", {P5: {GPU: 16}})], pool({P5: 40}, {P5: 8}),
        {"alpha": ("8", "28", "20", "0"), "beta": ("8", "0", "0", "4"), "gamma": ("16", "0", "0", "8")},
        ("40", "8", "28", "20", "12"), id="lenders-lend-in-proportion",
    ),
    pytest.param(  # beta uses 6 of its own 8, lends at most its lendingLimit 4 and only its 2 idle
        [cq("alpha", {P5: {GPU: 8}}, {P5: {GPU: ("10", "2")}}), cq("beta", {P5: {GPU: (8, 4)}}, {P5: {GPU: ("6", "0")}})],
        pool({P5: 16}, {P5: 0}), {"alpha": ("8", "10", "2", "0"), "beta": ("8", "6", "0", "2")},
        ("16", "0", "16", "2", "0"), id="lending-limit-and-own-use",
    ),
    pytest.param(  # sharing disabled: the cohort's quota is 0 whatever the pool document's unallocated says
        [cq("alpha", {P5: {GPU: 8}}, {P5: {GPU: ("12", "4")}}), cq("beta", {P5: {GPU: 8}})],
        pool({P5: 32}, {P5: 16}, "Disabled"), {"alpha": ("8", "12", "4", "0"), "beta": ("8", "0", "0", "4")},
        ("32", "0", "12", "4", "20"), id="idle-sharing-disabled",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("queues", "pool_doc", "teams", "flavor"), CASES)
def test_usage_per_team_and_flavor(queues, pool_doc, teams, flavor):
    out = doc(queues, pool_doc=pool_doc)
    assert {t: tuple(v["flavors"][P5][GPU][k] for k in USE) for t, v in out["teams"].items()} == teams
    assert out["flavors"][P5][GPU] == dict(zip(FLAVOR, flavor, strict=True))


@pytest.mark.parametrize(
    ("lendable", "drawn", "resource", "expected"),
    [
        ({"a": 8}, 8, GPU, {"a": 8}), ({"a": 8, "b": 8}, 16, GPU, {"a": 8, "b": 8}), ({"a": 0}, 4, GPU, {}),
        ({"a": 8, "b": 8}, 5, GPU, {"a": 3, "b": 2}),  # largest remainder, ties by name
        ({"a": 1, "b": 2}, 2, GPU, {"a": 1, "b": 1}),  # 2/3 and 4/3: remainders 2/3 > 1/3
        ({"a": 4}, 10, GPU, {"a": 4}),  # never more than lendable
        ({"a": 3, "b": 3}, Fraction(1, 2), "cpu", {"a": Fraction(1, 4), "b": Fraction(1, 4)}),
    ],
)  # fmt: skip
def test_split_lent(lendable, drawn, resource, expected):
    out = split_lent(lendable, drawn, resource)
    assert out == expected
    assert sum(out.values()) == min(drawn, sum(lendable.values()))


def test_workloads_preemptions_counted_once_by_second():
    queues = [cq("alpha", {P5: {GPU: 8}}, {P5: {GPU: ("8", "0")}}, pending=1, admitted=1)]
    at = lambda s: (T0 + timedelta(seconds=s)).strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: E731
    wls = [
        workload("alpha", "in-interval", 8, pending=False, preempted_at=at(-30)),
        workload("alpha", "first-second", 8, pending=False, preempted_at=at(-60)),  # [floor(since), ...
        workload("alpha", "next-sample", 8, pending=False, preempted_at=at(0)),  # ..., floor(until)): not this one
        workload("alpha", "before", 8, pending=False, preempted_at=at(-61)),
        workload("other", "not-a-team", 8, pending=False, preempted_at=at(-30)),
    ]
    out = doc(queues, wls, pool({P5: 8}, {}))
    assert out["teams"]["alpha"]["preemptions"] == 2
    assert out["teams"]["alpha"]["workloads"] == {"pending": 1, "reserving": 0, "admitted": 1}


def test_idle_while_pending_names_team_flavor_and_kueues_reason():
    queues = [cq("alpha", {P5: {GPU: 8}, G5: {GPU: 4}}, {P5: {GPU: ("16", "8")}}),
              cq("beta", {P5: {GPU: 8}}, {P5: {GPU: ("8", "0")}})]  # fmt: skip
    wls = [workload("alpha", "waits-p5", 1, flavor=P5), workload("alpha", "any-flavor", 1),
           workload("beta", "admitted", 8, flavor=P5, pending=False)]  # fmt: skip
    out = doc(queues, wls, pool({P5: 32, G5: 4}, {P5: 16}))
    # the unpinned one could run on the idle g5; p5: 32 - 24 in use
    assert [(i["team"], i["flavor"], i["idle"]) for i in out["idleWhilePending"]] == [
        ("alpha", G5, "4"),
        ("alpha", P5, "8"),
    ]
    assert all("insufficient quota" in i["pendingReason"] for i in out["idleWhilePending"])
    full = doc(queues, wls, pool({P5: 24, G5: 0}, {}))  # nothing idle: nothing to report
    assert full["idleWhilePending"] == []


def test_the_document_keeps_exact_quantities():
    queues = [
        cq("alpha", {P5: {"cpu": "1500m", "memory": "1536Gi"}}, {P5: {"cpu": ("2500m", "1"), "memory": ("1Ti", "0")}})
    ]
    out = doc(queues, pool_doc={"capacity": {P5: {"cpu": "4", "memory": "2Ti"}}, "unallocated": {}})
    cpu = {"nominal": "1500m", "inUse": "2500m", "borrowed": "1", "lent": "0"}
    assert out["teams"]["alpha"]["flavors"][P5]["cpu"] == cpu
    assert (out["flavors"][P5]["memory"]["idle"], out["flavors"][P5]["cpu"]["idle"]) == ("1Ti", "1500m")


def test_an_unreadable_amount_or_count_is_a_named_gap_never_zero_usage():
    # Given alpha's ClusterQueue whose p5 GPUs in use Kueue reports as "12x" and whose pending count is no number
    kube = FakeKube([])
    alpha = cq("alpha", {P5: {GPU: 8}, G5: {GPU: 4}}, {P5: {GPU: ("12x", "4")}, G5: {GPU: ("2", "0")}})
    alpha["status"]["pendingWorkloads"] = "many"
    kube.objects[("ClusterQueue", "", "alpha")] = alpha
    asks_lots = workload("beta", "lots", 1)  # and a pending Workload whose cpu request does not read
    asks_lots["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    kube.workloads = [asks_lots]
    kube.objects[("ClusterQueue", "", "beta")] = cq("beta", {P5: {GPU: 8}}, {P5: {GPU: ("8", "0")}})
    store = FakeStore([ClusterRecord("c1", "eks")])
    store.pools["c1"] = PoolRecord("c1", 1, "d", pool({P5: 16, G5: 4}, {}), "t")
    # When the watcher samples usage
    sample = sample_usage("c1", kube, store, now=T0).sample
    assert sample is not None
    out = sample_document(sample)
    # Then p5 GPUs are nobody's 0: no team and no flavor total shows them (lent and idle need alpha's use) ...
    assert [GPU in t["flavors"].get(P5, {}) for t in out["teams"].values()] == [False, False]
    assert GPU not in out["flavors"].get(P5, {})
    assert out["teams"]["alpha"]["workloads"]["pending"] is None
    # ... what reads stays (g5), and the sample names each gap: the object, the field, the problem, what it hides
    assert out["teams"]["alpha"]["flavors"][G5][GPU]["inUse"] == "2" and out["flavors"][G5][GPU]["inUse"] == "2"
    assert out["unreadable"] == [
        {"object": "ClusterQueue/hyperpod-ns-alpha-clusterqueue", "field": "status.flavorsUsage[0].resources[0].total",
         "problem": 'invalid quantity "12x"', "flavor": P5, "resource": GPU},
        {"object": "ClusterQueue/hyperpod-ns-alpha-clusterqueue", "field": "status.pendingWorkloads",
         "problem": 'must be a non-negative integer (got "many")'},
        {"object": "Workload/hyperpod-ns-beta/lots",
         "field": "spec.podSets[0].template.spec.containers[0].resources.requests['cpu']",
         "problem": 'invalid quantity "lots"', "flavor": "", "resource": "cpu"},
    ]  # fmt: skip
    # And the history's hour holds the interval as a gap for p5 GPUs (the others counted): not zero hours
    later = sample_usage("c1", kube, store, now=T0 + timedelta(minutes=1))
    assert later.recorded and later.gap == ""
    (bucket,) = store.hours.values()
    assert [g[2] for g in bucket.gaps] == [f"Unreadable: {P5}/{GPU} not read"]
    assert {k[1:] for k in bucket.rows} == {(G5, GPU)}
    # And `idleshare usage` shows them, the count as "-"
    text = usage_cli.table_text(out)
    assert (
        "Not read" in text and "status.flavorsUsage[0].resources[0].total" in text and 'invalid quantity "12x"' in text
    )
    assert re.search(r"^alpha +- ", text, re.M)


# -- exact hours ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("amount_seconds", "text"),
    [(Fraction(3600 * 8), "8"), (Fraction(1800), "0.5"), (Fraction(36), "0.01"), (Fraction(60), "0.016667"),
     (Fraction(0), "0"), (Fraction(9, 1000), "0.0000025")],
)  # fmt: skip
def test_hours_text(amount_seconds, text):
    assert hours_text(amount_seconds) == text
    # and an interval splits at the hour
    assert split_hours(T0, T0 + timedelta(minutes=3)) == [("2026-12-03T13", 120), ("2026-12-03T14", 60)]


# -- the history: samples, gaps, compaction -------------------------------------------------------------------


def _minute(store, kube, minute):
    return sample_usage("c1", kube, store, now=T0 + timedelta(minutes=minute))


def _kube(borrowed=8):
    kube = FakeKube([])
    used = {P5: {GPU: (str(8 + borrowed), str(borrowed))}}
    kube.objects[("ClusterQueue", "", "alpha")] = cq("alpha", {P5: {GPU: 8}}, used)
    return kube


@pytest.fixture(params=["fake", "dynamodb"])
def store(request: pytest.FixtureRequest) -> Any:
    clusters = [ClusterRecord("c1", "eks-c1")]
    if request.param == "fake":
        fake = FakeStore(clusters)
        fake.pools["c1"] = PoolRecord("c1", 1, "d", pool({P5: 32}, {P5: 16}), "t")
        yield fake
        return
    with fake_aws_env(), mock_aws():
        table = create_table(boto3.resource("dynamodb", region_name="us-east-1"))
        real = DynamoStore(table)
        real.put_cluster(clusters[0])
        real.put_pool(PoolRecord("c1", 1, "d", pool({P5: 32}, {P5: 16}), "t"), expected_generation=0)
        yield real


def test_history_hours_gaps_a_duplicate_and_the_latest_sample(store):
    from idleshare.service.usage import latest_usage

    with pytest.raises(NotFoundError):
        latest_usage(store, "c1")
    kube = _kube()
    # the first sample (nothing before it), minute 1 twice (a retried invocation), 13:59 -> 14:00, 14:00 -> 14:01
    assert [_minute(store, kube, m).recorded for m in (0, 1, 1, 2, 3)] == [True, True, False, True, True]
    kube.down = True
    out = _minute(store, kube, 4)  # failed: a gap; the last good sample is kept as the latest
    assert out.failure.startswith("SampleFailed") and out.sample is None
    latest = latest_usage(store, "c1")
    assert latest["sampledAt"] == (T0 + timedelta(minutes=3)).isoformat()
    assert (
        latest["teams"]["alpha"]["flavors"][P5][GPU]["borrowed"] == "8" and latest["flavors"][P5][GPU]["idle"] == "16"
    )
    kube.down = False
    _minute(store, kube, 5)
    _minute(store, kube, 15)  # the watcher did not run for 10 minutes: a gap, no usage
    report = usage_report(store, "c1", "2026-12-03T13:00:00Z", "2026-12-03T15:00:00Z", "hour",
                          now=T0 + timedelta(minutes=15))  # fmt: skip
    rows = {(r["start"], r["team"]): (r["allocatedHours"], r["borrowedHours"]) for r in report["rows"]}
    # 13:58 -> 14:00: 2 minutes x 8 + 8 (the duplicate added nothing); 14:00 -> 14:01, then 14:03 (after the failed
    # minute): 2 minutes
    two_minutes = (hours_text(Fraction(120 * 8)), hours_text(Fraction(120 * 8)))
    assert rows == {
        ("2026-12-03T13:00:00+00:00", "alpha"): two_minutes,
        ("2026-12-03T14:00:00+00:00", "alpha"): two_minutes,
    }
    gaps = [(g["start"][11:16], g["end"][11:16], g["reason"].split(":")[0]) for g in report["gaps"]]
    assert gaps == [("14:01", "14:02", "SampleFailed"), ("14:03", "14:13", "NoSample")]


def test_days_compact_when_the_day_is_over_and_agree_with_the_hours(store):
    kube = _kube(borrowed=2)
    late = datetime(2026, 12, 3, 23, 58, 30, tzinfo=UTC)
    for minute in range(4):  # 23:58:30 .. 00:01:30: the first sample of the 4th compacts the 3rd
        sample_usage("c1", kube, store, now=late + timedelta(minutes=minute))
    days = store.usage_buckets("c1", "day", "2026-12-03", "2026-12-04")
    assert [d.start for d in days] == ["2026-12-03"]
    assert days[0].rows[("alpha", P5, GPU)] == (Fraction(90 * 8), Fraction(90 * 2))  # 23:58:30 -> 24:00
    report = usage_report(store, "c1", "2026-12-03T00:00:00Z", "2026-12-05T00:00:00Z", "day",
                          now=late + timedelta(minutes=3))  # fmt: skip
    assert [(r["start"][:10], r["allocatedHours"], r["borrowedHours"]) for r in report["rows"]] == [
        ("2026-12-03", "0.2", "0.05"),  # 90 s x 8 = 0.2 h; 90 s x 2 = 0.05 h
        ("2026-12-04", "0.2", "0.05"),  # 00:00 -> 00:01:30, summed live from the hours
    ]
    assert report["gaps"] == []


@pytest.mark.parametrize(
    ("start", "end", "granularity", "field"),
    [("yesterday", "2026-12-02T00:00:00Z", "day", "from"), ("2026-12-02T00:00:00Z", "2026-12-01T00:00:00Z", "day", "to"),
     ("2026-01-01T00:00:00Z", "2026-12-01T00:00:00Z", "hour", "to"), ("2026-12-01T00:00:00Z", "2026-12-02T00:00:00Z", "week", "granularity")],
)  # fmt: skip
def test_bad_periods_are_refused_naming_the_field(start, end, granularity, field):
    store = FakeStore([ClusterRecord("c1", "eks")])
    with pytest.raises(BadRequestError) as err:
        usage_report(store, "c1", start, end, granularity, now=T0)
    assert err.value.errors[0].loc == field


def test_gaps_stay_bounded_and_adjacent_ones_with_one_reason_merge():
    gaps = [(f"2026-12-03T13:{m:02d}:00", f"2026-12-03T13:{m:02d}:30", "SampleFailed: x") for m in range(60)]
    gaps += [(f"2026-12-03T14:{m:02d}:00", f"2026-12-03T14:{m:02d}:30", f"SampleFailed: {m}") for m in range(60)]
    gaps += [("2026-12-03T15:00:00", "2026-12-03T15:10:00", "NoSample")]
    merged = merge_gaps((), gaps)
    assert len(merged) == MAX_GAPS and merged[-1][1] == "2026-12-03T15:10:00"
    merged = merge_gaps((("a0", "a1", "x"),), (("a1", "a2", "x"), ("a2", "a3", "y")))
    assert merged == (("a0", "a2", "x"), ("a2", "a3", "y"))


def test_no_sample_failed_samples_and_an_interval_above_the_limit_are_gaps_not_zero():
    store, kube = FakeStore([ClusterRecord("c1", "eks")]), _kube()
    report = usage_report(store, "c1", "2026-12-01T00:00:00Z", "2026-12-02T00:00:00Z", now=T0)
    assert report["rows"] == [] and [g["reason"] for g in report["gaps"]] == ["NoSample: never sampled"]
    kube.down = True
    out = _minute(store, kube, 0)  # a kube failure is recorded, not raised
    assert out.recorded and out.failure
    (bucket,) = store.hours.values()
    assert bucket.gaps[0][2].startswith("SampleFailed")
    store, kube = FakeStore([ClusterRecord("c1", "eks")]), _kube()
    _minute(store, kube, 0)
    out = sample_usage("c1", kube, store, now=T0 + timedelta(seconds=timings.USAGE_MAX_INTERVAL_SECONDS + 1))
    assert out.gap.startswith("NoSample") and all(not b.rows for b in store.hours.values())


# -- the route and the command --------------------------------------------------------------------------------


def test_the_route_answers_the_latest_sample_and_the_period():
    from idleshare.api import app as api
    from idleshare.runtime import wiring
    from tests.admin_api import CONTEXT
    from tests.builders import proxy_event

    store = FakeStore([ClusterRecord("c1", "eks")])
    store.pools["c1"] = PoolRecord("c1", 1, "d", pool({P5: 32}, {P5: 16}), "t")
    kube = _kube()
    now = datetime.now(UTC).replace(minute=30, second=0, microsecond=0)  # both samples in one hour
    sample_usage("c1", kube, store, now=now - timedelta(minutes=1))
    sample_usage("c1", kube, store, now=now)
    start, end = (now - timedelta(hours=2)).isoformat(), (now + timedelta(hours=1)).isoformat()
    wiring.install(wiring.Dependencies(store=store))
    try:
        latest, period, half, unknown = (
            api.handler(proxy_event("GET", f"/clusters/{c}/usage", query=q), CONTEXT)
            for c, q in [("c1", None), ("c1", {"from": start, "to": end, "granularity": "hour"}),
                         ("c1", {"from": start}), ("nope", None)]
        )  # fmt: skip
    finally:
        wiring.install(None)
    assert (latest["statusCode"], half["statusCode"], unknown["statusCode"]) == (200, 400, 404)
    body = json.loads(latest["body"])
    assert set(body) == {
        "cluster",
        "sampledAt",
        "flavors",
        "teams",
        "teamsTotal",
        "idleWhilePending",
        "pending",
        "aboveLimit",
        "unbound",
        "unboundPods",
        "oldestUnboundSeconds",
        "unreadable",
    }
    assert body["teams"]["alpha"]["flavors"][P5][GPU] == {"nominal": "8", "inUse": "16", "borrowed": "8", "lent": "0"}
    body = json.loads(period["body"])
    assert set(body) == {"cluster", "from", "to", "granularity", "rows", "gaps"}
    assert [(r["team"], r["borrowedHours"]) for r in body["rows"]] == [("alpha", hours_text(Fraction(8 * 60)))]


def test_the_command_prints_table_json_and_csv(monkeypatch, capsys):
    from idleshare_cli import remote
    from idleshare_cli.main import main

    answer = {"cluster": "c1", "from": "a", "to": "b", "granularity": "day", "gaps": [],
              "rows": [{"start": "2026-12-03T00:00:00+00:00", "team": "alpha", "flavor": P5, "resource": GPU,
                        "allocatedHours": "192", "borrowedHours": "8.5"}]}  # fmt: skip
    seen: list[Any] = []
    monkeypatch.setattr(remote, "connect", lambda args: object())
    monkeypatch.setattr(remote, "fetch_usage", lambda api, c, q: seen.append((c, q)) or answer)
    base = ["usage", "--cluster", "c1", "--from", "2026-12-01", "--to", "2026-12-04"]
    assert main([*base, "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == f"2026-12-03T00:00:00+00:00,alpha,{P5},{GPU},192,8.5"
    assert main([*base, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == answer
    assert main(base) == 0
    assert "8.5" in capsys.readouterr().out
    assert seen[0] == ("c1", {"from": "2026-12-01", "to": "2026-12-04", "granularity": "day"})
    assert main(["usage", "--cluster", "c1", "--from", "2026-12-01"]) == 2


def test_the_latest_sample_of_500_teams_is_stored_compressed_in_one_item_and_reads_back_equal():
    # Given a sample of 500 teams x 8 flavors x 9 resources (MBs of JSON: over one DynamoDB item as text)
    from idleshare.adapters.ports import UsageCursor
    from idleshare.adapters.store.items import item_size

    mig = [f"nvidia.com/mig-{i}g.{i * 5}gb" for i in range(1, 5)]
    resources = [GPU, "cpu", "memory", "aws.amazon.com/neuron", "vpc.amazonaws.com/efa", *mig]
    flavors = [f"ml.p{i}.48xlarge" for i in range(8)]

    def cells(**cell: str) -> dict[str, Any]:
        return {f: {r: dict(cell) for r in resources} for f in flavors}

    team = {"flavors": cells(nominal="8", inUse="12", borrowed="4", lent="0"), "preemptions": 0}
    team["workloads"] = {"pending": 1, "reserving": 0, "admitted": 2}
    sample = {"cluster": "c1", "sampledAt": T0.isoformat(), "idleWhilePending": []}
    sample["flavors"] = cells(capacity="64", pool="16", inUse="40", borrowed="8", idle="24")
    sample["teams"] = {f"team-{t:03d}": json.loads(json.dumps(team)) for t in range(500)}
    assert len(json.dumps(sample)) > 2_000_000
    with fake_aws_env(), mock_aws():
        table = create_table(boto3.resource("dynamodb", region_name="us-east-1"))
        real = DynamoStore(table)
        real.put_cluster(ClusterRecord("c1", "eks-c1"))
        # When it is kept as the latest sample, Then it fits one item (compressed) and reads back equal
        real.add_usage(UsageCursor("c1", T0.isoformat(), T0.isoformat(), sample), {}, expected=None)
        (item,) = [i for i in table.scan()["Items"] if i["sk"] == "USAGE#LATEST"]
        assert item_size(item) < 400_000 and "sample_z" in item
        assert real.get_usage_cursor("c1").sample == sample


def test_an_unparsable_amount_of_the_stored_pool_is_a_named_gap_never_zero():
    # Given the pool document as stored, its p5 capacity changed by hand to no quantity (g5 as written)
    queues = [cq("alpha", {P5: {GPU: 8}, G5: {GPU: 4}}, {P5: {GPU: ("8", "0")}, G5: {GPU: ("2", "0")}})]
    stored = pool({P5: 16, G5: 4}, {G5: 0})
    stored["capacity"][P5][GPU] = "sixteen"
    out = doc(queues, pool_doc=stored)
    # Then p5 GPUs are a gap naming the field, left out of the team's and the flavor's tables: not a capacity of 0
    assert GPU not in out["flavors"].get(P5, {}) and GPU not in out["teams"]["alpha"]["flavors"].get(P5, {})
    (gap,) = out["unreadable"]
    assert (gap["object"], gap["field"], gap["flavor"], gap["resource"]) == ("pool", f"capacity.{P5}.{GPU}", P5, GPU)
    assert "'sixteen' is not a quantity" in gap["problem"]
    # and what reads stays: g5's capacity as written
    assert out["flavors"][G5][GPU]["capacity"] == "4"
    # the same document with a quantity there reads whole (the gap is the value's, not the shape's)
    stored["capacity"][P5][GPU] = "16"
    assert (
        doc(queues, pool_doc=stored)["unreadable"] == []
        and out["flavors"][G5] == doc(queues, pool_doc=stored)["flavors"][G5]
    )
