"""Generate the bad-input corpus: every file here is input idleshare must refuse, naming the field.

    uv run python tests/corpus/make_corpus.py          # rewrite the corpus
    uv run python tests/corpus/make_corpus.py --check  # exit 1 if the checked-in corpus is stale

Four kinds, one directory each, and ``expected.json`` indexing them all (path from the repo root ->
``{"kind": ..., "field": ...}``): the error must name a field whose path contains ``field``
(``""``: the document as a whole).

- ``quotas/``: one quota (a JSON array of one, the ``idleshare plan --quotas`` shape) breaking one
  constraint of botocore's ``CreateComputeQuota`` shapes. The cases are derived from botocore's
  SageMaker service model (every required member, numeric min/max, enum, pattern, length, list
  size and structure of the members idleshare reads), so a botocore upgrade that changes a bound
  regenerates a different corpus and the up-to-date test fails until this script is rerun.
- ``scheduler/``: the same for ``CreateClusterSchedulerConfig``'s ``SchedulerConfig``.
- ``nodes/``: NodeLists with garbage quantities or missing / mistyped fields (hand-picked).
- ``events/``: the inbound examples of ``events/inbound`` with one field broken; the malformed
  examples of ``events/malformed`` are indexed too (they are not copied).

Only botocore and the standard library are used: the corpus does not depend on idleshare's code.
"""

from __future__ import annotations

import copy
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import botocore.session

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
INBOUND = ROOT / "events" / "inbound"
MALFORMED = ROOT / "events" / "malformed"
DELETE = object()  # a mutation that removes the member

MODEL = botocore.session.get_session().get_service_model("sagemaker")
INSTANCE_TYPES: list[str] = list(MODEL.shape_for("ClusterInstanceType").enum)
MIG_PROFILES: list[str] = list(MODEL.shape_for("MIGProfileType").enum)

# The request members idleshare reads; ClusterArn, Description and Tags are accepted and ignored.
QUOTA_MEMBERS = ("Name", "ComputeQuotaConfig", "ComputeQuotaTarget", "ActivationState")
SCHEDULER_MEMBERS = ("SchedulerConfig",)


def _resource(instance_type: str) -> dict[str, Any]:
    return {
        "InstanceType": instance_type,
        "Count": 1,
        "Accelerators": 1,
        "VCpu": 1,
        "MemoryInGiB": 1,
        "AcceleratorPartition": {"Type": MIG_PROFILES[0], "Count": 1},
    }


# Valid documents holding every structure the walk reaches, so any member can be broken in place.
QUOTA_BASE: dict[str, Any] = {
    "Name": "team-a-quota",
    "ComputeQuotaConfig": {
        "ComputeQuotaResources": [_resource("ml.p5.48xlarge")],
        "ResourceSharingConfig": {
            "Strategy": "LendAndBorrow",
            "BorrowLimit": 50,
            "AbsoluteBorrowLimits": [_resource("ml.p5.48xlarge")],
        },
        "PreemptTeamTasks": "Never",
    },
    "ComputeQuotaTarget": {"TeamName": "team-a", "FairShareWeight": 1},
    "ActivationState": "Enabled",
}
SCHEDULER_BASE: dict[str, Any] = {
    "SchedulerConfig": {
        "PriorityClasses": [{"Name": "inference", "Weight": 90}],
        "FairShare": "Enabled",
        "IdleResourceSharing": "Enabled",
    }
}
LIST_ITEMS = {
    "ComputeQuotaResourceConfig": lambda i: {"InstanceType": INSTANCE_TYPES[i], "Count": 1},
    "PriorityClass": lambda i: {"Name": f"class-{i}", "Weight": 1},
}
# A file is the Create request or the Describe response: top-level members required by both.
TOP_REQUIRED = {
    "CreateComputeQuotaRequest": set(MODEL.shape_for("CreateComputeQuotaRequest").required_members)
    & set(MODEL.shape_for("DescribeComputeQuotaResponse").required_members),
    "CreateClusterSchedulerConfigRequest": set(),  # an absent SchedulerConfig means the defaults
}

Path_ = tuple[str | int, ...]


def loc(path: Path_) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


def slug(path: Path_) -> str:
    return "-".join(str(p) for p in path if not isinstance(p, int)) or "document"


def get_at(doc: Any, path: Path_) -> Any:
    for part in path:
        doc = doc[part]
    return doc


def mutate(doc: Any, path: Path_, value: Any) -> Any:
    """A copy of ``doc`` with the member at ``path`` set to ``value`` (removed for ``DELETE``); ``value`` itself
    for the document as a whole (``()``), None when that is removed."""
    if not path:
        return None if value is DELETE else value
    out = copy.deepcopy(doc)
    target = get_at(out, path[:-1])
    if value is DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return out


class Member(NamedTuple):
    """A member of a botocore shape the walk reaches."""

    path: Path_
    shape: Any  # botocore Shape
    parent: Any  # the structure shape holding it (None for a list item)


def walk(root: str, members: tuple[str, ...]) -> Iterator[Member]:
    """Every member below ``members`` of the botocore shape ``root``, depth first (a list's item as index 0)."""
    top = MODEL.shape_for(root)

    def visit(path: Path_, shape: Any, parent: Any) -> Iterator[Member]:
        yield Member(path, shape, parent)
        if shape.type_name == "structure":
            for name, member in shape.members.items():
                yield from visit((*path, name), member, shape)
        elif shape.type_name == "list":
            yield from visit((*path, 0), shape.member, None)

    for name in members:
        yield from visit((name,), top.members[name], top)


def required_members(shape: Any) -> set[str]:
    return TOP_REQUIRED.get(shape.name, set(shape.required_members))


def _violations(path: Path_, shape: Any, parent: Any, base: dict[str, Any]) -> Iterator[tuple[str, Any, Path_]]:
    """(why, value or DELETE, where the error is reported) for every constraint of one member."""
    md = shape.metadata
    if parent is not None and path[-1] in required_members(parent):
        yield "required-missing", DELETE, path
    kind = shape.type_name
    if kind in ("integer", "long", "float", "double"):
        step: Any = 1 if kind in ("integer", "long") else 0.5
        if "min" in md:
            yield "below-min", md["min"] - step, path
        if "max" in md:
            yield "above-max", md["max"] + step, path
        yield "string-not-number", "1", path
        yield "bool-not-number", True, path
        yield "array-not-number", [1], path
        if step == 1:
            yield "fraction-not-integer", 1.5, path
    elif kind == "string":
        enum = md.get("enum")
        if enum:
            yield "not-in-enum", "NotAMember", path
            yield "enum-wrong-case", enum[0].swapcase(), path
        if "pattern" in md:
            for i, value in enumerate(
                c for c in ("-a", "a-", "A_b", "a b", "ä", "a\n") if not re.fullmatch(md["pattern"], c)
            ):
                yield f"pattern-mismatch-{i}", value, path
        if md.get("min", 0) > 0:
            yield "too-short", "a" * (md["min"] - 1), path
        if "max" in md:
            yield "too-long", "a" * (md["max"] + 1), path
        yield "number-not-string", 7, path
    elif kind == "list":
        item = LIST_ITEMS[shape.member.name]
        if "max" in md:
            yield "too-many-items", [item(i) for i in range(md["max"] + 1)], path
        yield "object-not-list", {"not": "a list"}, path
    elif kind == "structure":
        yield "string-not-object", "x", path
        yield "unknown-member", {**get_at(base, path), "Bogus": 1}, (*path, "Bogus")


def botocore_cases(kind: str) -> dict[str, tuple[Any, str]]:
    """file name -> (document, expected field path) for ``quotas`` or ``scheduler``."""
    if kind == "quotas":
        root, members, base = "CreateComputeQuotaRequest", QUOTA_MEMBERS, QUOTA_BASE
    else:
        root, members, base = "CreateClusterSchedulerConfigRequest", SCHEDULER_MEMBERS, SCHEDULER_BASE
    out: dict[str, tuple[Any, str]] = {}
    for path, shape, parent in walk(root, members):
        for why, value, at in _violations(path, shape, parent, base):
            name = f"{slug(path)}--{why}.json"
            assert name not in out, name
            doc = mutate(base, path, value)
            if kind == "quotas":
                out[name] = ([doc], loc((0, *at)))
            else:
                out[name] = (doc, loc(at))
    return out


# ------------------------------------------------------------------------------------------ nodes
def _node(name: str, **status: Any) -> dict[str, Any]:
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"node.kubernetes.io/instance-type": "ml.p5.48xlarge"}},
        "spec": {},
        "status": {
            "allocatable": {"cpu": "191450m", "memory": "2027264Mi", "nvidia.com/gpu": "8", "pods": "737"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    node["status"].update(status)
    return node


def _node_list(bad: dict[str, Any]) -> dict[str, Any]:
    """A NodeList of a good node and ``bad`` (second, so the path names items[1])."""
    return {"apiVersion": "v1", "kind": "List", "items": [_node("good-0"), bad]}


def _gpu(value: Any) -> dict[str, Any]:
    node = _node("bad-1")
    node["status"]["allocatable"]["nvidia.com/gpu"] = value
    return node


def _with(path: Path_, value: Any) -> dict[str, Any]:
    return mutate(_node("bad-1"), path, value)


GPU_FIELD = 'items[1] (bad-1).status.allocatable["nvidia.com/gpu"]'
NODE_CASES: dict[str, tuple[Any, str]] = {
    # garbage quantities (each as the GPU count of the second node)
    "quantity-word.json": (_node_list(_gpu("eight")), GPU_FIELD),
    "quantity-two-dots.json": (_node_list(_gpu("1.2.3Gi")), GPU_FIELD),
    "quantity-negative-string.json": (_node_list(_gpu("-1")), GPU_FIELD),
    "quantity-negative-integer.json": (_node_list(_gpu(-8)), GPU_FIELD),
    "quantity-nan-string.json": (_node_list(_gpu("NaN")), GPU_FIELD),
    "quantity-infinity-string.json": (_node_list(_gpu("Infinity")), GPU_FIELD),
    "quantity-1e400-string.json": (_node_list(_gpu("1e400")), GPU_FIELD),
    "quantity-10e30-integer.json": (_node_list(_gpu(10**30)), GPU_FIELD),
    "quantity-10e30-string.json": (_node_list(_gpu("1" + "0" * 30)), GPU_FIELD),
    "quantity-huge-exbi.json": (_node_list(_gpu("9000Ei")), GPU_FIELD),
    "quantity-fullwidth-digits.json": (_node_list(_gpu("\uff18")), GPU_FIELD),
    "quantity-arabic-indic-digits.json": (_node_list(_gpu("\u0668")), GPU_FIELD),
    "quantity-empty-string.json": (_node_list(_gpu("")), GPU_FIELD),
    "quantity-padded.json": (_node_list(_gpu(" 8 ")), GPU_FIELD),
    "quantity-hex.json": (_node_list(_gpu("0x8")), GPU_FIELD),
    "quantity-float.json": (_node_list(_gpu(8.5)), GPU_FIELD),
    "quantity-bool.json": (_node_list(_gpu(True)), GPU_FIELD),
    "quantity-null.json": (_node_list(_gpu(None)), GPU_FIELD),
    "quantity-object.json": (_node_list(_gpu({"value": 8})), GPU_FIELD),
    "quantity-array.json": (_node_list(_gpu([8])), GPU_FIELD),
    "quantity-bad-suffix.json": (_node_list(_gpu("8Gb")), GPU_FIELD),
    # status.allocatable junk
    "allocatable-string.json": (_node_list(_node("bad-1", allocatable="junk")), "items[1] (bad-1).status.allocatable"),
    "allocatable-array.json": (_node_list(_node("bad-1", allocatable=["8"])), "items[1] (bad-1).status.allocatable"),
    "allocatable-number.json": (_node_list(_node("bad-1", allocatable=8)), "items[1] (bad-1).status.allocatable"),
    "status-string.json": (_node_list(_with(("status",), "Ready")), "items[1] (bad-1).status"),
    # labels not strings
    "label-instance-type-number.json": (
        _node_list(_with(("metadata", "labels", "node.kubernetes.io/instance-type"), 5)),
        'items[1] (bad-1).metadata.labels["node.kubernetes.io/instance-type"]',
    ),
    "label-health-status-object.json": (
        _node_list(_with(("metadata", "labels", "sagemaker.amazonaws.com/node-health-status"), {"ok": True})),
        'items[1] (bad-1).metadata.labels["sagemaker.amazonaws.com/node-health-status"]',
    ),
    "labels-array.json": (_node_list(_with(("metadata", "labels"), ["a=b"])), "items[1] (bad-1).metadata.labels"),
    # conditions / taints / spec missing fields or mistyped
    "condition-missing-status.json": (
        _node_list(_node("bad-1", conditions=[{"type": "Ready"}])),
        "items[1] (bad-1).status.conditions[0].status",
    ),
    "condition-missing-type.json": (
        _node_list(_node("bad-1", conditions=[{"status": "True"}])),
        "items[1] (bad-1).status.conditions[0].type",
    ),
    "condition-status-bool.json": (
        _node_list(_node("bad-1", conditions=[{"type": "Ready", "status": True}])),
        "items[1] (bad-1).status.conditions[0].status",
    ),
    "conditions-object.json": (
        _node_list(_node("bad-1", conditions={"Ready": "True"})),
        "items[1] (bad-1).status.conditions",
    ),
    "taint-missing-effect.json": (
        _node_list(_with(("spec", "taints"), [{"key": "nvidia.com/gpu"}])),
        "items[1] (bad-1).spec.taints[0].effect",
    ),
    "unschedulable-string.json": (
        _node_list(_with(("spec", "unschedulable"), "true")),
        "items[1] (bad-1).spec.unschedulable",
    ),
    # identity
    "metadata-missing.json": (_node_list(_with(("metadata",), DELETE)), "items[1].metadata"),
    "name-missing.json": (_node_list(_with(("metadata", "name"), DELETE)), "items[1].metadata.name"),
    "name-empty.json": (_node_list(_with(("metadata", "name"), "")), "items[1].metadata.name"),
    "name-number.json": (_node_list(_with(("metadata", "name"), 42)), "items[1].metadata.name"),
    "duplicate-name.json": (_node_list(_node("good-0")), "items[1] (good-0).metadata.name"),
    # (a Pod, a DaemonSet or a Workload among the nodes is headroom input: `kubectl get nodes,daemonsets,pods,workloads -A -o json`)
    "item-kind-service.json": (_node_list(_with(("kind",), "Service")), "items[1] (bad-1).kind"),
    # the document
    "items-missing.json": ({"apiVersion": "v1", "kind": "List"}, "items"),
    "items-object.json": ({"apiVersion": "v1", "kind": "List", "items": {"a": 1}}, "items"),
    "kind-pod-list.json": ({"apiVersion": "v1", "kind": "PodList", "items": []}, "kind"),
    "document-string.json": ("nodes", ""),
    "document-number.json": (7, ""),
    "document-null.json": (None, ""),
}


# ----------------------------------------------------------------------------------------- events
def _inbound(name: str) -> dict[str, Any]:
    return json.loads((INBOUND / f"{name}.json").read_text())


# (inbound example, path, value or DELETE, expected field): only members the event parser checks
# (idleshare.parse.events says which); the envelope's id, time, account, resources and unread detail
# members such as ClusterStatus or reason are not checked.
EVENT_MUTATIONS: list[tuple[str, Path_, Any, str]] = [
    ("hyperpod-node-health-event", ("detail", "ClusterArn"), "", "detail.ClusterArn"),
    ("hyperpod-node-health-event", ("detail", "ClusterArn"), 42, "detail.ClusterArn"),
    ("hyperpod-node-health-event", ("detail", "InstanceId"), DELETE, "detail.InstanceId"),
    ("hyperpod-node-health-event", ("detail", "HealthSummary"), "Unhealthy", "detail.HealthSummary"),
    (
        "hyperpod-node-health-event",
        ("detail", "HealthSummary", "HealthStatus"),
        DELETE,
        "detail.HealthSummary.HealthStatus",
    ),
    (
        "hyperpod-node-health-event",
        ("detail", "HealthSummary", "RepairAction"),
        5,
        "detail.HealthSummary.RepairAction",
    ),
    ("hyperpod-node-health-event", ("detail",), [], "detail"),
    ("hyperpod-node-health-event", ("detail",), None, "detail"),
    ("hyperpod-node-health-event", ("detail",), DELETE, "detail"),
    ("hyperpod-node-health-event", ("source",), "aws.ec2", "source"),
    ("hyperpod-node-health-event", ("source",), DELETE, "source"),
    ("hyperpod-node-health-event", ("detail-type",), 5, "detail-type"),
    ("hyperpod-node-health-event", ("detail-type",), DELETE, "detail-type"),
    ("hyperpod-node-health-event", ("detail-type",), "sagemaker hyperpod cluster node health event", "detail-type"),
    ("hyperpod-cluster-state-change", ("detail", "Orchestrator"), "eks", "detail.Orchestrator"),
    (
        "hyperpod-cluster-state-change",
        ("detail", "Orchestrator", "Eks", "ClusterArn"),
        7,
        "detail.Orchestrator.Eks.ClusterArn",
    ),
    ("hyperpod-cluster-event", ("detail", "EventDetails"), DELETE, "detail.EventDetails"),
    ("hyperpod-cluster-event", ("detail", "EventDetails", "ClusterArn"), "", "detail.EventDetails.ClusterArn"),
    ("idleshare-recalculation-requested", ("detail", "cluster"), "Bad_Cluster", "detail.cluster"),
    ("idleshare-recalculation-requested", ("detail", "cluster"), "x" * 64, "detail.cluster"),
    ("idleshare-recalculation-requested", ("detail", "cluster"), ["demo"], "detail.cluster"),
    ("idleshare-recalculation-requested", ("detail", "requestId"), "x" * 129, "detail.requestId"),
    ("idleshare-recalculation-requested", ("source",), "aws.sagemaker", "source"),
    ("idleshare-recalculation-requested-by-eks-name", ("detail", "eksClusterName"), "", "detail.eksClusterName"),
    (
        "idleshare-recalculation-requested-by-eks-name",
        ("detail", "eksClusterName"),
        "x" * 101,
        "detail.eksClusterName",
    ),
    ("idleshare-node-changed", ("detail", "node"), "n" * 254, "detail.node"),
    ("idleshare-node-changed", ("detail", "change"), {"ready": False}, "detail.change"),
    ("idleshare-compute-quota-changed", ("detail", "quotaName"), "q" * 64, "detail.quotaName"),
    ("idleshare-scheduler-config-changed", ("detail",), "demo", "detail"),
    ("schedule-safety-net", ("detail", "clusters"), "some", "detail.clusters"),
    ("schedule-safety-net", ("detail", "clusters"), ["Bad!"], "detail.clusters"),
    ("schedule-safety-net", ("detail", "clusters"), [5], "detail.clusters"),
    ("schedule-safety-net", ("source",), "aws.events", "source"),
]
EVENT_DOCUMENTS: dict[str, tuple[Any, str]] = {
    "document-array.json": ([_inbound("schedule-safety-net")], ""),
    "document-string.json": ("Scheduled Recompute", ""),
    "document-null.json": (None, ""),
    "document-empty-object.json": ({}, "detail-type"),
}
# events/malformed/ (hand-written, checked in elsewhere): the field each must name.
MALFORMED_FIELDS = {
    "cloudtrail-create-compute-quota.json": "detail-type",  # no rule delivers CloudTrail calls: an unknown event
    "node-health-missing-cluster-arn.json": "detail.ClusterArn",
    "node-health-wrong-type.json": "detail.ClusterArn",
    "not-an-object.json": "",
    "own-event-bad-cluster-id.json": "detail.cluster",
    "own-event-wrong-source.json": "source",
    "schedule-bad-clusters.json": "detail.clusters",
    "unknown-detail-type.json": "detail-type",
}


def event_cases() -> dict[str, tuple[Any, str]]:
    out = dict(EVENT_DOCUMENTS)
    counts: dict[str, int] = {}
    for example, path, value, field in EVENT_MUTATIONS:
        stem = f"{example}--{slug(path)}"
        counts[stem] = counts.get(stem, 0) + 1
        out[f"{stem}-{counts[stem]}.json"] = (mutate(_inbound(example), path, value), field)
    return out


# ---------------------------------------------------------------------------------------- output
def _dump(doc: Any) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def build() -> dict[str, str]:
    """Every corpus file (path relative to this directory) -> its exact text."""
    files: dict[str, str] = {}
    index: dict[str, dict[str, str]] = {}
    groups = {
        "quotas": botocore_cases("quotas"),
        "scheduler": botocore_cases("scheduler"),
        "nodes": NODE_CASES,
        "events": event_cases(),
    }
    rel = HERE.relative_to(ROOT).as_posix()
    for kind, cases in groups.items():
        for name, (doc, field) in sorted(cases.items()):
            files[f"{kind}/{name}"] = _dump(doc)
            index[f"{rel}/{kind}/{name}"] = {"kind": kind, "field": field}
    for name, field in sorted(MALFORMED_FIELDS.items()):
        index[f"events/malformed/{name}"] = {"kind": "events", "field": field}
    files["expected.json"] = _dump(dict(sorted(index.items())))
    return files


def on_disk() -> dict[str, str]:
    """The checked-in corpus (the files this script owns: the four directories and the index)."""
    found = {"expected.json": (HERE / "expected.json").read_text()} if (HERE / "expected.json").exists() else {}
    for kind in ("quotas", "scheduler", "nodes", "events"):
        for path in sorted((HERE / kind).glob("*.json")):
            found[f"{kind}/{path.name}"] = path.read_text(encoding="utf-8")
    return found


def main(argv: list[str]) -> int:
    wanted = build()
    if "--check" in argv:
        stale = sorted(set(wanted.items()) ^ set(on_disk().items()))
        for name in sorted({n for n, _ in stale}):
            print(f"stale: tests/corpus/{name}", file=sys.stderr)
        return 1 if stale else 0
    for name in set(on_disk()) - set(wanted):
        (HERE / name).unlink()
    for name, text in wanted.items():
        (HERE / name).parent.mkdir(parents=True, exist_ok=True)
        (HERE / name).write_text(text, encoding="utf-8")
    print(f"wrote {len(wanted)} files under tests/corpus/")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
