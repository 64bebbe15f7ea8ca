"""Compute quota and scheduler config parsing (idleshare.parse.quotas): first every bound, enum, pattern, list length
and required member of botocore's SageMaker shapes idleshare reads (a botocore release changing one fails here), then
named cases."""

from __future__ import annotations

import json
import pickle
import re
import subprocess
import sys
from collections.abc import Iterator
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any, NamedTuple

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from idleshare.domain.catalog import KNOWN_INSTANCE_TYPES
from idleshare.domain.model import AcceleratorPartition, PriorityClass, Quota, ResourceConfig, SchedulerConfig, Strategy
from idleshare.domain.naming import DNS_LABEL
from idleshare.parse import quotas
from idleshare.parse.errors import MAX_ERRORS, FieldError, InputError
from idleshare.parse.quotas import parse_quotas, parse_scheduler_config
from idleshare.parse.schema import Shape, field_names
from tests.corpus.make_corpus import (
    LIST_ITEMS,
    MODEL,
    QUOTA_BASE,
    QUOTA_MEMBERS,
    SCHEDULER_BASE,
    SCHEDULER_MEMBERS,
    Member,
    Path_,
    get_at,
    loc,
    mutate,
    walk,
)
from tests.strategies import paths

# The botocore walk, the valid base documents and the mutation are the corpus generator's
# (tests/corpus/make_corpus.py): these tests check the same members against the same bounds.


class Case(NamedTuple):
    kind: str  # "quota" | "scheduler"
    path: Path_
    value: Any
    ok: bool
    why: str


def cases_for(kind: str, node: Member) -> Iterator[Case]:
    """What botocore accepts at each bound (tests/corpus holds, and test_corpus.py refuses, one past each bound)."""
    shape, path, md = node.shape, node.path, node.shape.metadata
    if shape.type_name in ("integer", "float", "long", "double"):
        yield from (Case(kind, path, md[bound], True, f"at-{bound}") for bound in ("min", "max") if bound in md)
        yield Case(kind, path, 1.5, shape.type_name in ("float", "double"), "fraction")
    elif shape.type_name == "string":
        enum = md.get("enum") or []
        for member in enum if len(enum) < 50 else enum[:: len(enum) // 20]:
            yield Case(kind, path, member, True, f"enum-{member}")
        if "pattern" in md:
            for value in ["-", "-a", "a-", "A_b", "a b", "a.b", "a/b", "ä", "a\n", "Team", "x" * 5 + "_"]:
                if not re.fullmatch(md["pattern"], value):  # beyond the corpus's few
                    yield Case(kind, path, value, False, f"pattern-mismatch-{value!r}")
            for value in ["a", "a1", "a-b", "a--b", "0-x-9", "a" * (md.get("max") or 40)]:
                if re.fullmatch(md["pattern"], value):
                    yield Case(kind, path, value, True, f"pattern-match-{len(value)}")
        if "max" in md:
            yield Case(kind, path, "a" * md["max"], True, "longest")
    elif shape.type_name == "list":
        item = LIST_ITEMS[shape.member.name]
        if "max" in md:
            yield Case(kind, path, [item(i) for i in range(md["max"])], True, "max-items")
        yield Case(kind, path, [], True, "empty-list")


QUOTA_NODES = list(walk("CreateComputeQuotaRequest", QUOTA_MEMBERS))
SCHEDULER_NODES = list(walk("CreateClusterSchedulerConfigRequest", SCHEDULER_MEMBERS))
CASES = [
    c
    for kind, nodes in (("quota", QUOTA_NODES), ("scheduler", SCHEDULER_NODES))
    for n in nodes
    for c in cases_for(kind, n)
]
NAMED_SHAPES = {n.shape.name for n in QUOTA_NODES + SCHEDULER_NODES}


def test_the_walk_reaches_every_shape_and_the_base_documents_every_member() -> None:
    shapes = {"ComputeQuotaConfig", "ComputeQuotaResourceConfig", "AcceleratorPartitionConfig", "ResourceSharingConfig"}
    shapes |= {"ComputeQuotaTarget", "ActivationState", "PreemptTeamTasks", "EntityName", "SchedulerConfig"}
    shapes |= {"PriorityClass", "FairShare", "IdleResourceSharing", "ClusterInstanceType", "MIGProfileType"}
    assert shapes | {"BorrowLimit", "FairShareWeight", "PriorityWeight"} <= NAMED_SHAPES
    assert len(CASES) > 100
    for base, nodes in ((QUOTA_BASE, QUOTA_NODES), (SCHEDULER_BASE, SCHEDULER_NODES)):
        for node in nodes:
            get_at(base, node.path)  # KeyError: botocore grew a member the base documents lack


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.kind}:{loc(c.path)}:{c.why}")
def test_botocore_constraint(case: Case) -> None:
    quota = case.kind == "quota"
    doc = mutate(QUOTA_BASE if quota else SCHEDULER_BASE, case.path, case.value)
    parse, doc, where = (parse_quotas, [doc], (0,)) if quota else (parse_scheduler_config, doc, ())
    for raw in (doc, json.dumps(doc)):
        if case.ok:
            parse(raw, "q.json")
            continue
        with pytest.raises(InputError) as caught:
            parse(raw, "q.json")
        expected = loc((*where, *case.path))
        assert expected in [e.loc for e in caught.value.errors] and expected in str(caught.value), caught.value


INSTANCE_TYPE_PATHS = (
    ("ComputeQuotaConfig", "ComputeQuotaResources", 0, "InstanceType"),
    ("ComputeQuotaConfig", "ResourceSharingConfig", "AbsoluteBorrowLimits", 0, "InstanceType"),
)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("ml.p5.96xlarge", '"ml.p5.96xlarge" is not a ClusterInstanceType value; did you mean ml.p5.'),
        ("ml.p5.48xlage", "did you mean ml.p5.48xlarge?"),
        ("", "must not be empty"),
        ("P5.48XLARGE", "lower-case RFC 1123 subdomain"),
        ("p5_48xlarge", "lower-case RFC 1123 subdomain"),
        ("a" * 64, "at most 63 characters"),
    ],
)
def test_an_instance_type_that_is_no_flavor_or_an_ml_name_outside_the_enum_is_rejected_everywhere(
    name: str, message: str
) -> None:
    for path in INSTANCE_TYPE_PATHS:
        with pytest.raises(InputError, match=re.escape(loc((0, *path)))) as caught:
            parse_quotas([mutate(QUOTA_BASE, path, name)])
        assert message in str(caught.value), caught.value


@pytest.mark.parametrize("name", ["trn1.2xlarge", "inf2.xlarge", "g6e.12xlarge", "p5.48xlarge", "c7i.metal-24xl"])
def test_an_ec2_instance_type_or_any_a_node_can_carry_is_accepted_everywhere(name: str) -> None:
    # issue 40.3: plain EKS (Karpenter) nodes carry EC2 names; a quota names the cluster's own nodes
    for path in INSTANCE_TYPE_PATHS:
        (quota,) = parse_quotas([mutate(QUOTA_BASE, path, name)])
        entries = quota.resources if path[1] == "ComputeQuotaResources" else quota.absolute_borrow_limits
        assert entries[0].instance_type == name and type(entries[0].instance_type) is str


@pytest.mark.parametrize("name", sorted(KNOWN_INSTANCE_TYPES))
def test_every_enum_instance_type_is_accepted(name: str) -> None:
    doc = mutate(QUOTA_BASE, ("ComputeQuotaConfig", "ComputeQuotaResources", 0, "InstanceType"), name)
    (quota,) = parse_quotas([doc])
    assert quota.resources[0].instance_type == name


# ------------------------------------------------------------- the Shapes mirror botocore's shapes
def members(shape: str) -> set[str]:
    return set(MODEL.shape_for(shape).members)


def info(shape: type[Shape]) -> Any:
    return msgspec.inspect.type_info(shape)


SHAPE_SOURCES = {
    **{name: (name,) for name in ("AcceleratorPartitionConfig", "ComputeQuotaResourceConfig", "ResourceSharingConfig")},
    **{name: (name,) for name in ("ComputeQuotaConfig", "ComputeQuotaTarget", "SchedulerConfig", "PriorityClass")},
    "ComputeQuota": ("CreateComputeQuotaRequest", "DescribeComputeQuotaResponse"),
    "ClusterSchedulerConfig": ("CreateClusterSchedulerConfigRequest", "DescribeClusterSchedulerConfigResponse"),
}


@pytest.mark.parametrize(("name", "sources"), SHAPE_SOURCES.items())
def test_shape_fields_and_required_fields_are_botocores(name: str, sources: tuple[str, ...]) -> None:
    shapes = [MODEL.shape_for(source) for source in sources]
    assert set(quotas.SHAPES[name].__struct_encode_fields__) == set().union(*(set(s.members) for s in shapes))
    # required in both the request and the response shape; a scheduler config may be its bare SchedulerConfig
    required = (
        set.intersection(*(set(s.required_members) for s in shapes)) if name != "ClusterSchedulerConfig" else set()
    )
    assert {f.encode_name for f in info(quotas.SHAPES[name]).fields if f.required} == required


def constraints(kind: Any) -> dict[str, Any]:
    """The bounds a field's type carries, named as botocore's metadata names them (min, max, enum, pattern)."""
    extra: dict[str, Any] = {}
    while isinstance(kind, msgspec.inspect.UnionType | msgspec.inspect.Metadata):
        if isinstance(kind, msgspec.inspect.Metadata):
            extra |= kind.extra or {}
            kind = kind.type
        else:
            (kind,) = [t for t in kind.types if not isinstance(t, msgspec.inspect.NoneType)]
    found: dict[str, Any] = {}
    if isinstance(kind, msgspec.inspect.LiteralType):
        found["enum"] = sorted(kind.values)
    elif isinstance(kind, msgspec.inspect.IntType):
        found |= {"min": kind.ge, "max": kind.le}
    elif isinstance(kind, msgspec.inspect.StrType):
        found |= {"min": kind.min_length, "max": kind.max_length}
    elif isinstance(kind, msgspec.inspect.ListType):
        found |= {"min": kind.min_length or 0, "max": kind.max_length}
    elif isinstance(kind, msgspec.inspect.CustomType):
        found |= {"min": getattr(kind.cls, "minimum", None), "max": getattr(kind.cls, "maximum", None)}
        found |= {"enum": sorted(kind.cls.enum)} if hasattr(kind.cls, "enum") else {}  # InstanceType: its ml. names
    if "pattern" in extra:
        found["pattern"] = extra["pattern"]
    return {k: v for k, v in found.items() if v is not None}


BOUND_KINDS = ("min", "max", "enum", "pattern")
BOUNDED_MEMBERS = [  # of each Shape but the scheduler config's wrapper, as the create request has it
    (name, field)
    for name, (botocore, *_) in SHAPE_SOURCES.items()
    if name != "ClusterSchedulerConfig"
    for field, member in MODEL.shape_for(botocore).members.items()
    if member.type_name != "structure" and field not in ("ClusterArn", "Description", "Tags")  # accepted, ignored
]


@pytest.mark.parametrize(("name", "field"), BOUNDED_MEMBERS)
def test_every_bound_on_a_field_is_botocores(name: str, field: str) -> None:
    # Catches what behaviour alone cannot: an enum value botocore does not have, a bound botocore changed.
    member = MODEL.shape_for(SHAPE_SOURCES[name][0]).members[field]
    expected = {k: sorted(v) if k == "enum" else v for k, v in member.metadata.items() if k in BOUND_KINDS}
    if member.type_name in ("integer", "long", "float", "double", "list"):
        expected.setdefault("min", 0)  # where botocore states no minimum, a count, an amount or a length is >= 0
    (ours,) = [f.type for f in info(quotas.SHAPES[name]).fields if f.encode_name == field]
    assert constraints(ours) == expected


def test_the_bounded_members_cover_every_bound_kind() -> None:
    kinds = {
        kind
        for name, field in BOUNDED_MEMBERS
        for kind in MODEL.shape_for(SHAPE_SOURCES[name][0]).members[field].metadata
        if kind in BOUND_KINDS
    }
    assert kinds == set(BOUND_KINDS) and len(BOUNDED_MEMBERS) >= 20


NAME_PATTERNS = [
    MODEL.shape_for("ComputeQuotaTargetTeamName").metadata["pattern"],
    MODEL.shape_for("ClusterSchedulerPriorityClassName").metadata["pattern"],
]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab09-_A.", max_size=14))
def test_the_linear_name_pattern_accepts_exactly_what_botocore_does(name: str) -> None:
    linear = re.compile(DNS_LABEL)
    for pattern in NAME_PATTERNS:
        assert (re.fullmatch(pattern, name) is None) == (linear.fullmatch(name) is None)


def test_a_long_almost_valid_name_is_rejected_quickly() -> None:
    # botocore's pattern backtracks exponentially in Python's re (24 chars: ~1 s, 40: hours).
    name = "a" * 5000 + "!"
    doc = mutate(QUOTA_BASE, ("ComputeQuotaTarget", "TeamName"), name)
    # No timed assertion: with botocore's pattern this call would not return for hours.
    with pytest.raises(InputError, match="TeamName: must be a valid team name"):
        parse_quotas([doc])
    with pytest.raises(InputError, match=r"PriorityClasses\[0\]\.Name"):
        parse_scheduler_config({"PriorityClasses": [{"Name": name, "Weight": 1}]})


def test_list_response_members_are_accepted() -> None:
    assert members("ComputeQuotaSummary") <= set(quotas.SHAPES["ComputeQuota"].__struct_encode_fields__)
    listed = [{**QUOTA_BASE, "Status": "Created", "ComputeQuotaVersion": 1}]
    doc = {"ComputeQuotaSummaries": listed, "NextToken": "abc"}
    assert set(doc) <= members("ListComputeQuotasResponse")
    assert parse_quotas(doc)[0].name == "team-a-quota"


# --------------------------------------------------------------------------------- named cases
CREATE = {
    "Name": "ml-research",
    "ClusterArn": "arn:aws:sagemaker:us-west-2:123456789012:cluster/abcdef123456",
    "Description": "research team quota",
    "ComputeQuotaConfig": {
        "ComputeQuotaResources": [
            {"InstanceType": "ml.p5.48xlarge", "Count": 2},
            {"InstanceType": "ml.g5.12xlarge", "Accelerators": 3, "VCpu": 30.5, "MemoryInGiB": 0.1},
            {"InstanceType": "ml.p4d.24xlarge", "AcceleratorPartition": {"Type": "mig-1g.5gb", "Count": 7}},
        ],
        "ResourceSharingConfig": {
            "Strategy": "LendAndBorrow",
            "BorrowLimit": 150,
            "AbsoluteBorrowLimits": [{"InstanceType": "ml.p5.48xlarge", "Accelerators": 4}],
        },
        "PreemptTeamTasks": "LowerPriority",
    },
    "ComputeQuotaTarget": {"TeamName": "research", "FairShareWeight": 10},
    "ActivationState": "Enabled",
    "Tags": [{"Key": "owner", "Value": "ml-platform"}],
}
EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "events" / "examples"
EXAMPLES = json.loads((EXAMPLES_DIR / "quotas.json").read_text())
DESCRIBE = {**EXAMPLES[1], "ActivationState": "Disabled", "FailureReason": ""}  # a DescribeComputeQuota response
MINIMAL = {"Name": "batch", "ComputeQuotaTarget": {"TeamName": "batch"}}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            json.dumps([CREATE]),
            Quota(
                name="ml-research",
                team="research",
                resources=(
                    ResourceConfig("ml.p5.48xlarge", count=2),
                    ResourceConfig("ml.g5.12xlarge", accelerators=3, vcpu=Fraction(61, 2), memory_gib=Fraction(1, 10)),
                    ResourceConfig("ml.p4d.24xlarge", accelerator_partition=AcceleratorPartition("mig-1g.5gb", 7)),
                ),
                strategy=Strategy.LEND_AND_BORROW,
                borrow_limit=150,
                absolute_borrow_limits=(ResourceConfig("ml.p5.48xlarge", accelerators=4),),
                preempt_team_tasks="LowerPriority",
                fair_share_weight=10,
                enabled=True,
            ),
        ),
        (
            json.dumps([DESCRIBE]).encode(),  # its extra fields are ignored
            Quota(
                name="nlp-quota",
                team="nlp",
                resources=(
                    ResourceConfig("ml.p5.48xlarge", accelerators=16),
                    ResourceConfig("ml.g5.12xlarge", count=2),
                ),
                strategy=Strategy.LEND,
                borrow_limit=None,
                preempt_team_tasks="Never",
                fair_share_weight=50,
                enabled=False,
            ),
        ),
    ],
    ids=["create", "describe"],
)
def test_the_api_shapes_parse_to_the_domain(raw: object, expected: Quota) -> None:
    assert parse_quotas(raw, "quotas.json") == (expected,)


@pytest.mark.parametrize(
    ("raw", "teams"),
    [
        (DESCRIBE, ["nlp"]),  # a single describe response object
        (json.dumps({"ComputeQuotas": [CREATE, DESCRIBE], "NextToken": "opaque"}), ["research", "nlp"]),
        ("[]", []),
        ({"ComputeQuotas": []}, []),
        (b"\xef\xbb\xbf[]", []),  # a UTF-8 BOM is tolerated
    ],
    ids=["describe", "wrapper", "empty", "empty-wrapper", "bom"],
)
def test_each_document_shape_parses(raw: object, teams: list[str]) -> None:
    assert [q.team for q in parse_quotas(raw)] == teams


def test_defaults_when_sharing_config_and_activation_state_are_absent() -> None:
    (quota,) = parse_quotas([MINIMAL])
    assert quota == Quota(name="batch", team="batch")
    # the engine applies its default BorrowLimit (50) to None
    expected = (Strategy.LEND_AND_BORROW, None, "Never", True, ())
    assert (quota.strategy, quota.borrow_limit, quota.preempt_team_tasks, quota.enabled, quota.resources) == expected
    (base,) = parse_quotas([QUOTA_BASE])  # the same instance type in the quota and the borrow limits is fine
    assert base.resources[0].instance_type == base.absolute_borrow_limits[0].instance_type


def test_the_error_message_names_source_path_bound_and_value() -> None:
    bad = mutate(QUOTA_BASE, ("ComputeQuotaConfig", "ResourceSharingConfig", "BorrowLimit"), 20000)
    bad = mutate(bad, ("Name", ), "other")  # fmt: skip
    bad = mutate(bad, ("ComputeQuotaTarget", "TeamName"), "team-b")
    with pytest.raises(InputError) as caught:
        parse_quotas([QUOTA_BASE, bad], "quotas.json")
    assert str(caught.value) == (
        "quotas.json: [1].ComputeQuotaConfig.ResourceSharingConfig.BorrowLimit: must be <= 10000 (got 20000)"
    )
    assert caught.value.source == "quotas.json"


TWICE = [{"InstanceType": "ml.g5.xlarge", "Count": 1}, {"InstanceType": "ml.g5.xlarge", "Count": 2}]
LISTED_TWICE = 'instance type "ml.g5.xlarge" listed twice (also [0])'
TWICE_CONFIG = {
    "ComputeQuotaResources": TWICE,
    "ResourceSharingConfig": {"Strategy": "Lend", "AbsoluteBorrowLimits": TWICE},
}
BORROW = "ResourceSharingConfig.AbsoluteBorrowLimits"
QUOTA_ERRORS = {
    "every-problem-at-once": (
        [mutate(mutate(QUOTA_BASE, ("ActivationState",), "On"), ("ComputeQuotaTarget", "FairShareWeight"), 101), 5],
        [
            ("[0].ComputeQuotaTarget.FairShareWeight", "must be <= 100 (got 101)"),
            ("[0].ActivationState", 'must be one of Disabled, Enabled (got "On")'),
            ("[1]", "must be an object (got 5)"),
        ],
    ),
    "misspelled-key": (
        [{**MINIMAL, "ComputeQuotaConfg": {"ComputeQuotaResources": []}}],
        [("[0].ComputeQuotaConfg", "unknown field; did you mean ComputeQuotaConfig?")],
    ),
    "misspelled-nested-key": (
        [{**MINIMAL, "ComputeQuotaConfig": {"ComputeQuotaResources": [{"InstanceType": "ml.p5.48xlarge", "Cout": 1}]}}],
        [("[0].ComputeQuotaConfig.ComputeQuotaResources[0].Cout", "unknown field; did you mean Count?")],
    ),
    "key-in-the-wrong-object": (
        [{**MINIMAL, "Strategy": "Lend"}],
        [("[0].Strategy", "unknown field here: put it inside ComputeQuotaConfig.ResourceSharingConfig")],
    ),
    "strategy-required": (
        [{**MINIMAL, "ComputeQuotaConfig": {"ResourceSharingConfig": {"BorrowLimit": 10}}}],
        [("[0].ComputeQuotaConfig.ResourceSharingConfig.Strategy", "required field is missing")],
    ),
    "two-quotas-for-one-team": (
        [MINIMAL, {"Name": "batch-2", "ComputeQuotaTarget": {"TeamName": "batch"}}],
        [("[1].ComputeQuotaTarget.TeamName", 'team "batch" has two quotas: "batch" ([0]) and "batch-2" ([1])')],
    ),
    "duplicate-quota-name": (
        {"ComputeQuotas": [MINIMAL, {"Name": "batch", "ComputeQuotaTarget": {"TeamName": "other-team"}}]},
        [("ComputeQuotas[1].Name", 'duplicate quota name "batch" (also ComputeQuotas[0])')],
    ),
    "instance-type-twice-in-one-list": (
        [{**MINIMAL, "ComputeQuotaConfig": TWICE_CONFIG}],
        [(f"[0].ComputeQuotaConfig.{at}[1].InstanceType", LISTED_TWICE) for at in ("ComputeQuotaResources", BORROW)],
    ),
    "wrapper-not-a-list": ({"ComputeQuotas": 5}, [("ComputeQuotas", "must be an array (got 5)")]),
    "both-list-keys": (
        {"ComputeQuotas": [CREATE], "ComputeQuotaSummaries": [DESCRIBE]},
        [("", "give ComputeQuotas or ComputeQuotaSummaries, not both")],
    ),
}


@pytest.mark.parametrize(("raw", "expected"), QUOTA_ERRORS.values(), ids=QUOTA_ERRORS)
def test_each_problem_is_named_with_its_field(raw: object, expected: list[tuple[str, str]]) -> None:
    with pytest.raises(InputError) as caught:
        parse_quotas(raw, "quotas.json")
    assert [(e.loc, e.message) for e in caught.value.errors] == expected
    if len(expected) > 1:
        assert f"{len(expected)} errors" in str(caught.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1.5", Fraction(3, 2)),
        ("0.1", Fraction(1, 10)),
        ("0.3", Fraction(3, 10)),
        ("2", 2),
        ("2.0", 2),
        ("1e2", 100),
        ("12.125", Fraction(97, 8)),
        ("9999999.999999", Fraction(9999999999999, 1000000)),
        ("0.10000000000000000001", Fraction(10**19 + 1, 10**20)),  # JSON text keeps digits a float would lose
    ],
)
def test_float_amounts_are_exact(text: str, expected: Fraction | int) -> None:
    doc = (
        '[{"Name": "a", "ComputeQuotaTarget": {"TeamName": "a"}, "ComputeQuotaConfig": {"ComputeQuotaResources":'
        f' [{{"InstanceType": "ml.c5.large", "VCpu": {text}, "MemoryInGiB": {text}}}]}}}}]'
    )
    (quota,) = parse_quotas(doc)
    entry = quota.resources[0]
    assert entry.vcpu == expected and entry.memory_gib == expected
    assert type(entry.vcpu) is type(expected)  # a whole number is an int, never a float


def test_python_floats_are_read_by_their_decimal_repr() -> None:
    doc = mutate(QUOTA_BASE, ("ComputeQuotaConfig", "ComputeQuotaResources", 0, "VCpu"), 0.1)
    (quota,) = parse_quotas([doc])
    assert quota.resources[0].vcpu == Fraction(1, 10)
    doc = mutate(QUOTA_BASE, ("ComputeQuotaConfig", "ComputeQuotaResources", 0, "MemoryInGiB"), Decimal("1.5"))
    assert parse_quotas([doc])[0].resources[0].memory_gib == Fraction(3, 2)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), Decimal("NaN"), Decimal("-Infinity")])
def test_non_finite_amounts_are_rejected(value: object) -> None:
    doc = mutate(QUOTA_BASE, ("ComputeQuotaConfig", "ComputeQuotaResources", 0, "VCpu"), value)
    with pytest.raises(InputError, match="VCpu: must be a finite number"):
        parse_quotas([doc])


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        (b"\xff\xfe[", "not UTF-8"),
        ("", "invalid JSON at line 1 column 1"),
        ('[\n  {"Name": "a",\n   "ComputeQuotaTarget": {"TeamName": "a"}\n  ,]\n', "invalid JSON at line 4 column 4"),
        ("[NaN]", "[0]: NaN is not a JSON number"),
        ('[{"Name": Infinity}]', "[0].Name: Infinity is not a JSON number"),
        ('"quotas"', 'expected an array of compute quotas or an object, got "quotas"'),
        ("42", "got 42"),
        (None, "got null"),
        ("[[]]", "[0]: must be an object (got an array)"),
        ("[" * 100_000, "nested too deeply"),
        ("[" + "9" * 5000 + "]", "[0]: an integer of 5000 digits (at most 4300)"),
        ('[{"Name": "\\ud800"}]', "[0].Name: character 0 is a lone surrogate"),
        ("[1e999999999]", "[0]: the number 1e999999999 is out of range"),
    ],
)
def test_documents_that_are_not_quotas(raw: object, fragment: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_quotas(raw, "quotas.json")
    assert str(caught.value).startswith("quotas.json: ") and fragment in str(caught.value)


@pytest.mark.parametrize("value", [10**5000, -(10**5000)], ids=["huge", "huge-negative"])
def test_huge_integers_are_reported_not_crashed_on(value: int) -> None:
    # repr() of an int over 4300 digits raises ValueError; the message must not need it.
    doc = mutate(QUOTA_BASE, ("ComputeQuotaConfig", "ResourceSharingConfig", "BorrowLimit"), value)
    with pytest.raises(InputError, match=r"BorrowLimit: must be [<>]= \d+ \(got a (negative )?16610-bit integer\)"):
        parse_quotas([doc])


def test_error_lists_are_capped_and_an_input_error_survives_pickling() -> None:
    with pytest.raises(InputError) as caught:
        parse_quotas([1] * 200)
    assert len(caught.value.errors) == MAX_ERRORS + 1
    assert caught.value.errors[-1].message == "... and 150 more errors"
    error = InputError("q.json", [FieldError("[0].Name", "bad")])
    again = pickle.loads(pickle.dumps(error))
    assert str(again) == str(error) == "q.json: [0].Name: bad"


# ------------------------------------------------------------------------------ scheduler config
BARE = {
    "PriorityClasses": [{"Name": "inference", "Weight": 100}, {"Name": "training", "Weight": 50}],
    "FairShare": "Disabled",
    "IdleResourceSharing": "Disabled",
}
EXPECTED_SCHEDULER = SchedulerConfig(
    priority_classes=(PriorityClass("inference", 100), PriorityClass("training", 50)),
    fair_share=False,
    idle_resource_sharing=False,
)
CREATE_SCHEDULER = {"Name": "default", "ClusterArn": CREATE["ClusterArn"], "SchedulerConfig": BARE}
DESCRIBE_SCHEDULER = json.loads((EXAMPLES_DIR / "scheduler-config.json").read_text()) | {"SchedulerConfig": BARE}
EVERYTHING_ENABLED = SchedulerConfig(priority_classes=(), fair_share=True, idle_resource_sharing=True)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        *[
            (raw, EVERYTHING_ENABLED)
            for raw in (None, "", "  \n", b"", "null", {}, {"SchedulerConfig": {}}, {"Name": "x"})
        ],
        (json.dumps(BARE), EXPECTED_SCHEDULER),
        ({**CREATE_SCHEDULER, "Description": "cluster policy", "Tags": []}, EXPECTED_SCHEDULER),
        (json.dumps(DESCRIBE_SCHEDULER).encode(), EXPECTED_SCHEDULER),
        ({"IdleResourceSharing": "Disabled"}, SchedulerConfig(fair_share=True, idle_resource_sharing=False)),
    ],
)
def test_scheduler_config_shapes(raw: object, expected: SchedulerConfig) -> None:
    assert parse_scheduler_config(raw) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"Name": "x", "FairShare": "Disabled"}, [("FairShare", "unknown field here: put it inside SchedulerConfig")]),
        (
            {"SchedulerConfig": {"PriorityClasses": [{"Name": "a", "Weight": 1}, {"Name": "a", "Weight": 2}]}},
            [("SchedulerConfig.PriorityClasses[1].Name", 'duplicate priority class "a" (also PriorityClasses[0])')],
        ),
        ("[]", [("", "expected an object, got an array")]),
        ("{", [("", "invalid JSON at line 1 column 2: Expecting property name enclosed in double quotes")]),
        ("5", [("", "expected an object, got 5")]),
    ],
)
def test_scheduler_config_problems_name_their_field(raw: object, expected: list[tuple[str, str]]) -> None:
    with pytest.raises(InputError) as caught:
        parse_scheduler_config(raw, "sched.json")
    assert [(e.loc, e.message) for e in caught.value.errors] == expected


# ------------------------------------------------------------------------------------ fuzzing
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.decimals() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(
            st.sampled_from([*sorted(field_names(quotas.ComputeQuotaList, quotas.ClusterSchedulerConfig)), "x"])
            | st.text(max_size=10),
            children,
            max_size=6,
        )
    ),
    max_leaves=12,
)


QUOTA_PATHS = [path for path in paths(QUOTA_BASE) if path]
FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ------------------------------------------------------------------------ the schema and its refusal
def msgspec_refusal(document: Any, kind: Any) -> str | None:
    """Where msgspec itself stops on ``document`` (its first problem), as our path, or None if it accepts it."""
    try:
        msgspec.convert(document, kind, strict=True, dec_hook=lambda t, v: t.check(v))
    except msgspec.ValidationError as exc:
        message, _, where = str(exc).partition(" - at `$")
        path = where.rstrip("`")
        named = re.match(r"Object (?:contains unknown|missing required) field `(.*)`", message, re.S)
        return (path + "." + named.group(1) if path else named.group(1)) if named else path
    return None


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(QUOTA_PATHS), json_values), max_size=3))
def test_a_refusal_names_where_msgspec_stopped_and_an_acceptance_names_nothing(mutations: list[Any]) -> None:
    doc = QUOTA_BASE
    for path, value in mutations:
        try:
            doc = mutate(doc, path, value)
        except (KeyError, IndexError, TypeError):
            continue
    document = [doc]
    where = msgspec_refusal(document, list[quotas.ComputeQuota])
    try:
        result = parse_quotas(document)
    except InputError as error:
        assert where is None or where in [e.loc for e in error.errors], (where, error.errors)
    else:
        assert where is None
        amounts = [a for q in result for e in (*q.resources, *q.absolute_borrow_limits) for a in (e.vcpu, e.memory_gib)]
        assert all(a is None or type(a) in (int, Fraction) for a in amounts)  # exact, never a float


def test_idleshare_plan_loads_no_pydantic_whatever_the_quotas() -> None:
    # the whole command's start-up is its cost on a small cluster (docs/decisions.md: the schema library)
    code = (
        "import sys; from idleshare_cli.plan import plan_from_bytes\n"
        "plan_from_bytes(b'[]', b'[]')\n"
        "try: plan_from_bytes(b'[]', b'[{\"Name\": 5}]')\n"
        "except ValueError: pass\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'pydantic', 'pydantic_core', 'lightkube'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# -- several files (`plan --quotas A.json --quotas B.json`) ----------------------------------------------


def test_quota_files_are_read_each_by_its_own_name_and_one_team_has_one_quota_across_them():
    from idleshare.parse.quotas import parse_quota_files
    from tests.builders import quota_body

    a, b = quota_body("alpha"), quota_body("beta")
    read = parse_quota_files([("a.json", json.dumps(a)), ("b.json", json.dumps([b]))])
    assert [q.team for q in read] == ["alpha", "beta"]
    # a bad field is named in its own file
    with pytest.raises(InputError) as bad:
        parse_quota_files([("a.json", json.dumps(a)), ("b.json", json.dumps({**b, "Name": ""}))])
    assert bad.value.source == "b.json" and "Name" in str(bad.value)
    # the same team in two files: the second file is refused naming the first
    again = {**quota_body("alpha"), "Name": "alpha-2"}
    with pytest.raises(InputError) as twice:
        parse_quota_files([("a.json", json.dumps(a)), ("b.json", json.dumps(again))])
    assert twice.value.source == "b.json"
    assert "ComputeQuotaTarget.TeamName" in str(twice.value) and "a.json" in str(twice.value)


@pytest.mark.parametrize("status", sorted(quotas.SKIPPED_STATUSES))
def test_a_quota_that_no_longer_governs_is_left_out_as_quota_import_skips_it(status: str) -> None:
    # Given what list-compute-quotas prints after a team's quota was replaced: the old one (its Status) and the new
    from idleshare_cli import quota_import

    old = {**MINIMAL, "Name": "batch-old", "Status": status}
    new = {**MINIMAL, "Status": "Created"}
    # When plan reads it
    read = parse_quotas({"ComputeQuotaSummaries": [old, new]}, "quotas.json")
    # Then only the governing one counts (and the old one is no second quota of the team), by the rule the import
    # skips by
    assert [q.name for q in read] == ["batch"]
    assert not quotas.governs(status) and quotas.governs("Created") and quotas.governs(None)
    assert quota_import.SKIPPED_STATUSES is quotas.SKIPPED_STATUSES
