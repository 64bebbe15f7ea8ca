"""Tests of the Kueue CRD validator (schema + CEL) and of the Kueue webhook rules."""

from __future__ import annotations

import copy
import os
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from devkit.kubesim import crds
from devkit.kubesim.crds import (
    CELRuleError,
    apply_defaults,
    evaluate_rule,
    is_transition_rule,
    iter_validation_rules,
    load_crds,
    parse_quantity,
    validate,
    validation_errors,
    webhook_errors,
)

V = "kueue.x-k8s.io/v1beta2"
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


# ---------------------------------------------------------------------------------------------- loading


def test_loads_the_five_kinds_with_scope_and_plurals() -> None:
    c = load_crds()
    assert c.kinds() == sorted(VALID)
    assert c.versions() == ["v1beta1", "v1beta2"]
    for kind in VALID:
        cv = c.lookup(V, kind)
        assert cv is not None and cv.served and cv.storage
        assert c.resource("kueue.x-k8s.io", "v1beta2", cv.plural) is cv
        assert cv.namespaced == (kind == "LocalQueue")
        assert c.lookup("kueue.x-k8s.io/v1beta1", kind).deprecated  # type: ignore[union-attr]
    assert c.resource("kueue.x-k8s.io", "v1beta2", "clusterqueues").short_names == ("cq",)  # type: ignore[union-attr]


def test_crds_dir_comes_from_env_relative_to_repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUEUE_CRDS_DIR", raising=False)
    default = crds.crds_dir()
    assert (default / "kueue.x-k8s.io_clusterqueues.yaml").is_file()
    assert default == (crds.REPO_ROOT / "../shared/kueue/crds").resolve()
    # never inside the repository
    assert crds.REPO_ROOT not in default.parents
    monkeypatch.setenv("KUEUE_CRDS_DIR", "tests/kube")  # relative → against the repo root
    assert crds.crds_dir() == crds.REPO_ROOT / "tests" / "kube"
    with pytest.raises(FileNotFoundError):
        load_crds(crds.crds_dir())


def test_no_crd_copied_into_the_repository() -> None:
    copies = []
    for root, dirs, files in os.walk(crds.REPO_ROOT):
        dirs[:] = [d for d in dirs if d not in (".venv", ".git", "node_modules", "cdk.out") and not d.startswith(".")]
        for f in files:
            if f.endswith((".yaml", ".yml", ".json")):
                text = (Path(root) / f).read_text(errors="ignore")
                if "CustomResourceDefinition" in text and "kueue.x-k8s.io" in text:
                    copies.append(f)
    assert copies == []


# ---------------------------------------------------------------------------------------------- valid


@pytest.mark.parametrize("kind", sorted(VALID))
def test_valid_object_of_each_kind_passes(kind: str) -> None:
    obj = VALID[kind]()
    assert validate(obj) == []
    assert webhook_errors(obj) == []


def test_validation_applies_schema_defaults_first() -> None:
    obj = cluster_queue(preemption={"borrowWithinCohort": {"policy": "LowerPriority"}})
    # reclaimWithinCohort defaults to Never, which the CEL rule forbids with borrowWithinCohort.policy != Never
    errs = validate(obj)
    assert errs == [
        'spec.preemption: Invalid value: "object": reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never'
    ]
    d = apply_defaults(cluster_queue(preemption={}))["spec"]
    assert d["queueingStrategy"] == "BestEffortFIFO"
    assert d["flavorFungibility"] == {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"}
    assert d["preemption"] == {
        "borrowWithinCohort": {"policy": "Never"},
        "reclaimWithinCohort": "Never",
        "withinClusterQueue": "Never",
    }
    assert apply_defaults(local_queue())["spec"]["stopPolicy"] == "None"
    assert "fairSharing" not in apply_defaults(local_queue())["spec"]  # no default for absent parent


# ---------------------------------------------------------------------------------------------- invalid


def _rg(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"]["resourceGroups"][0]


def _res(obj: dict[str, Any], flavor: int = 0, res: int = 0) -> dict[str, Any]:
    return _rg(obj)["flavors"][flavor]["resources"][res]


def m_no_cohort(o: dict[str, Any]) -> None:
    del o["spec"]["cohortName"]


def m_covered_mismatch(o: dict[str, Any]) -> None:
    _rg(o)["coveredResources"].append("vpc.amazonaws.com/efa")


def m_bad_quantity(o: dict[str, Any]) -> None:
    _res(o, 0, 1)["nominalQuota"] = "2TB"


def m_float_quantity(o: dict[str, Any]) -> None:
    _res(o, 0, 0)["nominalQuota"] = 1.5


def m_unknown(o: dict[str, Any]) -> None:
    o["spec"]["cohort"] = "shared-pool"  # the v1beta1 name: unknown in v1beta2


def m_too_many_groups(o: dict[str, Any]) -> None:
    o["spec"]["resourceGroups"] = [copy.deepcopy(_rg(o)) for _ in range(17)]


def m_too_many_covered(o: dict[str, Any]) -> None:
    names = [f"example.com/r{i}" for i in range(65)]
    _rg(o)["coveredResources"] = names
    for f in _rg(o)["flavors"]:
        f["resources"] = [{"name": n, "nominalQuota": 1} for n in names]


def m_missing_nominal(o: dict[str, Any]) -> None:
    del _res(o, 1, 2)["nominalQuota"]


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


CQ_CASES = [
    ("cel-borrowing-no-cohort", m_no_cohort, "spec", "borrowingLimit must be nil when cohort is empty"),
    (
        "cel-covered-mismatch",
        m_covered_mismatch,
        "spec.resourceGroups[0]",
        "flavors must have the same number of resources as the coveredResources",
    ),
    ("quantity-pattern", m_bad_quantity, "spec.resourceGroups[0].flavors[0].resources[1].nominalQuota", "should match"),
    (
        "quantity-float",
        m_float_quantity,
        "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota",
        "must be of type integer,string",
    ),
    ("unknown-field", m_unknown, "spec.cohort", 'unknown field "spec.cohort"'),
    ("too-many-groups", m_too_many_groups, "spec.resourceGroups", "Too many: 17: must have at most 16 items"),
    (
        "too-many-covered",
        m_too_many_covered,
        "spec.resourceGroups[0].coveredResources",
        "Too many: 65: must have at most 64 items",
    ),
    (
        "required-nominal",
        m_missing_nominal,
        "spec.resourceGroups[0].flavors[1].resources[2].nominalQuota",
        "Required value",
    ),
    ("required-flavors", m_missing_flavors, "spec.resourceGroups[0].flavors", "Required value"),
    ("enum", m_bad_enum, "spec.queueingStrategy", 'Unsupported value: "FIFO"'),
    ("pattern", m_bad_cohort_name, "spec.cohortName", "should match"),
    (
        "cel-preference",
        m_preference,
        "spec.flavorFungibility",
        "preference can only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor",
    ),
    ("list-map-duplicate", m_duplicate_flavor, "spec.resourceGroups[0].flavors[1]", "Duplicate value"),
    ("metadata-name", m_bad_name, "metadata.name", "RFC 1123 subdomain"),
    ("metadata-label", m_bad_label, "metadata.labels", "a valid label must be an empty string"),
    ("min-items", m_empty_covered, "spec.resourceGroups[0].coveredResources", "should have at least 1 items"),
]


def _assert_rejected(obj: dict[str, Any], field: str, fragment: str) -> None:
    errs = validate(obj)
    matching = [e for e in errs if e.startswith(field + ": ") and fragment in e]
    assert matching, f"expected an error on {field!r} containing {fragment!r}, got {errs}"


@pytest.mark.parametrize(("mutate", "field", "fragment"), [c[1:] for c in CQ_CASES], ids=[c[0] for c in CQ_CASES])
def test_invalid_cluster_queue_rejected(mutate: Any, field: str, fragment: str) -> None:
    obj = cluster_queue()
    mutate(obj)
    _assert_rejected(obj, field, fragment)


def _cohort_case(mut: Any) -> dict[str, Any]:
    o = cohort()
    mut(o)
    return o


COHORT_CASES = [
    (
        "cel-covered-mismatch",
        lambda o: _rg(o)["coveredResources"].pop(),
        "spec.resourceGroups[0]",
        "same number of resources",
    ),
    ("unknown-field", lambda o: o["spec"].__setitem__("parent", "root"), "spec.parent", "unknown field"),
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
        "spec.resourceGroups[0].flavors[0].resources[1]",
        "Duplicate value",
    ),
]


@pytest.mark.parametrize(
    ("mutate", "field", "fragment"), [c[1:] for c in COHORT_CASES], ids=[c[0] for c in COHORT_CASES]
)
def test_invalid_cohort_rejected(mutate: Any, field: str, fragment: str) -> None:
    _assert_rejected(_cohort_case(mutate), field, fragment)


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
    (
        "cel-toleration-no-key",
        lambda s: s["tolerations"][0].update(key=None, operator="Equal"),
        "spec.tolerations",
        "operator must be Exists",
    ),
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
    ("required-taint-key", lambda s: s["nodeTaints"][0].pop("key"), "spec.nodeTaints[0].key", "Required value"),
    ("unknown-field", lambda s: s.update(nodeSelector={}), "spec.nodeSelector", "unknown field"),
    ("type", lambda s: s.update(nodeLabels={"a": 1}), "spec.nodeLabels[a]", "must be of type string"),
    (
        "date-time",
        lambda s: s["nodeTaints"][0].update(timeAdded="yesterday"),
        "spec.nodeTaints[0].timeAdded",
        "date-time",
    ),
]


@pytest.mark.parametrize(("mutate", "field", "fragment"), [c[1:] for c in RF_CASES], ids=[c[0] for c in RF_CASES])
def test_invalid_resource_flavor_rejected(mutate: Any, field: str, fragment: str) -> None:
    o = resource_flavor()
    mutate(o["spec"])
    _assert_rejected(o, field, fragment)


LQ_CASES = [
    ("namespace-required", lambda o: o["metadata"].pop("namespace"), "metadata.namespace", "Required value"),
    ("namespace-label", lambda o: o["metadata"].update(namespace="a.b"), "metadata.namespace", "RFC 1123 label"),
    ("pattern", lambda o: o["spec"].update(clusterQueue="CQ"), "spec.clusterQueue", "should match"),
    ("enum", lambda o: o["spec"].update(stopPolicy="Pause"), "spec.stopPolicy", "Unsupported value"),
    ("unknown-field", lambda o: o["spec"].update(cohort="x"), "spec.cohort", "unknown field"),
    ("unknown-metadata", lambda o: o["metadata"].update(owner="me"), "metadata.owner", "unknown field"),
    ("max-length", lambda o: o["spec"].update(clusterQueue="a" * 254), "spec.clusterQueue", "Too long"),
]


@pytest.mark.parametrize(("mutate", "field", "fragment"), [c[1:] for c in LQ_CASES], ids=[c[0] for c in LQ_CASES])
def test_invalid_local_queue_rejected(mutate: Any, field: str, fragment: str) -> None:
    o = local_queue()
    mutate(o)
    _assert_rejected(o, field, fragment)


WPC_CASES = [
    ("required-value", lambda o: o.pop("value"), "value", "Required value"),
    ("type", lambda o: o.update(value="100"), "value", "must be of type integer"),
    ("int32-range", lambda o: o.update(value=2**31), "value", "int32"),
    ("unknown-field", lambda o: o.update(spec={"value": 1}), "spec", "unknown field"),
    ("bad-kind-version", lambda o: o.update(apiVersion="kueue.x-k8s.io/v1"), "apiVersion", "no matches for kind"),
]


@pytest.mark.parametrize(("mutate", "field", "fragment"), [c[1:] for c in WPC_CASES], ids=[c[0] for c in WPC_CASES])
def test_invalid_priority_class_rejected(mutate: Any, field: str, fragment: str) -> None:
    o = priority_class()
    mutate(o)
    _assert_rejected(o, field, fragment)


def test_transition_rules_run_only_on_update() -> None:
    old = local_queue()
    new = local_queue()
    new["spec"]["clusterQueue"] = "other-clusterqueue"
    assert validate(new) == []  # create: no oldSelf
    assert validate(new, old) == ['spec.clusterQueue: Invalid value: "string": field is immutable']
    assert validate(old, old) == []
    rf_old = resource_flavor()
    rf_old["spec"]["topologyName"] = "default"
    rf_new = copy.deepcopy(rf_old)
    rf_new["spec"]["nodeLabels"]["extra"] = "1"
    errs = validate(rf_new, rf_old)
    assert errs == ['spec: Invalid value: "object": nodeLabels are immutable when topologyName is set']


def test_rule_that_cannot_evaluate_is_an_error_not_a_pass() -> None:
    # topologyName set, nodeLabels absent: `self.nodeLabels.size()` has no such key → evaluation error
    o = resource_flavor()
    o["spec"] = {"topologyName": "default"}
    errs = validate(o)
    assert len(errs) == 1 and errs[0].startswith("spec: ") and "rule evaluation error" in errs[0]
    with pytest.raises(CELRuleError):
        evaluate_rule({"rule": "ip(self).family() == 4"}, "10.0.0.1", {"type": "string"})
    with pytest.raises(CELRuleError):
        evaluate_rule({"rule": "self.size()"}, "abc", {"type": "string"})  # not a bool
    with pytest.raises(CELRuleError):
        evaluate_rule({"rule": "self =="}, "abc", {"type": "string"})  # does not compile


def test_unknown_fields_are_flagged_as_such() -> None:
    o = cluster_queue()
    o["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["max"] = 1
    errs = validation_errors(o)
    assert [e.field for e in errs if e.unknown_field] == ["spec.resourceGroups[0].flavors[0].resources[0].max"]


def test_status_subresource_fields_are_schema_checked_too() -> None:
    o = local_queue()
    o["status"] = {"pendingWorkloads": "many"}
    _assert_rejected(o, "status.pendingWorkloads", "must be of type integer")


def test_v1beta1_objects_use_the_v1beta1_schema() -> None:
    o = cluster_queue()
    o["apiVersion"] = "kueue.x-k8s.io/v1beta1"
    _assert_rejected(o, "spec.cohortName", "unknown field")  # v1beta1 calls it `cohort`
    o["spec"]["cohort"] = o["spec"].pop("cohortName")
    assert validate(o) == []


# ---------------------------------------------------------------------------------------------- CEL engine


def sample(schema: dict[str, Any], full: bool) -> Any:
    """A value of the schema's shape: every property (full) or only the required ones."""
    if "enum" in schema:
        return schema["enum"][-1 if full else 0]
    if schema.get("x-kubernetes-int-or-string"):
        return "1" if full else 1
    t = schema.get("type")
    if t == "string":
        return "2024-01-01T00:00:00Z" if schema.get("format") == "date-time" else "a"
    if t == "integer":
        return 1
    if t == "number":
        return 1.5
    if t == "boolean":
        return full
    if t == "array":
        n = 2 if full else schema.get("minItems", 0)
        return [sample(schema.get("items", {}), full) for _ in range(n)]
    out: dict[str, Any] = {}
    for name, sub in (schema.get("properties") or {}).items():
        if full or name in schema.get("required", ()):
            out[name] = sample(sub, full)
    if full and isinstance(schema.get("additionalProperties"), dict):
        out["k"] = sample(schema["additionalProperties"], full)
    return out


def _all_rules() -> list[tuple[str, str, dict[str, Any], dict[str, Any]]]:
    out = []
    for (_, version, kind), cv in sorted(load_crds().by_gvk.items()):
        for path, node, rule in iter_validation_rules(cv.schema):
            out.append((f"{kind}/{version}:{path}", version, node, rule))
    return out


ALL_RULES = _all_rules()


def _raw_rules(node: Any) -> list[str]:
    """Every x-kubernetes-validations rule found anywhere in a raw document (schema-agnostic walk)."""
    if isinstance(node, dict):
        found = [r["rule"] for r in node.get("x-kubernetes-validations", [])]
        return found + [x for k, v in node.items() if k != "x-kubernetes-validations" for x in _raw_rules(v)]
    if isinstance(node, list):
        return [x for v in node for x in _raw_rules(v)]
    return []


def test_rule_inventory_is_complete() -> None:
    walked = sorted(r[3]["rule"] for r in ALL_RULES)
    raw = sorted(rule for crd in load_crds().raw for rule in _raw_rules(crd))
    assert walked == raw
    v1beta2 = [r for r in ALL_RULES if r[1] == "v1beta2"]
    assert len(v1beta2) == 16  # 4 ClusterQueue + 1 Cohort + 1 LocalQueue + 10 ResourceFlavor
    assert sum(is_transition_rule(r[3]) for r in v1beta2) == 4


@pytest.mark.parametrize(("where", "version", "node", "rule"), ALL_RULES, ids=[r[0] for r in ALL_RULES])
def test_every_cel_rule_compiles_and_evaluates(
    where: str, version: str, node: dict[str, Any], rule: dict[str, Any]
) -> None:
    results = set()
    for full in (True, False):
        value = sample(node, full)
        ok, message = evaluate_rule(rule, value, node, value)  # oldSelf = self for transition rules
        assert isinstance(ok, bool)
        assert message == rule["message"]
        results.add(ok)
    # every rule holds for some value; the unchanged object satisfies every transition rule
    assert True in results
    if is_transition_rule(rule):
        assert results == {True}


# For every v1beta2 rule, keyed by (path, rule): a `self` (and `oldSelf`) that violates it.
_TOL = "spec.tolerations"
VIOLATIONS: dict[tuple[str, str], tuple[Any, Any]] = {
    ("spec", "borrowingLimit must be nil when cohort is empty"): (
        {"resourceGroups": [{"flavors": [{"resources": [{"name": "cpu", "nominalQuota": 1, "borrowingLimit": 1}]}]}]},
        None,
    ),
    ("spec.flavorFungibility", "preference can only be set"): (
        {"preference": "BorrowingOverPreemption", "whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
        None,
    ),
    ("spec.preemption", "reclaimWithinCohort=Never"): (
        {"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "LowerPriority"}},
        None,
    ),
    ("spec.resourceGroups[*]", "flavors must have the same number"): (
        {"coveredResources": ["cpu"], "flavors": [{"name": "f", "resources": []}]},
        None,
    ),
    ("spec.clusterQueue", "field is immutable"): ("cq-b", "cq-a"),
    ("spec", "at least one nodeLabel"): ({"topologyName": "t", "nodeLabels": {}}, None),
    ("spec", "nodeLabels are immutable"): ({"nodeLabels": {"a": "1"}}, {"topologyName": "t", "nodeLabels": {"a": "2"}}),
    ("spec", "tolerations are immutable"): ({"tolerations": []}, {"topologyName": "t", "tolerations": [{"key": "k"}]}),
    ("spec", "topologyName is immutable"): ({"topologyName": "u"}, {"topologyName": "t"}),
    ("spec.nodeTaints", "supported taint effect"): ([{"key": "k", "effect": "Sometimes"}], None),
    (_TOL, "operator must be Exists"): ([{"operator": "Equal"}], None),
    (_TOL, "effect must be 'NoExecute'"): ([{"key": "k", "tolerationSeconds": 1, "effect": "NoSchedule"}], None),
    (_TOL, "supported toleration values"): ([{"key": "k", "operator": "In"}], None),
    (_TOL, "a value must be empty"): ([{"key": "k", "operator": "Exists", "value": "v"}], None),
    (_TOL, "supported taint effect"): ([{"key": "k", "effect": "Sometimes"}], None),
}


def test_every_v1beta2_rule_can_reject() -> None:
    used = set()
    for where, version, node, rule in ALL_RULES:
        if version != "v1beta2":
            continue
        path = where.split(":", 1)[1]
        (key,) = [k for k in VIOLATIONS if k[0] == path and rule["message"].startswith(k[1])]
        used.add(key)
        value, old = VIOLATIONS[key]
        args = (old,) if is_transition_rule(rule) else ()
        assert evaluate_rule(rule, value, node, *args) == (False, rule["message"]), where
        # and the same rule accepts the sample that conforms (oldSelf unchanged)
        ok, _ = evaluate_rule(rule, sample(node, False), node, *((sample(node, False),) if args else ()))
        assert ok is True, where
    assert used == set(VIOLATIONS)


def test_kubernetes_cel_extension_functions() -> None:
    node = {"type": "object", "properties": {"q": {"x-kubernetes-int-or-string": True}, "s": {"type": "string"}}}
    value = {"q": "1.5Gi", "s": "Hello,World"}
    cases = {
        "isQuantity(self.q) && !isQuantity('1.5x')": True,
        "quantity(self.q).isGreaterThan(quantity('1Gi'))": True,
        "quantity(self.q).isLessThan(quantity('1536Mi'))": False,
        "quantity(self.q).compareTo(quantity('1536Mi')) == 0": True,
        "quantity('500m').add(quantity('500m')).isInteger()": True,
        "quantity('2k').sub(quantity('1')).asInteger() == 1999": True,
        "quantity('-1').sign() == -1": True,
        "self.s.lowerAscii() == 'hello,world' && self.s.upperAscii() == 'HELLO,WORLD'": True,
        "self.s.split(',').size() == 2 && self.s.indexOf('W') == 6 && self.s.substring(0, 5) == 'Hello'": True,
        "['b', 'a'].join('-') == 'b-a' && [1, 2, 3].sum() == 6 && [3, 1].min() == 1 && [1, 2].isSorted()": True,
        "self.s.find('[A-Z][a-z]+') == 'Hello' && self.s.findAll('[A-Z]').size() == 2": True,
        "self.s.replace('l', 'L', 1) == 'HeLlo,World' && '  x '.trim() == 'x' && self.s.charAt(1) == 'e'": True,
        "has(self.q) && !has(self.missing) && self.s.matches('^H.*d$') && self.s.startsWith('He')": True,
        "['a', 'b'].exists(x, x == 'b') && ['a'].all(x, x == 'a') && ['a', 'a'].exists_one(x, x == 'a')": False,
    }
    for rule, expected in cases.items():
        ok, _ = evaluate_rule({"rule": rule, "message": "m"}, value, node)
        assert ok is expected, rule


def test_parse_quantity() -> None:
    assert parse_quantity("1.5Gi") == Fraction(3 * 2**29)
    assert parse_quantity("500m") == Fraction(1, 2)
    assert parse_quantity("1e3") == 1000
    assert parse_quantity("2k") == 2000
    assert parse_quantity(".5") == Fraction(1, 2)
    assert parse_quantity(8) == 8
    for bad in ("1.5x", "Gi", "", "1 Gi", True):
        with pytest.raises(ValueError):
            parse_quantity(bad)


# ---------------------------------------------------------------------------------------------- webhook


def _webhook_has(obj: dict[str, Any], field: str, fragment: str) -> None:
    errs = webhook_errors(obj)
    assert any(e.startswith(field + ": ") and fragment in e for e in errs), errs


def test_webhook_lending_limit_needs_cohort_but_bare_crd_accepts_it() -> None:
    o = cluster_queue()
    del o["spec"]["cohortName"]
    for f in _rg(o)["flavors"]:
        for r in f["resources"]:
            r.pop("borrowingLimit", None)
    assert validate(o) == []  # the CRD only knows about borrowingLimit
    _webhook_has(o, "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit", "must be nil when cohort is empty")


def test_webhook_lending_limit_at_most_nominal() -> None:
    o = cluster_queue()
    _res(o, 0, 2)["lendingLimit"] = 9
    assert validate(o) == []
    _webhook_has(
        o, "spec.resourceGroups[0].flavors[0].resources[2].lendingLimit", "less than or equal to the nominalQuota"
    )
    _res(o, 0, 2)["lendingLimit"] = "8"
    _res(o, 0, 0)["lendingLimit"] = "192000m"
    assert webhook_errors(o) == []


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


def test_webhook_size_limits() -> None:
    o = cluster_queue(resourceGroups=_groups(5, 1, 52))  # 260 flavors in total
    assert validate(o) == []
    _webhook_has(o, "spec.resourceGroups", "total number of flavors across all resourceGroups must be ≤ 256, got 260")
    o = cluster_queue(resourceGroups=_groups(5, 52, 1))  # 260 covered resources
    assert validate(o) == []
    _webhook_has(
        o, "spec.resourceGroups", "total number of covered resources across all resourceGroups must be ≤ 256, got 260"
    )
    o = cluster_queue(resourceGroups=_groups(1, 9, 64))  # 576 flavor-resource pairs in one group
    assert validate(o) == []
    _webhook_has(o, "spec.resourceGroups[0]", "must be ≤ 512, got 576")
    assert webhook_errors(cluster_queue(resourceGroups=_groups(4, 8, 64))) == []  # 256 flavors, 512 pairs each


def test_webhook_resource_names_and_duplicates() -> None:
    o = cluster_queue()
    o["spec"]["resourceGroups"].append(copy.deepcopy(_rg(o)))
    assert validate(o) == []  # duplicates across groups: webhook only
    _webhook_has(o, "spec.resourceGroups[1].coveredResources[0]", 'Duplicate value: "cpu"')
    _webhook_has(o, "spec.resourceGroups[1].flavors[0].name", f'Duplicate value: "{FLAVOR}"')
    o = cluster_queue()
    _rg(o)["coveredResources"][2] = "nvidia.com/gpu/x"
    _webhook_has(o, "spec.resourceGroups[0].coveredResources[2]", "qualified name")
    _webhook_has(o, "spec.resourceGroups[0].flavors[0].resources[2].name", "must match the name in coveredResources")
    o = cluster_queue()
    _res(o, 0, 1)["nominalQuota"] = "-1Gi"
    assert validate(o) == []
    _webhook_has(o, "spec.resourceGroups[0].flavors[0].resources[1].nominalQuota", "greater than or equal to 0")


@pytest.mark.parametrize(
    ("weight", "ok"),
    [(0, True), ("0", True), ("1n", False), ("1e-10", False), ("2n", True), ("0.5", True), ("-1", False), (1, True)],
)
def test_webhook_fair_sharing_weight_floor(weight: Any, ok: bool) -> None:
    for obj in (cluster_queue(fairSharing={"weight": weight}), cohort()):
        obj["spec"]["fairSharing"] = {"weight": weight}
        assert validate(obj) == []
        errs = [e for e in webhook_errors(obj) if e.startswith("spec.fairSharing:")]
        assert (errs == []) is ok, errs


def test_webhook_cohort_rules() -> None:
    o = cohort()
    _res(o, 0, 1)["lendingLimit"] = 10  # above nominal: allowed for a Cohort, but there is no parent
    errs = webhook_errors(o)
    assert errs == [
        'spec.resourceGroups[0].flavors[0].resources[1].lendingLimit: Invalid value: "10": must be nil when parent is empty'
    ]
    o["spec"]["parentName"] = "root"
    assert webhook_errors(o) == []


def test_webhook_namespace_selector_and_flavor_labels() -> None:
    o = cluster_queue(namespaceSelector={"matchExpressions": [{"key": "team", "operator": "In", "values": []}]})
    assert validate(o) == []
    _webhook_has(o, "spec.namespaceSelector.matchExpressions[0].values", "must be specified")
    rf = resource_flavor()
    rf["spec"]["nodeLabels"] = {"bad key": "v"}
    assert validate(rf) == []
    _webhook_has(rf, "spec.nodeLabels", "name part must consist of alphanumeric characters")


def test_crds_are_read_from_env_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a CRD directory with only the LocalQueue CRD (symlinked, not copied): other kinds are unknown
    (tmp_path / "lq.yaml").symlink_to(crds.crds_dir() / "kueue.x-k8s.io_localqueues.yaml")
    monkeypatch.setenv("KUEUE_CRDS_DIR", str(tmp_path))
    only = load_crds()
    assert only.kinds() == ["LocalQueue"]
    errs = validation_errors(resource_flavor(), crds=only)
    assert [e.field for e in errs] == ["apiVersion"]
