"""Admitted but not placed (issue 31, deliver 4): the usage sample counts, per team and flavor, the pods of admitted
workloads that no node has taken, and since when the oldest of those workloads was admitted; the gauges, the
alarm's threshold, the CLI and the report show it; pods that cannot be read leave the rest of the sample standing."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from idleshare import names, timings
from idleshare.domain.usage import PODSET_LABEL, derive_usage, sample_document
from idleshare.errors import PermanentError
from idleshare.parse.kueue_status import cluster_queues as read_queues
from idleshare.parse.kueue_status import workloads as read_workloads
from idleshare.parse.workloads import unbound_pods as read_unbound_pods
from idleshare.service.usage import sample_usage
from idleshare_cli.report_html import render
from idleshare_cli.usage import table_text
from tests.fakes import FakeKube, FakeStore
from tests.unit.test_usage import GPU, P5, T0, cq

G5 = "ml.g5.8xlarge"
REPO = Path(__file__).resolve().parents[2]


def admitted(
    team: str, name: str, job_uid: str, at: Any, flavor: str = P5, *, finished: bool = False
) -> dict[str, Any]:
    """A Workload Kueue admitted at ``at`` on ``flavor``, owned by the Job ``job_uid``."""
    stamp = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    conditions = [
        {"type": "QuotaReserved", "status": "True", "lastTransitionTime": stamp},
        {"type": "Admitted", "status": "True", "lastTransitionTime": stamp},
    ]
    if finished:
        conditions.append({"type": "Finished", "status": "True", "lastTransitionTime": stamp})
    return {
        "kind": "Workload",
        "metadata": {"name": name, "namespace": f"hyperpod-ns-{team}",
                     "ownerReferences": [{"kind": "Job", "name": name, "uid": job_uid}]},
        "spec": {"podSets": [{"name": "main", "count": 2, "template": {"spec": {"containers": []}}}]},
        "status": {"conditions": conditions,
                   "admission": {"podSetAssignments": [{"name": "main", "flavors": {GPU: flavor, "cpu": flavor}}]}},
    }  # fmt: skip


def pod(team: str, name: str, job_uid: str, message: str = "") -> dict[str, Any]:
    """A pod of Job ``job_uid`` no node has taken, as the adapter projects it."""
    conditions = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}]
    return {
        "metadata": {"namespace": f"hyperpod-ns-{team}", "name": name, "uid": f"uid-{name}",
                     "labels": {PODSET_LABEL: "main"}, "ownerReferences": [{"uid": job_uid}]},
        "status": {"conditions": conditions if message else []},
    }  # fmt: skip


def sampled(workloads: list[dict[str, Any]], pods: list[Any]) -> dict[str, Any]:
    """The sample's document at T0 of QUEUES, ``workloads`` and the unbound ``pods`` (read as the service reads them)."""
    sample = derive_usage(
        "c1",
        read_queues(QUEUES),
        read_workloads(workloads),
        None,
        since=T0,
        until=T0,
        unbound_pods=read_unbound_pods(pods),
    )
    return sample_document(sample)


QUEUES = [cq("alpha", {P5: {GPU: 8}, G5: {GPU: 4}}), cq("beta", {P5: {GPU: 8}})]
UNSCHEDULABLE = "0/4 nodes are available: 4 Insufficient cpu."


def test_the_pods_of_admitted_workloads_no_node_took_are_counted_per_team_and_flavor_since_the_oldest_admission():
    # Given alpha's two Jobs admitted on p5 15 and 3 minutes ago and one on g5, beta's admitted 1 minute ago, and a
    # finished Workload of alpha's whose pod is still listed (it ends), and a pod no admitted workload owns
    workloads = [
        admitted("alpha", "old", "j-old", T0 - timedelta(minutes=15)),
        admitted("alpha", "new", "j-new", T0 - timedelta(minutes=3)),
        admitted("alpha", "small", "j-small", T0 - timedelta(minutes=2), flavor=G5),
        admitted("beta", "b", "j-b", T0 - timedelta(minutes=1)),
        admitted("alpha", "done", "j-done", T0 - timedelta(minutes=30), finished=True),
    ]
    pods = [
        pod("alpha", "old-0", "j-old", UNSCHEDULABLE), pod("alpha", "old-1", "j-old"), pod("alpha", "new-0", "j-new"),
        pod("alpha", "small-0", "j-small"), pod("beta", "b-0", "j-b"), pod("alpha", "done-0", "j-done"),
        pod("alpha", "stray", "j-nobody"),
    ]  # fmt: skip
    # When the usage sample is taken
    sample = derive_usage(
        "c1",
        read_queues(QUEUES),
        read_workloads(workloads),
        None,
        since=T0 - timedelta(minutes=1),
        until=T0,
        unbound_pods=read_unbound_pods(pods),
    )
    document = sample_document(sample)
    # Then alpha has 3 pods of 2 workloads unbound on p5 since 15 minutes, 1 on g5; beta 1 on p5
    assert [(u["team"], u["flavor"], u["pods"], u["workloads"], u["seconds"]) for u in document["unbound"]] == [
        ("alpha", G5, 1, 1, 120),
        ("alpha", P5, 3, 2, 900),
        ("beta", P5, 1, 1, 60),
    ]
    assert document["unbound"][1]["reason"] == UNSCHEDULABLE and document["unbound"][1]["since"].startswith(
        (T0 - timedelta(minutes=15)).isoformat()[:16]
    )
    assert (document["unboundPods"], document["oldestUnboundSeconds"]) == (5, 900)


def test_no_unbound_pod_is_zero_and_pods_not_read_leave_the_sample_standing():
    workloads = [admitted("alpha", "old", "j-old", T0 - timedelta(minutes=15))]
    placed = sample_document(
        derive_usage("c1", read_queues(QUEUES), read_workloads(workloads), None, since=T0, until=T0, unbound_pods=[])
    )
    assert (placed["unbound"], placed["unboundPods"], placed["oldestUnboundSeconds"]) == ([], 0, 0)
    # Given a cluster whose RBAC does not let the watcher list pods yet
    kube, store = FakeKube([]), FakeStore([])
    kube.objects[("ClusterQueue", "", "alpha")] = QUEUES[0]
    kube.workloads = workloads
    kube.pods = [pod("alpha", "old-0", "j-old")]

    def refused() -> list[dict[str, Any]]:
        raise PermanentError('pods is forbidden: cannot list resource "pods"', operation="list Pod")

    kube.list_unbound_pods = refused  # type: ignore[method-assign]
    # When the sample is taken, then it is (teams, flavors) and says the pods were not read, with why
    outcome = sample_usage("c1", kube, store, now=T0)
    assert outcome.sample is not None and not outcome.failure and outcome.sample.unbound is None
    document = sample_document(outcome.sample)
    assert "unbound" not in document and "forbidden" in document["unboundError"]
    assert "not read" in table_text(document) and "forbidden" in table_text(document)


def test_the_fake_selects_as_the_adapter_asks_the_server_to():
    kube = FakeKube([])
    bound = {**pod("alpha", "bound", "j"), "spec": {"nodeName": "n1"}}
    ended = {**pod("alpha", "ended", "j"), "status": {"phase": "Succeeded"}}
    foreign = {"metadata": {"namespace": "x", "name": "f", "labels": {}}}
    kube.pods = [pod("alpha", "waiting", "j"), bound, ended, foreign]
    assert [p["metadata"]["name"] for p in kube.list_unbound_pods()] == ["waiting"]


def test_the_cli_and_the_report_show_the_unbound_pods():
    workloads = [admitted("alpha", "old", "j-old", T0 - timedelta(minutes=15))]
    pods = [pod("alpha", "old-0", "j-old", UNSCHEDULABLE)]
    document = sampled(workloads, pods)
    text = table_text(document)
    assert "Admitted but not placed: 1 pods no node has taken, the oldest admitted 900 s ago" in text
    assert UNSCHEDULABLE in text
    page = render({"cluster": "c1"}, usage=document)
    assert 'data-unbound="alpha"' in page and "Admitted but not placed" in page


def test_the_alarm_threshold_metric_and_docs_name_one_another():
    # one threshold (timings), the gauges the watcher emits (names), the alarm and the docs' tables say the same
    operations = (REPO / "docs" / "operations.md").read_text()
    minutes = timings.UNBOUND_PODS_ALARM_MINUTES
    assert f"| `UnboundPodsAlarm-<c>` | `{names.METRIC_UNBOUND_PODS_OLDEST_SECONDS}` ≥ {minutes * 60} |" in operations
    for metric in (names.METRIC_UNBOUND_PODS, names.METRIC_UNBOUND_PODS_OLDEST_SECONDS):
        assert f"| `{metric}` | node watcher (usage) | cluster |" in operations


def test_a_pod_that_does_not_read_is_named_and_left_out_and_the_others_count():
    # Given alpha's admitted workload with two unbound pods, one of them with a uid that is not a string
    workloads = [admitted("alpha", "old", "j-old", T0 - timedelta(minutes=15))]
    bad = pod("alpha", "old-1", "j-old")
    bad["metadata"]["uid"] = 7
    pods = [pod("alpha", "old-0", "j-old"), bad]
    # When the sample is taken
    document = sampled(workloads, pods)
    # Then the bad pod is named (object and field) and left out; the readable one is counted
    assert [(u["pods"], u["workloads"]) for u in document["unbound"]] == [(1, 1)]
    assert [(u["object"], u["field"]) for u in document["unreadable"]] == [
        ("Pod/hyperpod-ns-alpha/old-1", "metadata.uid")
    ]
    assert "flavor" not in document["unreadable"][0]  # no amount left unknown: the tables stand


def test_the_service_reads_the_pods_through_the_parser():
    # Given a cluster listing one pod with an owner reference that is not an object
    kube, store = FakeKube([]), FakeStore([])
    kube.objects[("ClusterQueue", "", "alpha")] = QUEUES[0]
    kube.workloads = [admitted("alpha", "old", "j-old", T0 - timedelta(minutes=15))]
    odd = pod("alpha", "odd", "j-old")
    odd["metadata"]["ownerReferences"] = ["j-old"]
    kube.pods = [pod("alpha", "old-0", "j-old"), odd]
    # When the sample is taken, then it stands, the odd pod named and not counted
    outcome = sample_usage("c1", kube, store, now=T0)
    assert outcome.sample is not None and not outcome.failure
    document = sample_document(outcome.sample)
    assert document["unboundPods"] == 1
    assert [(u["object"], u["field"]) for u in document["unreadable"]] == [
        ("Pod/hyperpod-ns-alpha/odd", "metadata.ownerReferences[0]")
    ]


def test_a_pod_that_is_not_an_object_is_named_by_its_position():
    read = read_unbound_pods([pod("alpha", "old-0", "j-old"), "old-1", {"metadata": []}])
    assert read[0].uids == ("uid-old-0", "j-old") and read[0].pod_set == "main"
    assert [(u.object, u.field, u.problem) for p in read[1:] for u in p.unreadable] == [
        ("Pod/#1", "", 'must be an object (got "old-1")'),
        ("Pod/#2", "metadata", "must be an object (got an array)"),
    ]
    assert [p.uids for p in read[1:]] == [(), ()]
