"""One declaration per metric (idleshare.metric_specs): every name declared once, the emitter held to its dimensions,
the operations guide's metrics table held to the declarations."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from idleshare import metric_specs, names
from idleshare.runtime.metrics import gauge, trouble

OPERATIONS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


def test_every_metric_name_is_declared_once() -> None:
    declared = [m.name for m in metric_specs.METRICS]
    named = [v for k, v in vars(names).items() if k.startswith("METRIC_") and not k.startswith("METRIC_DIM_")]
    assert len(declared) == len(set(declared))
    assert sorted(declared) == sorted(named)


def test_the_emitter_refuses_dimensions_its_declaration_does_not_name(capsys) -> None:
    with pytest.raises(ValueError, match=r"Unallocated.*declared"):
        gauge("c1", names.METRIC_UNALLOCATED, 1.0)  # no resource
    with pytest.raises(ValueError, match="declared"):
        gauge("c1", names.METRIC_UNBOUND_PODS, 1.0, resource="nvidia.com/gpu")
    with pytest.raises(ValueError, match="when_positive"):
        trouble("c1", names.METRIC_FLAVOR_IDLE, 1.0, resource="nvidia.com/gpu")
    gauge("c1", names.METRIC_UNALLOCATED, 1.0, resource="nvidia.com/gpu")
    assert '"Unallocated"' in capsys.readouterr().out


def _metrics_table() -> dict[str, tuple[str, str, bool]]:
    """docs/operations.md's metrics table: metric -> (from, per, marked *when > 0*)."""
    rows: dict[str, tuple[str, str, bool]] = {}
    text = OPERATIONS.read_text()
    section = text.split("## Metrics", 1)[1].split("\n## ", 1)[0]
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].startswith("`"):
            continue
        for name in re.findall(r"`([A-Za-z]+)`", cells[0]):
            rows[name] = (cells[1], cells[2], cells[3].startswith("*when > 0*"))
    return rows


def test_the_operations_guide_lists_each_metric_as_declared() -> None:
    table = _metrics_table()
    assert sorted(table) == sorted(m.name for m in metric_specs.METRICS)
    for m in metric_specs.METRICS:
        per = ", ".join(m.dims) if m.dims else "service"
        assert table[m.name] == (m.source, per, m.when_positive), m.name
