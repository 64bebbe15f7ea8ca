"""Kueue v0.19.2's CRDs (schema + CEL) and webhooks, on the real kube-apiserver: what they accept, what they
refuse and on which field — and ``webhook_violations`` (idleshare's pre-apply check of the webhook-only rules)
proven rule by rule against the real Kueue webhook.

Every check is a server-side apply by ``idleshare`` with ``dryRun=All`` and ``fieldValidation=Strict``, as
admin (:mod:`tests.kube.dryrun`): the CRD's structural schema and CEL rules, Kueue's mutating and validating
webhooks and server-side apply's typed merge all run; nothing is stored.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from devkit.kube import kueue_versions as stack_versions
from devkit.kube.client import Kube
from devkit.kube.stack import KubeStack
from idleshare.domain.kueue import webhook_violations
from idleshare.domain.kueue_versions import limits_of
from tests.kube.dryrun import assert_refused, dry_run_apply, ensure_namespace, refusal

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_CRDS = REPO_ROOT.parent / "shared" / "kueue" / "crds"
NAMESPACE = "hyperpod-ns-team-a"

V = "kueue.x-k8s.io/v1beta2"
LIMITS = limits_of(stack_versions.get().version)
"""The stack's Kueue's schema limits (domain/kueue_versions.py; held to its CRDs by tests/unit/test_kueue_limits.py)."""
FLAVOR = "ml.p5.48xlarge"


def cluster_queue(**spec_overrides: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "cohortName": "shared-pool",
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "hyperpod-ns-team-a"}},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                "flavors": [
                    {
                        "name": FLAVOR,
                        "resources": [
                            {"name": "cpu", "nominalQuota": "192", "borrowingLimit": "96", "lendingLimit": "192"},
                            {"name": "memory", "nominalQuota": "2Ti", "borrowingLimit": "0"},
                            {"name": "nvidia.com/gpu", "nominalQuota": 8, "lendingLimit": 8},
                        ],
                    },
                    {
                        "name": "ml.g5.8xlarge",
                        "resources": [
                            {"name": "cpu", "nominalQuota": "500m"},
                            {"name": "memory", "nominalQuota": "1536Mi"},
                            {"name": "nvidia.com/gpu", "nominalQuota": 0, "borrowingLimit": 4},
                        ],
                    },
                ],
            }
        ],
        "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
        "fairSharing": {"weight": "1.5"},
        "stopPolicy": "None",
    }
    spec.update(spec_overrides)
    return {
        "apiVersion": V,
        "kind": "ClusterQueue",
        "metadata": {
            "name": "hyperpod-ns-team-a-clusterqueue",
            "labels": {"app.kubernetes.io/managed-by": "idleshare"},
        },
        "spec": spec,
    }


def cohort() -> dict[str, Any]:
    return {
        "apiVersion": V,
        "kind": "Cohort",
        "metadata": {"name": "shared-pool"},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": FLAVOR,
                            "resources": [
                                {"name": "cpu", "nominalQuota": 96},
                                {"name": "nvidia.com/gpu", "nominalQuota": 4},
                            ],
                        }
                    ],
                }
            ],
            "fairSharing": {"weight": 1},
        },
    }


def resource_flavor() -> dict[str, Any]:
    return {
        "apiVersion": V,
        "kind": "ResourceFlavor",
        "metadata": {"name": FLAVOR},
        "spec": {
            "nodeLabels": {"node.kubernetes.io/instance-type": FLAVOR},
            "nodeTaints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        },
    }


def local_queue() -> dict[str, Any]:
    return {
        "apiVersion": V,
        "kind": "LocalQueue",
        "metadata": {"name": "hyperpod-ns-team-a-localqueue", "namespace": "hyperpod-ns-team-a"},
        "spec": {"clusterQueue": "hyperpod-ns-team-a-clusterqueue"},
    }


def priority_class() -> dict[str, Any]:
    return {
        "apiVersion": V,
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": "training-priority"},
        "value": 100,
        "description": "training jobs",
    }


VALID = {
    "ClusterQueue": cluster_queue,
    "Cohort": cohort,
    "ResourceFlavor": resource_flavor,
    "LocalQueue": local_queue,
    "WorkloadPriorityClass": priority_class,
}


@pytest.fixture(scope="module")
def emptied(kube_admin: Kube) -> Kube:
    """The stack emptied once for this module: a dry run of an object of a name that exists is an update (another
    test module's flavor on this worker would answer for it), and dry runs store nothing."""
    kube_admin.reset()
    return kube_admin


@pytest.fixture
def server(emptied: Kube) -> Kube:
    """The admin client, with the team namespace the LocalQueue lives in (dry runs store nothing else)."""
    ensure_namespace(emptied, NAMESPACE)
    return emptied


# ---------------------------------------------------------------------------------------------- the CRDs


def test_the_crds_the_stack_installs_are_byte_identical_to_shared_kueue_crds(kube_stack: KubeStack) -> None:
    # The stack installs all 11 of Kueue's CRDs from the pinned module; ../shared/kueue/crds holds the 5
    # idleshare writes (present in CI). Same bytes, so the pin and the shared reference cannot drift apart.
    module = sorted(p.name for p in kube_stack.binaries.crds.glob("*.yaml"))
    assert len(module) == 11 and "kueue.x-k8s.io_clusterqueues.yaml" in module
    if not SHARED_CRDS.is_dir():
        pytest.skip(f"{SHARED_CRDS} is not on this machine (it is in CI)")
    shared = sorted(p.name for p in SHARED_CRDS.glob("*.yaml"))
    assert shared == [f"kueue.x-k8s.io_{plural}.yaml" for plural in sorted(PLURALS_WRITTEN)]
    for name in shared:
        assert (SHARED_CRDS / name).read_bytes() == (kube_stack.binaries.crds / name).read_bytes(), name


PLURALS_WRITTEN = ("clusterqueues", "cohorts", "localqueues", "resourceflavors", "workloadpriorityclasses")


def test_no_crd_copied_into_the_repository() -> None:
    copies = []
    for root, dirs, files in os.walk(REPO_ROOT):
        dirs[:] = [d for d in dirs if d not in (".venv", ".git", "node_modules", "cdk.out") and not d.startswith(".")]
        for f in files:
            if f.endswith((".yaml", ".yml", ".json")):
                text = (Path(root) / f).read_text(errors="ignore")
                if "CustomResourceDefinition" in text and "kueue.x-k8s.io" in text:
                    copies.append(f)
    assert copies == []


# ---------------------------------------------------------------------------------------------- valid


@pytest.mark.parametrize("kind", sorted(VALID))
def test_valid_object_of_each_kind_passes(server: Kube, kind: str) -> None:
    obj = VALID[kind]()
    assert refusal(server, obj) == []
    assert webhook_violations(obj) == []


def test_the_server_defaults_before_it_validates(server: Kube) -> None:
    # reclaimWithinCohort defaults to Never, which the CEL rule forbids with borrowWithinCohort.policy != Never
    assert refusal(server, cluster_queue(preemption={"borrowWithinCohort": {"policy": "LowerPriority"}})) == [
        "spec.preemption: Invalid value: reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never"
    ]
    d = dry_run_apply(server, cluster_queue(preemption={}))["spec"]
    assert d["queueingStrategy"] == "BestEffortFIFO"
    assert d["flavorFungibility"] == {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"}
    assert d["preemption"] == {
        "borrowWithinCohort": {"policy": "Never"},
        "reclaimWithinCohort": "Never",
        "withinClusterQueue": "Never",
    }
    lq = dry_run_apply(server, local_queue())["spec"]
    assert lq["stopPolicy"] == "None"
    assert "fairSharing" not in lq  # no default for an absent parent


def test_kueues_mutating_webhook_round_trips_quantities(server: Kube) -> None:
    # Kueue's mutating webhook decodes the object into its Go types and encodes it back, so quantities come
    # back canonical, a JSON float is a quantity like any other, and a missing nominalQuota becomes "0"
    # before the schema (which requires it) is checked.
    o = cluster_queue(fairSharing={"weight": "1.5"})
    cpu = _res(o, 0, 0)
    cpu.update(nominalQuota=1.5)
    del cpu["borrowingLimit"], cpu["lendingLimit"]
    del _res(o, 1, 2)["nominalQuota"]
    stored = dry_run_apply(server, o)["spec"]
    assert stored["fairSharing"] == {"weight": "1500m"}
    assert stored["resourceGroups"][0]["flavors"][0]["resources"][0] == {"name": "cpu", "nominalQuota": "1500m"}
    assert stored["resourceGroups"][0]["flavors"][1]["resources"][2] == {
        "name": "nvidia.com/gpu",
        "nominalQuota": "0",
        "borrowingLimit": "4",
    }


# ---------------------------------------------------------------------------------------------- invalid


def _rg(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"]["resourceGroups"][0]


def _res(obj: dict[str, Any], flavor: int = 0, res: int = 0) -> dict[str, Any]:
    return _rg(obj)["flavors"][flavor]["resources"][res]


def m_no_cohort(o: dict[str, Any]) -> None:
    del o["spec"]["cohortName"]


def m_covered_mismatch(o: dict[str, Any]) -> None:
    _rg(o)["coveredResources"].append("vpc.amazonaws.com/efa")


def m_unknown(o: dict[str, Any]) -> None:
    o["spec"]["cohort"] = "shared-pool"  # the v1beta1 name: unknown in v1beta2


def m_too_many_groups(o: dict[str, Any]) -> None:
    o["spec"]["resourceGroups"] = [copy.deepcopy(_rg(o)) for _ in range(17)]


def m_too_many_covered(o: dict[str, Any]) -> None:
    names = [f"example.com/r{i}" for i in range(65)]
    _rg(o)["coveredResources"] = names
    for f in _rg(o)["flavors"]:
        f["resources"] = [{"name": n, "nominalQuota": 1} for n in names]


def m_missing_flavors(o: dict[str, Any]) -> None:
    del _rg(o)["flavors"]


def m_bad_enum(o: dict[str, Any]) -> None:
    o["spec"]["queueingStrategy"] = "FIFO"


def m_bad_cohort_name(o: dict[str, Any]) -> None:
    o["spec"]["cohortName"] = "Shared_Pool"


def m_preference(o: dict[str, Any]) -> None:
    o["spec"]["flavorFungibility"] = {"preference": "BorrowingOverPreemption"}


def m_duplicate_flavor(o: dict[str, Any]) -> None:
    _rg(o)["flavors"][1]["name"] = FLAVOR


def m_bad_name(o: dict[str, Any]) -> None:
    o["metadata"]["name"] = "Team_A"


def m_bad_label(o: dict[str, Any]) -> None:
    o["metadata"]["labels"]["idleshare/team"] = "not ok!"


def m_empty_covered(o: dict[str, Any]) -> None:
    _rg(o)["coveredResources"] = []
    for f in _rg(o)["flavors"]:
        f["resources"] = []


def _groups(n_groups: int, n_res: int, n_flavors: int) -> list[dict[str, Any]]:
    groups = []
    for g in range(n_groups):
        names = [f"example.com/g{g}r{i}" for i in range(n_res)]
        groups.append(
            {
                "coveredResources": names,
                "flavors": [
                    {"name": f"g{g}f{j}", "resources": [{"name": n, "nominalQuota": 1} for n in names]}
                    for j in range(n_flavors)
                ],
            }
        )
    return groups


CEL_CASES = [  # Kueue's CEL rules (x-kubernetes-validations)
    ("cel-borrowing-no-cohort", m_no_cohort, "spec", "borrowingLimit must be nil when cohort is empty"),
    ("cel-covered-mismatch", m_covered_mismatch, "spec.resourceGroups[0]", "same number of resources as the covered"),
    ("cel-preference", m_preference, "spec.flavorFungibility", "whenCanBorrow and whenCanPreempt are TryNextFlavor"),
]
BOUND_CASES = [  # the OpenAPI schema's bounds
    ("too-many-groups", m_too_many_groups, "spec.resourceGroups", "Too many: 17: must have at most 16 items"),
    ("too-many-covered", m_too_many_covered, "spec.resourceGroups[0].coveredResources", "65: must have at most 64"),
    ("min-items", m_empty_covered, "spec.resourceGroups[0].coveredResources", "should have at least 1 items"),
    ("required-flavors", m_missing_flavors, "spec.resourceGroups[0].flavors", "Required value"),
]
FIELD_CASES = [  # its fields and values, list-map keys and the object's metadata
    ("unknown-field", m_unknown, "spec.cohort", "field not declared in schema"),
    ("enum", m_bad_enum, "spec.queueingStrategy", 'Unsupported value: "FIFO"'),
    ("pattern", m_bad_cohort_name, "spec.cohortName", "should match"),
    ("list-map-duplicate", m_duplicate_flavor, "spec.resourceGroups[0].flavors", "duplicate entries for key"),
    ("metadata-name", m_bad_name, "metadata.name", "RFC 1123 subdomain"),
]
CQ_CASES = [
    *CEL_CASES,
    *BOUND_CASES,
    *FIELD_CASES,
    ("metadata-label", m_bad_label, "metadata.labels", "a valid label must be an empty string"),
]


COHORT_CASES = [
    (
        "cel-covered-mismatch",
        lambda o: _rg(o)["coveredResources"].pop(),
        "spec.resourceGroups[0]",
        "same number of resources",
    ),
    ("unknown-field", lambda o: o["spec"].__setitem__("parent", "root"), "spec.parent", "field not declared"),
    ("pattern", lambda o: o["spec"].__setitem__("parentName", "Root Cohort"), "spec.parentName", "should match"),
    (
        "weight-pattern",
        lambda o: o["spec"]["fairSharing"].__setitem__("weight", "1.5x"),
        "spec.fairSharing.weight",
        "should match",
    ),
    (
        "too-many-flavors",
        lambda o: _rg(o).__setitem__(
            "flavors",
            [
                {
                    "name": f"f{i}",
                    "resources": [{"name": "cpu", "nominalQuota": 1}, {"name": "nvidia.com/gpu", "nominalQuota": 1}],
                }
                for i in range(65)
            ],
        ),
        "spec.resourceGroups[0].flavors",
        "Too many: 65",
    ),
    (
        "required-covered",
        lambda o: _rg(o).pop("coveredResources"),
        "spec.resourceGroups[0].coveredResources",
        "Required value",
    ),
    (
        "required-resources",
        lambda o: _rg(o)["flavors"][0].pop("resources"),
        "spec.resourceGroups[0].flavors[0].resources",
        "Required value",
    ),
    (
        "resource-duplicate",
        lambda o: _res(o, 0, 1).__setitem__("name", "cpu"),
        'spec.resourceGroups[0].flavors[name="ml.p5.48xlarge"].resources',
        'duplicate entries for key [name="cpu"]',
    ),
]


def _drop_toleration_key(s: dict[str, Any]) -> None:
    del s["tolerations"][0]["key"]
    s["tolerations"][0]["operator"] = "Equal"


RF_CASES = [
    (
        "cel-topology-needs-labels",
        lambda s: s.update(topologyName="default", nodeLabels={}),
        "spec",
        "at least one nodeLabel is required",
    ),
    (
        "cel-taint-effect",
        lambda s: s["nodeTaints"][0].update(effect="Sometimes"),
        "spec.nodeTaints",
        "supported taint effect values",
    ),
    ("cel-toleration-no-key", _drop_toleration_key, "spec.tolerations", "operator must be Exists"),
    (
        "cel-toleration-value",
        lambda s: s["tolerations"][0].update(value="x"),
        "spec.tolerations",
        "a value must be empty",
    ),
    (
        "cel-toleration-seconds",
        lambda s: s["tolerations"][0].update(tolerationSeconds=30),
        "spec.tolerations",
        "effect must be 'NoExecute'",
    ),
    (
        "too-many-labels",
        lambda s: s.update(nodeLabels={f"k{i}": "v" for i in range(9)}),
        "spec.nodeLabels",
        "Too many: 9: must have at most 8 items",
    ),
    # the key is required by the schema, but Kueue's webhook sees the empty key first
    ("taint-key", lambda s: s["nodeTaints"][0].pop("key"), "spec.nodeTaints[0].key", "name part must be non-empty"),
    ("unknown-field", lambda s: s.update(nodeSelector={}), "spec.nodeSelector", "field not declared in schema"),
    ("type", lambda s: s.update(nodeLabels={"a": 1}), "spec.nodeLabels.a", "expected string"),
    ("label-key", lambda s: s.update(nodeLabels={"bad key": "v"}), "spec.nodeLabels", "name part must consist"),
]


LQ_CASES = [
    ("pattern", lambda o: o["spec"].update(clusterQueue="CQ"), "spec.clusterQueue", "should match"),
    ("enum", lambda o: o["spec"].update(stopPolicy="Pause"), "spec.stopPolicy", "Unsupported value"),
    ("unknown-field", lambda o: o["spec"].update(cohort="x"), "spec.cohort", "field not declared in schema"),
    ("unknown-metadata", lambda o: o["metadata"].update(owner="me"), "metadata.owner", "field not declared"),
    ("max-length", lambda o: o["spec"].update(clusterQueue="a" * 254), "spec.clusterQueue", "Too long"),
    ("status-type", lambda o: o.update(status={"pendingWorkloads": "many"}), "status.pendingWorkloads", "numeric"),
]


WPC_CASES = [
    ("required-value", lambda o: o.pop("value"), "value", "Required value"),
    ("type", lambda o: o.update(value="100"), "value", "expected numeric"),
    # the apiserver names no field for this one (``<nil>``), only the message does ("in value")
    ("int32-range", lambda o: o.update(value=2**31), "<nil>", "format int32 in value"),
    ("unknown-field", lambda o: o.update(spec={"value": 1}), "spec", "field not declared in schema"),
]


def _on_spec(mutate: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], Any]:
    return lambda o: mutate(o["spec"])


# (kind, case, mutation of a valid object, the field refused, a fragment of the message)
INVALID = [
    *[("ClusterQueue", *c) for c in CQ_CASES],
    *[("Cohort", *c) for c in COHORT_CASES],
    *[("ResourceFlavor", case, _on_spec(mutate), *rest) for case, mutate, *rest in RF_CASES],
    *[("LocalQueue", *c) for c in LQ_CASES],
    *[("WorkloadPriorityClass", *c) for c in WPC_CASES],
]


@pytest.mark.parametrize(
    ("kind", "mutate", "field", "fragment"),
    [(kind, *rest) for kind, _, *rest in INVALID],
    ids=[f"{kind}-{case}" for kind, case, *_ in INVALID],
)
def test_an_invalid_object_of_each_kind_is_refused_naming_the_field(
    server: Kube, kind: str, mutate: Any, field: str, fragment: str
) -> None:
    obj = VALID[kind]()
    mutate(obj)
    assert_refused(server, obj, field, fragment)


NO_FIELD_CASES = [
    ("quantity-pattern", lambda: _with(cluster_queue(), lambda o: _res(o, 0, 1).update(nominalQuota="2TB"))),
    ("quantity-bool", lambda: _with(cluster_queue(), lambda o: _res(o, 0, 0).update(nominalQuota=True))),
    (
        "date-time",
        lambda: _with(resource_flavor(), lambda o: o["spec"]["nodeTaints"][0].update(timeAdded="yesterday")),
    ),
]


def _with(obj: dict[str, Any], mutate: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    mutate(obj)
    return obj


@pytest.mark.parametrize("make", [c[1] for c in NO_FIELD_CASES], ids=[c[0] for c in NO_FIELD_CASES])
def test_a_value_kueue_cannot_decode_is_refused_by_its_mutating_webhook_without_a_field(
    server: Kube, make: Callable[[], dict[str, Any]]
) -> None:
    # Kueue's mutating webhook runs before the schema and decodes the object into its Go types: a malformed
    # quantity or timestamp fails there, and its message names no field. idleshare never sends one
    # (quantities come from ``format_quantity``), and ``webhook_violations`` does not claim to catch it.
    (err,) = refusal(server, make())
    assert err.startswith(("quantities must match the regular expression", 'parsing time "yesterday"')), err


def test_a_kind_or_version_kueue_does_not_serve_is_not_found(server: Kube) -> None:
    o = priority_class()
    o["apiVersion"] = "kueue.x-k8s.io/v1"
    assert refusal(server, o) == ["HTTP 404: 404 page not found"]


def test_transition_rules_run_only_on_update(server: Kube) -> None:
    # Given a LocalQueue and a ResourceFlavor with a topology, stored for real
    server.reset()
    ensure_namespace(server, NAMESPACE)
    server.apply(local_queue(), "idleshare")
    rf = resource_flavor()
    rf["spec"]["topologyName"] = "default"
    server.apply(rf, "idleshare")
    # Then changing what CEL's oldSelf rules freeze is refused, the unchanged object is not
    moved = local_queue()
    moved["spec"]["clusterQueue"] = "other-clusterqueue"
    assert refusal(server, local_queue()) == []
    assert refusal(server, moved) == ['spec.clusterQueue: Invalid value: "other-clusterqueue": field is immutable']
    relabelled = copy.deepcopy(rf)
    relabelled["spec"]["nodeLabels"]["extra"] = "1"
    assert refusal(server, rf) == []
    assert_refused(server, relabelled, "spec", "nodeLabels are immutable when topologyName is set")
    server.reset()


def test_v1beta1_objects_use_the_v1beta1_schema_and_kueue_sees_them_without_conversion(server: Kube) -> None:
    o = cluster_queue()
    o["apiVersion"] = "kueue.x-k8s.io/v1beta1"
    assert_refused(server, o, "spec.cohortName", "field not declared in schema")  # v1beta1 calls it `cohort`
    o["spec"]["cohort"] = o["spec"].pop("cohortName")
    # The CRDs convert with strategy None, so Kueue's webhook reads the v1beta1 object as a v1beta2 one: a
    # v1beta1 `cohort` is no cohortName to it. (idleshare writes v1beta2 only.)
    assert_refused(server, o, "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit", "cohort is empty")


# ---------------------------------------------------------------------------------------------- webhook


def test_webhook_lending_limit_needs_cohort(server: Kube) -> None:
    o = _with(cluster_queue(), _lend_without_cohort)
    assert_refused(
        server, o, "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit", "must be nil when cohort is empty"
    )


def test_webhook_lending_limit_at_most_nominal(server: Kube) -> None:
    o = cluster_queue()
    _res(o, 0, 2)["lendingLimit"] = 9
    assert_refused(
        server,
        o,
        "spec.resourceGroups[0].flavors[0].resources[2].lendingLimit",
        "less than or equal to the nominalQuota",
    )
    _res(o, 0, 2)["lendingLimit"] = "8"
    _res(o, 0, 0)["lendingLimit"] = "192000m"
    assert refusal(server, o) == []


def test_webhook_size_limits(server: Kube) -> None:
    assert_refused(
        server,
        cluster_queue(resourceGroups=_groups(5, 1, 52)),  # 260 flavors in total
        "spec.resourceGroups",
        "total number of flavors across all resourceGroups must be ≤ 256, got 260",
    )
    assert_refused(
        server,
        cluster_queue(resourceGroups=_groups(5, 52, 1)),  # 260 covered resources
        "spec.resourceGroups",
        "total number of covered resources across all resourceGroups must be ≤ 256, got 260",
    )
    assert_refused(
        server,
        cluster_queue(resourceGroups=_groups(1, 9, 64)),  # 576 flavor-resource pairs in one group
        "spec.resourceGroups[0]",
        "must be ≤ 512, got 576",
    )
    assert refusal(server, cluster_queue(resourceGroups=_groups(4, 8, 64))) == []  # 256 flavors, 512 pairs each


def test_webhook_resource_names_and_duplicates(server: Kube) -> None:
    o = cluster_queue()
    o["spec"]["resourceGroups"].append(copy.deepcopy(_rg(o)))
    assert_refused(server, o, "spec.resourceGroups[1].coveredResources[0]", 'Duplicate value: "cpu"')
    assert_refused(server, o, "spec.resourceGroups[1].flavors[0].name", f'Duplicate value: "{FLAVOR}"')
    o = cluster_queue()
    _rg(o)["coveredResources"][2] = "nvidia.com/gpu/x"
    assert_refused(server, o, "spec.resourceGroups[0].coveredResources[2]", "a valid label key")
    assert_refused(
        server, o, "spec.resourceGroups[0].flavors[0].resources[2].name", "must match the name in coveredResources"
    )
    o = cluster_queue()
    _res(o, 0, 1)["nominalQuota"] = "-1Gi"
    assert_refused(
        server, o, "spec.resourceGroups[0].flavors[0].resources[1].nominalQuota", "greater than or equal to 0"
    )


@pytest.mark.parametrize(
    ("weight", "ok"),
    [(0, True), ("0", True), ("1n", False), ("1e-10", False), ("2n", True), ("0.5", True), ("-1", False), (1, True)],
)
def test_webhook_fair_sharing_weight_floor(server: Kube, weight: Any, ok: bool) -> None:
    for obj in (cluster_queue(), cohort()):
        obj["spec"]["fairSharing"] = {"weight": weight}
        errs = refusal(server, obj)
        assert (errs == []) is ok, errs
        assert all(e.startswith("spec.fairSharing: ") for e in errs), errs
        assert (webhook_violations(obj) == []) is ok


def test_webhook_cohort_rules(server: Kube) -> None:
    o = cohort()
    _res(o, 0, 1)["lendingLimit"] = 10  # above nominal: allowed for a Cohort, but there is no parent
    assert refusal(server, o) == [
        'spec.resourceGroups[0].flavors[0].resources[1].lendingLimit: Invalid value: "10": must be nil when parent is empty'
    ]
    o["spec"]["parentName"] = "root"
    assert refusal(server, o) == []


def test_webhook_namespace_selector(server: Kube) -> None:
    o = cluster_queue(namespaceSelector={"matchExpressions": [{"key": "team", "operator": "In", "values": []}]})
    assert_refused(server, o, "spec.namespaceSelector.matchExpressions[0].values", "must be specified")


# ------------------------------------------------------------------ webhook_violations against the real webhook


def _lend_without_cohort(o: dict[str, Any]) -> None:
    del o["spec"]["cohortName"]
    for f in _rg(o)["flavors"]:
        for r in f["resources"]:
            r.pop("borrowingLimit", None)


def _cohort(mutate: Callable[[dict[str, Any]], Any]) -> Callable[[], dict[str, Any]]:
    return lambda: _with(cohort(), mutate)


def _cq(mutate: Callable[[dict[str, Any]], Any]) -> Callable[[], dict[str, Any]]:
    return lambda: _with(cluster_queue(), mutate)


def _set(path: tuple[int, int, int], **values: Any) -> Callable[[dict[str, Any]], None]:
    g, f, r = path
    return lambda o: o["spec"]["resourceGroups"][g]["flavors"][f]["resources"][r].update(values)


def _two_groups(o: dict[str, Any]) -> None:
    o["spec"]["resourceGroups"].append(copy.deepcopy(_rg(o)))


def _rename_covered(o: dict[str, Any]) -> None:
    _rg(o)["coveredResources"][1] = "memory!"
    for f in _rg(o)["flavors"]:
        f["resources"][1]["name"] = "memory!"


def _second_group_reuses_flavor(o: dict[str, Any]) -> None:
    o["spec"]["resourceGroups"].append(
        {"coveredResources": ["vpc.amazonaws.com/efa"], "flavors": [{"name": FLAVOR, "resources": [_efa()]}]}
    )


def _second_group_reuses_resource(o: dict[str, Any]) -> None:
    o["spec"]["resourceGroups"].append(
        {
            "coveredResources": ["cpu"],
            "flavors": [{"name": "ml.trn1.32xlarge", "resources": [{"name": "cpu", "nominalQuota": 1}]}],
        }
    )


def _efa() -> dict[str, Any]:
    return {"name": "vpc.amazonaws.com/efa", "nominalQuota": 1}


def _groups_setter(n_groups: int, n_res: int, n_flavors: int) -> Callable[[dict[str, Any]], None]:
    return lambda o: o["spec"].update(resourceGroups=_groups(n_groups, n_res, n_flavors))


# (rule, object breaking it) — each refused by the real Kueue webhook and flagged by webhook_violations
BROKEN: list[tuple[str, Callable[[], dict[str, Any]]]] = [
    (f"more than {LIMITS.resources_total} covered resources in all groups", _cq(_groups_setter(5, 52, 1))),
    (f"more than {LIMITS.flavors_total} flavors in all groups", _cq(_groups_setter(5, 1, 52))),
    (f"more than {LIMITS.pairs_per_group} flavor-resource pairs in a group", _cq(_groups_setter(1, 9, 64))),
    ("a resource name that is not a label key", _cq(_rename_covered)),
    ("a resource in two groups", _cq(_second_group_reuses_resource)),
    ("a flavor in two groups", _cq(_second_group_reuses_flavor)),
    ("both at once (a group repeated)", _cq(_two_groups)),
    ("a ClusterQueue lendingLimit without a cohort", _cq(_lend_without_cohort)),
    ("a Cohort lendingLimit without a parent", _cohort(_set((0, 0, 1), lendingLimit=1))),
    ("a ClusterQueue lendingLimit above nominalQuota", _cq(_set((0, 0, 2), lendingLimit="9"))),
    ("a negative nominalQuota", _cq(_set((0, 0, 1), nominalQuota="-1Gi"))),
    ("a negative borrowingLimit", _cq(_set((0, 0, 0), borrowingLimit="-1"))),
    (
        "a negative lendingLimit",
        _cohort(lambda o: (o["spec"].update(parentName="root"), _set((0, 0, 1), lendingLimit="-1")(o))),
    ),
    ("a fair-sharing weight of 1e-9", _cq(lambda o: o["spec"].update(fairSharing={"weight": "1n"}))),
    ("a negative fair-sharing weight", _cohort(lambda o: o["spec"].update(fairSharing={"weight": "-1"}))),
]

# (bound, object past it) — each refused by the CRD's schema (maxItems) with the field named, and flagged by
# webhook_violations with the stack's Kueue's limits (domain/kueue_versions.KueueLimits)
PAST_CRD_BOUNDS: list[tuple[str, str, Callable[[], dict[str, Any]]]] = [
    (
        f"more than {LIMITS.flavors_per_group} flavors in a group",
        "spec.resourceGroups[0].flavors",
        _cq(_groups_setter(1, 3, LIMITS.flavors_per_group + 1)),
    ),
    (
        f"more than {LIMITS.flavors_per_group} flavors in a Cohort's group",
        "spec.resourceGroups[0].flavors",
        _cohort(_groups_setter(1, 3, LIMITS.flavors_per_group + 1)),
    ),
    (
        f"more than {LIMITS.covered_resources} covered resources in a group",
        "spec.resourceGroups[0].coveredResources",
        _cq(_groups_setter(1, LIMITS.covered_resources + 1, 1)),
    ),
    (
        f"more than {LIMITS.resource_groups} resource groups",
        "spec.resourceGroups",
        _cq(_groups_setter(LIMITS.resource_groups + 1, 1, 1)),
    ),
]


@pytest.mark.parametrize(("field", "make"), [c[1:] for c in PAST_CRD_BOUNDS], ids=[c[0] for c in PAST_CRD_BOUNDS])
def test_webhook_violations_flags_what_the_crds_bounds_refuse(
    server: Kube, field: str, make: Callable[[], dict[str, Any]]
) -> None:
    obj = make()
    errs = refusal(server, obj)
    assert any(e.startswith(f"{field}: Too many") for e in errs), errs
    assert any(f"{field}: at most" in e for e in webhook_violations(obj, LIMITS)), webhook_violations(obj, LIMITS)


# objects at the edge of each rule, which both accept
VALID_EDGES: list[tuple[str, Callable[[], dict[str, Any]]]] = [
    ("every kind as built", cluster_queue),
    ("a Cohort", cohort),
    (f"{LIMITS.flavors_total} flavors, {LIMITS.pairs_per_group} pairs per group", _cq(_groups_setter(4, 8, 64))),
    (
        f"{LIMITS.flavors_per_group} flavors in one group, a Cohort's",
        _cohort(_groups_setter(1, 3, LIMITS.flavors_per_group)),
    ),
    (
        "a third resource group of its own",
        _cq(
            lambda o: o["spec"]["resourceGroups"].append(
                {
                    "coveredResources": ["vpc.amazonaws.com/efa"],
                    "flavors": [{"name": "ml.trn1.32xlarge", "resources": [_efa()]}],
                }
            )
        ),
    ),
    ("lendingLimit equal to nominalQuota (1000m == 1)", _cq(_set((0, 0, 2), nominalQuota="8", lendingLimit="8000m"))),
    (
        "a Cohort lendingLimit above its nominalQuota under a parent",
        _cohort(lambda o: (o["spec"].update(parentName="root"), _set((0, 0, 1), lendingLimit=10)(o))),
    ),
    ("zero quota and limits", _cq(_set((0, 1, 2), nominalQuota=0, borrowingLimit=0))),
    ("a fair-sharing weight of 0", _cq(lambda o: o["spec"].update(fairSharing={"weight": 0}))),
    ("a fair-sharing weight of 2n", _cohort(lambda o: o["spec"].update(fairSharing={"weight": "2n"}))),
]


@pytest.mark.parametrize("make", [c[1] for c in BROKEN], ids=[c[0] for c in BROKEN])
def test_webhook_violations_flags_what_the_real_kueue_webhook_refuses(
    server: Kube, make: Callable[[], dict[str, Any]]
) -> None:
    obj = make()
    errs = refusal(server, obj)
    assert errs, "the real Kueue webhook accepted it"
    assert all(e.startswith("spec.") for e in errs), errs  # Kueue's webhook, not the schema's typed merge
    assert webhook_violations(obj) != []


@pytest.mark.parametrize("make", [c[1] for c in VALID_EDGES], ids=[c[0] for c in VALID_EDGES])
def test_webhook_violations_passes_what_the_real_kueue_webhook_accepts(
    server: Kube, make: Callable[[], dict[str, Any]]
) -> None:
    obj = make()
    assert refusal(server, obj) == []
    assert webhook_violations(obj) == []
