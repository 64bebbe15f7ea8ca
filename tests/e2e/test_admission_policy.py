"""Issue 41.4 on the real apiserver: isolation enforced at admission. idleshare writes its ValidatingAdmissionPolicy
and binding (``domain/admission.py``); in a governed team's namespace the API server then refuses a Job without the
team's ``kueue.x-k8s.io/queue-name`` (or naming another team's queue), with a message naming the LocalQueue to use;
the same Job with the label is admitted by Kueue and runs; a namespace no team has is left alone; a Job that never
had the label (created before the policy) may still be updated, and a right label may not be taken away."""

from __future__ import annotations

import copy
import time
from typing import Any

from devkit.kube import workloads as wl
from devkit.kube.stack import KubeStack
from idleshare.domain.admission import POLICY_NAME
from tests.e2e.conftest import GPU, P5, Cluster, p5_nodes, quota

ADMISSION = "/apis/admissionregistration.k8s.io/v1"


def post_job(kube_stack: KubeStack, job: dict[str, Any]) -> tuple[int, Any]:
    namespace = job["metadata"]["namespace"]
    return kube_stack.request("POST", f"/apis/batch/v1/namespaces/{namespace}/jobs", job)


def unlabelled(job: dict[str, Any], name: str) -> dict[str, Any]:
    out = copy.deepcopy(job)
    out["metadata"]["name"] = name
    del out["metadata"]["labels"][wl.QUEUE_LABEL]
    return out


def refused_once_in_force(kube_stack: KubeStack, job: dict[str, Any]) -> tuple[int, Any]:
    """POST ``job`` until the API server's policy cache has the new policy (it syncs within seconds); the answer."""
    deadline = time.monotonic() + 20
    while True:
        status, answer = post_job(kube_stack, job)
        if status != 201 or time.monotonic() > deadline:
            return status, answer
        namespace, name = job["metadata"]["namespace"], job["metadata"]["name"]
        kube_stack.request("DELETE", f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}")
        time.sleep(0.5)


def test_a_job_without_its_teams_queue_is_refused_naming_it_and_with_it_kueue_admits_it(
    make_cluster: Any, kube_stack: KubeStack
) -> None:
    # Given two governed teams
    cluster: Cluster = make_cluster(p5_nodes(2))
    cluster.put_quota(quota("alpha", [{"InstanceType": P5, "Count": 1}], borrow_limit=50))
    cluster.put_quota(quota("beta", [{"InstanceType": P5, "Count": 1}], borrow_limit=50))
    cluster.wait_active("alpha", "beta")
    # Then idleshare wrote the policy and its binding, for the teams' namespaces only
    status, binding = kube_stack.request("GET", f"{ADMISSION}/validatingadmissionpolicybindings/{POLICY_NAME}")
    assert status == 200, binding
    (selector,) = binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
    assert selector["values"] == ["hyperpod-ns-alpha", "hyperpod-ns-beta"]
    assert kube_stack.request("GET", f"{ADMISSION}/validatingadmissionpolicies/{POLICY_NAME}")[0] == 200
    job = wl.batch_job("alpha", "train", {GPU: 8}, instance_type=P5)
    # When alpha submits a Job without the label: refused, the message names the queue to use
    status, answer = refused_once_in_force(kube_stack, unlabelled(job, "no-label"))
    assert status in (403, 422), answer
    assert "kueue.x-k8s.io/queue-name: hyperpod-ns-alpha-localqueue" in answer["message"], answer
    # and naming beta's queue from alpha's namespace: refused too
    other = copy.deepcopy(job)
    other["metadata"]["name"] = "other-queue"
    other["metadata"]["labels"][wl.QUEUE_LABEL] = "hyperpod-ns-beta-localqueue"
    assert post_job(kube_stack, other)[0] in (403, 422)
    # and the same Job with its team's queue: accepted, and Kueue admits it (it runs)
    cluster.submit_job("alpha", "train", {GPU: 8})
    cluster.wait_job("train", "Admitted")
    assert cluster.job_running("train")
    # and in a namespace no team has, a Job without the label is the API server's as ever
    free = unlabelled(job, "elsewhere")
    free["metadata"]["namespace"] = "default"
    status, answer = post_job(kube_stack, free)
    assert status == 201, answer
    kube_stack.request("DELETE", "/apis/batch/v1/namespaces/default/jobs/elsewhere")


def test_an_update_may_not_take_the_label_away_and_leaves_a_job_from_before_the_policy_alone(
    make_cluster: Any, kube_stack: KubeStack
) -> None:
    # Given a Job without the label, made in the team's namespace before idleshare governed it
    cluster: Cluster = make_cluster(p5_nodes(2))
    kube_stack.request("POST", "/api/v1/namespaces", {"metadata": {"name": "hyperpod-ns-alpha"}})
    before = unlabelled(wl.batch_job("alpha", "x", {GPU: 1}), "from-before")
    deadline = time.monotonic() + 20  # a policy an earlier test left may linger in the API server's cache a moment
    while (answered := post_job(kube_stack, before))[0] != 201 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert answered[0] == 201, answered
    # When the team is governed (the policy in force), and a labelled Job is there too
    cluster.put_quota(quota("alpha", [{"InstanceType": P5, "Count": 1}], borrow_limit=50))
    probe = unlabelled(wl.batch_job("alpha", "x", {GPU: 1}), "probe")
    assert refused_once_in_force(kube_stack, probe)[0] in (403, 422)
    cluster.submit_job("alpha", "labelled", {GPU: 1})
    jobs = "/apis/batch/v1/namespaces/hyperpod-ns-alpha/jobs"
    patch_headers = {"metadata": {"annotations": {"touched": "yes"}}}
    # Then the Job from before may still be updated (its controller's and its owner's writes go on)
    status, answer = kube_stack.request("PATCH", f"{jobs}/from-before", patch_headers)
    assert status == 200, answer
    # but the labelled one may not lose its label
    status, answer = kube_stack.request("PATCH", f"{jobs}/labelled", {"metadata": {"labels": {wl.QUEUE_LABEL: None}}})
    assert status in (403, 422), answer
    assert "hyperpod-ns-alpha-localqueue" in answer["message"]
    for name in ("from-before",):
        kube_stack.request("DELETE", f"{jobs}/{name}")


def test_switched_off_for_a_cluster_idleshare_deletes_its_policy_and_the_api_server_takes_any_job(
    make_cluster: Any, kube_stack: KubeStack
) -> None:

    # Given a governed team, the policy in force
    cluster: Cluster = make_cluster(p5_nodes(2))
    cluster.put_quota(quota("alpha", [{"InstanceType": P5, "Count": 1}], borrow_limit=50))
    probe = unlabelled(wl.batch_job("alpha", "x", {GPU: 1}), "probe")
    assert refused_once_in_force(kube_stack, probe)[0] in (403, 422)
    # When the cluster's admission_policy is switched off (the registry, as a deploy of the config writes it)
    store, cid = cluster.pipeline.store, cluster.spec.cluster_id
    store.put_cluster(store.get_cluster(cid).with_settings(admission_policy=False))
    cluster.recalculate()
    # Then both objects are gone, named in the apply status, and a Job without the label is taken again
    for plural in ("validatingadmissionpolicybindings", "validatingadmissionpolicies"):
        assert kube_stack.request("GET", f"{ADMISSION}/{plural}/{POLICY_NAME}")[0] == 404
    pool = store.get_pool(cid)
    assert pool is not None and f"ValidatingAdmissionPolicy/{POLICY_NAME}" in (pool.apply_message or ""), pool
    deadline = time.monotonic() + 20
    while (answered := post_job(kube_stack, probe))[0] != 201 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert answered[0] == 201, answered
