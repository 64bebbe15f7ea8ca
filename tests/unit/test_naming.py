"""docs/spec.md §3 names: a team's namespace and queues must be valid Kubernetes names in its cluster."""

from __future__ import annotations

import json

import pytest

from idleshare.domain.catalog import KNOWN_INSTANCE_TYPES
from idleshare.domain.kueue import INVALID_OBJECT_NAME, writable_objects
from idleshare.domain.model import ExclusionReason, PriorityClass, SchedulerConfig, Settings, Snapshot
from idleshare.domain.naming import (
    LABEL_VALUE_MAX,
    PRIORITY_CLASS_NAME_MAX,
    RESERVED_NAMESPACE_PREFIXES,
    cohort_name_problem,
    flavor_name_problem,
    local_queue_name,
    max_team_name_length,
    namespace_prefix_problem,
    object_name_problems,
    priority_class_name_problem,
    team_name_problem,
)
from idleshare.domain.pool import compute
from idleshare_cli.plan import plan
from tests.builders import (
    BAD_NAMES,
    CLUSTER,
    GOOD_OBJECTS,
    P5,
    QUOTAS,
    entry,
    good_object,
    k8s_node,
    node,
    nodes,
    quota,
    spoiled,
)


@pytest.mark.parametrize(
    ("team", "prefix", "ok"),
    [
        ("t" * 40, "hyperpod-ns-", True),
        ("t" * 41, "hyperpod-ns-", False),
        ("t" * 49, "ns-", True),  # a shorter prefix leaves room for a longer team
        ("t" * 50, "hyperpod-ns-", False),
        ("team", "Upper-", False),  # the namespace would not be a DNS label
    ],
)
def test_team_name_problem(team, prefix, ok):
    problem = team_name_problem(team, Settings(namespace_prefix=prefix))
    assert problem is None if ok else problem  # a problem says what it is


def test_a_team_whose_queues_cannot_be_named_is_left_out_and_reported_not_fatal():
    long_team = "t" * 41
    quotas = (quota(long_team, entry(P5, accelerators=8)), quota("ok", entry(P5, accelerators=4)))
    result = compute(Snapshot(nodes=tuple(nodes("p5", P5, 2)), quotas=quotas))
    assert set(result.teams) == {"ok"}
    assert result.allocated[P5]["nvidia.com/gpu"] == 4  # the left-out team reserves nothing it cannot use
    issue = next(i for i in result.issues if i.code == "InvalidTeamName")
    # the default prefix leaves the 40 characters SageMaker's pattern was written for: hyperpod-ns-<team>-localqueue
    # is a label value on every job, 12 + 40 + 11 = 63
    assert max_team_name_length(Settings()) == 40 and len(local_queue_name("t" * 40, Settings())) == LABEL_VALUE_MAX
    assert issue.severity == "error" and issue.subject == long_team and "40" in issue.message


# -- issue 35: every name checked before any write ------------------------------------------------------------

UNIT_ONLY = [  # what the server cannot even be asked: a name that is not text, a newline, a namespace's URL
    ("ResourceFlavor", ("metadata", "name"), "a\n", "metadata.name", True),
    ("ClusterQueue", ("metadata", "name"), 7, "metadata.name", True),
    ("LocalQueue", ("metadata", "namespace"), "Upper", "metadata.namespace", True),
]


@pytest.mark.parametrize(("kind", "path", "value", "field", "api"), BAD_NAMES + UNIT_ONLY, ids=lambda v: str(v)[:30])
def test_every_name_an_object_carries_or_refers_to_is_checked(kind, path, value, field, api):
    assert object_name_problems(good_object(kind)) == []  # given a writable object
    obj = spoiled(kind, path, value)
    problems = object_name_problems(obj)
    assert len(problems) == 1 and field in problems[0], problems
    assert len(problems[0]) < 400  # a hostile name is cut in the message


def test_every_desired_object_of_a_good_cluster_passes():
    assert {o["kind"] for o in GOOD_OBJECTS} == {"Namespace", "ResourceFlavor", "WorkloadPriorityClass", "Cohort"} | {
        "ClusterQueue",
        "LocalQueue",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
    assert [o for o in GOOD_OBJECTS if object_name_problems(o)] == []


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("ml.p5.48xlarge", True),
        ("p5.48xlarge", True),
        ("GPU_Box.X", False),  # a valid label value, not a ResourceFlavor name
        ("gpu_box", False),
        ("Gpu", False),
        ("a" * 63, True),
        ("a" * 64, False),  # the ResourceFlavor's nodeLabels value must hold it
        ("a.-b", False),
    ],
)
def test_flavor_name_problem(value, ok):
    assert (flavor_name_problem(value) is None) is ok


def test_every_instance_type_a_quota_may_name_can_name_a_flavor():
    # the quota parser takes only these (botocore's enum): no quota can ask for an unwritable flavor
    assert [
        t for t in KNOWN_INSTANCE_TYPES if flavor_name_problem(t) or flavor_name_problem(t.removeprefix("ml."))
    ] == []


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("p" * PRIORITY_CLASS_NAME_MAX, True),  # 54 + "-priority" = 63
        ("p" * (PRIORITY_CLASS_NAME_MAX + 1), False),
        ("p" * 300, False),
        ("inference", True),
        ("a.b", False),
        ("Inference", False),
        ("-a", False),
    ],
)
def test_priority_class_name_problem(name, ok):
    assert (priority_class_name_problem(name) is None) is ok
    assert PRIORITY_CLASS_NAME_MAX == 54


@pytest.mark.parametrize(
    ("prefix", "ok"),
    [
        ("hyperpod-ns-", True),
        ("defaul", True),  # a team "t" is refused instead (below)
        ("team-", True),
        ("", False),  # bare namespaces
        ("kube-", False),
        ("kube-x-", False),
        ("openshift-", False),
        ("openshift", False),
        ("default", False),
        ("default-", False),
        ("Hyperpod-", False),
        ("-ns-", False),
        ("n" * 31, True),
        ("n" * 32, False),
        ("ns_", False),
    ],
)
def test_namespace_prefix_problem(prefix, ok):
    assert (namespace_prefix_problem(prefix) is None) is ok


@pytest.mark.parametrize(
    ("prefix", "team"),
    [("defaul", "t"), ("kub", "e-system"), ("k", "ube-public"), ("openshif", "t-x"), ("d", "efault")],
)
def test_a_team_whose_namespace_would_be_reserved_is_refused(prefix, team):
    problem = team_name_problem(team, Settings(namespace_prefix=prefix))
    assert problem and "reserved" in problem
    assert any(f"{prefix}{team}".startswith(p) for p in RESERVED_NAMESPACE_PREFIXES)


@pytest.mark.parametrize(
    ("name", "ok"), [("shared-pool", True), ("pool.a", True), ("Shared", False), ("p" * 253, True), ("p" * 254, False)]
)
def test_cohort_name_problem(name, ok):
    assert (cohort_name_problem(name) is None) is ok


def test_a_node_whose_instance_type_cannot_name_a_flavor_is_excluded_with_its_reason_and_named():
    bad = node("odd-1", flavor="GPU_Box.X")
    not_ready = node("odd-2", flavor="GPU_Box.X", ready=False)  # the label is what must change: it names it
    result = compute(Snapshot(nodes=(*nodes("p5", P5, 2), bad, not_ready), quotas=(quota("a", entry(P5, count=1)),)))
    assert result.excluded_nodes == {"odd-1": ExclusionReason.INVALID_INSTANCE_TYPE, "odd-2": "InvalidInstanceType"}
    assert result.flavors == (P5,) and result.node_counts == {P5: (2, 2)}
    issue = next(i for i in result.issues if i.code == "InvalidInstanceType")
    assert issue.severity == "error" and issue.subject == "GPU_Box.X"
    assert "odd-1, odd-2" in issue.message and "2 node(s)" in issue.message


def test_invalid_instance_types_are_named_within_bounds():
    many = [node(f"n{i}", flavor=f"Bad_{i:03}") for i in range(30)]
    result = compute(Snapshot(nodes=tuple(many)))
    issues = [i for i in result.issues if i.code == "InvalidInstanceType"]
    assert len(issues) == 11 and "20 more node(s)" in next(i.message for i in issues if "more" in i.subject)
    assert result.flavors == ()


def test_a_quota_naming_an_instance_type_that_cannot_name_a_flavor_makes_no_flavor():
    # the quota parser refuses such a type (an enum); a domain Quota from elsewhere still cannot produce one
    q = quota("a", entry("GPU_Box.X", accelerators=8), entry(P5, accelerators=8), absolute=(entry("Bad_X", count=1),))
    result = compute(Snapshot(nodes=tuple(nodes("p5", P5, 2)), quotas=(q,)))
    assert result.flavors == (P5,)
    codes = {(i.code, i.subject) for i in result.issues}
    assert {("InvalidInstanceType", "a-quota/GPU_Box.X"), ("InvalidInstanceType", "a-quota/Bad_X")} <= codes


def test_an_object_that_cannot_be_written_is_named_and_the_others_are_kept():
    sc = SchedulerConfig(
        priority_classes=(PriorityClass("p" * 300, 10), PriorityClass("p" * 55, 20), PriorityClass("ok", 5))
    )
    result, kept = writable_objects(*_pool(sc), sc, Settings())
    names = {(o["kind"], o["metadata"]["name"]) for o in kept}
    assert ("WorkloadPriorityClass", "ok-priority") in names
    assert not any(n.startswith("pp") for _, n in names)
    assert {"ClusterQueue", "Cohort", "LocalQueue", "Namespace", "ResourceFlavor"} <= {k for k, _ in names}
    bad = [i for i in result.issues if i.code == INVALID_OBJECT_NAME]
    assert len(bad) == 2 and all(i.subject.startswith("WorkloadPriorityClass/pp") for i in bad)
    assert all("priority class" in i.message and len(i.subject) <= 130 for i in bad)


def _pool(sc):
    return (compute(Snapshot(nodes=tuple(CLUSTER), quotas=tuple(QUOTAS), scheduler_config=sc)),)


def test_plan_writes_no_invalid_name_and_reports_each():
    odd = k8s_node("odd")
    odd["metadata"]["labels"]["node.kubernetes.io/instance-type"] = "GPU_Box.X"
    nodes_json = json.dumps({"items": [k8s_node("p5-0"), odd]})
    quotas_json = json.dumps(
        [
            {
                "Name": "a",
                "ComputeQuotaConfig": {"ComputeQuotaResources": [{"InstanceType": P5, "Accelerators": 4}]},
                "ComputeQuotaTarget": {"TeamName": "a"},
            }
        ]
    )
    sc_json = json.dumps({"PriorityClasses": [{"Name": "x" * 300, "Weight": 1}, {"Name": "ok", "Weight": 2}]})
    result, manifests = plan(nodes_json, quotas_json, sc_json)
    assert [o for o in manifests if object_name_problems(o)] == []
    assert {o["metadata"]["name"] for o in manifests if o["kind"] == "ResourceFlavor"} == {P5}
    assert result.excluded_nodes == {"odd": "InvalidInstanceType"}
    assert {i.code for i in result.issues} >= {"InvalidInstanceType", INVALID_OBJECT_NAME}
    assert {o["kind"] for o in manifests} >= {"ClusterQueue", "Cohort", "LocalQueue", "WorkloadPriorityClass"}


@pytest.mark.parametrize(
    ("flag", "value", "named"),
    [
        ("--namespace-prefix", "", "must not be empty"),  # teams onto bare namespaces
        ("--namespace-prefix", "kube-", "must not start with 'kube-'"),
        ("--namespace-prefix", "openshift-", "must not start with 'openshift'"),
        ("--namespace-prefix", "default-", "must not start with 'default'"),
        ("--cohort-name", "Shared_Pool", "RFC 1123 subdomain"),
        ("--cohort-name", "p" * 254, "at most 253"),
    ],
)
def test_plan_refuses_a_prefix_or_cohort_that_cannot_name_objects(tmp_path, capsys, flag, value, named):
    from idleshare_cli.main import EXIT_INPUT, main

    (tmp_path / "n.json").write_text(json.dumps({"items": [k8s_node("p5-0")]}))
    (tmp_path / "q.json").write_text("[]")
    files = ["--nodes", str(tmp_path / "n.json"), "--quotas", str(tmp_path / "q.json"), "--format", "json"]
    assert main(["plan", *files]) == 0  # given files plan takes
    capsys.readouterr()
    assert main(["plan", *files, flag, value]) == EXIT_INPUT
    out = capsys.readouterr()
    assert out.out == "" and flag in out.err and named in out.err and "Traceback" not in out.err


def test_plan_json_names_the_node_and_the_object_it_left_out(tmp_path, capsys):
    from idleshare_cli.main import main

    odd = k8s_node("odd")
    odd["metadata"]["labels"]["node.kubernetes.io/instance-type"] = "GPU_Box.X"
    (tmp_path / "n.json").write_text(json.dumps({"items": [k8s_node("p5-0"), odd]}))
    (tmp_path / "q.json").write_text("[]")
    (tmp_path / "sc.json").write_text(json.dumps({"PriorityClasses": [{"Name": "x" * 60, "Weight": 1}]}))
    args = ["--nodes", str(tmp_path / "n.json"), "--quotas", str(tmp_path / "q.json")]
    assert main(["plan", *args, "--scheduler-config", str(tmp_path / "sc.json"), "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert "odd" in json.dumps(document) and "InvalidInstanceType" in json.dumps(document)
    assert {i["code"] for i in document["issues"]} >= {"InvalidInstanceType", INVALID_OBJECT_NAME}
    assert document["manifests"] and all(object_name_problems(m) == [] for m in document["manifests"])
    assert "GPU_Box.X" not in json.dumps(document["manifests"]) and "x" * 60 not in json.dumps(document["manifests"])


def test_the_docs_state_the_names_bounds_and_codes_the_code_has():
    from pathlib import Path

    from idleshare.domain.naming import NAMESPACE_PREFIX_MAX, SUBDOMAIN_MAX

    docs = Path(__file__).resolve().parents[2] / "docs"
    operations = (docs / "operations.md").read_text()
    section = operations[operations.index("## Names idleshare will not write") :]
    section = section[: section.index("\n## ", 1)]
    spec = (docs / "spec.md").read_text()
    for stated in (
        f"more than {PRIORITY_CLASS_NAME_MAX} characters",
        f"longer than {NAMESPACE_PREFIX_MAX} characters",
        f"at most {SUBDOMAIN_MAX} characters",
        f"at most {LABEL_VALUE_MAX} characters",
        f"`{ExclusionReason.INVALID_INSTANCE_TYPE}`",
        f"`{INVALID_OBJECT_NAME}`",
        "SchedulerConfig.PriorityClasses[i].Name",
        *(f"`{p}`" for p in RESERVED_NAMESPACE_PREFIXES),
    ):
        assert stated in section, stated
    assert f"of at most {PRIORITY_CLASS_NAME_MAX}" in spec and f"`{INVALID_OBJECT_NAME}`" in spec
    assert all(f"`{p}`" in spec for p in RESERVED_NAMESPACE_PREFIXES)
