"""Node objects (kubectl / API JSON) -> domain Nodes: shapes, exact quantities, named errors."""

from __future__ import annotations

import copy
import json
import re
from fractions import Fraction
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from idleshare.domain.eligibility import exclusion_reason
from idleshare.domain.model import (
    BETA_INSTANCE_TYPE_LABEL,
    DEFAULT_TOLERATED_TAINT_KEYS,
    HEALTH_LABEL,
    INSTANCE_TYPE_LABEL,
    Node,
    Taint,
)
from idleshare.parse import nodes as nodes_module
from idleshare.parse.errors import MAX_ERRORS, InputError
from idleshare.parse.nodes import cluster_node, node_from_dict, parse_nodes
from tests.strategies import NODES, mutations

EXAMPLE_NODES = json.loads((Path(__file__).resolve().parents[2] / "events" / "examples" / "nodes.json").read_text())
# A HyperPod p5 node as `kubectl get node -o json` prints it (managedFields, images, nodeInfo, ...), with a
# PreferNoSchedule taint of its own.
REAL_NODE: dict[str, Any] = copy.deepcopy(EXAMPLE_NODES["items"][0])
REAL_NODE["spec"]["taints"].append({"effect": "PreferNoSchedule", "key": "team", "value": "ml-research"})
REAL_NAME = REAL_NODE["metadata"]["name"]

UNREAD = {"ephemeral-storage": 483172477747, "hugepages-1Gi": 0, "hugepages-2Mi": 0, "pods": 100}  # the engine skips
P5_ALLOCATABLE = {"cpu": Fraction(191450, 1000), "memory": 2095551620 * 1024, "nvidia.com/gpu": 8}
EXPECTED_REAL = Node(
    name="hyperpod-i-06801cba1736accb4",
    instance_type="ml.p5.48xlarge",
    allocatable={**P5_ALLOCATABLE, **UNREAD, "vpc.amazonaws.com/efa": 32},
    ready=True,
    unschedulable=False,
    deleting=False,
    health_status="Schedulable",
    taints=(Taint("nvidia.com/gpu", "NoSchedule", "true"), Taint("team", "PreferNoSchedule", "ml-research")),
    labels=REAL_NODE["metadata"]["labels"],  # every label: what DaemonSets' node selectors match (headroom)
)


def node(name: str, allocatable: dict[str, Any] | None = None, **top: Any) -> dict[str, Any]:
    """A minimal Node object; ``top`` replaces top-level sections (metadata, spec, status)."""
    alloc = allocatable if allocatable is not None else {"cpu": "47810m", "nvidia.com/gpu": "4"}
    status = {"allocatable": alloc, "conditions": [{"type": "Ready", "status": "True"}]}
    return {"metadata": {"name": name, "labels": {INSTANCE_TYPE_LABEL: "ml.g5.12xlarge"}}, "status": status} | top


def kubectl_list(*items: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": list(items)}


def errors_of(raw: Any, source: str = "nodes.json") -> list[str]:
    with pytest.raises(InputError) as caught:
        parse_nodes(raw, source)
    assert caught.value.source == source
    return [str(e) for e in caught.value.errors]


# ------------------------------------------------------------------------------------- shapes
API_NODE_LIST = {
    "kind": "NodeList",
    "apiVersion": "v1",
    "metadata": {"resourceVersion": "187233541", "continue": "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ"},
    "items": [{k: v for k, v in REAL_NODE.items() if k not in ("kind", "apiVersion")}, node("b")],
}


@pytest.mark.parametrize(
    "document",
    [kubectl_list(REAL_NODE, node("b")), API_NODE_LIST, [REAL_NODE, node("b")]],
    ids=["kubectl-List", "API-NodeList", "bare-array"],
)
@pytest.mark.parametrize("encoding", ["bytes", "str", "decoded"])
def test_the_three_input_shapes_give_exactly_what_the_engine_needs(document: Any, encoding: str) -> None:
    text = json.dumps(document, indent=4)
    raw = {"bytes": text.encode(), "str": "\n  " + text, "decoded": document}[encoding]
    parsed = parse_nodes(raw)
    assert [n.name for n in parsed] == [REAL_NAME, "b"]
    assert parsed[0] == EXPECTED_REAL  # only the needed fields come out, quantities exact
    assert type(parsed[0].allocatable["cpu"]) is Fraction and type(parsed[0].allocatable["memory"]) is int
    assert node_from_dict(copy.deepcopy(REAL_NODE)) == EXPECTED_REAL


# --------------------------------------------------------------------------------- the fields
@pytest.mark.parametrize(
    ("allocatable", "expected"),
    [
        (
            {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "7", "nvidia.com/mig-3g.20gb": "16"},
            {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.10gb": 7, "nvidia.com/mig-3g.20gb": 16},
        ),
        (
            {"aws.amazon.com/neurondevice": "16", "memory": "2097152Ki"},
            {"aws.amazon.com/neurondevice": 16, "memory": 2 * 1024**3},
        ),
        (
            {"cpu": "191450m", "memory": "1.5Gi", "x": "100k", "y": "0.5"},
            {"cpu": Fraction(191450, 1000), "memory": 3 * 2**29, "x": 100_000, "y": Fraction(1, 2)},
        ),
        ({"nvidia.com/gpu": 8}, {"nvidia.com/gpu": 8}),  # a plain JSON integer is a quantity too
    ],
    ids=["mig", "neuron", "milli-cpu", "json-integer"],
)
def test_quantities_are_exact(allocatable: dict[str, Any], expected: dict[str, Any]) -> None:
    for raw in ([node("n", allocatable)], json.dumps([node("n", allocatable)])):
        (n,) = parse_nodes(raw)
        assert n.allocatable == expected
        assert all(type(v) is type(expected[k]) for k, v in n.allocatable.items())


@pytest.mark.parametrize(
    ("labels", "instance_type"),
    [
        ({BETA_INSTANCE_TYPE_LABEL: "p3.16xlarge"}, "p3.16xlarge"),  # the beta label is the fallback
        ({BETA_INSTANCE_TYPE_LABEL: "old-name", INSTANCE_TYPE_LABEL: "ml.p5.48xlarge"}, "ml.p5.48xlarge"),
        (None, None),
    ],
)
def test_the_instance_type_label_and_its_beta_fallback(
    labels: dict[str, str] | None, instance_type: str | None
) -> None:
    meta: dict[str, Any] = {"name": "n"} | ({"labels": labels} if labels is not None else {})
    (n,) = parse_nodes([node("n", metadata=meta)])
    assert n.instance_type == instance_type
    assert n.health_status is None


@pytest.mark.parametrize(
    ("conditions", "ready", "reason"),
    [
        ([{"type": "Ready", "status": "True"}], True, None),
        ([{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "False"}], False, "NotReady"),
        ([{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown"}], False, "NotReady"),
        ([{"type": "DiskPressure", "status": "True"}], False, "NoReadyCondition"),  # no Ready condition at all
        ([], False, "NoReadyCondition"),
    ],
)
def test_ready_is_the_ready_condition_being_true_and_none_at_all_is_its_own_reason(
    conditions: list[dict[str, str]], ready: bool, reason: str | None
) -> None:
    (n,) = parse_nodes([node("n", status={"allocatable": {"nvidia.com/gpu": "8"}, "conditions": conditions})])
    assert n.ready is ready
    assert exclusion_reason(n, DEFAULT_TOLERATED_TAINT_KEYS) == reason


def test_cordon_deletion_health_and_taints_are_read() -> None:
    when, replace = "2025-06-02T14:03:11Z", "UnschedulablePendingReplacement"
    meta = {"name": "n", "deletionTimestamp": when, "labels": {HEALTH_LABEL: replace}}
    cordon = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": when}
    spec = {
        "unschedulable": True,
        "taints": [cordon, {"key": "dedicated", "effect": "NoExecute", "value": "inference"}],
    }
    (n,) = parse_nodes([node("n", metadata=meta, spec=spec)])
    assert (n.unschedulable, n.deleting, n.health_status) == (True, True, replace)
    assert n.taints == (Taint(cordon["key"], "NoSchedule", None), Taint("dedicated", "NoExecute", "inference"))
    (plain,) = parse_nodes([node("p")])
    assert (plain.unschedulable, plain.deleting, plain.taints) == (False, False, ())


def test_the_example_cluster_parses_with_its_special_nodes() -> None:
    parsed = parse_nodes(json.dumps(EXAMPLE_NODES), "nodes.json")
    assert len(parsed) == 36
    assert sum(not n.ready for n in parsed) == 1
    assert sum(n.unschedulable for n in parsed) == 1
    assert [n.health_status for n in parsed if n.health_status != "Schedulable"] == ["UnschedulablePendingReplacement"]
    mig = [n for n in parsed if "nvidia.com/mig-1g.5gb" in n.allocatable]
    assert len(mig) == 5 and all(n.allocatable["nvidia.com/gpu"] == 0 for n in mig)


# ------------------------------------------------------------------------------------- errors
BAD_QUANTITIES = [
    ("abc", 'invalid quantity "abc"'),
    ("1.2.3Gi", 'invalid quantity "1.2.3Gi"'),
    ("12Gb", 'invalid quantity "12Gb"'),
    ("", 'invalid quantity ""'),
    ("1e999999", 'invalid quantity "1e999999"'),
    ("-4", 'negative quantity "-4"'),
    (1.5, "must be a quantity string (got 1.5)"),
    (True, "must be a quantity string (got true)"),
    (None, "must be a quantity string (got null)"),
    ({"v": 1}, "must be a quantity string (got an object)"),
]


@pytest.mark.parametrize(
    ("resource", "value"),
    [("nvidia.com/gpu", "800m"), ("nvidia.com/gpu", "0.5"), ("aws.amazon.com/neurondevice", "1500m"),
     ("nvidia.com/mig-1g.10gb", "2.5"), ("example.com/fpga", "1e-1")],
)  # fmt: skip
def test_a_fraction_of_a_device_is_refused_naming_the_node(resource: str, value: str) -> None:
    # issue 40.5: the API server accepts only whole extended resources; plan read 0.5 GPUs as half a GPU
    bad = node("gpu-7", {"cpu": "191450m", "memory": "1.5Gi", resource: value})
    expected = (
        f'items[1] (gpu-7).status.allocatable["{resource}"]: must be a whole number (got "{value}"): a device count; '
        "the API server refuses a fraction of an extended resource"
    )
    for raw in ([node("a"), bad], json.dumps([node("a"), bad])):
        assert errors_of(raw) == [expected]
    (n,) = parse_nodes([node("ok", {"cpu": "800m", "memory": "0.5Ki", "hugepages-2Mi": "1.5Mi", resource: "2"})])
    assert n.allocatable[resource] == 2 and n.allocatable["cpu"] == Fraction(4, 5)  # cpu, memory: fractions allowed
    unreadable, error = cluster_node(bad, 3)  # the recompute: that node counts as nothing, named; the others count
    assert unreadable.unreadable and unreadable.name == "gpu-7" and error is not None


@pytest.mark.parametrize(
    ("items", "expected"),
    [
        *[([node("g5-0", {"cpu": v})], f'items[0] (g5-0).status.allocatable["cpu"]: {m}') for v, m in BAD_QUANTITIES],
        (
            [node("a"), node("b"), node("c"), node("ip-10-0-1-5", {"memory": "1.2.3Gi"})],
            'items[3] (ip-10-0-1-5).status.allocatable["memory"]: invalid quantity "1.2.3Gi"',
        ),
        ([node("a"), {"metadata": {}}], "items[1].metadata.name: required field is missing"),
        ([{"metadata": {"name": ""}}], "items[0].metadata.name: must not be empty"),
        ([{"metadata": {"name": 42}}], "items[0].metadata.name: must be a string (got 42)"),
        ([{"spec": {}}], "items[0].metadata: required field is missing"),
        ([node("a"), "node-b"], 'items[1]: must be an object (got "node-b")'),
        (
            [{"metadata": {"name": "x", "labels": {INSTANCE_TYPE_LABEL: 5}}}],
            'items[0] (x).metadata.labels["node.kubernetes.io/instance-type"]: must be a string (got 5)',
        ),
        (
            [{"metadata": {"name": "x", "labels": {HEALTH_LABEL: None}}}],
            'items[0] (x).metadata.labels["sagemaker.amazonaws.com/node-health-status"]: must not be null (omit the field instead)',
        ),
        (
            [{"metadata": {"name": "x"}, "spec": {"unschedulable": "true"}}],
            'items[0] (x).spec.unschedulable: must be true or false (got "true")',
        ),
        (
            [{"metadata": {"name": "x"}, "spec": {"taints": [{"key": "k"}]}}],
            "items[0] (x).spec.taints[0].effect: required field is missing",
        ),
        (
            [{"metadata": {"name": "x"}, "status": {"conditions": {}}}],
            "items[0] (x).status.conditions: must be an array (got an object)",
        ),
        (
            [{"metadata": {"name": "x"}, "status": {"allocatable": []}}],
            "items[0] (x).status.allocatable: must be an object (got an array)",
        ),
        ([{"kind": "Pod", "metadata": {"name": "web-0"}}], 'items[0] (web-0).kind: must be Node (got "Pod")'),
        ([node("a"), node("b"), node("a")], "items[2] (a).metadata.name: duplicate node name (also items[0])"),
    ],
)
def test_each_bad_field_is_an_input_error_naming_the_item_and_field(items: list[Any], expected: str) -> None:
    for raw in (items, json.dumps(items), kubectl_list(*items)):
        assert errors_of(raw) == [expected]
    with pytest.raises(InputError) as caught:
        parse_nodes(items, "nodes.json")
    assert str(caught.value) == f"nodes.json: {expected}"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"items": [', "invalid JSON at line 1 column 12: unexpected end of input"),
        ('{"kind": "List",\n "items": [}', "invalid JSON at line 2 column 12: invalid character"),
        ("", "invalid JSON at line 1 column 1: unexpected end of input"),
        ('[{"metadata": {"name": "a"}},]', "invalid JSON at line 1 column 30: trailing comma in array"),
        ('[{"metadata": {"name": "a"}, "x": NaN}]', "invalid JSON at line 1 column 35: invalid character"),
        ("[" * 100_000, "invalid JSON: nested too deeply"),
        ('{"items": [' + "[" * 100_000, "invalid JSON: nested too deeply"),
        ('[{"metadata": {"name": "a"}, "x": ' + "[" * 5000 + "]" * 5000 + "}]", "invalid JSON: nested too deeply"),
    ],
    ids=["eof", "bad-char", "empty", "trailing-comma", "nan", "deep", "deep-items", "deep-unread"],
)
def test_invalid_json_says_where_never_a_traceback(text: str, expected: str) -> None:
    assert errors_of(text) == [expected] == errors_of(text.encode())


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"kind": "Node", "metadata": {"name": "a"}}', 'kind: must be one of List, NodeList (got "Node")'),
        ('{"kind": "List"}', "items: required field missing: expected a List or NodeList"),
        ('{"kind": "List", "items": {"a": 1}}', "items: must be an array (got an object)"),
        ("null", "expected a List or NodeList (`kubectl get nodes -o json`) or a JSON array of Node objects, got null"),
        ('"nodes"', "expected a List or NodeList (`kubectl get nodes -o json`) or a JSON array"),
        (42, "expected JSON text, an object or an array, got 42"),
    ],
)
def test_a_document_of_the_wrong_shape_says_what_was_expected(raw: Any, expected: str) -> None:
    (error,) = errors_of(raw)
    assert error.startswith(expected), error


def test_node_from_dict_errors_name_the_node() -> None:
    with pytest.raises(InputError, match=r'node \(z\)\.status\.allocatable\["memory"\]: invalid quantity "x"'):
        node_from_dict({"metadata": {"name": "z"}, "status": {"allocatable": {"memory": "x"}}})
    with pytest.raises(InputError, match=r"node\.metadata\.name: must be a string \(got 3\)"):
        node_from_dict({"metadata": {"name": 3}})


def test_a_refused_document_names_every_bad_field_not_only_the_first() -> None:
    # msgspec stops at the first problem; the refusal names every bad node, its problems in order
    items = [
        {"metadata": {"name": 5}, "spec": {"unschedulable": True}},  # a good field beside a bad one: not named
        {"metadata": {"name": "b"}, "spec": {"unschedulable": "yes", "taints": [{"key": "k"}]}},
        node("c", {"cpu": "x"}),
        {"metadata": {"name": "b"}},
    ]
    assert [e.split(": ")[0] for e in errors_of(json.dumps(items))] == [
        "items[0].metadata.name",
        "items[1] (b).spec.unschedulable",
        "items[1] (b).spec.taints[0].effect",
        'items[2] (c).status.allocatable["cpu"]',
        "items[3] (b).metadata.name",
    ]


def test_unknown_members_and_unread_values_are_ignored_and_an_empty_list_is_no_nodes() -> None:
    # a number JSON allows but no double holds, where nothing reads it, costs nothing
    raw = '[{"metadata": {"name": "a", "uid": 1e400}, "x": [1e400], "status": {"capacity": {"cpu": "bad"}}}]'
    assert [n.name for n in parse_nodes(raw)] == ["a"]
    assert parse_nodes(b'{"apiVersion":"v1","kind":"List","items":[]}') == () == parse_nodes(b"[]")  # no nodes


def test_every_bad_node_is_reported_up_to_a_cap() -> None:
    items = [node(f"n{i}", {"cpu": "bad"}) for i in range(MAX_ERRORS + 10)]
    errors = errors_of(items)
    assert len(errors) == MAX_ERRORS + 1
    assert errors[0].startswith("items[0] (n0).") and errors[-1] == "... and 10 more errors"


# ------------------------------------------------------------------------------------ fuzzing
@settings(max_examples=200, deadline=None)
@given(st.lists(mutations({"node": NODES[0], "other": NODES[-1]}), max_size=4))
def test_fuzz_every_item_msgspec_refuses_is_named_in_the_schema_words(items: list[Any]) -> None:
    # msgspec says only where it stopped, in its own words (`str`); the walk of the same Structs names each item
    refused = set()
    for index, item in enumerate(items):
        try:
            msgspec.convert(item, nodes_module._Node)
        except msgspec.ValidationError:
            refused.add(index)
    try:
        parse_nodes(items)
    except InputError as exc:
        # msgspec's words would show as `bool`; a backtick inside the value shown, "(got ...)", is the input's own
        assert not any("`" in re.sub(r" \(got .*\)$", "", e.message) for e in exc.errors), exc.errors
        named = {int(re.match(r"items\[(\d+)\]", e.loc)[1]) for e in exc.errors}
    else:
        named = set()
    assert refused <= named
