"""A recompute's writes several at a time (service/apply.py) on the real apiserver and Kueue's webhooks, through the
recording fault proxy: the dependency order kept, every failure named, a foreign manager's field left to it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from idleshare.adapters.kube import LightkubeCluster
from idleshare.domain.kueue_diff import diff
from idleshare.errors import PermanentError, RetryableError
from idleshare.service.apply import write
from tests.builders import CLUSTER, QUOTAS, objects
from tests.kube.fixtures import ProxiedKube, proxied_kube  # noqa: F401  (fixture)

CONCURRENCY = 8


@pytest.fixture
def adapter(proxied_kube: ProxiedKube) -> Iterator[LightkubeCluster]:  # noqa: F811
    cluster = proxied_kube.adapter(timeout=30)
    cluster.write_concurrency = CONCURRENCY
    yield cluster
    cluster.close()


def manifests() -> list[dict[str, Any]]:
    return objects(CLUSTER, QUOTAS)[1]


def kind_of(path: str) -> str:
    for plural, kind in (
        ("/localqueues", "LocalQueue"),
        ("/clusterqueues", "ClusterQueue"),
        ("/cohorts", "Cohort"),
        ("/resourceflavors", "ResourceFlavor"),
        ("/workloadpriorityclasses", "WorkloadPriorityClass"),
        ("/namespaces", "Namespace"),
    ):
        if plural in path:
            return kind
    return "?"


def writes(proxied: ProxiedKube) -> list[tuple[str, str]]:
    return [(r.method, kind_of(r.path)) for r in proxied.requests if r.method in ("POST", "PATCH", "PUT", "DELETE")]


def test_the_objects_are_written_in_dependency_waves_and_the_cluster_holds_them(proxied_kube, adapter) -> None:  # noqa: F811
    # Given an empty cluster and 4 teams' desired objects
    desired = manifests()
    # When written 8 at a time
    done = write(adapter, desired, [], force=False)
    done.raise_failures()
    # Then the namespaces, flavors, priority classes and the cohort were all sent before the first ClusterQueue,
    # every ClusterQueue before the first LocalQueue
    sent = [kind for _, kind in writes(proxied_kube)]
    first = {"Namespace", "ResourceFlavor", "WorkloadPriorityClass", "Cohort"}
    assert max(i for i, k in enumerate(sent) if k in first) < sent.index("ClusterQueue")
    assert max(i for i, k in enumerate(sent) if k == "ClusterQueue") < sent.index("LocalQueue")
    # and the counts are exact: every object created once (a POST; for a Kueue object, then its create entry handed
    # to idleshare's apply entry: a JSON patch), every namespace created
    n_namespaces = sum(1 for m in desired if m["kind"] == "Namespace")
    assert done.namespaces_created == n_namespaces and done.applied == len(desired) - n_namespaces
    assert sum(method == "POST" for method, _ in writes(proxied_kube)) == len(desired)
    # and the cluster holds them all (nothing left to apply)
    assert diff(desired, adapter.list_managed()) == ([], [])


def test_two_refused_writes_are_both_named_and_the_others_made(proxied_kube, adapter) -> None:  # noqa: F811
    # Given the ClusterQueues of two teams that the apiserver refuses (422: a stopPolicy its schema does not have)
    desired = manifests()
    cqs = [m["metadata"]["name"] for m in desired if m["kind"] == "ClusterQueue"]
    for m in desired:
        if m["kind"] == "ClusterQueue" and m["metadata"]["name"] in cqs[:2]:
            m["spec"]["stopPolicy"] = "Invalid"
    # When written
    done = write(adapter, desired, [], force=False)
    # Then both are named as refused, each with the apiserver's answer, and nothing is raised (retrying cannot help)
    assert [what for what, _ in done.refused] == [f"ClusterQueue/{name}" for name in cqs[:2]]
    assert all(isinstance(exc, PermanentError) and "HTTP 422" in str(exc) for _, exc in done.refused)
    done.raise_failures()
    # and every other object is in the cluster, the LocalQueues of those two teams waiting for their ClusterQueue
    held = {(o["kind"], o["metadata"]["name"]) for o in adapter.list_managed()}
    waiting = {
        m["metadata"]["name"] for m in desired if m["kind"] == "LocalQueue" and m["spec"]["clusterQueue"] in cqs[:2]
    }
    assert len(waiting) == 2 and sorted(what.split("/")[-1] for what, _ in done.waiting) == sorted(waiting)
    for m in desired:
        key = (m["kind"], m["metadata"]["name"])
        refused = m["kind"] == "ClusterQueue" and key[1] in cqs[:2]
        assert (key in held) == (not refused and key[1] not in waiting), key


def test_a_foreign_managers_field_is_left_to_it_and_the_rest_is_written(proxied_kube, adapter) -> None:  # noqa: F811
    # Given the objects written once, then another manager taking one ClusterQueue's stopPolicy
    desired = manifests()
    first = write(adapter, desired, [], force=False)
    first.raise_failures()
    cq = next(m for m in desired if m["kind"] == "ClusterQueue")
    name = cq["metadata"]["name"]
    foreign = {"apiVersion": cq["apiVersion"], "kind": "ClusterQueue", "metadata": {"name": name}}
    proxied_kube.admin.apply(foreign | {"spec": {"stopPolicy": "Hold"}}, "gitops", force=True)
    # When everything is written again (what the first write created is idleshare's: applied)
    done = write(adapter, desired, [], force=False, existing=set(first.created))
    # Then the conflict is reported, nothing raised, every other object applied again
    assert len(done.conflicts) == 1 and done.conflicts[0].startswith(f"ClusterQueue/{name}:")
    assert "gitops" in done.conflicts[0]
    done.raise_failures()
    n_namespaces = sum(1 for m in desired if m["kind"] == "Namespace")
    assert done.applied == len(desired) - n_namespaces - 1
    # and the other manager's value stays
    assert proxied_kube.admin.get("ClusterQueue", name)["spec"]["stopPolicy"] == "Hold"


def test_an_outage_stops_the_writes_not_yet_started(proxied_kube, adapter) -> None:  # noqa: F811
    # Given a server answering 503 to everything
    proxied_kube.outage("503")
    try:
        # When written
        done = write(adapter, manifests(), [], force=False)
    finally:
        proxied_kube.restore()
    # Then the error is retryable, and no ClusterQueue or LocalQueue was even sent (the first wave failed)
    with pytest.raises(RetryableError):
        done.raise_failures()
    assert done.not_started > 0 and done.applied == 0
    assert not {k for _, k in writes(proxied_kube)} & {"ClusterQueue", "LocalQueue"}
