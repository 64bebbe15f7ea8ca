"""The built-in instance catalog against botocore's SageMaker model (a release that adds an instance type or a
MIG profile fails here until the catalog learns it) and tests/data/instance-specs.csv."""

from __future__ import annotations

import csv
import re
from fractions import Fraction
from pathlib import Path

import botocore.session
import pytest

from idleshare.domain import catalog
from idleshare.domain.model import CPU, EFA, GIB, MEMORY, NEURON_DEVICE, NVIDIA_GPU

_MODEL = botocore.session.get_session().get_service_model("sagemaker")
ENUM: list[str] = _MODEL.shape_for("ClusterInstanceType").metadata["enum"]
MIG_ENUM: list[str] = _MODEL.shape_for("MIGProfileType").metadata["enum"]

# Accelerated families: NVIDIA GPUs (p*, g*, gr*), AWS Trainium / Inferentia (trn*, inf*).
ACCELERATED = re.compile(r"ml\.(p\d|g\d|gr\d|trn\d|inf\d)")
NEURON_FAMILY = re.compile(r"ml\.(trn|inf)\d")


SPECS_CSV = Path(__file__).parents[1] / "data" / "instance-specs.csv"  # the specs the catalog was built from
with SPECS_CSV.open(newline="") as handle:
    ROWS = list(csv.DictReader(handle))
ACCELERATED_ENUM = [name for name in ENUM if ACCELERATED.match(name)]


def test_instance_types_and_mig_profiles_are_the_botocore_enums_and_the_csv_is_read() -> None:
    assert frozenset(ENUM) == catalog.KNOWN_INSTANCE_TYPES
    assert frozenset(MIG_ENUM) == catalog.MIG_PROFILES
    # the csv is read, and the accelerated filter sees every csv type (else the test below skips a family)
    assert len(ROWS) >= 40
    assert {row["instance_type"] for row in ROWS} <= set(ACCELERATED_ENUM)


@pytest.mark.parametrize("name", ACCELERATED_ENUM)
def test_every_accelerated_enum_member_has_an_accelerator(name: str) -> None:
    spec = catalog.lookup(name)
    assert spec is not None, f"{name} is in botocore's ClusterInstanceType but not in the catalog"
    expected = NEURON_DEVICE if NEURON_FAMILY.match(name) else NVIDIA_GPU
    assert spec.accelerator == expected
    assert spec.accelerators >= 1
    assert spec.allocatable()[expected] == spec.accelerators


@pytest.mark.parametrize("name", ENUM)
def test_every_enum_member_resolves_by_both_names(name: str) -> None:
    spec = catalog.lookup(name)
    assert spec is not None and spec.instance_type == name and spec.vcpu >= 1
    assert catalog.lookup(name.removeprefix("ml.")) is spec
    allocatable = spec.allocatable()
    assert (allocatable[CPU], allocatable[MEMORY]) == (spec.vcpu, spec.memory_gib * GIB)
    assert all(type(v) is int for v in allocatable.values())


@pytest.mark.parametrize("row", ROWS, ids=[row["instance_type"] for row in ROWS])
def test_catalog_agrees_with_every_csv_row(row: dict[str, str]) -> None:
    spec = catalog.lookup(row["instance_type"])
    assert spec is not None and spec.verified
    expected = (int(row["vcpu"]), Fraction(row["memory_gib"]), int(row["accelerators"]), int(row["efa"]))
    assert (spec.vcpu, spec.memory_gib, spec.accelerators, spec.efa) == expected
    assert spec.accelerator == {"nvidia": NVIDIA_GPU, "neuron": NEURON_DEVICE}[row["accelerator_kind"]]
    assert spec.accelerator_name == (row["accelerator_name"] or None)
    memory_mib = row["accelerator_memory_mib"]
    assert spec.accelerator_memory_mib == (int(memory_mib) if memory_mib else None)


@pytest.mark.parametrize(
    ("name", "allocatable"),
    [
        ("p5.48xlarge", {CPU: 192, MEMORY: 2048 * GIB, NVIDIA_GPU: 8, EFA: 32}),
        ("ml.trn2.48xlarge", {CPU: 192, MEMORY: 2048 * GIB, NEURON_DEVICE: 16, EFA: 16}),
        ("ml.m5.large", {CPU: 2, MEMORY: 8 * GIB}),  # no accelerator and no EFA -> neither key, not a zero
        ("c5n.large", {CPU: 2, MEMORY: 21 * 256 * 1024**2}),  # 5.25 GiB: fractional memory is exact bytes
    ],
)
def test_allocatable(name: str, allocatable: dict[str, int]) -> None:
    spec = catalog.lookup(name)
    assert spec is not None and spec.allocatable() == allocatable


def test_g4dn_from_aws_published_specs() -> None:
    sizes = ("xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge")
    shapes = {
        size: (s.vcpu, s.memory_gib, s.accelerators) for size in sizes if (s := catalog.lookup(f"ml.g4dn.{size}"))
    }
    assert shapes == dict(
        zip(sizes, [(4, 16, 1), (8, 32, 1), (16, 64, 1), (32, 128, 1), (48, 192, 4), (64, 256, 1)], strict=True)
    )


def test_only_the_g7_family_is_unverified() -> None:
    assert {s.instance_type for s in catalog.CATALOG.values() if not s.verified} == {
        f"ml.g7.{size}" for size in ("2xlarge", "4xlarge", "8xlarge", "12xlarge", "24xlarge", "48xlarge")
    }


@pytest.mark.parametrize(
    ("names", "resource"),
    [
        (["ml.p5.48xlarge", "p4d.24xlarge", "g4dn.metal", "ml.g6e.metal", "p3.2xlarge", "g5g.xlarge"], NVIDIA_GPU),
        (["ml.trn1.32xlarge", "trn2.3xlarge", "trn1.2xlarge", "inf2.xlarge"], NEURON_DEVICE),
        (["ml.c5.large", "m5.large", "x2idn.16xlarge", ""], None),
    ],
)
def test_instance_accelerator(names: list[str], resource: str | None) -> None:
    # in the catalog or, when not (g4dn.metal, p3.2xlarge, trn1.2xlarge, x2idn...), judged by family
    assert [catalog.instance_accelerator(name) for name in names] == [resource] * len(names)


def test_names_canonical_and_unknown() -> None:
    assert catalog.canonical_name("p5.48xlarge") == "ml.p5.48xlarge" == catalog.canonical_name("ml.p5.48xlarge")
    # names are case-sensitive, as Kubernetes labels are
    assert [catalog.lookup(name) for name in ("ml.x99.huge", "", "ML.P5.48XLARGE")] == [None, None, None]
