"""MIG readiness (docs/spec.md §2; issue 29): a node whose ``nvidia.com/mig.config.state`` label is present and not
``success`` lends none of its MIG profiles; its other resources count, and it is named ``MigNotReady`` wherever
excluded nodes are shown. No label: counted (a cluster without NVIDIA's MIG manager)."""

from __future__ import annotations

import copy
import dataclasses
from fractions import Fraction
from typing import Any

import pytest

from idleshare.domain.document import pool_document
from idleshare.domain.model import MIG_CONFIG_STATE_LABEL, ExclusionReason, Node, Snapshot
from idleshare.domain.pool import compute
from idleshare.parse.nodes import cluster_node, node_from_dict, parse_nodes
from idleshare.service import watcher as w
from idleshare_cli.pool import show_text
from idleshare_cli.present import result_tables
from idleshare_cli.report_html import render
from tests.builders import BALANCED, P5, R1, R3, node
from tests.fakes import emf_documents
from tests.kube.fixtures import make_node

GPU = "nvidia.com/gpu"
BALANCED_STR = {r: str(q) if not isinstance(q, Fraction) else f"{q * 1000}m" for r, q in BALANCED.items()}


def mig_node(name: str, state: str | None, **overrides: Any) -> Node:
    """A p5 in the balanced layout (4 whole GPUs, 4 x 3g.40gb, 14 x 1g.10gb) with this MIG manager state."""
    return node(name, allocatable=dict(BALANCED), mig_config_state=state, **overrides)


def pool_of(*nodes_: Node):
    return compute(Snapshot(nodes=tuple(nodes_)))


# (label value, whether its MIG profiles count)
STATES = [
    (None, True),  # no MIG manager on the cluster: counted as before
    ("success", True),
    ("pending", False),
    ("rebooting", False),
    ("failed", False),
    ("", False),  # present and not success
    ("Success", False),  # the manager writes lower case: anything else is not its success
]


@pytest.mark.parametrize(("state", "counts"), STATES, ids=[repr(s) for s, _ in STATES])
def test_a_mig_node_lends_its_mig_profiles_only_when_its_mig_manager_says_success(state, counts):
    # Given a ready MIG node beside one whose MIG manager is in ``state``
    result = pool_of(mig_node("ok", "success"), mig_node("m", state))
    capacity = result.capacity[P5]
    # Then its MIG profiles count only on success (or without the label) ...
    assert capacity[R1] == (28 if counts else 14)
    assert capacity[R3] == (8 if counts else 4)
    # ... and its whole GPUs, cpu and memory always do
    assert capacity[GPU] == 8
    assert capacity["cpu"] == 2 * BALANCED["cpu"]
    assert capacity["memory"] == 2 * BALANCED["memory"]
    # And it is named MigNotReady, yet counted eligible (its other resources are in the pool)
    assert result.excluded_nodes == ({} if counts else {"m": ExclusionReason.MIG_NOT_READY})
    assert result.node_counts[P5] == (2, 2)
    assert ("excluded: MigNotReady=1" in result.summary()) is not counts
    assert result.unallocated[P5][R1] == capacity[R1]


def test_a_node_excluded_for_another_reason_keeps_that_reason_and_counts_nothing():
    result = pool_of(mig_node("ok", None), mig_node("down", "pending", ready=False))
    assert result.excluded_nodes == {"down": ExclusionReason.NOT_READY}
    assert result.capacity[P5][GPU] == 4 and result.capacity[P5][R1] == 14
    assert result.node_counts[P5] == (1, 2)


def test_a_not_ready_mig_layout_still_votes_for_the_flavors_shape_as_any_node_does():
    # S(f) is "the most common allocatable among the flavor's nodes, eligible or not": readiness is not a vote
    result = pool_of(mig_node("a", "pending"), mig_node("b", "pending"), node("c"))
    assert result.shapes[P5][R1] == 14
    assert result.capacity[P5][R1] == 0 and R1 in result.capacity[P5]  # the resource stays, at zero


# -- the label, read once (parse/nodes.py) --------------------------------------------------------------------


@pytest.mark.parametrize("state", [None, "success", "pending", "failed", ""])
def test_the_label_is_read_as_written(state):
    labels = {} if state is None else {MIG_CONFIG_STATE_LABEL: state}
    raw = make_node("n", "ml.p5.48xlarge", allocatable=BALANCED_STR, labels=labels)
    assert node_from_dict(raw).mig_config_state == state
    (parsed,) = parse_nodes({"kind": "List", "items": [raw]})
    assert parsed.mig_config_state == state


def test_a_label_that_is_not_a_string_makes_the_node_unreadable_not_the_cluster():
    raw = make_node("n", labels={})
    raw["metadata"]["labels"][MIG_CONFIG_STATE_LABEL] = 1
    parsed, error = cluster_node(raw, 0)
    assert parsed.unreadable and error is not None and MIG_CONFIG_STATE_LABEL in str(error)


# -- every surface that shows excluded nodes --------------------------------------------------------------------


@pytest.fixture(name="result")
def result_fixture():
    return pool_of(mig_node("p5-ok", "success"), mig_node("p5-mig-pending", "pending"))


def test_the_pool_document_and_pool_show_name_it(result):
    document = pool_document(result)
    assert document["excludedNodes"] == {"p5-mig-pending": "MigNotReady"}
    assert document["nodeCounts"][P5] == {"eligible": 2, "total": 2}
    shown = show_text({**document, "excludedSummary": {"total": 1, "byReason": {"MigNotReady": 1}}})
    assert "Excluded nodes (1): MigNotReady=1" in shown
    assert any(line.split() == ["p5-mig-pending", "MigNotReady"] for line in shown.splitlines()), shown


def test_plan_tables_name_it(result):
    text = result_tables(result)
    assert any(line.split() == ["p5-mig-pending", "MigNotReady"] for line in text.splitlines()), text


def test_the_html_report_names_it(result):
    page = render(pool_document(result))
    assert (
        '<tr data-excluded-node="p5-mig-pending"><td>p5-mig-pending</td><td data-field="reason">MigNotReady</td>'
        in page
    )
    assert '<b data-reason="MigNotReady" data-value="1">' in page


def test_the_excluded_nodes_metric_counts_it(result, capsys):
    from idleshare.runtime.metrics import emit_recompute  # not at collection: it reads the environment
    from idleshare.service.recompute import Outcome

    emit_recompute(Outcome("c1", 1, True, result=result))
    excluded = [m for m in emf_documents(capsys.readouterr().out) if "ExcludedNodes" in m]
    assert [(m["reason"], m["ExcludedNodes"]) for m in excluded] == [("MigNotReady", [1.0])]


# -- the node watcher sees what the engine reads ------------------------------------------------------------------


def _label(key: str, value: str | None):
    def edit(n: dict[str, Any]) -> None:
        labels = n["metadata"]["labels"]
        if value is None:
            labels.pop(key, None)
        else:
            labels[key] = value

    return edit


def _status(**fields: Any):
    return lambda n: n["status"].update(fields)


# For each field of the engine's Node: an edit of the Kubernetes Node that changes it. The watcher must report
# every one of them (else a change the pool depends on waits for the scheduled recompute).
FIELD_EDITS: dict[str, Any] = {
    "instance_type": _label("node.kubernetes.io/instance-type", "ml.p4d.24xlarge"),
    "allocatable": lambda n: n["status"]["allocatable"].update({R1: "7"}),
    "ready": _status(conditions=[{"type": "Ready", "status": "False"}]),
    "ready_condition": _status(conditions=[{"type": "MemoryPressure", "status": "False"}]),  # no Ready at all
    "unschedulable": lambda n: n["spec"].update(unschedulable=True),
    "deleting": lambda n: n["metadata"].update(deletionTimestamp="2026-01-01T00:00:00Z"),
    "health_status": _label("sagemaker.amazonaws.com/node-health-status", "Unschedulable"),
    "taints": lambda n: n["spec"].update(taints=[{"key": "k", "effect": "NoSchedule"}]),
    "unreadable": lambda n: n["status"]["allocatable"].update({"cpu": "1.2.3"}),
    "mig_config_state": _label(MIG_CONFIG_STATE_LABEL, "pending"),
    "labels": _label("example.com/pool", "blue"),  # headroom: a DaemonSet's selector may match it now
}
UNREAD_FIELDS = {"name"}  # the node's identity: a rename is a delete and an add


def test_every_node_field_the_engine_reads_has_an_edit_here():
    assert set(FIELD_EDITS) | UNREAD_FIELDS == {f.name for f in dataclasses.fields(Node)}


@pytest.mark.parametrize("field", sorted(FIELD_EDITS))
def test_the_watcher_reports_every_change_of_what_the_engine_reads(field):
    before = make_node("n", labels={MIG_CONFIG_STATE_LABEL: "success"}, allocatable=BALANCED_STR)
    after = copy.deepcopy(before)
    FIELD_EDITS[field](after)
    engine_before, engine_after = cluster_node(before, 0)[0], cluster_node(after, 0)[0]
    assert getattr(engine_before, field) != getattr(engine_after, field)  # the edit moves the engine's field ...
    assert w.node_changes(w.node_view(before), w.node_view(after))  # ... and the watcher reports it


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        ("pending", "success", ["MigConfigState"]),
        ("success", "rebooting", ["MigConfigState"]),
        (None, "pending", ["MigConfigState"]),  # the MIG manager installed and starting
        ("failed", None, ["MigConfigState"]),
        ("pending", "pending", []),
        (None, None, []),
    ],
)
def test_a_mig_state_flip_is_a_change_and_nothing_else_is(before, after, expected):
    old = make_node("n", labels={} if before is None else {MIG_CONFIG_STATE_LABEL: before})
    new = copy.deepcopy(old)
    _label(MIG_CONFIG_STATE_LABEL, after)(new)
    for c in new["status"]["conditions"]:  # a heartbeat rides along: it is never a change
        c["lastHeartbeatTime"] = "2026-12-04T10:00:00Z"
    assert w.node_changes(w.node_view(old), w.node_view(new)) == expected


def test_a_view_saved_before_the_mig_state_was_watched_resumes_without_a_spurious_change():
    raw = make_node("n")
    saved = w.node_view(raw)[:7]  # what a watcher before this change checkpointed
    assert w.node_changes(saved, w.node_view(raw)) == []
    _label(MIG_CONFIG_STATE_LABEL, "pending")(raw)
    assert w.node_changes(saved, w.node_view(raw)) == ["MigConfigState"]
