"""The built-in instance catalog against botocore's SageMaker model and tests/data/instance-specs.csv.

A botocore release that adds an accelerated ``ClusterInstanceType`` member (or any member, or a MIG
profile) fails here until the catalog learns it.
"""

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


SPECS_CSV = Path(__file__).parents[1] / "data" / "instance-specs.csv"
"""The accelerated instance types' nominal specs the catalog was built from (its sources: ``instance-specs.md``)."""


def csv_rows() -> list[dict[str, str]]:
    path = SPECS_CSV
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


ROWS = csv_rows()
ACCELERATED_ENUM = [name for name in ENUM if ACCELERATED.match(name)]


def test_known_instance_types_are_exactly_the_botocore_enum() -> None:
    assert frozenset(ENUM) == catalog.KNOWN_INSTANCE_TYPES
    assert len(catalog.KNOWN_INSTANCE_TYPES) == len(ENUM)


def test_mig_profiles_are_exactly_the_botocore_enum() -> None:
    assert frozenset(MIG_ENUM) == catalog.MIG_PROFILES


def test_the_csv_was_found_and_is_not_empty() -> None:
    assert len(ROWS) >= 40
    assert {"instance_type", "vcpu", "memory_gib", "accelerator_kind", "accelerators", "efa"} <= set(ROWS[0])


def test_the_accelerated_filter_sees_every_csv_type() -> None:
    # Guards the regex: if it missed a family, the coverage test below would silently skip it.
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
    assert spec is not None
    assert spec.instance_type == name
    assert catalog.lookup(name.removeprefix("ml.")) is spec
    assert spec.vcpu >= 1
    allocatable = spec.allocatable()
    assert allocatable[CPU] == spec.vcpu
    assert allocatable[MEMORY] == spec.memory_gib * GIB
    assert all(type(v) is int for v in allocatable.values())


@pytest.mark.parametrize("row", ROWS, ids=[row["instance_type"] for row in ROWS])
def test_catalog_agrees_with_every_csv_row(row: dict[str, str]) -> None:
    spec = catalog.lookup(row["instance_type"])
    assert spec is not None
    assert spec.verified
    assert spec.vcpu == int(row["vcpu"])
    assert spec.memory_gib == Fraction(row["memory_gib"])
    assert spec.accelerator == {"nvidia": NVIDIA_GPU, "neuron": NEURON_DEVICE}[row["accelerator_kind"]]
    assert spec.accelerators == int(row["accelerators"])
    assert spec.accelerator_name == (row["accelerator_name"] or None)
    assert spec.accelerator_memory_mib == (
        int(row["accelerator_memory_mib"]) if row["accelerator_memory_mib"] else None
    )
    assert spec.efa == int(row["efa"])


def test_allocatable_of_p5_48xlarge() -> None:
    assert catalog.lookup("p5.48xlarge").allocatable() == {  # type: ignore[union-attr]
        CPU: 192,
        MEMORY: 2048 * 1024**3,
        NVIDIA_GPU: 8,
        EFA: 32,
    }


def test_allocatable_of_trn2_and_a_cpu_type() -> None:
    assert catalog.lookup("ml.trn2.48xlarge").allocatable() == {  # type: ignore[union-attr]
        CPU: 192,
        MEMORY: 2048 * GIB,
        NEURON_DEVICE: 16,
        EFA: 16,
    }
    # no accelerator and no EFA -> neither key, not a zero
    assert catalog.lookup("ml.m5.large").allocatable() == {CPU: 2, MEMORY: 8 * GIB}  # type: ignore[union-attr]


def test_g4dn_from_aws_published_specs() -> None:
    shapes = {
        size: (s.vcpu, s.memory_gib, s.accelerators)
        for size in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge")
        if (s := catalog.lookup(f"ml.g4dn.{size}")) is not None
    }
    assert shapes == {
        "xlarge": (4, 16, 1),
        "2xlarge": (8, 32, 1),
        "4xlarge": (16, 64, 1),
        "8xlarge": (32, 128, 1),
        "12xlarge": (48, 192, 4),
        "16xlarge": (64, 256, 1),
    }


def test_fractional_memory_is_exact_bytes() -> None:
    spec = catalog.lookup("c5n.large")
    assert spec is not None
    assert spec.memory_gib == Fraction(21, 4)
    assert spec.allocatable()[MEMORY] == 21 * 256 * 1024**2


def test_only_the_g7_family_is_unverified() -> None:
    assert {s.instance_type for s in catalog.CATALOG.values() if not s.verified} == {
        f"ml.g7.{size}" for size in ("2xlarge", "4xlarge", "8xlarge", "12xlarge", "24xlarge", "48xlarge")
    }


def test_unknown_types_resolve_to_none() -> None:
    assert catalog.lookup("ml.x99.huge") is None
    assert catalog.lookup("") is None
    assert catalog.lookup("ML.P5.48XLARGE") is None  # names are case-sensitive, as Kubernetes labels are


@pytest.mark.parametrize(
    ("name", "resource"),
    [
        ("ml.p5.48xlarge", NVIDIA_GPU),
        ("p4d.24xlarge", NVIDIA_GPU),
        ("ml.trn1.32xlarge", NEURON_DEVICE),
        ("trn2.3xlarge", NEURON_DEVICE),
        ("ml.c5.large", None),
        ("m5.large", None),
        # not in the catalog, judged by family
        ("g4dn.metal", NVIDIA_GPU),
        ("ml.g6e.metal", NVIDIA_GPU),
        ("p3.2xlarge", NVIDIA_GPU),
        ("g5g.xlarge", NVIDIA_GPU),
        ("trn1.2xlarge", NEURON_DEVICE),
        ("inf2.xlarge", NEURON_DEVICE),
        ("x2idn.16xlarge", None),
        ("", None),
    ],
)
def test_instance_accelerator(name: str, resource: str | None) -> None:
    assert catalog.instance_accelerator(name) == resource


def test_canonical_name() -> None:
    assert catalog.canonical_name("p5.48xlarge") == "ml.p5.48xlarge"
    assert catalog.canonical_name("ml.p5.48xlarge") == "ml.p5.48xlarge"


def test_specs_are_frozen() -> None:
    spec = catalog.lookup("ml.p5.48xlarge")
    assert spec is not None
    with pytest.raises(AttributeError):
        spec.vcpu = 1  # type: ignore[misc]
