"""Issue 40.1: every surface over every cluster of the zoo (events/zoo: Karpenter with 156 instance types, HyperPod,
plain EKS GPUs, Neuron on both device plugins, Bottlerocket, ml. and EC2 names together, odd quantities), offline:
the files are what the generator makes, ``plan`` gives every team with an enabled quota its ClusterQueue and
LocalQueue with only objects that pass the API server's rules, names whatever it leaves out (node, flavor,
reason), and the report renders each. On the real apiserver and Kueue: tests/e2e/test_zoo.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from idleshare.domain.model import Headroom, Settings
from idleshare_cli.plan import plan
from idleshare_cli.present import result_json
from idleshare_cli.report_html import render
from tests.builders import load_script

ZOO = Path(__file__).resolve().parents[2] / "events" / "zoo"
SHAPES = sorted(p.name for p in ZOO.iterdir() if p.is_dir())
# what each cluster names, besides its left-out nodes: nothing else is an issue on it
EXPECTED_ISSUES = {
    "karpenter": {"FlavorsNotGoverned"},
    "mixed-names": {"TwoNamesForOneInstanceType"},
    "odd-quantities": {"QuantityOutOfRange"},
}
EXPECTED_EXCLUDED = {
    "karpenter": {"UntoleratedTaint"},  # the node Karpenter has not registered yet
    "hyperpod": {"Unhealthy", "MigNotReady"},  # health labels; MIG pending and failed
}


def generator() -> Any:
    return load_script(ZOO / "make_zoo.py", "make_zoo_under_test")


def planned(shape: str, settings: Settings | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    cluster, quotas = (ZOO / shape / "cluster.json").read_bytes(), (ZOO / shape / "quotas.json").read_bytes()
    result, manifests = plan(cluster, quotas, settings=settings, sources=(f"{shape}/cluster.json", "quotas", "sc"))
    return result_json(result, manifests), manifests


def test_the_zoo_is_what_its_generator_makes_and_has_every_shape_the_issue_asks_for() -> None:
    files = generator().files()
    assert {p.parent.name for p in files} == set(SHAPES) and len(SHAPES) == 7
    for path, text in files.items():
        assert path.read_text() == text, f"{path}: run `uv run python events/zoo/make_zoo.py`"


def test_the_karpenter_cluster_has_at_least_150_instance_types_graviton_and_spot() -> None:
    items = json.loads((ZOO / "karpenter" / "cluster.json").read_text())["items"]
    nodes = [i for i in items if i["kind"] == "Node"]
    types = {n["metadata"]["labels"]["node.kubernetes.io/instance-type"] for n in nodes}
    assert len(types) >= 150
    assert {n["metadata"]["labels"]["kubernetes.io/arch"] for n in nodes} == {"amd64", "arm64"}
    assert {n["metadata"]["labels"]["karpenter.sh/capacity-type"] for n in nodes} == {"spot", "on-demand"}
    assert {i["kind"] for i in items} == {"Node", "DaemonSet", "Pod"}


@pytest.mark.parametrize("shape", SHAPES)
def test_plan_gives_every_enabled_team_its_queues_and_names_what_it_leaves_out(shape: str) -> None:
    out, manifests = planned(shape)
    quotas = json.loads((ZOO / shape / "quotas.json").read_text())
    teams = {q["ComputeQuotaTarget"]["TeamName"] for q in quotas if q.get("ActivationState", "Enabled") == "Enabled"}
    # Then every team with an enabled quota has its ClusterQueue and LocalQueue among the objects written
    by_kind: dict[str, set[str]] = {}
    for m in manifests:
        by_kind.setdefault(m["kind"], set()).add(m["metadata"]["name"])
    assert by_kind["ClusterQueue"] == {f"hyperpod-ns-{t}-clusterqueue" for t in teams}
    assert by_kind["LocalQueue"] == {f"hyperpod-ns-{t}-localqueue" for t in teams}
    # and each flavor a quota names is governed (written), never among the ungoverned
    named = {r["InstanceType"] for q in quotas for r in q["ComputeQuotaConfig"]["ComputeQuotaResources"]}
    ungoverned = set((out.get("ungoverned") or {}).get("flavors") or [])
    assert not named & ungoverned
    # and whatever is left out is named: each excluded node with its reason, each issue expected for this shape
    assert {i["code"] for i in out["issues"]} == EXPECTED_ISSUES.get(shape, set()), out["issues"]
    assert set(out["excludedNodes"].values()) == EXPECTED_EXCLUDED.get(shape, set())
    if ungoverned:
        (issue,) = [i for i in out["issues"] if i["code"] == "FlavorsNotGoverned"]
        assert f"{len(ungoverned)} not governed" in issue["message"]


@pytest.mark.parametrize("shape", SHAPES)
def test_the_report_renders_every_cluster_with_its_teams_and_left_out_nodes(shape: str) -> None:
    out, _ = planned(shape)
    page = render(out)
    assert page.startswith("<!DOCTYPE html>")
    assert all(team in page for team in out["teams"])
    assert all(node in page for node in out["excludedNodes"])


@pytest.mark.parametrize("shape", SHAPES)
def test_the_dumps_daemonsets_are_headroom(shape: str) -> None:
    # the dump's DaemonSets (kube-proxy, aws-node, the device plugin, ...) reduce capacity; headroom off does not
    with_headroom, _ = planned(shape)
    without, _ = planned(shape, Settings(headroom=Headroom.OFF))
    flavor = sorted(with_headroom["capacity"])[0]
    assert with_headroom["capacity"][flavor]["cpu"] != without["capacity"][flavor]["cpu"]


def test_the_neuron_cluster_counts_devices_under_the_old_and_the_new_plugins_name() -> None:
    out, _ = planned("neuron")
    capacity = out["capacity"]
    assert capacity["trn1.32xlarge"]["aws.amazon.com/neurondevice"] == "32"  # 2 nodes of the plugin up to 2.19
    assert capacity["trn2.48xlarge"]["aws.amazon.com/neuron"] == "32"  # 2 nodes of the current plugin
    assert out["teams"]["finetune"]["nominal"]["trn1.32xlarge"]["aws.amazon.com/neurondevice"] == "8"
    assert out["teams"]["serving"]["nominal"]["inf2.xlarge"]["aws.amazon.com/neuron"] == "2"


def test_odd_quantities_are_read_exactly_and_the_out_of_range_flavor_is_named_and_zeroed() -> None:
    out, manifests = planned("odd-quantities")
    # S(f) of p5 by the majority layout (8 GPUs), never the outlier's 1e3
    assert out["teams"]["big"]["nominal"]["p5.48xlarge"]["nvidia.com/gpu"] == "16"
    (issue,) = [i for i in out["issues"] if i["code"] == "QuantityOutOfRange"]
    assert issue["subject"] == "p4de.24xlarge/nvidia.com/gpu"
    # and no quantity written passes Kueue's int64
    for m in manifests:
        for group in m.get("spec", {}).get("resourceGroups", []):
            for flavor in group["flavors"]:
                for res in flavor["resources"]:
                    for key in ("nominalQuota", "borrowingLimit", "lendingLimit"):
                        value = str(res.get(key, "0"))
                        assert not value.isdigit() or int(value) < 2**63, (m["metadata"]["name"], res)
