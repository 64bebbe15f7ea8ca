"""Node objects (kubectl / API JSON) -> domain Nodes: shapes, exact quantities, named errors."""

from __future__ import annotations

import copy
import json
import re
from fractions import Fraction
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from idleshare.domain.model import HEALTH_LABEL, INSTANCE_TYPE_LABEL, Node, Taint
from idleshare.parse import nodes as nodes_module
from idleshare.parse.errors import InputError
from idleshare.parse.nodes import BETA_INSTANCE_TYPE_LABEL, node_from_dict, parse_nodes

# A HyperPod p5 node as `kubectl get node hyperpod-i-0a1b2c3d4e5f60718 -o json` prints it (trimmed
# image list; everything else as a real node carries it).
REAL_NODE_JSON = r"""
{
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {
        "annotations": {
            "alpha.kubernetes.io/provided-node-ip": "10.1.113.5",
            "node.alpha.kubernetes.io/ttl": "0",
            "volumes.kubernetes.io/controller-managed-attach-detach": "true"
        },
        "creationTimestamp": "2025-03-11T08:14:52Z",
        "labels": {
            "beta.kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/instance-type": "ml.p5.48xlarge",
            "beta.kubernetes.io/os": "linux",
            "failure-domain.beta.kubernetes.io/region": "us-west-2",
            "failure-domain.beta.kubernetes.io/zone": "us-west-2c",
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/hostname": "hyperpod-i-0a1b2c3d4e5f60718",
            "kubernetes.io/os": "linux",
            "node.kubernetes.io/instance-type": "ml.p5.48xlarge",
            "nvidia.com/cuda.driver.major": "550",
            "nvidia.com/gpu.count": "8",
            "nvidia.com/gpu.memory": "81559",
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
            "nvidia.com/mig.capable": "true",
            "sagemaker.amazonaws.com/cluster-name": "ml-cluster",
            "sagemaker.amazonaws.com/compute-type": "hyperpod",
            "sagemaker.amazonaws.com/deep-health-check-status": "Passed",
            "sagemaker.amazonaws.com/instance-group-name": "p5-training",
            "sagemaker.amazonaws.com/node-health-status": "Schedulable",
            "topology.k8s.aws/network-node-layer-1": "nn-3d0f6b9e1c0a2f6a1",
            "topology.k8s.aws/zone-id": "usw2-az3",
            "topology.kubernetes.io/region": "us-west-2",
            "topology.kubernetes.io/zone": "us-west-2c"
        },
        "managedFields": [
            {
                "apiVersion": "v1",
                "fieldsType": "FieldsV1",
                "fieldsV1": {
                    "f:metadata": {
                        "f:annotations": {".": {}, "f:alpha.kubernetes.io/provided-node-ip": {}},
                        "f:labels": {".": {}, "f:node.kubernetes.io/instance-type": {}}
                    },
                    "f:spec": {"f:providerID": {}}
                },
                "manager": "kubelet",
                "operation": "Update",
                "time": "2025-03-11T08:14:52Z"
            },
            {
                "apiVersion": "v1",
                "fieldsType": "FieldsV1",
                "fieldsV1": {
                    "f:status": {
                        "f:allocatable": {"f:nvidia.com/gpu": {}, "f:vpc.amazonaws.com/efa": {}},
                        "f:conditions": {"k:{\"type\":\"Ready\"}": {"f:status": {}, "f:type": {}}},
                        "f:images": {}
                    }
                },
                "manager": "kubelet",
                "operation": "Update",
                "subresource": "status",
                "time": "2025-06-02T14:03:11Z"
            }
        ],
        "name": "hyperpod-i-0a1b2c3d4e5f60718",
        "resourceVersion": "187233541",
        "uid": "5e0c1f3a-6d7b-4a52-a0c4-9b3e2d1f7a88"
    },
    "spec": {
        "providerID": "aws:///usw2-az3/sagemaker/cluster/hyperpod-k1ft7ynfs0qz-i-0a1b2c3d4e5f60718",
        "taints": [
            {"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "true"},
            {"effect": "PreferNoSchedule", "key": "team", "value": "ml-research"}
        ]
    },
    "status": {
        "addresses": [
            {"address": "10.1.113.5", "type": "InternalIP"},
            {"address": "hyperpod-i-0a1b2c3d4e5f60718", "type": "Hostname"},
            {"address": "ip-10-1-113-5.us-west-2.compute.internal", "type": "InternalDNS"}
        ],
        "allocatable": {
            "cpu": "191450m",
            "ephemeral-storage": "483172477747",
            "hugepages-1Gi": "0",
            "hugepages-2Mi": "0",
            "memory": "2095551620Ki",
            "nvidia.com/gpu": "8",
            "pods": "100",
            "vpc.amazonaws.com/efa": "32"
        },
        "capacity": {
            "cpu": "192",
            "ephemeral-storage": "524275692Ki",
            "hugepages-1Gi": "0",
            "hugepages-2Mi": "0",
            "memory": "2097041540Ki",
            "nvidia.com/gpu": "8",
            "pods": "100",
            "vpc.amazonaws.com/efa": "32"
        },
        "conditions": [
            {"lastHeartbeatTime": "2025-06-02T14:03:11Z", "lastTransitionTime": "2025-03-11T08:14:52Z",
             "message": "kubelet has sufficient memory available", "reason": "KubeletHasSufficientMemory",
             "status": "False", "type": "MemoryPressure"},
            {"lastHeartbeatTime": "2025-06-02T14:03:11Z", "lastTransitionTime": "2025-03-11T08:14:52Z",
             "message": "kubelet has no disk pressure", "reason": "KubeletHasNoDiskPressure",
             "status": "False", "type": "DiskPressure"},
            {"lastHeartbeatTime": "2025-06-02T14:03:11Z", "lastTransitionTime": "2025-03-11T08:14:52Z",
             "message": "kubelet has sufficient PID available", "reason": "KubeletHasSufficientPID",
             "status": "False", "type": "PIDPressure"},
            {"lastHeartbeatTime": "2025-06-02T14:03:11Z", "lastTransitionTime": "2025-03-11T08:15:40Z",
             "message": "kubelet is posting ready status", "reason": "KubeletReady",
             "status": "True", "type": "Ready"}
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "images": [
            {"names": ["nvcr.io/nvidia/pytorch@sha256:4e1b4c5e0f3a7d6c2b9a8f1e0d3c5b7a9e2f4d6c8b0a1e3f5d7c9b2a4e6f8d0c",
                       "nvcr.io/nvidia/pytorch:24.12-py3"], "sizeBytes": 10413880321},
            {"names": ["602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/pause:3.5"], "sizeBytes": 298689}
        ],
        "nodeInfo": {
            "architecture": "amd64",
            "bootID": "0f6a3c2e-1b7d-4e9a-8c5f-2d4b6a8e0c1f",
            "containerRuntimeVersion": "containerd://1.7.25",
            "kernelVersion": "5.10.234-225.895.amzn2.x86_64",
            "kubeProxyVersion": "",
            "kubeletVersion": "v1.31.4-eks-aeac579",
            "machineID": "ec2a0b1c2d3e4f5a6b7c8d9e0f1a2b3c",
            "operatingSystem": "linux",
            "osImage": "Amazon Linux 2",
            "systemUUID": "ec2d4f1a-9b3c-7e2d-5a8f-1c6b0e4d2a9f"
        },
        "runtimeHandlers": [{"features": {"recursiveReadOnlyMounts": true, "userNamespaces": true}, "name": "nvidia"}]
    }
}
"""
REAL_NODE: dict[str, Any] = json.loads(REAL_NODE_JSON)

EXPECTED_REAL = Node(
    name="hyperpod-i-0a1b2c3d4e5f60718",
    instance_type="ml.p5.48xlarge",
    allocatable={
        "cpu": Fraction(191450, 1000),
        "ephemeral-storage": 483172477747,
        "hugepages-1Gi": 0,
        "hugepages-2Mi": 0,
        "memory": 2095551620 * 1024,
        "nvidia.com/gpu": 8,
        "pods": 100,
        "vpc.amazonaws.com/efa": 32,
    },
    ready=True,
    unschedulable=False,
    deleting=False,
    health_status="Schedulable",
    taints=(
        Taint("nvidia.com/gpu", "NoSchedule", "true"),
        Taint("team", "PreferNoSchedule", "ml-research"),
    ),
)


def node(name: str, allocatable: dict[str, Any] | None = None, **top: Any) -> dict[str, Any]:
    """A minimal Node object; ``top`` replaces top-level sections (metadata, spec, status)."""
    obj: dict[str, Any] = {
        "metadata": {"name": name, "labels": {INSTANCE_TYPE_LABEL: "ml.g5.12xlarge"}},
        "status": {
            "allocatable": allocatable if allocatable is not None else {"cpu": "47810m", "nvidia.com/gpu": "4"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    obj.update(top)
    return obj


def kubectl_list(*items: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": list(items)}


def errors_of(raw: Any, source: str = "nodes.json") -> list[str]:
    with pytest.raises(InputError) as caught:
        parse_nodes(raw, source)
    assert caught.value.source == source
    return [str(e) for e in caught.value.errors]


# ------------------------------------------------------------------------------------- shapes


def test_a_real_hyperpod_node_parses_into_exactly_what_the_engine_needs() -> None:
    # Given a full node object with managedFields, images, nodeInfo, ... / When parsed
    (parsed,) = parse_nodes(kubectl_list(REAL_NODE))
    # Then only the needed fields come out, quantities exact
    assert parsed == EXPECTED_REAL
    assert type(parsed.allocatable["cpu"]) is Fraction
    assert type(parsed.allocatable["memory"]) is int


@pytest.mark.parametrize(
    "document",
    [
        pytest.param(kubectl_list(REAL_NODE, node("b")), id="kubectl-List"),
        pytest.param(
            {
                "kind": "NodeList",
                "apiVersion": "v1",
                "metadata": {"resourceVersion": "187233541", "continue": "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ"},
                "items": [{k: v for k, v in REAL_NODE.items() if k not in ("kind", "apiVersion")}, node("b")],
            },
            id="API-NodeList",
        ),
        pytest.param([REAL_NODE, node("b")], id="bare-array"),
    ],
)
@pytest.mark.parametrize("encoding", ["bytes", "str", "decoded"])
def test_the_three_input_shapes_give_the_same_nodes(document: Any, encoding: str) -> None:
    text = json.dumps(document, indent=4)
    raw = {"bytes": text.encode(), "str": "\n  " + text, "decoded": document}[encoding]
    parsed = parse_nodes(raw)
    assert [n.name for n in parsed] == ["hyperpod-i-0a1b2c3d4e5f60718", "b"]
    assert parsed[0] == EXPECTED_REAL


def test_node_from_dict_reads_one_api_object() -> None:
    assert node_from_dict(copy.deepcopy(REAL_NODE)) == EXPECTED_REAL


def test_an_empty_list_is_no_nodes() -> None:
    assert parse_nodes(b'{"apiVersion":"v1","kind":"List","items":[]}') == ()
    assert parse_nodes(b"[]") == ()


def test_label_keys_are_the_domain_constants() -> None:
    # the parser spells the label keys out (typed access); they must stay the domain's ones
    import msgspec

    assert {f.encode_name for f in msgspec.structs.fields(nodes_module._Labels)} == {
        INSTANCE_TYPE_LABEL,
        BETA_INSTANCE_TYPE_LABEL,
        HEALTH_LABEL,
    }


# --------------------------------------------------------------------------------- the fields


def test_mig_neuron_memory_and_milli_cpu_are_exact() -> None:
    (mig,) = parse_nodes(
        [node("p4d", {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "7", "nvidia.com/mig-3g.20gb": "16"})]
    )
    assert mig.allocatable == {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.10gb": 7, "nvidia.com/mig-3g.20gb": 16}
    (trn,) = parse_nodes([node("trn1", {"aws.amazon.com/neurondevice": "16", "memory": "2097152Ki"})])
    assert trn.allocatable == {"aws.amazon.com/neurondevice": 16, "memory": 2 * 1024**3}
    (cpu,) = parse_nodes([node("c", {"cpu": "191450m", "memory": "1.5Gi", "x": "100k", "y": "0.5"})])
    assert cpu.allocatable["cpu"] == Fraction(191450, 1000)
    assert cpu.allocatable["memory"] == 3 * 2**29 and type(cpu.allocatable["memory"]) is int
    assert cpu.allocatable["x"] == 100_000
    assert cpu.allocatable["y"] == Fraction(1, 2)


def test_a_plain_json_integer_is_accepted_as_a_quantity() -> None:
    (n,) = parse_nodes('[{"metadata":{"name":"a"},"status":{"allocatable":{"nvidia.com/gpu":8}}}]')
    assert n.allocatable == {"nvidia.com/gpu": 8}


def test_the_beta_instance_type_label_is_the_fallback() -> None:
    meta = {"name": "old", "labels": {BETA_INSTANCE_TYPE_LABEL: "p3.16xlarge"}}
    (n,) = parse_nodes([node("old", metadata=meta)])
    assert n.instance_type == "p3.16xlarge"
    both = {"name": "new", "labels": {BETA_INSTANCE_TYPE_LABEL: "old-name", INSTANCE_TYPE_LABEL: "ml.p5.48xlarge"}}
    assert parse_nodes([node("new", metadata=both)])[0].instance_type == "ml.p5.48xlarge"


def test_no_labels_means_no_instance_type_and_no_health_status() -> None:
    (n,) = parse_nodes([node("bare", metadata={"name": "bare"})])
    assert n.instance_type is None and n.health_status is None


@pytest.mark.parametrize(
    ("conditions", "ready"),
    [
        ([{"type": "Ready", "status": "True"}], True),
        ([{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "False"}], False),
        ([{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown"}], False),
        ([{"type": "DiskPressure", "status": "True"}], False),  # no Ready condition: not ready
        ([], False),
    ],
)
def test_ready_is_the_ready_condition_being_true(conditions: list[dict[str, str]], ready: bool) -> None:
    (n,) = parse_nodes([node("n", status={"allocatable": {}, "conditions": conditions})])
    assert n.ready is ready


def test_cordon_deletion_health_and_taints_are_read() -> None:
    obj = node(
        "n",
        metadata={
            "name": "n",
            "deletionTimestamp": "2025-06-02T14:03:11Z",
            "labels": {HEALTH_LABEL: "UnschedulablePendingReplacement"},
        },
        spec={
            "unschedulable": True,
            "taints": [
                {
                    "key": "node.kubernetes.io/unschedulable",
                    "effect": "NoSchedule",
                    "timeAdded": "2025-06-02T14:03:11Z",
                },
                {"key": "dedicated", "effect": "NoExecute", "value": "inference"},
            ],
        },
    )
    (n,) = parse_nodes([obj])
    assert (n.unschedulable, n.deleting, n.health_status) == (True, True, "UnschedulablePendingReplacement")
    assert n.taints == (
        Taint("node.kubernetes.io/unschedulable", "NoSchedule", None),
        Taint("dedicated", "NoExecute", "inference"),
    )
    (plain,) = parse_nodes([node("p")])
    assert (plain.unschedulable, plain.deleting, plain.taints) == (False, False, ())


def test_the_example_cluster_parses_with_its_special_nodes() -> None:
    from pathlib import Path

    raw = (Path(__file__).resolve().parents[2] / "events" / "examples" / "nodes.json").read_bytes()
    parsed = parse_nodes(raw, "nodes.json")
    assert len(parsed) == 36
    assert sum(not n.ready for n in parsed) == 1
    assert sum(n.unschedulable for n in parsed) == 1
    assert [n.health_status for n in parsed if n.health_status != "Schedulable"] == ["UnschedulablePendingReplacement"]
    mig = [n for n in parsed if "nvidia.com/mig-1g.5gb" in n.allocatable]
    assert len(mig) == 5 and all(n.allocatable["nvidia.com/gpu"] == 0 for n in mig)


# ------------------------------------------------------------------------------------- errors


def test_a_garbage_quantity_names_the_node_and_the_field() -> None:
    doc = kubectl_list(node("a"), node("b"), node("c"), node("ip-10-0-1-5", {"memory": "1.2.3Gi"}))
    assert errors_of(json.dumps(doc)) == [
        'items[3] (ip-10-0-1-5).status.allocatable["memory"]: invalid quantity "1.2.3Gi"'
    ]
    with pytest.raises(InputError, match=r'^nodes.json: items\[3\] \(ip-10-0-1-5\)\.status\.allocatable\["memory"\]'):
        parse_nodes(doc, "nodes.json")


@pytest.mark.parametrize(
    ("value", "message"),
    [
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
    ],
)
def test_each_bad_quantity_is_an_input_error_naming_it(value: Any, message: str) -> None:
    expected = [f'items[0] (g5-0).status.allocatable["cpu"]: {message}']
    assert errors_of([node("g5-0", {"cpu": value})]) == expected
    assert errors_of(json.dumps([node("g5-0", {"cpu": value})])) == expected


@pytest.mark.parametrize(
    ("items", "expected"),
    [
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
            'items[0] (x).metadata.labels["sagemaker.amazonaws.com/node-health-status"]: must not be null',
        ),
        (
            [{"metadata": {"name": "x"}, "spec": {"unschedulable": "true"}}],
            'items[0] (x).spec.unschedulable: must be true or false (got "true")',
        ),
        ([{"metadata": {"name": "x"}, "spec": {"taints": [{"key": "k"}]}}], "items[0] (x).spec.taints[0].effect"),
        (
            [{"metadata": {"name": "x"}, "status": {"conditions": {}}}],
            "items[0] (x).status.conditions: must be an array (got an object)",
        ),
        (
            [{"metadata": {"name": "x"}, "status": {"allocatable": []}}],
            "items[0] (x).status.allocatable: must be an object (got an array)",
        ),
        ([{"kind": "Pod", "metadata": {"name": "web-0"}}], 'items[0] (web-0).kind: must be Node (got "Pod")'),
    ],
)
def test_wrong_types_and_missing_fields_name_the_item_and_field(items: list[Any], expected: str) -> None:
    for raw in (items, json.dumps(items), kubectl_list(*items)):
        (error,) = errors_of(raw)
        assert error.startswith(expected), error


def test_duplicate_node_names_are_an_error() -> None:
    assert errors_of([node("a"), node("b"), node("a")]) == [
        "items[2] (a).metadata.name: duplicate node name (also items[0])"
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"items": [', "invalid JSON at line 1 column 12: unexpected end of input"),
        ('{"kind": "List",\n "items": [}', "invalid JSON at line 2 column 12: invalid character"),
        ("", "invalid JSON at line 1 column 1: unexpected end of input"),
        ('[{"metadata": {"name": "a"}},]', "invalid JSON at line 1 column 30: trailing comma in array"),
        ('[{"metadata": {"name": "a"}, "x": NaN}]', "invalid JSON at line 1 column 35: invalid character"),
    ],
)
def test_invalid_json_says_where(text: str, expected: str) -> None:
    assert errors_of(text) == [expected]
    assert errors_of(text.encode()) == [expected]


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100_000,
        '{"items": [' + "[" * 100_000,
        '[{"metadata": {"name": "a"}, "x": ' + "[" * 5000 + "]" * 5000 + "}]",  # where nothing reads, too
    ],
)
def test_json_nested_too_deeply_is_an_input_error_not_a_traceback(text: str) -> None:
    assert errors_of(text) == ["invalid JSON: nested too deeply"]


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
        {"metadata": {"name": 5}},
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


def test_unknown_members_and_unread_values_are_ignored() -> None:
    # a number JSON allows but no double holds, where nothing reads it, costs nothing
    raw = '[{"metadata": {"name": "a", "uid": 1e400}, "x": [1e400], "status": {"capacity": {"cpu": "bad"}}}]'
    assert [n.name for n in parse_nodes(raw)] == ["a"]


def test_every_bad_node_is_reported_up_to_a_cap() -> None:
    items = [node(f"n{i}", {"cpu": "bad"}) for i in range(nodes_module.MAX_ERRORS + 10)]
    errors = errors_of(items)
    assert len(errors) == nodes_module.MAX_ERRORS + 1
    assert errors[0].startswith("items[0] (n0).") and errors[-1] == "... and 10 more errors"


# ------------------------------------------------------------------------------------ fuzzing

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=25,
)
# node-like documents get much deeper into the parser than arbitrary JSON
quantity_like = st.one_of(
    st.from_regex(r"[+-]?[0-9.]{0,6}(e[0-9]{1,3})?(m|k|Ki|Mi|Gi|M|G|u|x)?", fullmatch=True), json_values
)
node_like = st.fixed_dictionaries(
    {"metadata": st.fixed_dictionaries({"name": st.one_of(st.text(min_size=0, max_size=6), json_values)})},
    optional={
        "kind": st.sampled_from(["Node", "Pod", None]),
        "spec": st.fixed_dictionaries(
            {},
            optional={
                "unschedulable": st.one_of(st.booleans(), json_values),
                "taints": st.lists(
                    st.fixed_dictionaries({"key": st.text(max_size=5), "effect": st.sampled_from(["NoSchedule", 3])})
                ),
            },
        ),
        "status": st.fixed_dictionaries(
            {},
            optional={
                "allocatable": st.dictionaries(st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), quantity_like),
                "conditions": st.lists(
                    st.fixed_dictionaries(
                        {"type": st.sampled_from(["Ready", "X"]), "status": st.sampled_from(["True", "False"])}
                    )
                ),
            },
        ),
    },
)
documents = st.one_of(
    json_values,
    st.lists(node_like, max_size=4),
    st.builds(lambda items: {"kind": "List", "items": items}, st.lists(node_like, max_size=4)),
)


def _only_input_errors(raw: Any) -> None:
    try:
        result = parse_nodes(raw)
    except InputError as exc:
        assert exc.errors and all(isinstance(e.loc, str) and e.message for e in exc.errors)
    else:
        assert isinstance(result, tuple) and all(isinstance(n, Node) for n in result)


@settings(max_examples=150, deadline=None)
@given(documents)
def test_fuzz_any_json_value_gives_nodes_or_an_input_error(document: Any) -> None:
    _only_input_errors(document)
    _only_input_errors(json.dumps(document))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64) | st.text(max_size=64))
def test_fuzz_any_text_gives_nodes_or_an_input_error(raw: bytes | str) -> None:
    _only_input_errors(raw)


@settings(max_examples=200, deadline=None)
@given(st.lists(node_like, max_size=4))
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
