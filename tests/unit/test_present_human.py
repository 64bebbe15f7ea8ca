"""Tables print quantities as an operator reads them; JSON keeps the exact Kubernetes quantity."""

from __future__ import annotations

from fractions import Fraction

import pytest

from idleshare.domain.model import GIB, Snapshot
from idleshare.domain.pool import compute
from idleshare_cli.present import human_quantity, human_text, result_json, result_tables
from tests.builders import P5, entry, node, quota

KI, MI = 1024, 1024**2


@pytest.mark.parametrize(
    ("value", "resource", "shown"),
    [
        (1900 * GIB, "memory", "1900Gi"),
        (8252719688 * KI, "memory", "7870.4Gi"),
        (GIB * 3 // 2, "memory", "1.5Gi"),
        (GIB + 1, "memory", "1Gi"),  # rounded down, never up
        (64 * MI, "memory", "64Mi"),
        (Fraction(191450, 1000), "cpu", "191.45"),
        (Fraction(1, 1000), "cpu", "0.001"),
        (96, "cpu", "96"),
        (8, "nvidia.com/gpu", "8"),
    ],
)
def test_human_quantity(value, resource, shown):
    assert human_quantity(value, resource) == shown


def test_human_text_reads_api_quantities_and_keeps_what_is_not_one():
    assert human_text("2097152Ki", "memory") == "2Gi"
    assert human_text("191450m", "cpu") == "191.45"
    assert human_text(None, "cpu") == "-" and human_text("0", "cpu", "0") == "0"
    assert human_text("n/a", "cpu") == "n/a"


def test_the_table_prints_gi_and_cores_and_json_keeps_exact_quantities():
    alloc = {"cpu": Fraction(191450, 1000), "memory": 8252719688 * KI, "nvidia.com/gpu": 8}
    snapshot = Snapshot(nodes=(node("a", P5, allocatable=alloc),), quotas=(quota("t", entry(P5, accelerators=8)),))
    result = compute(snapshot)
    table = result_tables(result)
    assert "8252719688Ki" not in table
    assert "7870.4Gi" in table and "191.45" in table
    capacity = result_json(result)["capacity"][P5]
    assert (capacity["memory"], capacity["cpu"]) == ("8252719688Ki", "191450m")
