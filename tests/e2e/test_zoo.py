"""Issue 40.1 on the real stack: each cluster of the zoo (events/zoo) through idleshare's real pipeline into the real
kube-apiserver and Kueue. The apiserver accepts every object idleshare writes (apply status ``Applied``), every team
with an enabled quota has an Active ClusterQueue, and what is left out is named in the pool (offline, the same
clusters through ``plan`` and the report: tests/unit/test_zoo.py).

The nodes go in as the dump has them, but for what would make the test stack act on them: Karpenter's finalizer
(nothing here would remove it, so the nodes could never be deleted) and its NodeClaim owner (no such kind here; the
garbage collector would look for it). The DaemonSets and pods stay offline (headroom on the real stack:
tests/e2e/test_headroom.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from idleshare_cli.plan import plan
from tests.e2e.conftest import Cluster

ZOO = Path(__file__).resolve().parents[2] / "events" / "zoo"
SHAPES = sorted(p.name for p in ZOO.iterdir() if p.is_dir())


def zoo_nodes(shape: str) -> list[dict[str, Any]]:
    nodes = [i for i in json.loads((ZOO / shape / "cluster.json").read_text())["items"] if i["kind"] == "Node"]
    for node in nodes:
        node["metadata"].pop("finalizers", None)
        node["metadata"].pop("ownerReferences", None)
    return nodes


@pytest.mark.parametrize("shape", SHAPES)
def test_every_zoo_cluster_is_governed_on_the_real_stack(make_cluster: Any, shape: str) -> None:
    # Given the cluster's nodes in the real apiserver, and the pipeline governing it
    cluster: Cluster = make_cluster(zoo_nodes(shape))
    quotas = json.loads((ZOO / shape / "quotas.json").read_text())
    # When each team's quota arrives (each delivery recomputes and applies)
    for body in quotas:
        cluster.put_quota(body)
    # Then the apiserver took every object idleshare wrote
    store, cid = cluster.pipeline.store, cluster.spec.cluster_id
    pool = store.get_pool(cid)
    assert pool is not None and pool.apply_status == "Applied", (pool.apply_status, pool.apply_message)
    # and every team with an enabled quota has an Active ClusterQueue (Kueue found its flavors and the Cohort)
    teams = sorted(q["ComputeQuotaTarget"]["TeamName"] for q in quotas if q.get("ActivationState") == "Enabled")
    cluster.wait_active(*teams)
    # and what is left out is named, as plan names it offline: each excluded node with its reason, each flavor
    # Kueue cannot hold in an issue and in no object
    offline, _ = plan((ZOO / shape / "cluster.json").read_bytes(), (ZOO / shape / "quotas.json").read_bytes())
    document = pool.pool
    assert document["excludedNodes"] == {n: str(r) for n, r in offline.excluded_nodes.items()}
    ungoverned = (document.get("ungoverned") or {}).get("flavors") or []
    assert sorted(ungoverned) == sorted(offline.ungoverned_flavors)
    if ungoverned:
        assert any(i["code"] == "FlavorsNotGoverned" for i in document["issues"])
        written = {o["metadata"]["name"] for o in cluster.kube.objects("ResourceFlavor")}
        assert written and not written & set(ungoverned)
