"""Every object the engine emits is accepted by the real kube-apiserver with Kueue v0.19.2's CRDs (schema + CEL)
and Kueue's mutating and validating webhooks (a server-side dry-run apply by ``idleshare``), and passes
``webhook_violations``; a broken one is refused with the field named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from devkit.kube.client import Kube
from idleshare.domain.kueue import desired_objects, webhook_violations
from idleshare.domain.model import SchedulerConfig, Settings, Snapshot
from idleshare.domain.pool import compute
from idleshare_cli.plan import plan
from tests.bench.synthetic import make_cluster
from tests.builders import P5, entry, nodes, quota
from tests.kube.dryrun import assert_refused, ensure_namespace, refusal

EXAMPLES = Path(__file__).parents[2] / "events" / "examples"


def example_objects(scheduler: bool = True) -> list[dict[str, Any]]:
    _, manifests = plan(
        (EXAMPLES / "nodes.json").read_bytes(),
        (EXAMPLES / "quotas.json").read_bytes(),
        (EXAMPLES / "scheduler-config.json").read_bytes() if scheduler else None,
    )
    return manifests


def assert_all_accepted(kube: Kube, manifests: list[dict[str, Any]]) -> int:
    """Namespaces are created for real (a namespaced dry run needs its namespace); every Kueue object is
    dry-run applied. Returns how many Kueue objects were checked."""
    checked = 0
    for m in manifests:
        if m["kind"] == "Namespace":
            assert refusal(kube, m) == [], m["metadata"]["name"]
            ensure_namespace(kube, m["metadata"]["name"])
    for m in manifests:
        if m["apiVersion"].startswith("kueue.x-k8s.io"):
            assert refusal(kube, m) == [], m["metadata"]["name"]
            assert webhook_violations(m) == [], m["metadata"]["name"]
            checked += 1
    return checked


@pytest.mark.parametrize("scheduler", [True, False])
def test_example_cluster_objects_are_accepted(kube: Kube, scheduler: bool) -> None:
    manifests = example_objects(scheduler)
    kinds = {m["kind"] for m in manifests}
    assert {"ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue", "Namespace"} <= kinds
    assert assert_all_accepted(kube, manifests) > 0


def test_synthetic_cluster_with_many_teams_and_mig_objects_are_accepted(kube: Kube) -> None:
    nodes_json, quotas_json = make_cluster(300, n_teams=40, seed=3)
    _, manifests = plan(nodes_json, quotas_json)
    assert assert_all_accepted(kube, manifests) > 80


def test_the_server_would_catch_a_broken_engine_object(kube: Kube) -> None:
    cq = next(m for m in example_objects() if m["kind"] == "ClusterQueue")
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"].pop()  # fewer resources than coveredResources
    assert_refused(kube, cq, "spec.resourceGroups[0]", "flavors must have the same number of resources")


def test_the_longest_team_name_gets_objects_the_apiserver_accepts(kube: Kube) -> None:
    # docs/spec.md §3 names: hyperpod-ns-<team>-localqueue is a label value on every job: 12 + 40 + 11 = 63
    team = "a" + "b" * 38 + "c"
    result = compute(Snapshot(nodes=tuple(nodes("p5", P5, 2)), quotas=(quota(team, entry(P5, accelerators=8)),)))
    objects = desired_objects(result, SchedulerConfig(), Settings())
    names = {
        o["kind"]: o["metadata"]["name"] for o in objects if o["metadata"].get("labels", {}).get("idleshare.io/team")
    }
    assert names["LocalQueue"] == f"hyperpod-ns-{team}-localqueue" and len(names["LocalQueue"]) == 63
    assert assert_all_accepted(kube, objects) >= 3
