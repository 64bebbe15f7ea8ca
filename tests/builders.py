"""Given-builders: domain nodes and quotas in a line each, the quota documents (JSON) the API, the store
and the CLI take (:func:`quota_body`), and the event API Gateway hands the admin API (:func:`proxy_event`)."""

from __future__ import annotations

import enum
import json
from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import Any

from idleshare.domain.cluster_settings import ClusterSettings, setting_type
from idleshare.domain.kueue import desired_objects
from idleshare.domain.model import (
    GIB,
    AcceleratorPartition,
    Node,
    PriorityClass,
    Quota,
    ResourceConfig,
    SchedulerConfig,
    Settings,
    Snapshot,
    Strategy,
    Taint,
)
from idleshare.domain.pool import PoolResult, compute

P5 = "ml.p5.48xlarge"
P4D = "ml.p4d.24xlarge"
TRN1 = "ml.trn1.32xlarge"
G5 = "ml.g5.12xlarge"

P5_ALLOC = {"cpu": Fraction(191450, 1000), "memory": 1900 * GIB, "nvidia.com/gpu": 8, "vpc.amazonaws.com/efa": 32}
P4D_MIG_ALLOC = {
    "cpu": Fraction(95690, 1000),
    "memory": 1100 * GIB,
    "nvidia.com/gpu": 0,
    "nvidia.com/mig-1g.5gb": 56,
    "vpc.amazonaws.com/efa": 4,
}

MIG3 = "mig-3g.40gb"
MIG1 = "mig-1g.10gb"
MIG2 = "mig-2g.20gb"
R3, R1, R2 = (f"nvidia.com/{p}" for p in (MIG3, MIG1, MIG2))
# Three MIG layouts of one p5.48xlarge (8 x H100 80GB): as HyperPod's MIG manager leaves them.
WHOLE = dict(P5_ALLOC)
ALL_3G = {**P5_ALLOC, "nvidia.com/gpu": 0, R3: 16}  # 2 x 3g.40gb per GPU
BALANCED = {**P5_ALLOC, "nvidia.com/gpu": 4, R3: 4, R1: 14}  # 4 whole GPUs, 2 GPUs as 2 x 3g, 2 GPUs as 7 x 1g
LAYOUTS = {"whole": WHOLE, "all-3g": ALL_3G, "balanced": BALANCED}
TRN1_ALLOC = {"cpu": Fraction(127500, 1000), "memory": 480 * GIB, "aws.amazon.com/neurondevice": 16}
G5_ALLOC = {"cpu": Fraction(47810, 1000), "memory": 180 * GIB, "nvidia.com/gpu": 4}
ALLOC = {P5: P5_ALLOC, P4D: P4D_MIG_ALLOC, TRN1: TRN1_ALLOC, G5: G5_ALLOC}


def node(name: str, flavor: str | None = P5, **overrides: object) -> Node:
    """An eligible node of ``flavor`` with that flavor's usual allocatable; override any field."""
    alloc = dict(ALLOC.get(flavor or "", P5_ALLOC))
    base = Node(name=name, instance_type=flavor, allocatable=alloc, health_status="Schedulable")
    return replace(base, **overrides)  # type: ignore[arg-type]


def nodes(prefix: str, flavor: str, n: int) -> list[Node]:
    return [node(f"{prefix}-{i}", flavor) for i in range(n)]


def tainted(name: str, key: str, effect: str = "NoSchedule", flavor: str = P5) -> Node:
    return node(name, flavor, taints=(Taint(key=key, effect=effect),))


def entry(flavor: str = P5, **fields: object) -> ResourceConfig:
    if "partition" in fields:
        p_type, p_count = fields.pop("partition")  # type: ignore[misc]
        fields["accelerator_partition"] = AcceleratorPartition(type=p_type, count=p_count)
    return ResourceConfig(instance_type=flavor, **fields)  # type: ignore[arg-type]


def quota(
    team: str,
    *entries: ResourceConfig,
    strategy: Strategy = Strategy.LEND_AND_BORROW,
    borrow: int | None = None,
    absolute: tuple[ResourceConfig, ...] = (),
    enabled: bool = True,
    **kw: object,
) -> Quota:
    return Quota(
        name=f"{team}-quota",
        team=team,
        resources=entries,
        strategy=strategy,
        borrow_limit=borrow,
        absolute_borrow_limits=absolute,
        enabled=enabled,
        **kw,  # type: ignore[arg-type]
    )


def quota_body(
    team: str,
    gpus: int = 8,
    strategy: str | None = "LendAndBorrow",
    borrow: int | None = 50,
    *,
    name: str | None = None,
    resources: list[dict[str, Any]] | None = None,
    absolute: list[dict[str, Any]] | None = None,
    preempt: str | None = None,
    weight: int | None = None,
    enabled: bool | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A SageMaker CreateComputeQuota body (the stored Describe shape, without ClusterArn): ``team``'s quota
    ``<team>-quota`` (or ``name``) of ``gpus`` p5 accelerators (or ``resources``), ``strategy`` with ``borrow``
    percent (None: no BorrowLimit; a None strategy: no ResourceSharingConfig) and ``absolute`` limits;
    ``preempt`` (PreemptTeamTasks), ``weight`` (FairShareWeight) and ``enabled`` (ActivationState) only when
    given; ``extra``: more top-level members (Description, ComputeQuotaId...)."""
    config: dict[str, Any] = {
        "ComputeQuotaResources": resources if resources is not None else [{"InstanceType": P5, "Accelerators": gpus}]
    }
    if strategy is not None:
        sharing: dict[str, Any] = {"Strategy": strategy}
        if borrow is not None:
            sharing["BorrowLimit"] = borrow
        if absolute is not None:
            sharing["AbsoluteBorrowLimits"] = absolute
        config["ResourceSharingConfig"] = sharing
    if preempt is not None:
        config["PreemptTeamTasks"] = preempt
    target: dict[str, Any] = {"TeamName": team}
    if weight is not None:
        target["FairShareWeight"] = weight
    body: dict[str, Any] = {"Name": name or f"{team}-quota", "ComputeQuotaConfig": config, "ComputeQuotaTarget": target}
    if enabled is not None:
        body["ActivationState"] = "Enabled" if enabled else "Disabled"
    return body | extra


API_HOST = "abc123.execute-api.us-east-1.amazonaws.com"


def proxy_event(
    method: str,
    path: str,
    *,
    body: Any = None,
    query: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
    signed: bool = True,
    request_id: str = "c0ffee00-0000-4000-8000-000000000001",
) -> dict[str, Any]:
    """What API Gateway (REST API, Lambda proxy, resource ``/{proxy+}``, stage ``v1``) sends the Lambda."""
    raw = body if body is None or isinstance(body, str) else json.dumps(body)
    hdrs = {"Host": API_HOST, "User-Agent": "idleshare-cli"}
    if raw:
        hdrs["Content-Type"] = "application/json"
    hdrs.update(headers or {})
    principal = {"accountId": "111122223333", "caller": "AIDAEXAMPLEEXAMPLE", "user": "AIDAEXAMPLEEXAMPLE"}
    principal |= {"userArn": "arn:aws:iam::111122223333:user/admin", "accessKey": "ASIAEXAMPLE"}
    identity: dict[str, Any] = {"sourceIp": "198.51.100.7", "userAgent": "idleshare-cli", "apiKey": None}
    identity.update(principal if signed else dict.fromkeys(principal))
    context = {"resourceId": "r1", "resourcePath": "/{proxy+}", "httpMethod": method, "requestId": request_id}
    context |= {"path": f"/v1{path}", "stage": "v1", "accountId": "111122223333", "apiId": "abc123"}
    context |= {"protocol": "HTTP/1.1", "domainName": API_HOST, "identity": identity}
    event = {"resource": "/{proxy+}", "path": path, "httpMethod": method, "headers": hdrs, "body": raw}
    event |= {"multiValueHeaders": {k: [v] for k, v in hdrs.items()}, "queryStringParameters": query}
    event["multiValueQueryStringParameters"] = {k: [v] for k, v in query.items()} if query else None
    event |= {"pathParameters": {"proxy": path.lstrip("/")}, "stageVariables": None, "isBase64Encoded": False}
    return event | {"requestContext": context}


def k8s_node(name: str, gpus: int = 8, ready: str = "True") -> dict[str, Any]:
    """A schedulable p5 Node object as the API server returns it, with ``gpus`` GPUs and Ready ``ready``."""
    labels = {"node.kubernetes.io/instance-type": P5, "sagemaker.amazonaws.com/node-health-status": "Schedulable"}
    allocatable = {"cpu": "191450m", "memory": "2000Gi", "nvidia.com/gpu": str(gpus), "pods": "110"}
    status = {"allocatable": allocatable, "conditions": [{"type": "Ready", "status": ready}]}
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}
    return node | {"spec": {}, "status": status}


def objects(
    nodes_: Any, quotas_: Any, sc: SchedulerConfig | None = None, settings: Settings | None = None
) -> tuple[PoolResult, list[dict[str, Any]]]:
    """The engine's result for these nodes and quotas, and the Kueue objects idleshare writes for it."""
    sc = sc or SchedulerConfig(priority_classes=(PriorityClass("inference", 90), PriorityClass("training", 40)))
    settings = settings or Settings()
    result = compute(Snapshot(nodes=tuple(nodes_), quotas=tuple(quotas_), scheduler_config=sc, settings=settings))
    return result, desired_objects(result, sc, settings)


# a cluster of every kind of flavor and quota: 4 p5, 2 p4d (MIG), 2 trn1, one NotReady node; the four strategies
CLUSTER = [*nodes("p5", P5, 4), *nodes("p4d", P4D, 2), *nodes("trn", TRN1, 2), node("bad", ready=False)]
QUOTAS = [
    quota("research", entry(P5, accelerators=8), borrow=100, fair_share_weight=10, preempt_team_tasks="LowerPriority"),
    quota("nlp", entry(TRN1, count=1), strategy=Strategy.LEND),
    quota("vision", entry(P4D, partition=("mig-1g.5gb", 28)), strategy=Strategy.DONT_LEND),
    quota("paused", entry(P5, accelerators=4), enabled=False),
]


# -- names the API server refuses, or that no Job could use (issue 35) --------------------------------------------

_, GOOD_OBJECTS = objects(CLUSTER, QUOTAS)  # every kind idleshare writes, every name valid: read, never changed
API, OURS = True, False  # refused by the API server itself / idleshare's own rule (the server would take it)
BAD_NAMES: list[tuple[str, tuple[str | int, ...], Any, str, bool]] = [
    # (kind, where in the manifest, the bad value, the field idleshare's check names, who refuses it)
    ("Namespace", ("metadata", "name"), "Team-A", "metadata.name", API),  # a namespace is a DNS label
    ("Namespace", ("metadata", "name"), "a.b", "metadata.name", API),
    ("Namespace", ("metadata", "name"), "n" * 64, "metadata.name", API),
    ("Namespace", ("metadata", "name"), "kube-system", "metadata.name", OURS),  # reserved: the cluster's own
    ("Namespace", ("metadata", "name"), "default", "metadata.name", OURS),
    ("Namespace", ("metadata", "name"), "openshift-monitoring", "metadata.name", OURS),
    ("ResourceFlavor", ("metadata", "name"), "GPU_Box.X", "metadata.name", API),  # a subdomain: lower case, no '_'
    ("ResourceFlavor", ("metadata", "name"), "a" * 254, "metadata.name", API),
    ("ResourceFlavor", ("metadata", "name"), "-a", "metadata.name", API),
    ("ResourceFlavor", ("metadata", "name"), "a..b", "metadata.name", API),
    ("ResourceFlavor", ("spec", "nodeLabels", "node.kubernetes.io/instance-type"), "x" * 64, "spec.nodeLabels", API),
    ("ResourceFlavor", ("spec", "nodeLabels", "node.kubernetes.io/instance-type"), "a b", "spec.nodeLabels", API),
    ("ResourceFlavor", ("spec", "nodeLabels", "bad key!"), "v", "spec.nodeLabels", API),
    ("WorkloadPriorityClass", ("metadata", "name"), "p" * 64, "metadata.name", OURS),  # a Job's label value: 63
    ("WorkloadPriorityClass", ("metadata", "name"), "p" * 300, "metadata.name", API),
    ("Cohort", ("metadata", "name"), "Shared_Pool", "metadata.name", API),
    ("ClusterQueue", ("metadata", "name"), "q" * 254, "metadata.name", API),
    ("ClusterQueue", ("spec", "cohortName"), "Shared_Pool", "spec.cohortName", API),
    ("ClusterQueue", ("spec", "resourceGroups", 0, "flavors", 0, "name"), "GPU_Box.X", "flavors[0].name", API),
    (
        "ClusterQueue",
        ("spec", "namespaceSelector", "matchLabels", "kubernetes.io/metadata.name"),
        "a" * 64,
        "match",
        API,
    ),
    ("Cohort", ("spec", "resourceGroups", 0, "flavors", 1, "name"), "Bad", "resourceGroups[0].flavors[1].name", API),
    ("LocalQueue", ("metadata", "name"), "l" * 64, "metadata.name", OURS),  # a Job's queue-name label value: 63
    ("LocalQueue", ("metadata", "namespace"), "kube-system", "metadata.namespace", OURS),
    ("LocalQueue", ("spec", "clusterQueue"), "Q", "spec.clusterQueue", API),
    ("LocalQueue", ("metadata", "labels", "idleshare.io/team"), "t" * 64, "metadata.labels", API),
]
"""One row per rule of ``naming.object_name_problems``: the unit test proves idleshare's check names the field; the
real-stack test (tests/kube/test_names.py) that the API server refuses each ``API`` row and takes each ``OURS`` one
(those are idleshare's: the cluster's own namespaces, names a Job could not put in a label)."""


def good_object(kind: str) -> dict[str, Any]:
    """A copy of idleshare's desired object of ``kind`` (for the CLUSTER and QUOTAS above)."""
    found: dict[str, Any] = json.loads(json.dumps(next(o for o in GOOD_OBJECTS if o["kind"] == kind)))
    return found


def spoiled(kind: str, path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    """``good_object(kind)`` with ``value`` at ``path``."""
    obj = good_object(kind)
    *parents, last = path
    at: Any = obj
    for key in parents:
        at = at[key]
    at[last] = value
    return obj


# -- a fleet of many instance types (issue 40): what a Karpenter NodePool allowing any type produces --------------

_SIZES = {"large": 2, "xlarge": 4, "2xlarge": 8, "4xlarge": 16, "8xlarge": 32, "12xlarge": 48, "16xlarge": 64}
_FAMILIES = {  # EC2 family -> GiB per vCPU, and its sizes beyond _SIZES (published EC2 names only)
    "c5": (2, {"9xlarge": 36, "18xlarge": 72, "24xlarge": 96}),
    "m5": (4, {"24xlarge": 96}),
    "r5": (8, {"24xlarge": 96}),
    "c6i": (2, {"24xlarge": 96, "32xlarge": 128}),
    "m6i": (4, {"24xlarge": 96, "32xlarge": 128}),
    "r6i": (8, {"24xlarge": 96, "32xlarge": 128}),
    "c7i": (2, {"24xlarge": 96, "48xlarge": 192}),
    "m7i": (4, {"24xlarge": 96, "48xlarge": 192}),
    "r7i": (8, {"24xlarge": 96, "48xlarge": 192}),
}
EC2_CPU_TYPES: tuple[tuple[str, int, int], ...] = tuple(
    (f"{family}.{size}", vcpu, vcpu * per_vcpu)
    for family, (per_vcpu, extra) in _FAMILIES.items()
    for size, vcpu in {
        **{s: v for s, v in _SIZES.items() if not (family == "c5" and s in ("8xlarge", "16xlarge"))},
        **extra,
    }.items()
)
"""``(instance type, vCPU, GiB)`` of real EC2 CPU instance types (c5, m5, r5, c6i, m6i, r6i, c7i, m7i, r7i), each
distinct: more than Kueue's 64 flavors per resource group."""


def cpu_allocatable(vcpu: int, gib: int) -> dict[str, Any]:
    """What a kubelet on such a node reports allocatable (a little under the instance's vCPU and memory)."""
    return {"cpu": Fraction(vcpu * 1000 - 90, 1000), "memory": (gib * 1024 - 600) * 1024**2}


def cpu_fleet(n: int) -> list[Node]:
    """One node each of the first ``n`` of :data:`EC2_CPU_TYPES`."""
    return [node(f"cpu-{t.replace('.', '-')}", t, allocatable=cpu_allocatable(v, g)) for t, v, g in EC2_CPU_TYPES[:n]]


def load_script(path: Path, name: str) -> Any:
    """The module of a stand-alone script (``events/examples/make_nodes.py``, ``events/zoo/make_zoo.py``: generators
    outside any package), loaded by path under ``name``."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------ cluster settings, drawn from their type
def other_value(name: str) -> Any:
    """A valid value of setting ``name`` that is not its default, drawn from its type."""
    kind, default = setting_type(name), getattr(ClusterSettings(), name)
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return next(v for v in kind if v != default)
    if kind is bool:
        return not default
    if kind is int:
        return default + 1
    return f"{default}x" if not default.endswith("-") else f"{default}x-"


def wrong_type(name: str) -> Any:
    """A JSON value of the wrong type for setting ``name``."""
    return [1] if setting_type(name) is str else "on"


def json_value(value: Any) -> Any:
    return value.value if isinstance(value, enum.Enum) else value
