"""The node watcher and the engine read one Node object two ways: the engine through ``parse/nodes.py`` (what
eligibility, capacity and the shapes use), the watcher through ``service/watcher.node_view`` (what it keeps per node
and compares, so a heartbeat publishes nothing). They must never disagree about whether a node changed: whenever
the engine's reading of a node changes, the watcher's view changes too — else a new eligibility rule (a label, a
field) leaves the watcher blind and the pool waits for the 5-minute safety net (issue 33, "one input, two readers").

Held as a property over real-shaped Node objects and every field either reader looks at, plus fields neither does.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from idleshare.domain.model import BLOCKING_TAINT_EFFECTS, Node
from idleshare.parse.nodes import cluster_node
from idleshare.service.watcher import node_changes, node_view
from tests.kube.fixtures import make_node

LABELS = (
    "node.kubernetes.io/instance-type",
    "beta.kubernetes.io/instance-type",
    "sagemaker.amazonaws.com/node-health-status",
    "nvidia.com/mig.config.state",
    "topology.kubernetes.io/zone",  # neither reads it
)
RESOURCES = ("cpu", "memory", "nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "aws.amazon.com/neurondevice", "pods")

label_values = st.sampled_from(
    ["ml.p5.48xlarge", "ml.g5.12xlarge", "ml.m5.2xlarge", "Schedulable", "Unschedulable", "success", "pending", ""]
)
quantities = st.sampled_from(["0", "1", "8", "191450m", "2027264Mi", "56", "12x"])  # "12x": an unreadable node


@st.composite
def edits(draw: st.DrawFn) -> list[tuple[str, Any]]:
    """A few edits of a Node object: set or drop a label, a taint, cordon, delete, Ready, an allocatable resource;
    a bad quantity or a read label that is not a string makes it unreadable."""
    kinds = st.sampled_from(
        ["label", "unlabel", "badlabel", "taint", "untaint", "cordon", "deleting", "ready", "alloc", "unalloc"]
    )
    out: list[tuple[str, Any]] = []
    for kind in draw(st.lists(kinds, min_size=1, max_size=3)):
        if kind in ("label", "unlabel"):
            out.append((kind, (draw(st.sampled_from(LABELS)), draw(label_values))))
        elif kind == "badlabel":  # a label a rule reads, not a string: the node is unreadable
            out.append(("label", (draw(st.sampled_from(LABELS[:4])), draw(st.sampled_from([5, None])))))
        elif kind == "taint":
            key = draw(st.sampled_from(["nvidia.com/gpu", "dedicated", "node.kubernetes.io/unreachable"]))
            effect = draw(st.sampled_from(["NoSchedule", "NoExecute", "PreferNoSchedule"]))
            out.append((kind, {"key": key, "effect": effect}))
        elif kind == "ready":
            out.append((kind, draw(st.sampled_from(["True", "False", "Unknown"]))))
        elif kind in ("alloc", "unalloc"):
            out.append((kind, (draw(st.sampled_from(RESOURCES)), draw(quantities))))
        else:
            out.append((kind, draw(st.booleans())))
    return out


def engine_reading(obj: dict[str, Any]) -> Node:
    """The engine's Node, but for taints no rule reads (``PreferNoSchedule`` excludes nothing and blocks no pod)."""
    node = cluster_node(obj, 0)[0]
    return dataclasses.replace(node, taints=tuple(t for t in node.taints if t.effect in BLOCKING_TAINT_EFFECTS))


def edited(node: dict[str, Any], changes: list[tuple[str, Any]]) -> dict[str, Any]:
    out = copy.deepcopy(node)
    meta, spec, status = out["metadata"], out["spec"], out["status"]
    for kind, value in changes:
        if kind == "label":
            meta["labels"][value[0]] = value[1]
        elif kind == "unlabel":
            meta["labels"].pop(value[0], None)
        elif kind == "taint":
            spec["taints"] = [*spec.get("taints", []), value]
        elif kind == "untaint":
            spec.pop("taints", None)
        elif kind == "cordon":
            spec["unschedulable"] = value
        elif kind == "deleting":
            if value:
                meta["deletionTimestamp"] = "2026-12-05T01:00:00Z"
            else:
                meta.pop("deletionTimestamp", None)
        elif kind == "ready":
            status["conditions"] = [{"type": "Ready", "status": value, "reason": "KubeletReady"}]
        elif kind == "alloc":
            status["allocatable"][value[0]] = value[1]
        else:
            status["allocatable"].pop(value[0], None)
    return out


@settings(max_examples=400, deadline=None)
@given(before=edits(), after=edits())
def test_whenever_the_engine_reads_a_node_differently_the_watcher_reports_a_change(before, after):
    base = make_node("hyperpod-i-0001")
    a, b = edited(base, before), edited(base, after)
    engine_a, engine_b = engine_reading(a), engine_reading(b)
    if engine_a != engine_b:
        assert node_view(a) != node_view(b), (engine_a, engine_b)
        assert node_changes(node_view(a), node_view(b)) != []


def test_a_heartbeat_or_a_field_neither_reads_is_no_change_to_either():  # every label is read (headroom)
    base = make_node("hyperpod-i-0001")
    beat = copy.deepcopy(base)
    beat["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-12-05T01:00:00Z"
    beat["status"]["images"] = [{"names": ["nvcr.io/nvidia/pytorch:24.01"], "sizeBytes": 10**10}]
    assert engine_reading(beat) == engine_reading(base)
    assert node_changes(node_view(base), node_view(beat)) == []


def test_a_node_recreated_under_the_name_of_one_being_deleted_is_reported_added():
    # Given the view kept of a node being deleted, and (after a relist) a new node of the same name, else the same
    old = edited(make_node("hyperpod-i-0001"), [("deleting", True)])
    new = make_node("hyperpod-i-0001")
    # Then it is a change: a deletion is never undone, so it is a new node
    assert node_changes(node_view(old), node_view(new)) == ["Added"]


def test_an_unreadable_node_is_one_view_whatever_else_it_says():
    # Given a node the engine cannot read (an allocatable quantity "12x"): it counts as nothing
    bad = edited(make_node("hyperpod-i-0001"), [("alloc", ("nvidia.com/gpu", "12x"))])
    # When it is cordoned or loses Ready, the engine's reading does not move, and neither does the watcher's
    for more in ([("cordon", True)], [("ready", "False")]):
        assert engine_reading(edited(bad, more)) == engine_reading(bad)
        assert node_changes(node_view(bad), node_view(edited(bad, more))) == []
    # When it becomes readable again, it is a change (what it has counts again)
    assert "Allocatable" in node_changes(node_view(bad), node_view(make_node("hyperpod-i-0001")))


# What the previous watcher (reading the raw object) checkpointed for make_node("hyperpod-i-0001"), as stored.
SAVED_BY_THE_RAW_READER = [
    "True", False, False, None, [],
    {"cpu": "191450m", "memory": "2027264Mi", "nvidia.com/gpu": "8", "pods": "737"},
    "ml.p5.48xlarge", None, "f6cef68c54a0",
]  # fmt: skip


def test_views_checkpointed_before_read_as_no_change_and_a_real_change_still_shows():
    node = make_node("hyperpod-i-0001")
    # Given the checkpoint of the raw reader, in full and as the releases before the MIG state and labels digest
    for saved in (SAVED_BY_THE_RAW_READER, SAVED_BY_THE_RAW_READER[:7]):
        # Then the same node is no change (an upgrade publishes nothing by itself) ...
        assert node_changes(saved, node_view(node)) == []
        # ... and a cordon is still one
        assert node_changes(saved, node_view(edited(node, [("cordon", True)]))) == ["Cordoned"]
    assert node_view(node) == SAVED_BY_THE_RAW_READER
